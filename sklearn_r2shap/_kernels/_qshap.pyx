# Shapley decomposition of R^2 (Q-SHAP; doc/r2_decomposition.rst).
#
# For one tree with path-dependent value v_S(x) = sum_l rho_l prod_j
# [j in S ? X_jl : R_jl], the squared game is a sum over ordered leaf pairs
#     v_S(x)^2 = sum_{l1,l2} rho_1 rho_2 prod_j [j in S ? X_j1 X_j2 : R_j1 R_j2],
# whose multilinear extension at t*1 has, per pair, one factor per feature
#     (1 - t) R_j1 R_j2 + t X_j1 X_j2
# (1 for features on neither path). Sh_j[v^2] is the integral over t of its
# gradient, a polynomial of degree < 2 d (d = most distinct features on a
# path): Gauss-Legendre with d nodes is exact (doc/r2_decomposition.rst,
# "Computation: squared games by quadrature"). Two methods sum the pairs:
# leaf-pair tables (the default, "Leaf-pair tables" below) and, for the
# trees they cannot take, a walk. The walk groups pairs by their
# lowest common ancestor w: for a leaf l1 in the left subtree of w, every
# l2 in the right subtree B_w is reached by one depth-first pass over B_w
# that starts from the factors the pair shares above w and replaces a
# feature's factor when l2's path splits on it again (as TreeGrad does for
# repeated features, Algorithm 9); the
# up-pass credits each edge's feature as in Lemma 2. Diagonal pairs l1 = l2
# are a product over l1's own path. Cost O(L^2 d) per tree and row.
#
# The degree bound holds per tree and is also bounded by the tree's features:
# a pair's gradient has degree |F_1 u F_2| - 1, and |F_1 u F_2| is at most
# 2 d_t - 1 (both paths start with the root's split) and at most F_t, the
# distinct features of tree t. Gauss-Legendre with n nodes is exact to degree
# 2 n - 1, so n_t = min(d_t, ceil(F_t / 2)) nodes suffice for tree t (and
# for its linear game, of degree d_t - 1). When the caller's rule is the
# Gauss-Legendre rule for the whole ensemble, each tree uses its own n_t-node
# rule; the cost is linear in the nodes, and n_t is often well below the
# ensemble's d (leaf-wise LightGBM trees; deep trees on few features). Trees
# summed by tables use ceil(G_t / 2) nodes where that is fewer, G_t the most
# distinct features on the paths of a pair of their leaves (counted with the
# tables).
#
# Per row i and tree k the kernel adds  a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i)
# for coefficients computed outside (importance.py). For the squared error,
# a = w_i and b = -2 w_i c_ik where c_ik is the residual before tree k
# (sequential, boosting) or r_sym,k + v^k(empty) (symmetric, averaging
# ensembles; Sh[(m - c)^2] = Sh[m^2] - 2 c Sh[m] for a constant c).
import numpy as np

from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy

from ._common cimport (
    Buffers, Rows, block_leaf_patterns, parallel_units, row_at, rows_of, take, take_each,
)
from ._forest cimport Forest, Interrupt, Patterns, forest_from, interrupted, patterns_from
from ._semivalues cimport Scratch, scratch_take, tree_gradient_uniform


cdef struct PairScratch:
    int64_t* slot_of      # feature -> slot of l1's path features, -1 if none
    int64_t* slot_feature # slot -> feature
    double* r1            # R_j1, X_j1 over l1's whole path, per slot
    double* x1
    double* prefix_r      # l2's cumulative R, X above the current w, per slot
    double* prefix_x
    double* base_r        # ... and at the root b of B_w, per slot
    double* base_x
    double* base_factor   # the pair's factor before B_w, (slots, m)
    double* excluded      # leaf terms of B_w whose path splits on the slot's feature, (slots, m)
    double* product       # (m,)
    double* weights       # (m,)


cdef PairScratch* pair_take(Buffers* mem, int64_t n_features, int64_t n_slots,
                            int64_t m) noexcept nogil:
    """A PairScratch from ``mem``; ``slot_of`` all -1."""
    cdef PairScratch* ps = <PairScratch*> take(mem, sizeof(PairScratch))
    cdef int64_t j
    if ps == NULL:
        return NULL
    take_each(mem, n_features, &ps.slot_of)
    take_each(mem, n_slots, &ps.slot_feature)
    take_each(mem, n_slots, &ps.r1, &ps.x1, &ps.prefix_r, &ps.prefix_x, &ps.base_r, &ps.base_x)
    take_each(mem, n_slots * m, &ps.base_factor, &ps.excluded)
    take_each(mem, m, &ps.product, &ps.weights)
    if ps.slot_of != NULL:
        for j in range(n_features):
            ps.slot_of[j] = -1
    return ps




cdef inline int64_t edge_slot(const Forest* f, const PairScratch* ps, int64_t start, int64_t k,
                              double* r1, double* x1, int64_t* q) noexcept nogil:
    """The slot in l1's path of the feature of the edge into node k (-1 if
    none) and l1's R and X on that feature (1 if none); ``q`` the local index
    of the edge's nearest ancestor edge on the same feature (-1 if none)."""
    cdef int64_t sl = ps.slot_of[f.feature[f.parent[k]]]
    r1[0] = ps.r1[sl] if sl >= 0 else 1.0
    x1[0] = ps.x1[sl] if sl >= 0 else 1.0
    q[0] = f.prev_same[k] - start if f.prev_same[k] >= 0 else -1
    return sl


cdef void cross_pairs(
    const Forest* f, int64_t start, int64_t b, int64_t end, double rho1, double scale,
    const double* points, const double* weights, int64_t m, int64_t n_slots,
    Scratch* sc, PairScratch* ps, double* out,
) noexcept nogil:
    """Add scale * 2 rho1 * sum_{l2 in [b, end)} rho2 grad P(l1, l2) to out.

    Local node indices; the pair's factors above B_w are in ps.base_factor,
    their product in ps.product.
    """
    cdef int64_t k, kk, pl, q, sl, j, l, s
    cdef double r1, x1, rk, xk, fk, old, acc, d
    cdef double* factor = sc.factor
    cdef double* prod = sc.path_prod
    cdef double* total = sc.subtree
    cdef double* deepest = sc.deepest
    for s in range(n_slots):
        for l in range(m):
            ps.excluded[s * m + l] = 0.0
    for kk in range(b, end):
        k = start + kk
        if kk == b:
            for l in range(m):
                prod[kk * m + l] = ps.product[l]
        else:
            pl = f.parent[k] - start
            sl = edge_slot(f, ps, start, k, &r1, &x1, &q)
            rk = r1 * sc.ratio_prod[kk]
            xk = x1 * sc.follow_prod[kk]
            for l in range(m):
                fk = rk + points[l] * (xk - rk)
                factor[kk * m + l] = fk
                if q > b:
                    old = factor[q * m + l]
                elif sl >= 0:
                    old = ps.base_factor[sl * m + l]
                else:
                    old = 1.0
                # old = 0 only where both R and X products are 0, which stays 0 below
                prod[kk * m + l] = prod[pl * m + l] * fk / old if old != 0.0 else 0.0
        if f.left[k] >= 0:
            for l in range(m):
                total[kk * m + l] = 0.0
                deepest[kk * m + l] = 0.0
        else:
            for l in range(m):
                total[kk * m + l] = f.value[k] * prod[kk * m + l]
                deepest[kk * m + l] = 0.0
    for kk in range(end - 1, b, -1):
        k = start + kk
        pl = f.parent[k] - start
        j = f.feature[f.parent[k]]
        sl = edge_slot(f, ps, start, k, &r1, &x1, &q)
        d = x1 * sc.follow_prod[kk] - r1 * sc.ratio_prod[kk]
        acc = 0.0
        for l in range(m):
            fk = factor[kk * m + l]
            if fk != 0.0:
                acc = acc + weights[l] * (deepest[kk * m + l] + total[kk * m + l]) / fk
            total[pl * m + l] += total[kk * m + l]
            if q > b:
                deepest[q * m + l] -= total[kk * m + l]
            elif sl >= 0:
                ps.excluded[sl * m + l] += total[kk * m + l]
        out[j] += scale * 2.0 * rho1 * d * acc
    for s in range(n_slots):
        d = ps.x1[s] * ps.base_x[s] - ps.r1[s] * ps.base_r[s]
        acc = 0.0
        for l in range(m):
            fk = ps.base_factor[s * m + l]
            if fk != 0.0:
                acc = acc + weights[l] * (total[b * m + l] - ps.excluded[s * m + l]) / fk
        out[ps.slot_feature[s]] += scale * 2.0 * rho1 * d * acc


cdef void tree_square_gradient(
    const Forest* f, int64_t t, const double* points, const double* weights, int64_t m,
    double scale, Scratch* sc, PairScratch* ps, double* out,
) noexcept nogil:
    """Add scale * sum_l weights[l] grad U_t(points[l] 1) to out (U: MLE of v_t^2).

    Needs sc.ratio_prod and sc.follow_prod of this tree and row
    (left there by tree_gradient_uniform).
    """
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t l1, c, p, j, s, n_slots, w, a, b, end, sw, l
    cdef double rho1, fd, acc, d, r1, x1, tl
    if n == 1:
        return
    for l1 in range(n):
        if f.left[start + l1] >= 0:
            continue
        rho1 = f.value[start + l1]
        if rho1 == 0.0:
            continue
        # l1's distinct path features: the deepest edge of each carries its
        # full products R_j1, X_j1.
        n_slots = 0
        c = l1
        while c > 0:
            p = f.parent[start + c] - start
            j = f.feature[start + p]
            if ps.slot_of[j] < 0:
                ps.slot_of[j] = n_slots
                ps.slot_feature[n_slots] = j
                ps.r1[n_slots] = sc.ratio_prod[c]
                ps.x1[n_slots] = sc.follow_prod[c]
                ps.prefix_r[n_slots] = 1.0
                ps.prefix_x[n_slots] = 1.0
                n_slots += 1
            c = p
        # the diagonal pair (l1, l1): factors (1 - t) R^2 + t X
        for l in range(m):
            tl = points[l]
            ps.product[l] = 1.0
            for s in range(n_slots):
                ps.product[l] *= (1.0 - tl) * ps.r1[s] * ps.r1[s] + tl * ps.x1[s]
        for s in range(n_slots):
            r1 = ps.r1[s]
            x1 = ps.x1[s]
            acc = 0.0
            for l in range(m):
                fd = (1.0 - points[l]) * r1 * r1 + points[l] * x1
                if fd != 0.0:
                    acc = acc + weights[l] * ps.product[l] / fd
            out[ps.slot_feature[s]] += scale * rho1 * rho1 * (x1 - r1 * r1) * acc
        # pairs whose lowest common ancestor w has l1 on its left
        w = 0
        end = n
        while f.left[start + w] >= 0:
            a = f.left[start + w] - start
            b = f.right[start + w] - start
            sw = ps.slot_of[f.feature[start + w]]
            if l1 < b:
                for s in range(n_slots):
                    ps.base_r[s] = ps.prefix_r[s]
                    ps.base_x[s] = ps.prefix_x[s]
                ps.base_r[sw] = sc.ratio_prod[b]
                ps.base_x[sw] = sc.follow_prod[b]
                for l in range(m):
                    tl = points[l]
                    ps.product[l] = 1.0
                    for s in range(n_slots):
                        fd = ((1.0 - tl) * ps.r1[s] * ps.base_r[s]
                              + tl * ps.x1[s] * ps.base_x[s])
                        ps.base_factor[s * m + l] = fd
                        ps.product[l] *= fd
                cross_pairs(f, start, b, end, rho1, scale, points, weights, m, n_slots,
                            sc, ps, out)
                ps.prefix_r[sw] = sc.ratio_prod[a]
                ps.prefix_x[sw] = sc.follow_prod[a]
                end = b
                w = a
            else:
                ps.prefix_r[sw] = sc.ratio_prod[b]
                ps.prefix_x[sw] = sc.follow_prod[b]
                w = b
        for s in range(n_slots):
            ps.slot_of[ps.slot_feature[s]] = -1


# Leaf-pair tables (the default method; the walk above serves the trees they
# cannot take: zero covers, paths of more than 64 features).
# Write u_j(l) = (1 - t) R_jl + t X_jl for the factor of a feature on one
# leaf's path, U_l = prod_j u_j(l), and for a pair (l1, l2) the factor of a
# feature on both paths g_j = (1 - t) R_j1 R_j2 + t X_j1 X_j2. A pair's product
# is then P = U_1 U_2 prod_{j in F_1 n F_2} psi_j, psi_j = g_j / (u_j(l1) u_j(l2)),
# and its gradient coefficient (X1 X2 - R1 R2) P / g_j for a shared feature,
# (X_jl - R_jl) P / u_j(l) for a feature on one path only. Summed over ordered
# pairs l1 != l2 (with Q_l = sum_{l' != l} rho_l' P(l, l')):
#   Sh_j = 2 sum_l rho_l (X_jl - R_jl) int Q_l / u_j(l)
#        + 2 sum_{l1 < l2} rho_1 rho_2 sum_{j in F_1 n F_2} int P kappa_j,
#   kappa_j = (X1 X2 - R1 R2) / g_j - (X_j1 - R_j1) / u_j(l1) - (X_j2 - R_j2) / u_j(l2),
# plus the diagonal pairs. With X in {0, 1}, psi_j and kappa_j take four
# row-independent values per Gauss node: 1 / (1 - t) when X1 = X2 = 0,
# R_2 / u_j(l2) and -(1 - R_2) / u_j(l2) when only X2 = 1 (and the mirror),
# and a per-pair value when X1 = X2 = 1. Those are tabulated once per tree;
# a row then costs, per pair and node, one product per shared feature and
# one multiply-add per shared feature, without divisions.
#
# Blocks of pairs. A table read row after row stays in cache only while it
# is small (a whole-tree table of 10 MB, random forests of depth 8 on 10
# features, made the tables 1.7x slower than the walk). So a tree's pairs, in
# row-major order of the upper triangle, are cut into blocks whose tables
# take at most ``block_bytes`` (DEFAULT_BLOCK_BYTES; 16 m + 26 bytes per shared
# feature of a pair at m nodes, plus 8 per pair: entry_bytes). A tree of one block is
# summed row by row from its table. A tree of several blocks is summed block
# by block, by groups of rows (``group_rows``: at least ROW_GROUPS per call,
# 4 per thread, at most ROW_STATE_BYTES of per-row U_l and Q_l kept between
# blocks): a thread takes a group, gives its
# rows their leaf products and diagonal pairs, then builds every block's table
# in turn (its own copy: threads never wait for each other between blocks,
# which on a machine shared with other work costs more than building) and runs
# the group's rows through its pairs, then gives the rows their one-path
# credits. A row adds the same terms in the same order as from one table, so
# both give the same values; blocks are fixed by the tree, and a row's terms
# do not depend on its group, so the groups may follow the threads.
DEFAULT_BLOCK_BYTES = 1 << 19
cdef double ROW_STATE_BYTES = 8.0 * 1024 * 1024
# groups of rows per call for trees of several blocks: each group builds the
# tables (in the thread that takes it, without waiting for the others), so a
# call of n rows shares each table among max(n / groups, MIN_GROUP_ROWS) rows
# (building costs a few rows' pass over the pairs), groups = max(ROW_GROUPS,
# GROUPS_PER_THREAD threads): 8 groups kept 16 threads at most 8 busy (issue 31)
ROW_GROUPS = 8
GROUPS_PER_THREAD = 4
MIN_GROUP_ROWS = 64


def group_rows(n_rows, n_threads, max_blocked_leaves, m):
    """Rows per group for trees of several blocks (module comment): the
    same values for any size, a row's terms not depending on its group."""
    groups = max(ROW_GROUPS, GROUPS_PER_THREAD * n_threads)
    return max(1, min(max((n_rows + groups - 1) // groups, MIN_GROUP_ROWS),
                      int(ROW_STATE_BYTES // max(1, max_blocked_leaves * (16 * m + 8)))))
cdef double MIN_RATIO = 1e-12
# max_union is counted pair by pair up to this many pairs in a tree; beyond,
# its bound min(2 d_t - 1, F_t) (which gives the tree's own rule, n_t)
cdef int64_t MAX_COUNTED_PAIRS = 1 << 22
# pairs per segment of a block (its table is built by segments in parallel)
cdef int64_t SEGMENT_PAIRS = 2048


def entry_bytes(m):
    """Bytes of a block's table per shared feature of a pair (psi and kappa
    at ``m`` nodes, two pattern bits, the feature, four offsets) and per pair."""
    return 16 * int(m) + 26, 8


cdef extern from *:
    """
    #if defined(_MSC_VER)
    #include <intrin.h>
    static int r2shap_qshap_popcount(unsigned long long v) { return (int)__popcnt64(v); }
    #else
    static int r2shap_qshap_popcount(unsigned long long v) { return __builtin_popcountll(v); }
    #endif
    """
    int popcount "r2shap_qshap_popcount" (unsigned long long v) noexcept nogil


# one tree; per leaf slot s (a distinct feature of a leaf's path), (m,) each
cdef struct LeafTables:
    double* u0       # (1 - t) R: X = 0
    double* u1       # (1 - t) R + t: X = 1
    double* alone    # R / u1: psi of a shared feature where only this leaf has X = 1
    double* kappa    # -w (1 - R) / u1: its kappa, times the quadrature weight
                     # (both inside the tree's psi and kappa tables, pair_entries)
    double* credit   # (1 - R) / u1: (X - R) / u with X = 1 (X = 0: -1 / (1 - t))
    double* diag0    # (1 - t) R^2: diagonal factor, X = 0
    double* diag1    # (1 - t) R^2 + t: X = 1
    double* idiag0   # their inverses
    double* idiag1
    double* iu1      # 1 / u1 (the psi and kappa of shared features, pair_entries)


cdef struct RowScratch:
    double* V        # rho_l U_l, (leaves, m)
    double* Q        # rho_l Q_l, (leaves, m)
    double* P        # (m,)
    double* wP       # (m,)
    uint64_t* pattern        # per node
    uint64_t* leaf_pattern   # per leaf
    uint8_t* left_taken      # per node


cdef RowScratch* row_take(Buffers* mem, int64_t n_leaves, int64_t n_nodes,
                          int64_t m) noexcept nogil:
    """A RowScratch from ``mem``."""
    cdef RowScratch* rs = <RowScratch*> take(mem, sizeof(RowScratch))
    if rs == NULL:
        return NULL
    take_each(mem, n_leaves * m, &rs.V, &rs.Q)
    take_each(mem, m, &rs.P, &rs.wP)
    take_each(mem, n_nodes, &rs.pattern)
    take_each(mem, n_leaves, &rs.leaf_pattern)
    take_each(mem, n_nodes, &rs.left_taken)
    return rs




cdef void leaf_tables(
    const double* ratio, int64_t n_slots, const double* points, const double* weights,
    int64_t m, LeafTables* lt,
) noexcept nogil:
    cdef int64_t s, l, a
    cdef double r, tl, u1
    for s in range(n_slots):
        r = ratio[s]
        for l in range(m):
            a = s * m + l
            tl = points[l]
            u1 = (1.0 - tl) * r + tl
            lt.u0[a] = (1.0 - tl) * r
            lt.u1[a] = u1
            lt.alone[a] = r / u1
            lt.kappa[a] = -weights[l] * (1.0 - r) / u1
            lt.credit[a] = (1.0 - r) / u1
            lt.diag0[a] = (1.0 - tl) * r * r
            lt.diag1[a] = (1.0 - tl) * r * r + tl
            lt.idiag0[a] = 1.0 / lt.diag0[a]
            lt.idiag1[a] = 1.0 / lt.diag1[a]
            lt.iu1[a] = 1.0 / u1


cdef int64_t pair_entries(
    int64_t n_leaves, int64_t l1_begin, int64_t l2_begin, int64_t n_pairs, int64_t entry_base,
    const int64_t* dim, const int64_t* slot_start, const int64_t* feature,
    const double* ratio, const LeafTables* lt, int64_t m, int64_t* slot_of,
    int64_t* pair_start, uint8_t* bit1, uint8_t* bit2, int64_t* entry_feature,
    int32_t* offset, double* psi11, double* kappa11, const double* points,
    const double* weights,
) noexcept nogil:
    """A segment of a block: the shared features of ``n_pairs`` pairs l1 < l2
    from (l1_begin, l2_begin) on, in row-major order of the upper triangle,
    and their tables where X1 = X2 = 1 (kappa times the quadrature weight).
    Entries are numbered in the block from ``entry_base`` (``pair_start[p]``
    for the segment's p-th pair; the caller writes the block's last one).
    ``lt``: the tree's leaf tables (1 / u1 and (1 - R) / u1 per slot).
    Returns the segment's number of entries.

    ``offset[4 e + x]``, x = X1 + 2 X2: where entry e's psi (and kappa)
    starts in the table [1 / (1 - t) | alone per slot of the tree | psi11 per
    entry of the block], each part m wide (tree_square_pairs)."""
    cdef int64_t l1 = l1_begin, l2, l2_first = l2_begin, l2_end, b, b2, s1, s2, l, e
    cdef int64_t n_entries = 0, p = 0
    cdef int64_t n_slots = slot_start[n_leaves] - slot_start[0]
    cdef double a, tl, g
    cdef const double* iu1
    cdef const double* iu2
    cdef const double* c1
    cdef const double* c2
    while p < n_pairs:
        for b in range(dim[l1]):
            slot_of[feature[slot_start[l1] + b]] = b
        l2_end = min(n_leaves, l2_first + (n_pairs - p))
        for l2 in range(l2_first, l2_end):
            pair_start[p] = entry_base + n_entries
            p += 1
            for b2 in range(dim[l2]):
                s2 = slot_start[l2] + b2
                b = slot_of[feature[s2]]
                if b < 0:
                    continue
                s1 = slot_start[l1] + b
                e = entry_base + n_entries
                bit1[e] = <uint8_t> b
                bit2[e] = <uint8_t> b2
                entry_feature[e] = feature[s2]
                offset[4 * e] = 0
                offset[4 * e + 1] = <int32_t> (m + (s1 - slot_start[0]) * m)
                offset[4 * e + 2] = <int32_t> (m + (s2 - slot_start[0]) * m)
                offset[4 * e + 3] = <int32_t> (m + (n_slots + e) * m)
                a = ratio[s1] * ratio[s2]
                iu1 = lt.iu1 + (s1 - slot_start[0]) * m
                iu2 = lt.iu1 + (s2 - slot_start[0]) * m
                c1 = lt.credit + (s1 - slot_start[0]) * m
                c2 = lt.credit + (s2 - slot_start[0]) * m
                for l in range(m):
                    tl = points[l]
                    g = (1.0 - tl) * a + tl
                    psi11[e * m + l] = g * iu1[l] * iu2[l]
                    kappa11[e * m + l] = weights[l] * ((1.0 - a) / g - c1[l] - c2[l])
                n_entries += 1
        for b in range(dim[l1]):
            slot_of[feature[slot_start[l1] + b]] = -1
        l1 += 1
        l2_first = l1 + 1
    return n_entries


def _pair_counts(const int64_t[::1] dim, const int64_t[::1] slot_start,
                 const int64_t[::1] feature, int64_t[::1] count, int64_t[::1] local):
    """(entries, max_union) of one tree: the shared features summed over its
    leaf pairs, and the most distinct features on the paths of a pair.

    ``dim``, ``slot_start`` (absolute, one more than the leaves) are the
    tree's slices of _PairTables' arrays; ``count`` (zeros) and ``local``
    (-1), one per feature, are scratch left as given. Entries: each feature
    on k leaves' paths is shared by k (k - 1) / 2 pairs. max_union: by
    bitsets of the tree's features, pair by pair up to MAX_COUNTED_PAIRS
    pairs; beyond, the bound min(2 d - 1, F) (d the most on one path, F the
    tree's distinct features)."""
    cdef int64_t n_leaves = dim.shape[0], l1, l2, b, j, w, u, n_words
    cdef int64_t n_entries = 0, max_union = 0, max_dim = 0, n_local = 0
    cdef uint64_t[:, ::1] bits
    for l1 in range(n_leaves - 1, -1, -1):
        max_dim = max(max_dim, dim[l1])
        for b in range(slot_start[l1], slot_start[l1 + 1]):
            n_entries += count[feature[b]]
        for b in range(slot_start[l1], slot_start[l1 + 1]):
            count[feature[b]] += 1
            if local[feature[b]] < 0:
                local[feature[b]] = n_local
                n_local += 1
    for b in range(slot_start[0], slot_start[n_leaves]):
        count[feature[b]] = 0
    if n_leaves * (n_leaves - 1) // 2 > MAX_COUNTED_PAIRS:
        max_union = min(2 * max_dim - 1, n_local)
    else:
        n_words = (n_local + 63) // 64
        bits = np.zeros((n_leaves, max(1, n_words)), dtype=np.uint64)
        for l1 in range(n_leaves):
            for b in range(slot_start[l1], slot_start[l1 + 1]):
                j = local[feature[b]]
                bits[l1, j >> 6] |= (<uint64_t> 1) << (j & 63)
        with nogil:
            for l1 in range(n_leaves):
                for l2 in range(l1 + 1, n_leaves):
                    u = 0
                    for w in range(n_words):
                        u += popcount(bits[l1, w] | bits[l2, w])
                    if u > max_union:
                        max_union = u
    for b in range(slot_start[0], slot_start[n_leaves]):
        local[feature[b]] = -1
    return n_entries, max_union


def _plan_blocks(const int64_t[::1] dim, const int64_t[::1] slot_start,
                 const int64_t[::1] feature, int64_t[::1] slot_of, int64_t m,
                 double block_bytes):
    """The blocks of one tree's pairs (row-major order of the upper triangle),
    each as large as fits in ``block_bytes`` at ``m`` nodes (entry_bytes),
    and at least one pair; each block cut into segments of at most
    SEGMENT_PAIRS pairs, built in parallel. Returns ``blocks`` (l1, l2,
    pairs, entries, first segment) per block, one more row whose first
    segment ends the last block, and ``segments`` (l1, l2, pairs, first pair
    and first entry in its block) per segment, as int64 arrays."""
    cdef int64_t n_leaves = dim.shape[0], l1, l2, b, shared
    cdef int64_t pairs = 0, entries = 0, seg_pairs = 0
    cdef double per_entry = 16.0 * m + 26.0, size = 0.0, pair_size
    blocks = []
    segments = []
    for l1 in range(n_leaves):
        for b in range(dim[l1]):
            slot_of[feature[slot_start[l1] + b]] = b
        for l2 in range(l1 + 1, n_leaves):
            shared = 0
            for b in range(slot_start[l2], slot_start[l2 + 1]):
                shared += slot_of[feature[b]] >= 0
            pair_size = shared * per_entry + 8.0
            if pairs == 0 or size + pair_size > block_bytes:
                if pairs > 0:
                    blocks[len(blocks) - 1][2:4] = [pairs, entries]
                    segments[len(segments) - 1][2] = seg_pairs
                blocks.append([l1, l2, 0, 0, len(segments)])
                pairs, entries, size, seg_pairs = 0, 0, 0.0, 0
            if seg_pairs == 0 or seg_pairs == SEGMENT_PAIRS:
                if seg_pairs > 0:
                    segments[len(segments) - 1][2] = seg_pairs
                segments.append([l1, l2, 0, pairs, entries])
                seg_pairs = 0
            pairs += 1
            entries += shared
            seg_pairs += 1
            size += pair_size
        for b in range(dim[l1]):
            slot_of[feature[slot_start[l1] + b]] = -1
    if pairs > 0:
        blocks[len(blocks) - 1][2:4] = [pairs, entries]
        segments[len(segments) - 1][2] = seg_pairs
    blocks.append([n_leaves, n_leaves, 0, 0, len(segments)])
    return (np.array(blocks, dtype=np.int64).reshape(-1, 5),
            np.array(segments, dtype=np.int64).reshape(-1, 5))


cdef inline void pair_sums "r2shap_pair_sums"(
    int64_t n_leaves, int64_t l1_begin, int64_t l2_begin, int64_t n_pairs,
    const int64_t* pair_start, const uint8_t* bit1, const uint8_t* bit2,
    const int64_t* entry_feature, const int32_t* offset, const double* psi_table,
    const double* kappa_table, const uint64_t* leaf_pattern, const double* V, double* Q,
    double c, double* out, const int64_t m,
) noexcept nogil:
    """The ``n_pairs`` pairs l1 < l2 of a block from (l1_begin, l2_begin) on:
    Q of both leaves and the kappa terms of their shared features
    (tree_square_pairs)."""
    cdef int64_t l1 = l1_begin, l2, l2_first = l2_begin, l2_end, l, e, e0, n_shared, p = 0
    cdef uint64_t A1, A2, x
    cdef double acc, acc1
    cdef const double* V1
    cdef const double* V2
    cdef double* Q1
    cdef double* Q2
    cdef const double* tab
    cdef double Pl[64]              # the pair's product per node (m <= 64)
    cdef const double* kappa_of[64]  # per shared feature of the pair (at most 64)
    while p < n_pairs:
        A1 = leaf_pattern[l1]
        V1 = V + l1 * m
        Q1 = Q + l1 * m
        l2_end = min(n_leaves, l2_first + (n_pairs - p))
        for l2 in range(l2_first, l2_end):
            e0 = pair_start[p]
            n_shared = pair_start[p + 1] - e0
            p += 1
            A2 = leaf_pattern[l2]
            V2 = V + l2 * m
            Q2 = Q + l2 * m
            for l in range(m):
                Pl[l] = V1[l] * V2[l]
            # psi and kappa by (X1, X2), without branches: the bits vary by row
            for e in range(e0, e0 + n_shared):
                x = ((A1 >> bit1[e]) & 1) | (((A2 >> bit2[e]) & 1) << 1)
                tab = psi_table + offset[4 * e + x]
                kappa_of[e - e0] = kappa_table + offset[4 * e + x]
                for l in range(m):
                    Pl[l] = Pl[l] * tab[l]
            for l in range(m):
                Q1[l] += Pl[l]
                Q2[l] += Pl[l]
            for e in range(e0, e0 + n_shared):
                tab = kappa_of[e - e0]
                acc = 0.0
                acc1 = 0.0
                for l in range(0, m - 1, 2):
                    acc = acc + Pl[l] * tab[l]
                    acc1 = acc1 + Pl[l + 1] * tab[l + 1]
                if m & 1:
                    acc = acc + Pl[m - 1] * tab[m - 1]
                out[entry_feature[e]] += c * (acc + acc1)
        l1 += 1
        l2_first = l1 + 1


cdef extern from *:
    """
    /* pair_sums with a constant m, 3 to 10 (pair_block) */
    #define r2shap_pair_case(k, ...) case k: r2shap_pair_sums(__VA_ARGS__, k); break;
    #define r2shap_pair_sums_by_m(m, ...) switch (m) { \
        r2shap_pair_case(3, __VA_ARGS__) r2shap_pair_case(4, __VA_ARGS__) \
        r2shap_pair_case(5, __VA_ARGS__) r2shap_pair_case(6, __VA_ARGS__) \
        r2shap_pair_case(7, __VA_ARGS__) r2shap_pair_case(8, __VA_ARGS__) \
        r2shap_pair_case(9, __VA_ARGS__) r2shap_pair_case(10, __VA_ARGS__) \
        default: r2shap_pair_sums(__VA_ARGS__, m); }
    """
    void pair_sums_by_m "r2shap_pair_sums_by_m"(
        int64_t m, int64_t n_leaves, int64_t l1_begin, int64_t l2_begin, int64_t n_pairs,
        const int64_t* pair_start, const uint8_t* bit1, const uint8_t* bit2,
        const int64_t* entry_feature, const int32_t* offset, const double* psi_table,
        const double* kappa_table, const uint64_t* leaf_pattern, const double* V, double* Q,
        double c, double* out) noexcept nogil


cdef void pair_block(
    int64_t n_leaves, int64_t l1_begin, int64_t l2_begin, int64_t n_pairs,
    const int64_t* pair_start, const uint8_t* bit1, const uint8_t* bit2,
    const int64_t* entry_feature, const int32_t* offset, const double* psi_table,
    const double* kappa_table, const uint64_t* leaf_pattern, const double* V, double* Q,
    double scale, double* out, int64_t m,
) noexcept nogil:
    """pair_sums of one block with c = 2 scale; a constant m lets the compiler
    specialise pair_sums and unroll its loops over the nodes (1.2-1.3x with
    GCC 12, which clones it for these m)."""
    pair_sums_by_m(m, n_leaves, l1_begin, l2_begin, n_pairs, pair_start, bit1, bit2,
                   entry_feature, offset, psi_table, kappa_table, leaf_pattern, V, Q,
                   2.0 * scale, out)


cdef void leaf_products(
    int64_t n_leaves, const int64_t* dim, const int64_t* slot_start, const int64_t* feature,
    const double* ratio, const double* rho, const LeafTables* lt, const uint64_t* leaf_pattern,
    const double* weights, int64_t m, double scale, double* V, double* Q, double* P,
    double* out,
) noexcept nogil:
    """Before the pairs: V = rho_l U_l, Q = 0 per leaf, and the diagonal pairs
    (l, l) added to ``out`` (tree_square_pairs)."""
    cdef int64_t l1, b, s, l
    cdef int64_t s0 = slot_start[0]
    cdef uint64_t A1
    cdef double r1, acc
    cdef const double* tab
    cdef const double* itab
    for l1 in range(n_leaves):
        A1 = leaf_pattern[l1]
        r1 = rho[l1]
        for l in range(m):
            V[l1 * m + l] = r1
            Q[l1 * m + l] = 0.0
        for b in range(dim[l1]):
            s = slot_start[l1] - s0 + b
            tab = (lt.u1 if (A1 >> b) & 1 else lt.u0) + s * m
            for l in range(m):
                V[l1 * m + l] *= tab[l]
        if scale == 0.0 or r1 == 0.0:
            continue
        # the diagonal pair (l1, l1): factors (1 - t) R^2 + t X
        for l in range(m):
            P[l] = 1.0
        for b in range(dim[l1]):
            s = slot_start[l1] - s0 + b
            tab = (lt.diag1 if (A1 >> b) & 1 else lt.diag0) + s * m
            for l in range(m):
                P[l] *= tab[l]
        for b in range(dim[l1]):
            s = slot_start[l1] - s0 + b
            itab = (lt.idiag1 if (A1 >> b) & 1 else lt.idiag0) + s * m
            acc = 0.0
            for l in range(m):
                acc = acc + weights[l] * P[l] * itab[l]
            out[feature[s]] += (scale * r1 * r1 * acc
                                * (<double> ((A1 >> b) & 1) - ratio[s] * ratio[s]))


cdef void leaf_credits(
    int64_t n_leaves, const int64_t* dim, const int64_t* slot_start, const int64_t* feature,
    const double* rho, const LeafTables* lt, const uint64_t* leaf_pattern,
    const double* weights, const double* neg_inv_1mt, int64_t m, double scale, double linear,
    const double* V, const double* Q, double* wP, double* out,
) noexcept nogil:
    """After the pairs: features on one path of a pair (and the linear game),
    (X - R) / u times Q and U (tree_square_pairs)."""
    cdef int64_t l1, b, s, l
    cdef int64_t s0 = slot_start[0]
    cdef uint64_t A1
    cdef double acc
    cdef const double* tab
    for l1 in range(n_leaves):
        if rho[l1] == 0.0:
            continue
        A1 = leaf_pattern[l1]
        for l in range(m):
            wP[l] = weights[l] * (2.0 * scale * Q[l1 * m + l] + linear * V[l1 * m + l])
        for b in range(dim[l1]):
            s = slot_start[l1] - s0 + b
            tab = (lt.credit + s * m) if (A1 >> b) & 1 else neg_inv_1mt
            acc = 0.0
            for l in range(m):
                acc = acc + wP[l] * tab[l]
            out[feature[s]] += acc


cdef void tree_square_pairs(
    int64_t n_leaves, const int64_t* dim, const int64_t* slot_start, const int64_t* feature,
    const double* ratio, const double* rho, const LeafTables* lt,
    const int64_t* pair_start, const uint8_t* bit1, const uint8_t* bit2,
    const int64_t* entry_feature, const int32_t* offset, const double* psi_table,
    const double* kappa_table, const double* weights, const double* neg_inv_1mt, int64_t m,
    double scale, double linear, RowScratch* rs, double* out,
) noexcept nogil:
    """Add scale Sh[v^2] + linear Sh[v] of one tree and row to ``out`` from the
    table of all its pairs (one block; leaf patterns in rs.leaf_pattern).
    ``feature``, ``ratio`` and the leaf tables start at the tree's first
    slot, slot_start[0]; ``psi_table`` and ``kappa_table`` (kappa times the
    quadrature weights) as ``offset`` (pair_entries) reads them. A tree of
    several blocks runs the same three steps, the pairs block by block."""
    leaf_products(n_leaves, dim, slot_start, feature, ratio, rho, lt, rs.leaf_pattern, weights,
                  m, scale, rs.V, rs.Q, rs.P, out)
    if scale != 0.0:
        pair_block(n_leaves, 0, 1, n_leaves * (n_leaves - 1) // 2, pair_start, bit1, bit2,
                   entry_feature, offset, psi_table, kappa_table, rs.leaf_pattern, rs.V, rs.Q,
                   scale, out, m)
    leaf_credits(n_leaves, dim, slot_start, feature, rho, lt, rs.leaf_pattern, weights,
                 neg_inv_1mt, m, scale, linear, rs.V, rs.Q, rs.wP, out)


cdef struct TreeSquares:
    # the call's
    Forest f
    Patterns pt
    Rows rows
    const double* square_coef  # (rows, n_trees)
    const double* linear_coef
    const double* rho          # per leaf of the structure
    int64_t m                  # the ensemble's rule (the walk's scratch)
    int64_t n_slots
    double* out                # (rows, n_features)
    # the tree's (tree_square_pairs)
    int64_t t
    int64_t mt
    int64_t ls                 # its first leaf, leaves, first slot, slots
    int64_t n_leaves
    int64_t base
    int64_t leaf_slots
    const double* points       # its rule
    const double* weights
    const double* neg_inv_1mt
    LeafTables* lt
    # the tables of one block (and its plan)
    int64_t* pair_start
    uint8_t* bit1
    uint8_t* bit2
    int64_t* entry_feature
    int32_t* offset
    double* psi_table
    double* kappa_table
    const int64_t* block       # _plan_blocks' rows, 5 wide
    const int64_t* segment
    int64_t n_blocks
    int64_t seg_begin          # the segments of a one-block tree start here
    # trees of several blocks: groups of rows, each thread with its own tables
    int64_t n_group_rows
    int64_t n_block_entries
    int64_t n_block_pairs


cdef void* slot_scratch(void* work, Buffers* mem) noexcept nogil:
    """pair_entries' slot_of: one per feature, all -1."""
    cdef int64_t n = max(1, (<const TreeSquares*> work).f.n_features), k
    cdef int64_t* slot_of = <int64_t*> take(mem, n * sizeof(int64_t))
    if slot_of != NULL:
        for k in range(n):
            slot_of[k] = -1
    return slot_of


cdef void segment_tables(void* work, int64_t lo, int64_t hi, void* scratch,
                         Interrupt* stop) noexcept nogil:
    """Segments seg_begin + lo:hi of a one-block tree's tables (pair_entries);
    each entry is written by one segment, so the tables do not depend on the
    threads. The caller writes pair_start[block's pairs]."""
    cdef TreeSquares w = (<const TreeSquares*> work)[0]
    cdef int64_t prefix = w.mt + w.leaf_slots * w.mt
    cdef int64_t sg
    cdef const int64_t* seg
    for sg in range(w.seg_begin + lo, w.seg_begin + hi):
        seg = w.segment + 5 * sg
        pair_entries(w.n_leaves, seg[0], seg[1], seg[2], seg[4], &w.pt.dim[w.ls],
                     &w.pt.fstart[w.ls], w.pt.feature, w.pt.ratio, w.lt, w.mt,
                     <int64_t*> scratch, w.pair_start + seg[3], w.bit1, w.bit2,
                     w.entry_feature, w.offset, w.psi_table + prefix, w.kappa_table + prefix,
                     w.points, w.weights)


cdef void* row_scratch(void* work, Buffers* mem) noexcept nogil:
    cdef const TreeSquares* w = <const TreeSquares*> work
    return row_take(mem, w.n_leaves, w.f.max_tree_nodes, w.mt)


cdef inline bint row_skipped(const TreeSquares* w, int64_t i) noexcept nogil:
    return (w.square_coef[i * w.f.n_trees + w.t] == 0.0
            and w.linear_coef[i * w.f.n_trees + w.t] == 0.0)


cdef void pair_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                    Interrupt* stop) noexcept nogil:
    """Rows lo:hi of a one-block tree (tree_square_pairs)."""
    cdef TreeSquares w = (<const TreeSquares*> work)[0]
    cdef RowScratch rs = (<RowScratch*> scratch)[0]  # a copy: see the driver
    cdef const Patterns* pt = &w.pt
    cdef int64_t i, k = w.f.n_trees
    for i in range(lo, hi):
        if interrupted(stop):
            return
        if row_skipped(&w, i):
            continue
        block_leaf_patterns(&w.f, w.t, row_at(&w.rows, i), 0, 1, pt.node_slot,
                            &pt.leaf_node[w.ls], w.n_leaves, rs.left_taken, rs.pattern,
                            rs.leaf_pattern)
        tree_square_pairs(
            w.n_leaves, &pt.dim[w.ls], &pt.fstart[w.ls], &pt.feature[w.base],
            &pt.ratio[w.base], &w.rho[w.ls], w.lt, w.pair_start, w.bit1, w.bit2,
            w.entry_feature, w.offset, w.psi_table, w.kappa_table, w.weights, w.neg_inv_1mt,
            w.mt, w.square_coef[i * k + w.t], w.linear_coef[i * k + w.t], &rs,
            w.out + i * w.f.n_features)


cdef struct GroupScratch:
    RowScratch* rs
    # the thread's own tables of a block (pair_entries)
    double* psi
    double* kappa
    int64_t* start
    uint8_t* bit1
    uint8_t* bit2
    int64_t* feature
    int32_t* offset
    int64_t* slot_of
    # the group's rows: leaf products and patterns
    double* V
    double* Q
    uint64_t* pattern


cdef void* group_scratch(void* work, Buffers* mem) noexcept nogil:
    """A GroupScratch, the shared head of the tables ([1 / (1 - t) | alone
    per leaf slot], for psi and kappa) copied in, slot_of all -1."""
    cdef const TreeSquares* w = <const TreeSquares*> work
    cdef int64_t prefix = w.mt + w.leaf_slots * w.mt
    cdef int64_t entries = w.n_block_entries, table = prefix + entries * w.mt
    cdef int64_t n_features = max(1, w.f.n_features), group = w.n_group_rows * w.n_leaves, k
    cdef GroupScratch* g = <GroupScratch*> take(mem, sizeof(GroupScratch))
    if g == NULL:
        return NULL
    g.rs = row_take(mem, w.n_leaves, w.f.max_tree_nodes, w.mt)
    take_each(mem, table, &g.psi, &g.kappa)
    take_each(mem, w.n_block_pairs + 1, &g.start)
    take_each(mem, entries, &g.bit1, &g.bit2)
    take_each(mem, entries, &g.feature)
    take_each(mem, 4 * entries, &g.offset)
    take_each(mem, n_features, &g.slot_of)
    take_each(mem, group * w.mt, &g.V, &g.Q)
    take_each(mem, group, &g.pattern)
    if g.psi == NULL or g.kappa == NULL or g.slot_of == NULL:
        return g
    memcpy(g.psi, w.psi_table, prefix * sizeof(double))
    memcpy(g.kappa, w.kappa_table, prefix * sizeof(double))
    for k in range(n_features):
        g.slot_of[k] = -1
    return g


cdef void row_groups(void* work, int64_t lo, int64_t hi, void* scratch,
                     Interrupt* stop) noexcept nogil:
    """Groups lo:hi of rows of a tree of several blocks (module comment): per
    group, leaf products, then each block's table and its pairs, then
    credits; Ctrl-C within a group (seconds of work on a large tree) per
    segment of a table build and per row of a block."""
    cdef TreeSquares w = (<const TreeSquares*> work)[0]
    cdef GroupScratch g = (<GroupScratch*> scratch)[0]  # copies: see the driver
    cdef RowScratch rs = g.rs[0]
    cdef const Patterns* pt = &w.pt
    cdef int64_t prefix = w.mt + w.leaf_slots * w.mt
    cdef int64_t k = w.f.n_trees, p = w.f.n_features, mt = w.mt, t = w.t, ls = w.ls
    cdef int64_t gi, g0, g1, r, at, blk, sg
    cdef const int64_t* b
    cdef const int64_t* seg
    for gi in range(lo, hi):
        g0 = gi * w.n_group_rows
        g1 = min(w.rows.n, g0 + w.n_group_rows)
        for r in range(g0, g1):
            if row_skipped(&w, r):
                continue
            at = (r - g0) * w.n_leaves
            block_leaf_patterns(&w.f, t, row_at(&w.rows, r), 0, 1, pt.node_slot,
                                &pt.leaf_node[ls], w.n_leaves, rs.left_taken, rs.pattern,
                                &g.pattern[at])
            leaf_products(w.n_leaves, &pt.dim[ls], &pt.fstart[ls], &pt.feature[w.base],
                          &pt.ratio[w.base], &w.rho[ls], w.lt, &g.pattern[at], w.weights, mt,
                          w.square_coef[r * k + t], &g.V[at * mt], &g.Q[at * mt], rs.P,
                          w.out + r * p)
        for blk in range(w.n_blocks):
            if interrupted(stop):
                return
            b = w.block + 5 * blk
            for sg in range(b[4], w.block[5 * (blk + 1) + 4]):
                if interrupted(stop):
                    return
                seg = w.segment + 5 * sg
                pair_entries(w.n_leaves, seg[0], seg[1], seg[2], seg[4], &pt.dim[ls],
                             &pt.fstart[ls], pt.feature, pt.ratio, w.lt, mt, g.slot_of,
                             g.start + seg[3], g.bit1, g.bit2, g.feature, g.offset,
                             g.psi + prefix, g.kappa + prefix, w.points, w.weights)
            g.start[b[2]] = b[3]
            for r in range(g0, g1):
                if w.square_coef[r * k + t] == 0.0 or interrupted(stop):
                    continue
                at = (r - g0) * w.n_leaves
                pair_block(w.n_leaves, b[0], b[1], b[2], g.start, g.bit1, g.bit2, g.feature,
                           g.offset, g.psi, g.kappa, &g.pattern[at], &g.V[at * mt],
                           &g.Q[at * mt], w.square_coef[r * k + t], w.out + r * p, mt)
        if interrupted(stop):
            return
        for r in range(g0, g1):
            if row_skipped(&w, r):
                continue
            at = (r - g0) * w.n_leaves
            leaf_credits(w.n_leaves, &pt.dim[ls], &pt.fstart[ls], &pt.feature[w.base],
                         &w.rho[ls], w.lt, &g.pattern[at], w.weights, w.neg_inv_1mt, mt,
                         w.square_coef[r * k + t], w.linear_coef[r * k + t], &g.V[at * mt],
                         &g.Q[at * mt], rs.wP, w.out + r * p)


cdef struct WalkScratch:
    Scratch* sc
    PairScratch* ps


cdef void* walk_scratch(void* work, Buffers* mem) noexcept nogil:
    cdef const TreeSquares* w = <const TreeSquares*> work
    cdef WalkScratch* s = <WalkScratch*> take(mem, sizeof(WalkScratch))
    if s != NULL:
        s.ps = pair_take(mem, w.f.n_features, w.n_slots, w.m)
        s.sc = scratch_take(mem, w.f.max_tree_nodes, w.m, 1)
    return s


cdef void walk_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                    Interrupt* stop) noexcept nogil:
    """Rows lo:hi of a tree the pair tables do not take: the walk."""
    cdef TreeSquares w = (<const TreeSquares*> work)[0]
    cdef Scratch sc = (<const WalkScratch*> scratch).sc[0]  # copies: see the driver
    cdef PairScratch ps = (<const WalkScratch*> scratch).ps[0]
    cdef int64_t i, l, k = w.f.n_trees
    for i in range(lo, hi):
        if interrupted(stop):
            return
        if row_skipped(&w, i):
            continue
        for l in range(w.mt):
            ps.weights[l] = w.linear_coef[i * k + w.t] * w.weights[l]
        tree_gradient_uniform(&w.f, w.t, row_at(&w.rows, i), w.points, ps.weights, w.mt,
                              &sc, w.out + i * w.f.n_features)
        tree_square_gradient(&w.f, w.t, w.points, w.weights, w.mt, w.square_coef[i * k + w.t],
                             &sc, &ps, w.out + i * w.f.n_features)


class _PairTables:
    """Row-independent leaf structure of every tree for ``tree_square_pairs``
    and which trees take it (``by_pairs``): at least two leaves, at most 64
    distinct features on a path (pattern bits) and every cover ratio product
    above MIN_RATIO (u = 0 would break the division-free identities); the
    tables of a large tree are built block by block (``blocks``). Other
    trees take the walk. Per tree taken: ``n_pairs``, ``n_entries`` (shared
    features of its pairs), ``max_union`` (most distinct features on the
    paths of a pair, or its bound in trees of more than MAX_COUNTED_PAIRS
    pairs); 0 elsewhere. ``m``: the ensemble's Gauss-Legendre nodes (unused;
    each tree's are chosen by _tree_rules)."""

    def __init__(self, ens, m=None):
        from ._semivalues import pattern_structure

        self.structure = structure = pattern_structure(ens)
        self.node_slot = structure["node_slot"]
        self.leaf_node = structure["leaf_node"]
        self.dim = structure["leaf_dim"]
        self.slot_start = structure["leaf_feature_start"]
        self.feature = structure["leaf_feature"]
        self.ratio = structure["leaf_ratio"]
        self.tree_leaf_start = structure["tree_leaf_start"]
        self.rho = np.ascontiguousarray(np.asarray(ens.value, dtype=np.float64)
                                        .reshape(len(ens.children_left), -1)[self.leaf_node, 0])
        n_trees = len(self.tree_leaf_start) - 1
        self.by_pairs = np.zeros(n_trees, dtype=np.uint8)
        self.max_union = np.zeros(n_trees, dtype=np.int64)
        self.n_pairs = np.zeros(n_trees, dtype=np.int64)
        self.n_entries = np.zeros(n_trees, dtype=np.int64)
        self.max_slots = self.max_dim = 0
        n_features = max(1, int(ens.n_features))
        count = np.zeros(n_features, dtype=np.int64)
        local = np.full(n_features, -1, dtype=np.int64)
        for t in range(n_trees):
            ls, le = self.tree_leaf_start[t], self.tree_leaf_start[t + 1]
            n_leaves = le - ls
            if n_leaves < 2:
                continue
            slots = slice(self.slot_start[ls], self.slot_start[le])
            max_dim = int(self.dim[ls:le].max())
            if max_dim > 64 or self.ratio[slots].min() <= MIN_RATIO:
                continue
            n_entries, max_union = _pair_counts(self.dim[ls:le], self.slot_start[ls:le + 1],
                                                self.feature, count, local)
            self.by_pairs[t] = 1
            self.max_union[t] = max_union
            self.n_pairs[t] = n_leaves * (n_leaves - 1) // 2
            self.n_entries[t] = n_entries
            self.max_slots = max(self.max_slots, self.slot_start[le] - self.slot_start[ls])
            self.max_dim = max(self.max_dim, max_dim)

    def blocks(self, t, m, block_bytes):
        """Tree t's blocks of pairs at ``m`` nodes and their segments (_plan_blocks)."""
        ls, le = self.tree_leaf_start[t], self.tree_leaf_start[t + 1]
        slot_of = np.full(max(1, int(self.feature.max(initial=0)) + 1), -1, dtype=np.int64)
        return _plan_blocks(self.dim[ls:le], self.slot_start[ls:le + 1], self.feature, slot_of,
                            int(m), float(block_bytes))


def tree_path_features(ens):
    """d_t, the most distinct features on a root-to-leaf path, per tree."""
    cdef const int64_t[::1] parent = ens.parent
    cdef const int64_t[::1] prev_same = ens.prev_same
    cdef const int64_t[::1] left = ens.children_left
    cdef const int64_t[::1] tree_start = ens.tree_start
    cdef int64_t n_trees = tree_start.shape[0] - 1
    cdef int64_t[::1] distinct = np.zeros(parent.shape[0], dtype=np.int64)
    cdef int64_t[::1] out = np.zeros(n_trees, dtype=np.int64)
    cdef int64_t t, k
    for t in range(n_trees):
        for k in range(tree_start[t], tree_start[t + 1]):
            if parent[k] >= 0:  # preorder: the parent comes first
                distinct[k] = distinct[parent[k]] + (prev_same[k] < 0)
            if left[k] < 0 and distinct[k] > out[t]:
                out[t] = distinct[k]
    return np.asarray(out)


def tree_feature_counts(ens):
    """F_t, the distinct split features (players) of every tree."""
    n_trees = len(ens.tree_start) - 1
    internal = np.asarray(ens.children_left) >= 0
    tree_of = np.repeat(np.arange(n_trees), np.diff(ens.tree_start))
    pairs = np.unique(np.stack([tree_of[internal], np.asarray(ens.feature)[internal]]), axis=1)
    return np.bincount(pairs[0], minlength=n_trees)


def tree_rule_sizes(ens):
    """n_t = min(d_t, ceil(F_t / 2)) per tree: the Gauss-Legendre nodes exact
    for tree t's games (module comment); at least 1."""
    d = tree_path_features(ens)
    n_features = tree_feature_counts(ens)
    return np.maximum(1, np.minimum(d, (n_features + 1) // 2))


def _tree_rules(ens, points, weights, max_union=None):
    """Per tree, the number of nodes and the rows (padded to len(points)) of
    the quadrature rule it uses: its own Gauss-Legendre rule (tree_rule_sizes,
    at most len(points)) when the given one is the Gauss-Legendre rule on
    [0, 1], else the given rule. ``max_union[t]`` > 0, the most distinct
    features on the paths of a pair of tree t's leaves, bounds the degree
    of its pair gradients by max_union[t] - 1, so ceil(max_union[t] / 2)
    nodes suffice there (at most n_t)."""
    from .._numerics import _gauss_legendre

    m = len(points)
    n_trees = len(ens.tree_start) - 1
    rule_points = np.zeros((m, m))
    rule_weights = np.zeros((m, m))
    rule_points[m - 1] = points
    rule_weights[m - 1] = weights
    tree_m = np.full(n_trees, m, dtype=np.int64)
    nodes, w = _gauss_legendre(m)
    if np.array_equal(points, (nodes + 1.0) / 2.0) and np.array_equal(weights, w / 2.0):
        for size in range(1, m):
            nodes, w = _gauss_legendre(size)
            rule_points[size - 1, :size] = (nodes + 1.0) / 2.0
            rule_weights[size - 1, :size] = w / 2.0
        tree_m = tree_rule_sizes(ens)
        if max_union is not None:
            tree_m = np.where(max_union > 0, np.minimum(tree_m, (max_union + 1) // 2), tree_m)
        tree_m = np.clip(tree_m, 1, m)
    return tree_m, rule_points, rule_weights




def r2_terms(ens, const double[:, ::1] X, const double[:, ::1] square_coef,
             const double[:, ::1] linear_coef, const double[::1] points,
             const double[::1] weights, int n_threads, method="auto", block_bytes=None):
    """Per-row, per-feature  sum_k a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i).

    ``square_coef`` (a) and ``linear_coef`` (b) have shape (n_rows, n_trees);
    a tree whose two coefficients are 0 for a row is skipped for that row.
    The squared-error game of tree k against a constant c_ik with weight w_i
    is a = w_i, b = -2 w_i c_ik (module doc); a second-order loss game is
    a = w_i h_ik / 2, b = w_i g_ik. Shape (n_rows, n_features).

    ``points``, ``weights``: a quadrature rule on [0, 1] exact for the
    ensemble's games (Gauss-Legendre with ``n_path_features`` nodes). When
    it is that Gauss-Legendre rule, each tree uses the smaller Gauss-Legendre
    rule exact for its own games instead (``tree_rule_sizes``, or fewer
    nodes where no pair of the tree's leaves has that many features; the
    same values up to rounding); any other rule is used as given.

    ``method``: "auto" takes the leaf-pair tables for every tree they can
    take (``_PairTables``) and the pair walk for the others; "walk" takes
    the walk for every tree (the tests compare the two). ``block_bytes``:
    the most bytes of a block of a tree's pair tables (None:
    DEFAULT_BLOCK_BYTES); any size gives the same values.
    """
    cdef Forest f = forest_from(ens)
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef int64_t m = points.shape[0]
    cdef int64_t n_slots = max(1, min(ens.max_depth, f.n_features))
    cdef double[:, ::1] out = np.zeros((n_rows, f.n_features))
    cdef int64_t t, l, mt
    cdef const int64_t[::1] tree_m
    cdef const double[:, ::1] rule_points
    cdef const double[:, ::1] rule_weights
    if f.n_values != 1:
        raise ValueError("the R^2 decomposition needs one value per leaf")
    if np.any(np.asarray(ens.tree_output) != 0):
        # the shared up pass credits output tree_output[t]; out has one output
        raise ValueError("the R^2 kernel needs every tree to write to output 0 (the game "
                         "coefficients carry the class)")
    if square_coef.shape[0] != n_rows or square_coef.shape[1] != f.n_trees or \
            linear_coef.shape[0] != n_rows or linear_coef.shape[1] != f.n_trees:
        raise ValueError("game coefficients must have shape (n_rows, n_trees)")
    if method not in ("auto", "walk"):
        raise ValueError(f"method must be 'auto' or 'walk', got {method!r}")
    if block_bytes is None:
        block_bytes = DEFAULT_BLOCK_BYTES
    if not block_bytes > 0:
        raise ValueError(f"block_bytes must be > 0, got {block_bytes!r}")
    if n_rows == 0:
        return np.asarray(out)
    tables = _PairTables(ens, m)
    if (method == "walk" or m > 64
            or not np.all((np.asarray(points) > 0) & (np.asarray(points) < 1))):
        tables.by_pairs[:] = 0  # the leaf-pair tables divide by 1 - t; at most 64 nodes
        tables.max_union[:] = 0
    tree_m, rule_points, rule_weights = _tree_rules(ens, np.asarray(points), np.asarray(weights),
                                                    tables.max_union)
    # trees some row needs
    cdef const uint8_t[::1] used = np.ascontiguousarray(
        (np.any(np.asarray(square_coef) != 0, axis=0)
         | np.any(np.asarray(linear_coef) != 0, axis=0)).astype(np.uint8))
    # the blocks of every tree taken (by the tree and block_bytes only)
    plans = {}
    max_block_pairs = max_block_entries = max_blocked_leaves = 0
    for t in np.flatnonzero(np.asarray(tables.by_pairs) & np.asarray(used)):
        plans[t] = tables.blocks(t, tree_m[t], block_bytes)
        blocks = plans[t][0][:len(plans[t][0]) - 1]
        max_block_pairs = max(max_block_pairs, int(blocks[:, 2].max()))
        max_block_entries = max(max_block_entries, int(blocks[:, 3].max()))
        if len(blocks) > 1:
            max_blocked_leaves = max(max_blocked_leaves, int(
                tables.tree_leaf_start[t + 1] - tables.tree_leaf_start[t]))
    cdef Patterns pt = patterns_from(tables.structure)  # slots: a leaf's path features
    cdef const double[::1] rho = tables.rho
    cdef const uint8_t[::1] by_pairs = tables.by_pairs
    cdef int64_t[::1] pair_start = np.zeros(max_block_pairs + 1, dtype=np.int64)
    cdef uint8_t[::1] bit1 = np.zeros(max(1, max_block_entries), dtype=np.uint8)
    cdef uint8_t[::1] bit2 = np.zeros(max(1, max_block_entries), dtype=np.uint8)
    cdef int64_t[::1] entry_feature = np.zeros(max(1, max_block_entries), dtype=np.int64)
    cdef int32_t[::1] offset = np.zeros(4 * max(1, max_block_entries), dtype=np.int32)
    # per tree: [1 / (1 - t) | alone per leaf slot | psi11 per entry of a block]
    # and the same for kappa, each part tree_m[t] wide
    table_size = m + tables.max_slots * m + max_block_entries * m
    cdef double[::1] psi_table = np.zeros(table_size)
    cdef double[::1] kappa_table = np.zeros(table_size)
    # the other leaf tables (alone, kappa live in psi_table, kappa_table)
    cdef double[:, ::1] leaf_buffers = np.zeros((8, max(1, tables.max_slots * m)))
    cdef double[::1] neg_inv_1mt = np.zeros(m)
    # trees of several blocks: groups of rows
    cdef Py_ssize_t n_group_rows = group_rows(n_rows, n_threads, max_blocked_leaves, m)
    cdef const int64_t[:, ::1] block
    cdef const int64_t[:, ::1] segment
    cdef LeafTables lt
    cdef TreeSquares w = TreeSquares(
        f=f, pt=pt, rows=rows_of(X),
        square_coef=&square_coef[0, 0], linear_coef=&linear_coef[0, 0], rho=&rho[0], m=m,
        n_slots=n_slots, out=&out[0, 0], lt=&lt, neg_inv_1mt=&neg_inv_1mt[0],
        pair_start=&pair_start[0], bit1=&bit1[0], bit2=&bit2[0],
        entry_feature=&entry_feature[0], offset=&offset[0], psi_table=&psi_table[0],
        kappa_table=&kappa_table[0], n_group_rows=n_group_rows,
        n_block_entries=max(1, max_block_entries), n_block_pairs=max_block_pairs)
    lt.u0 = &leaf_buffers[0, 0]
    lt.u1 = &leaf_buffers[1, 0]
    lt.credit = &leaf_buffers[2, 0]
    lt.diag0 = &leaf_buffers[3, 0]
    lt.diag1 = &leaf_buffers[4, 0]
    lt.idiag0 = &leaf_buffers[5, 0]
    lt.idiag1 = &leaf_buffers[6, 0]
    lt.iu1 = &leaf_buffers[7, 0]
    for t in range(f.n_trees):
        if f.tree_start[t + 1] - f.tree_start[t] == 1 or not used[t]:
            continue
        mt = tree_m[t]
        w.t = t
        w.mt = mt
        w.points = &rule_points[mt - 1, 0]
        w.weights = &rule_weights[mt - 1, 0]
        if not by_pairs[t]:
            parallel_units(n_rows, 4, walk_scratch, walk_rows, &w, n_threads)
            continue
        w.ls = pt.tree_leaf_start[t]
        w.n_leaves = pt.tree_leaf_start[t + 1] - w.ls
        w.base = pt.fstart[w.ls]
        w.leaf_slots = pt.fstart[w.ls + w.n_leaves] - w.base
        block, segment = plans[t]
        w.block = &block[0, 0]
        w.segment = &segment[0, 0]
        w.n_blocks = block.shape[0] - 1
        with nogil:
            for l in range(mt):
                psi_table[l] = 1.0 / (1.0 - rule_points[mt - 1, l])
                kappa_table[l] = rule_weights[mt - 1, l] * psi_table[l]
                neg_inv_1mt[l] = -psi_table[l]
            lt.alone = &psi_table[mt]
            lt.kappa = &kappa_table[mt]
            leaf_tables(&pt.ratio[w.base], w.leaf_slots, w.points, w.weights, mt, &lt)
        if w.n_blocks == 1:
            w.seg_begin = block[0, 4]
            parallel_units(block[1, 4] - block[0, 4], 1, slot_scratch, segment_tables, &w,
                           n_threads)
            pair_start[block[0, 2]] = block[0, 3]
            parallel_units(n_rows, 8, row_scratch, pair_rows, &w, n_threads)
        else:
            # several blocks (module comment): rows in fixed groups, one group at
            # a time per thread, each thread with its own copy of the tables (no
            # barrier between blocks)
            parallel_units((n_rows + n_group_rows - 1) // n_group_rows, 1, group_scratch,
                           row_groups, &w, n_threads)
    return np.asarray(out)
