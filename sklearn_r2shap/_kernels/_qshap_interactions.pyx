# Shapley interaction shares of R^2 (doc/r2_decomposition.rst, "Interaction
# shares"; interaction values: doc/local_attributions.rst, "Interaction values").
#
# Per row i and tree k the R^2 game is a_ik m_S^2 + b_ik m_S (the Q-SHAP
# coefficients of _qshap.r2_terms: squared error a = w_i, b = -2 w_i c_ik).
# Its SHAP interaction value (Lundberg et al. 2020, eq. (8)) is, for j != k,
#     Phi_jk = (1/2) int_0^1 d_j d_k U(t 1) dt
# with U the game's multilinear extension (Grabisch's Shapley interaction
# index; _interactions.pyx, (I1)). For the linear part U = sum_l rho_l U_l,
# U_l = prod_{j in F_l} u_j(l), u_j(l) = (1 - t) R_jl + t X_jl, so
#     d_j d_k U_l = U_l alpha_j(l) alpha_k(l),  alpha_j(l) = (X_jl - R_jl) / u_j(l).
# For the squared part U = sum over ordered leaf pairs (l1, l2) of
# rho_1 rho_2 P(l1, l2), P = prod over F_1 u F_2 of the pair's factors (_qshap.pyx:
# g_j = (1 - t) R_j1 R_j2 + t X_j1 X_j2 on both paths, u_j(l) on one), so
#     d_j d_k P = P a_j a_k,  a_j = alpha_j(l1) + alpha_j(l2) + kappa_j,
# alpha_j(l) = 0 off l's path, kappa_j = (X1 X2 - R1 R2) / g_j - alpha_j(l1)
# - alpha_j(l2) on shared features (0 elsewhere). With M = rho_1 rho_2 P
# (symmetric, summed over l1 != l2) and the sums over a leaf's partners
#     Q_l = sum_{l'} M(l, l'),  K_l = sum_{l'} M(l, l') kappa(l, l'),
#     (M A)_l = sum_{l'} M(l, l') alpha(l'),
# the off-diagonal pairs give
#     sum M a a^T = 2 sum_l Q_l alpha_l alpha_l^T + 2 sym(sum_l alpha_l (M A)_l^T)
#                   + 2 sym(sum_l K_l alpha_l^T) + 2 sum_{l1 < l2} M kappa kappa^T
# (sym(Z) = Z + Z^T, its two halves added into [j][k] and [k][j] of a full
# matrix whose two triangles are added at the end), and the diagonal pairs
# l1 = l2 the product over one path with g_j = (1 - t) R_j^2 + t X_j. With X in
# {0, 1}, a shared feature's psi_j = g_j / (u_j(l1) u_j(l2)) and kappa_j are
# 1 / (1 - t) and 1 / (1 - t) when X1 = X2 = 0, R1 / u1 and -(1 - R1) / u1
# (u1 = (1 - t) R1 + t, so -alpha_j(l1)) when only X1 = 1 (and the mirror), and
# g / (u1 u2) and (1 - R1 R2) / g - (1 - R1) / u1 - (1 - R2) / u2 with
# g = (1 - t) R1 R2 + t when X1 = X2 = 1: functions of the pair entry and the
# bits only (shared_factors). The pairs listed once per call (pair_lists) keep
# the four per entry in a table per tree (each distinct ratio, and ordered pair
# of ratios, once: it stays in cache) that the row picks by its two bits,
# without a branch or a division; the others compute them row by row, by the
# same functions, so both give the same bits. Cost per row, tree and Gauss node:
# O(L^2 (d + s^2) + L d F), L leaves, d path features, s shared features of a
# pair, F the tree's features. Two sibling leaves' paths differ in their
# parent's feature only, so their pairs with a third leaf share all other
# psi and kappa: leaf_partners takes them in one pass (about a tenth fewer
# instructions on XGBoost depth 6, where nine leaves in ten have a leaf sibling).
#
# The same sums give the first derivatives, whose integrals are the games'
# Shapley values (the terms of _qshap.r2_terms): over the off-diagonal pairs
# sum M a = 2 sum_l Q_l alpha_l + sum_l K_l (K_l holds each pair's M kappa at
# both of its leaves), so one pass gives the terms and the interactions, the
# terms at the R^2 kernel's rule per tree (one node more than the
# interactions need where |F_1 u F_2| is odd).
#
# A factor vanishes only where its R and X products are 0 (a zero-cover edge
# x does not take); its derivative X - R (or X1 X2 - R1 R2) is then 0 too, so
# every derivative of that leaf's or pair's term is 0: it is skipped, and the
# other factors are divided exactly. The integrand has degree at most
# |F_1 u F_2| - 2, below the degree the R^2 kernel's rule per tree is exact
# for (_qshap._tree_rules).
import numpy as np

from libc.stdint cimport int8_t, int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memset

from ._common cimport (
    Buffers, Rows, Rules, block_leaf_patterns, parallel_units, row_at, rows_of, rules_of, take,
    take_each,
)
from ._forest cimport Forest, Interrupt, Patterns, forest_from, interrupted, patterns_from


cdef enum:
    MAX_NODES = 64  # Gauss nodes of a tree's rule: at most its path features (<= 64)
    ROW_CHUNK = 64  # rows that take a tree in turn (r2_interaction_terms)

# the lists of leaf pairs' shared features and their tables, per call (pair_lists)
DEFAULT_LIST_BYTES = 256.0 * 1024 * 1024


cdef struct PairRow:
    uint8_t* left_taken
    uint64_t* pattern
    uint64_t* leaf_pattern   # per leaf of the tree
    uint8_t* alive           # per leaf
    # per Gauss node q, innermost ([.. * m + q]):
    double* rU               # per leaf: rho_l U_l
    double* Q                # per leaf: sum over partners of M
    double* alpha            # per leaf entry (the tree's, from 0): alpha_j(l)
    double* K
    double* alone_psi        # per leaf entry, pairs not listed: alone_factors
    double* alone_kappa
    double* psi11            # one pair's shared features with X1 = X2 = 1, pairs not
    double* kappa11          # listed: shared_factors
    double* MA               # (tree features,): sum over l1's later partners of M alpha
    const double** kappa     # one pair's shared features: their kappa (m values), and
                             # after them a sibling l2 + 1's differing one (leaf_partners)
    double* H                # (tree features, tree features), both triangles, summed over q
    double* grad             # (tree features,): the first derivatives, summed over q
    int64_t* pos             # tree feature -> entry of the pair's first leaf, or -1
    int64_t* shared_e1       # one pair's shared features: entries in l1 and l2
    int64_t* shared_e2


cdef struct PairRowSize:
    int64_t max_nodes
    int64_t max_leaves
    int64_t max_entries
    int64_t max_local
    int64_t max_dim
    int64_t m


cdef void* pair_row_scratch(void* work, Buffers* mem) noexcept nogil:
    """A PairRow for the sizes of the work struct's first field (a
    PairRowSize); ``pos`` all -1."""
    cdef const PairRowSize* size = <const PairRowSize*> work
    cdef int64_t m = size.m, max_nodes = size.max_nodes, max_leaves = size.max_leaves
    cdef int64_t max_entries = size.max_entries, max_local = size.max_local
    cdef int64_t max_dim = size.max_dim, z
    cdef PairRow* s = <PairRow*> take(mem, sizeof(PairRow))
    if s == NULL:
        return NULL
    take_each(mem, max_nodes, &s.left_taken)
    take_each(mem, max_nodes, &s.pattern)
    take_each(mem, max_leaves, &s.leaf_pattern)
    take_each(mem, max_leaves, &s.alive)
    take_each(mem, max_leaves * m, &s.rU, &s.Q)
    take_each(mem, max_entries * m, &s.alpha, &s.K)
    take_each(mem, 2 * max_entries * m, &s.alone_psi)
    s.alone_kappa = s.alone_psi + max_entries * m if s.alone_psi != NULL else NULL
    take_each(mem, 2 * (max_dim + 1) * m, &s.psi11)
    s.kappa11 = s.psi11 + (max_dim + 1) * m if s.psi11 != NULL else NULL
    take_each(mem, max_local * m, &s.MA)
    s.kappa = <const double**> take(mem, (max_dim + 1) * sizeof(double*))
    take_each(mem, max_local * (max_local + 1), &s.H)
    s.grad = s.H + max_local * max_local if s.H != NULL else NULL
    take_each(mem, max_local, &s.pos)
    take_each(mem, 2 * max_dim, &s.shared_e1)
    s.shared_e2 = s.shared_e1 + max_dim if s.shared_e1 != NULL else NULL
    if s.pos != NULL:
        for z in range(max_local):
            s.pos[z] = -1
    return s


cdef inline int64_t shared_factor(
    const PairRow* s, int64_t n_shared, int64_t ed, const double* psi, const double* unit,
    double* P, int64_t m, int64_t* cd, const double** psi_d,
) noexcept nogil:
    """Multiply the pair's factors ``P`` by shared entry ``n_shared``'s psi,
    except for the entry that differs in l2's sibling (``ed``), whose psi is
    kept in ``psi_d`` and its index in ``cd`` (selects, not branches: that
    entry is anywhere); return the next entry's index."""
    cdef bint is_d = s.shared_e2[n_shared] == ed
    cdef int64_t q
    cd[0] = n_shared if is_d else cd[0]
    psi_d[0] = psi if is_d else psi_d[0]
    psi = unit if is_d else psi
    for q in range(m):
        P[q] *= psi[q]
    return n_shared + 1


cdef inline double bit(uint64_t pattern, int64_t b) noexcept nogil:
    return <double> ((pattern >> b) & 1)


cdef inline void alone_factors(double R, const double* points, int64_t m, double* psi,
                               double* kappa) noexcept nogil:
    """psi and kappa of a shared feature where only the leaf with ratio R has X = 1
    (module comment)."""
    cdef int64_t q
    cdef double u
    for q in range(m):
        u = (1.0 - points[q]) * R + points[q]
        psi[q] = R / u
        kappa[q] = -(1.0 - R) / u


cdef inline void shared_factors(double R1, double R2, const double* points, int64_t m,
                                double* psi, double* kappa) noexcept nogil:
    """psi and kappa of a shared feature where both leaves have X = 1 (module comment)."""
    cdef int64_t q
    cdef double u1, u2, g
    for q in range(m):
        u1 = (1.0 - points[q]) * R1 + points[q]
        u2 = (1.0 - points[q]) * R2 + points[q]
        g = (1.0 - points[q]) * (R1 * R2) + points[q]
        psi[q] = g / (u1 * u2)
        kappa[q] = (1.0 - R1 * R2) / g - (1.0 - R1) / u1 - (1.0 - R2) / u2


cdef struct PairLists:
    # per listed tree, its pairs l1 < l2 in row-major order from ``first``; per
    # pair [start[p], start[p + 1]) its shared features: their slots in l1's
    # and l2's paths, and per bits x = X1 + 2 X2 where their psi and kappa
    # start in the tree's table (``offset[4 c + x]``; pair_lists)
    const int64_t* start     # NULL: the pairs are found row by row
    const uint8_t* slot1
    const uint8_t* slot2
    const int32_t* offset
    const double* table      # the tree's table
    int64_t first


# A constant number of Gauss nodes lets the compiler unroll the loops over
# them (as _qshap.pair_block): leaf_partners takes it as the size of its
# arrays' struct (the fused type), and any other count as NodesAny's m. Four
# and five are the rules of most depth-5 to depth-7 trees; with GCC 12, more
# copies (or copies of all of tree_pair_hessian) were slower, not faster.
cdef struct Nodes4:
    double v[4]
cdef struct Nodes5:
    double v[5]
cdef struct NodesAny:
    double v[MAX_NODES]

ctypedef fused Nodes:
    Nodes4
    Nodes5
    NodesAny


cdef inline const double* row_factors(
    int64_t e1, int64_t e2, double X1, double X2, int64_t base, const double* ratio,
    const double* points, int64_t m, const double* inv_1mt, PairRow* s, int64_t c,
) noexcept nogil:
    """psi of a shared feature of a pair not listed (entries e1, e2, bits X1, X2);
    its kappa into ``s.kappa[c]`` (module comment)."""
    if X1 == 0.0 and X2 == 0.0:
        s.kappa[c] = inv_1mt
        return inv_1mt
    if X2 == 0.0:
        s.kappa[c] = &s.alone_kappa[(e1 - base) * m]
        return &s.alone_psi[(e1 - base) * m]
    if X1 == 0.0:
        s.kappa[c] = &s.alone_kappa[(e2 - base) * m]
        return &s.alone_psi[(e2 - base) * m]
    shared_factors(ratio[e1], ratio[e2], points, m, &s.psi11[c * m], &s.kappa11[c * m])
    s.kappa[c] = &s.kappa11[c * m]
    return &s.psi11[c * m]


cdef inline void kappa_products(
    double* H_row, const double* Mk, int64_t first, int64_t n_shared, PairRow* s,
    const int64_t* local, int64_t base, int64_t m,
) noexcept nogil:
    """2 M kappa_j kappa_k^T of a pair: into the row ``H_row`` of shared feature j
    (``Mk``: M kappa_j), at each shared feature k in [first, n_shared)."""
    cdef int64_t c, q
    cdef double acc
    cdef const double* kc
    for c in range(first, n_shared):
        kc = s.kappa[c]
        acc = 0.0
        for q in range(m):
            acc = acc + Mk[q] * kc[q]
        H_row[local[s.shared_e1[c] + base]] += 2.0 * acc


cdef inline void leaf_partners(
    int64_t l1, int64_t n_leaves, const int64_t* dim, const int64_t* fstart, int64_t base,
    const int64_t* local, const int8_t* sibling, const double* ratio, int64_t n_local,
    const double* points, const double* sq, const double* inv_1mt, PairLists lists,
    PairRow* s, Nodes* nodes, int64_t any_m,
) noexcept nogil:
    """The pairs (l1, l2 > l1) of tree_pair_hessian: M, and the partner sums Q,
    K, M A (l1's, into H at once); ``nodes.v`` holds M at the m nodes.

    Sibling leaves l2, l2 + 1 (``sibling[l2]``, the slot of their parent's
    feature: leaf_siblings) have the same entries but that one, so their pairs
    with l1 share every factor and kappa but its: one pass serves both, and
    adds l1's sums, K of the entries they share and M A once for both."""
    cdef int64_t q, l2, e, e1, e2, c, n_shared, j, f, at, pp, slot, ed, cd
    cdef uint64_t A1, A2, x
    cdef double X1, X2, acc
    cdef bint both
    cdef const double* psi
    cdef const double* psi_d = NULL   # the differing entry's psi at l2 and at l2 + 1
    cdef const double* psi_d2 = NULL
    cdef const double* kc
    cdef const double* kc2
    cdef double* H = s.H
    cdef double* row = s.MA
    cdef double* Mc = nodes.v
    cdef int64_t m = any_m if Nodes is NodesAny else sizeof(nodes.v) // sizeof(double)
    cdef Nodes Q1, scaled1, Mk, alpha1  # l1's Q, sq rho_1 U_1, one M kappa, one alpha
    cdef Nodes P, M2, S, Kd  # the factors both siblings' pairs share; l2 + 1's M; both Ms;
                             # both M kappa of the differing entry
    cdef Nodes ones
    cdef const double* unit = &ones.v[0]
    for q in range(m):
        Q1.v[q] = s.Q[l1 * m + q]
        scaled1.v[q] = sq[q] * s.rU[l1 * m + q]
        ones.v[q] = 1.0
    if lists.start == NULL:
        for e in range(fstart[l1], fstart[l1] + dim[l1]):
            s.pos[local[e]] = e
    memset(row, 0, n_local * m * sizeof(double))
    A1 = s.leaf_pattern[l1]
    l2 = l1 + 1
    while l2 < n_leaves:
        if not s.alive[l2]:
            l2 += 1
            continue
        both = sibling[l2] >= 0 and l2 + 1 < n_leaves and s.alive[l2 + 1]
        ed = fstart[l2] - base + sibling[l2] if both else -1
        cd = -1
        n_shared = 0
        for q in range(m):
            P.v[q] = scaled1.v[q]
        if lists.start != NULL:  # the pair's shared features, listed once per call
            pp = lists.first + l1 * (2 * n_leaves - l1 - 1) // 2 + (l2 - l1 - 1)
            A2 = s.leaf_pattern[l2]
            for c in range(lists.start[pp], lists.start[pp + 1]):
                # the block by the bits, without a branch
                x = ((A1 >> lists.slot1[c]) & 1) | (((A2 >> lists.slot2[c]) & 1) << 1)
                psi = lists.table + lists.offset[4 * c + x]
                s.kappa[n_shared] = psi + m
                s.shared_e1[n_shared] = fstart[l1] - base + lists.slot1[c]
                s.shared_e2[n_shared] = fstart[l2] - base + lists.slot2[c]
                n_shared = shared_factor(s, n_shared, ed, psi, unit, P.v, m, &cd, &psi_d)
            if cd >= 0:  # l2 + 1's: pair pp + 1 lists the same features in order
                c = lists.start[pp + 1] + cd
                x = ((A1 >> lists.slot1[c]) & 1) | (
                    ((s.leaf_pattern[l2 + 1] >> lists.slot2[c]) & 1) << 1)
                psi_d2 = lists.table + lists.offset[4 * c + x]
                s.kappa[n_shared] = psi_d2 + m
        else:
            for e2 in range(fstart[l2], fstart[l2] + dim[l2]):
                e1 = s.pos[local[e2]]
                if e1 < 0:
                    continue
                X1 = bit(A1, e1 - fstart[l1])
                X2 = bit(s.leaf_pattern[l2], e2 - fstart[l2])
                psi = row_factors(e1, e2, X1, X2, base, ratio, points, m, inv_1mt, s, n_shared)
                s.shared_e1[n_shared] = e1 - base
                s.shared_e2[n_shared] = e2 - base
                n_shared = shared_factor(s, n_shared, ed, psi, unit, P.v, m, &cd, &psi_d)
            if cd >= 0:
                e1 = s.shared_e1[cd] + base
                psi_d2 = row_factors(e1, ed + base + dim[l2], bit(A1, e1 - fstart[l1]),
                                     bit(s.leaf_pattern[l2 + 1], sibling[l2]), base, ratio,
                                     points, m, inv_1mt, s, n_shared)
        for q in range(m):
            Mc[q] = P.v[q] * s.rU[l2 * m + q]
        if cd >= 0:
            for q in range(m):
                Mc[q] *= psi_d[q]
        if not both:
            for q in range(m):
                Q1.v[q] += Mc[q]
                s.Q[l2 * m + q] += Mc[q]
            for e2 in range(fstart[l2], fstart[l2] + dim[l2]):
                at = local[e2] * m
                for q in range(m):
                    row[at + q] += Mc[q] * s.alpha[(e2 - base) * m + q]
            # M kappa per shared feature: into K at both leaves, and 2 M kappa kappa^T
            for c in range(n_shared):
                kc = s.kappa[c]
                for q in range(m):
                    Mk.v[q] = Mc[q] * kc[q]
                    s.K[s.shared_e1[c] * m + q] += Mk.v[q]
                    s.K[s.shared_e2[c] * m + q] += Mk.v[q]
                kappa_products(H + local[s.shared_e1[c] + base] * n_local, Mk.v, c + 1,
                               n_shared, s, local, base, m)
            l2 += 1
            continue
        # the siblings' pairs: l1's Q, M A, K and kappa kappa^T by M + M2 where
        # their factors agree (l2 + 1's entry is l2's + dim[l2])
        for q in range(m):
            M2.v[q] = P.v[q] * s.rU[(l2 + 1) * m + q]
        if cd >= 0:
            for q in range(m):
                M2.v[q] *= psi_d2[q]
        for q in range(m):
            S.v[q] = Mc[q] + M2.v[q]
            Q1.v[q] += S.v[q]
            s.Q[l2 * m + q] += Mc[q]
            s.Q[(l2 + 1) * m + q] += M2.v[q]
        for slot in range(dim[l2]):
            e2 = fstart[l2] + slot - base
            at = local[e2 + base] * m
            if slot == sibling[l2]:
                for q in range(m):
                    row[at + q] += Mc[q] * s.alpha[e2 * m + q] + \
                        M2.v[q] * s.alpha[(e2 + dim[l2]) * m + q]
            else:
                for q in range(m):
                    row[at + q] += S.v[q] * s.alpha[e2 * m + q]
        if cd >= 0:  # the differing entry last (l2 + 1's kappa after it): the others
            # are [0, n_shared)
            n_shared -= 1
            kc = s.kappa[cd]
            s.kappa[cd] = s.kappa[n_shared]
            s.kappa[n_shared] = kc
            e1 = s.shared_e1[cd]
            s.shared_e1[cd] = s.shared_e1[n_shared]
            s.shared_e1[n_shared] = e1
            e2 = s.shared_e2[cd]
            s.shared_e2[cd] = s.shared_e2[n_shared]
            s.shared_e2[n_shared] = e2
            cd = n_shared
        for c in range(n_shared):
            kc = s.kappa[c]
            for q in range(m):
                Mk.v[q] = S.v[q] * kc[q]
                s.K[s.shared_e1[c] * m + q] += Mk.v[q]
                s.K[s.shared_e2[c] * m + q] += Mc[q] * kc[q]
                s.K[(s.shared_e2[c] + dim[l2]) * m + q] += M2.v[q] * kc[q]
            kappa_products(H + local[s.shared_e1[c] + base] * n_local, Mk.v, c + 1, n_shared,
                           s, local, base, m)
        if cd >= 0:
            kc = s.kappa[cd]
            kc2 = s.kappa[cd + 1]
            for q in range(m):
                Kd.v[q] = Mc[q] * kc[q] + M2.v[q] * kc2[q]
                s.K[s.shared_e1[cd] * m + q] += Kd.v[q]
                s.K[s.shared_e2[cd] * m + q] += Mc[q] * kc[q]
                s.K[(s.shared_e2[cd] + dim[l2]) * m + q] += M2.v[q] * kc2[q]
            kappa_products(H + local[s.shared_e1[cd] + base] * n_local, Kd.v, 0, n_shared,
                           s, local, base, m)
        l2 += 2
    if lists.start == NULL:
        for e in range(fstart[l1], fstart[l1] + dim[l1]):
            s.pos[local[e]] = -1
    for q in range(m):
        s.Q[l1 * m + q] = Q1.v[q]
    # 2 sym(alpha (M A)^T): one triangle here, the other as H's are added
    for e in range(fstart[l1], fstart[l1] + dim[l1]):
        j = local[e] * n_local
        for q in range(m):
            alpha1.v[q] = s.alpha[(e - base) * m + q]
        for f in range(n_local):  # (H's diagonal is not read)
            acc = 0.0
            for q in range(m):
                acc = acc + alpha1.v[q] * row[f * m + q]
            H[j + f] += 2.0 * acc


cdef void partners(
    int64_t l1, int64_t n_leaves, const int64_t* dim, const int64_t* fstart, int64_t base,
    const int64_t* local, const int8_t* sibling, const double* ratio, int64_t n_local,
    const double* points, const double* sq, const double* inv_1mt, PairLists lists, PairRow* s,
    int64_t m,
) noexcept nogil:
    """leaf_partners at m nodes."""
    cdef Nodes4 n4
    cdef Nodes5 n5
    cdef NodesAny any
    if m == 4:
        leaf_partners(l1, n_leaves, dim, fstart, base, local, sibling, ratio, n_local, points,
                      sq, inv_1mt, lists, s, &n4, m)
    elif m == 5:
        leaf_partners(l1, n_leaves, dim, fstart, base, local, sibling, ratio, n_local, points,
                      sq, inv_1mt, lists, s, &n5, m)
    else:
        leaf_partners(l1, n_leaves, dim, fstart, base, local, sibling, ratio, n_local, points,
                      sq, inv_1mt, lists, s, &any, m)


cdef void tree_pair_hessian(
    int64_t n_leaves, const int64_t* dim, const int64_t* fstart, int64_t base,
    const int64_t* local, const int8_t* sibling, const double* ratio, const double* rho,
    int64_t n_local, const double* points, const double* weights, int64_t m,
    double a, double b, PairLists lists, PairRow* s,
) noexcept nogil:
    """Add sum_q w_q (a d_j d_k U_sq + b d_j d_k U_lin)(t_q 1) of one tree and
    row into ``s.H`` (module comment), and sum_q w_q (a d_j U_sq + b d_j U_lin)
    into ``s.grad``; the row's leaf patterns are in
    ``s.leaf_pattern``. ``fstart``, ``dim`` per leaf: its entries (path
    features) in ``local`` (the tree's own index of the entry's feature) and
    ``ratio``; ``base``, the tree's first entry (``s.alpha``, ``s.K``
    hold the tree's entries from 0). Only pairs l1 < l2 add M alpha(l2) to
    ``s.MA``, l1's (M A) over its later partners (leaf_partners): sum_l
    alpha_l (M A)_l^T is then half of the symmetric sum over ordered pairs, so
    it enters H twice."""
    cdef int64_t q, l, l1, e, e2, j, k, at
    cdef double R, X, g, acc
    cdef double* H = s.H
    cdef double sq[MAX_NODES]
    cdef double lin[MAX_NODES]
    cdef double P[MAX_NODES]
    cdef double inv_1mt[MAX_NODES]
    for q in range(m):
        sq[q] = weights[q] * a
        lin[q] = weights[q] * b
        inv_1mt[q] = 1.0 / (1.0 - points[q])
    # one leaf at a time: u, alpha, rho U; the linear game and the diagonal pairs
    for l in range(n_leaves):
        s.alive[l] = 1
        for e in range(fstart[l], fstart[l] + dim[l]):
            if ratio[e] == 0.0 and not bit(s.leaf_pattern[l], e - fstart[l]):
                s.alive[l] = 0  # a factor 0 at every t (module comment)
        if not s.alive[l]:
            continue
        for q in range(m):
            s.rU[l * m + q] = rho[l]
            s.Q[l * m + q] = 0.0
        for e in range(fstart[l], fstart[l] + dim[l]):
            R = ratio[e]
            X = bit(s.leaf_pattern[l], e - fstart[l])
            at = (e - base) * m
            for q in range(m):
                g = (1.0 - points[q]) * R + points[q] * X
                s.alpha[at + q] = (X - R) / g
                s.rU[l * m + q] *= g
                s.K[at + q] = 0.0
            if lists.start == NULL:
                alone_factors(R, points, m, &s.alone_psi[at], &s.alone_kappa[at])
        for e in range(fstart[l], fstart[l] + dim[l]):
            acc = 0.0
            for q in range(m):
                acc = acc + lin[q] * s.rU[l * m + q] * s.alpha[(e - base) * m + q]
            s.grad[local[e]] += acc
            for e2 in range(e + 1, fstart[l] + dim[l]):
                acc = 0.0
                for q in range(m):
                    acc = acc + lin[q] * s.rU[l * m + q] * (
                        s.alpha[(e - base) * m + q] * s.alpha[(e2 - base) * m + q])
                H[local[e] * n_local + local[e2]] += acc
        if a == 0.0:
            continue
        # the diagonal pair (l, l): factors (1 - t) R^2 + t X, derivatives X - R^2
        for q in range(m):
            P[q] = sq[q] * rho[l] * rho[l]
        # per entry, (X - R^2) / g (in s.psi11, free until the pairs)
        for e in range(fstart[l], fstart[l] + dim[l]):
            R = ratio[e] * ratio[e]
            X = bit(s.leaf_pattern[l], e - fstart[l])
            at = (e - fstart[l]) * m
            for q in range(m):
                g = (1.0 - points[q]) * R + points[q] * X
                P[q] *= g
                s.psi11[at + q] = (X - R) / g
        for e in range(fstart[l], fstart[l] + dim[l]):
            at = (e - fstart[l]) * m
            acc = 0.0
            for q in range(m):
                acc = acc + P[q] * s.psi11[at + q]
            s.grad[local[e]] += acc
            for e2 in range(e + 1, fstart[l] + dim[l]):
                acc = 0.0
                for q in range(m):
                    acc = acc + P[q] * s.psi11[at + q] * s.psi11[(e2 - fstart[l]) * m + q]
                H[local[e] * n_local + local[e2]] += acc
    if a == 0.0:
        return
    # pairs l1 < l2: M, and the partner sums Q, K, M A (l1's, into H at once)
    for l1 in range(n_leaves):
        if s.alive[l1]:
            partners(l1, n_leaves, dim, fstart, base, local, sibling, ratio, n_local, points,
                     sq, inv_1mt, lists, s, m)
    # the partner sums into H: 2 Q alpha alpha^T, 2 sym(K alpha^T); and into the
    # first derivatives, 2 Q alpha + K (K holds a pair's M kappa at both leaves)
    for l in range(n_leaves):
        if not s.alive[l]:
            continue
        for e in range(fstart[l], fstart[l] + dim[l]):
            j = local[e]
            acc = 0.0
            for q in range(m):
                acc = acc + 2.0 * s.Q[l * m + q] * s.alpha[(e - base) * m + q] + s.K[(e - base) * m + q]
            s.grad[j] += acc
            for e2 in range(fstart[l], fstart[l] + dim[l]):
                if e2 == e:
                    continue
                k = local[e2]
                acc = 0.0
                for q in range(m):
                    acc = acc + s.alpha[(e2 - base) * m + q] * (
                        s.K[(e - base) * m + q] + (s.Q[l * m + q] * s.alpha[(e - base) * m + q]
                                                   if e2 > e else 0.0))
                H[j * n_local + k] += 2.0 * acc


def tree_features(structure):
    """Per tree of a pattern structure, its own indices of its features:
    ``local`` (each leaf entry's feature's index in its tree), ``n_local``
    (features per tree), ``feature_start`` / ``tree_feature`` (tree t's
    features, flat), and the most entries of a tree."""
    tree_leaf_start = np.asarray(structure["tree_leaf_start"])
    entry_start = np.asarray(structure["leaf_feature_start"])[tree_leaf_start]
    leaf_feature = np.asarray(structure["leaf_feature"])
    local = np.zeros(len(leaf_feature), dtype=np.int64)
    n_local = np.zeros(len(entry_start) - 1, dtype=np.int64)
    features = [np.zeros(0, dtype=np.int64)]
    for t in range(len(n_local)):
        uniq, inverse = np.unique(leaf_feature[entry_start[t]:entry_start[t + 1]],
                                  return_inverse=True)
        local[entry_start[t]:entry_start[t + 1]] = inverse
        n_local[t] = len(uniq)
        features.append(uniq.astype(np.int64))
    feature_start = np.concatenate([[0], np.cumsum(n_local)]).astype(np.int64)
    most = int(np.diff(entry_start).max(initial=1))
    return local, n_local, feature_start, np.concatenate(features + [np.zeros(1, np.int64)]), max(1, most)


cdef int64_t tree_pair_entries(
    int64_t leaf0, int64_t leaf1, const int64_t* fstart, const int64_t* dim,
    const int64_t* local, int64_t* pos, int64_t offset, int64_t* start, uint8_t* slot1,
    uint8_t* slot2, int64_t* entry1, int64_t* entry2,
) noexcept nogil:
    """The shared features of the pairs l1 < l2 of leaves [leaf0, leaf1), written
    when ``start`` is not NULL (the end of each pair's entries, from ``offset``):
    their slots in l1's and l2's paths and their entries (from the tree's
    first). Returns the number of shared features."""
    cdef int64_t l1, l2, e, e1, n = 0, pair = 0
    cdef int64_t first = fstart[leaf0]
    for l1 in range(leaf0, leaf1):
        for e in range(fstart[l1], fstart[l1] + dim[l1]):
            pos[local[e]] = e
        for l2 in range(l1 + 1, leaf1):
            for e in range(fstart[l2], fstart[l2] + dim[l2]):
                e1 = pos[local[e]]
                if e1 < 0:
                    continue
                if start != NULL:
                    slot1[n] = e1 - fstart[l1]
                    slot2[n] = e - fstart[l2]
                    entry1[n] = e1 - first
                    entry2[n] = e - first
                n += 1
            if start != NULL:
                start[pair] = offset + n
            pair += 1
        for e in range(fstart[l1], fstart[l1] + dim[l1]):
            pos[local[e]] = -1
    return n


def factor_table(const double[::1] alone, const double[::1] ratio1,
                 const double[::1] ratio2, const double[::1] points):
    """A tree's table at the ``len(points)`` nodes: blocks of psi then kappa
    (2 m wide) for [X1 = X2 = 0 | X = 1 on one leaf, per ratio in ``alone``
    (alone_factors) | X1 = X2 = 1, per pair of ratios (shared_factors)]."""
    cdef int64_t m = points.shape[0], w = 2 * points.shape[0], q, k
    cdef int64_t n_alone = alone.shape[0]
    cdef double[::1] table = np.zeros((1 + n_alone + ratio1.shape[0]) * w)
    for q in range(m):
        table[q] = 1.0 / (1.0 - points[q])
        table[m + q] = table[q]
    for k in range(n_alone):
        alone_factors(alone[k], &points[0], m, &table[(1 + k) * w], &table[(1 + k) * w + m])
    for k in range(ratio1.shape[0]):
        shared_factors(ratio1[k], ratio2[k], &points[0], m, &table[(1 + n_alone + k) * w],
                       &table[(1 + n_alone + k) * w + m])
    return np.asarray(table)


def pair_lists(structure, const int64_t[::1] local, const int64_t[::1] tree_m,
               const double[:, ::1] rule_points, double max_bytes):
    """The shared features of every pair of leaves of the trees whose lists and
    tables fit, in turn, in ``max_bytes`` (module comment; ``PairLists``), tree t
    at ``tree_m[t]`` nodes ``rule_points[tree_m[t] - 1]``: ``first`` per tree (-1:
    not listed), ``start``, ``slot1``, ``slot2``, ``offset``, and per tree where
    its table starts (``table_first``) in ``table``. A table holds each distinct
    ratio, and each distinct ordered pair of ratios, once (factor_table): equal
    ratios give equal factors, so the values are those the rows would compute."""
    cdef const int64_t[::1] tree_leaf_start = structure["tree_leaf_start"]
    cdef const int64_t[::1] fstart = structure["leaf_feature_start"]
    cdef const int64_t[::1] dim = structure["leaf_dim"]
    ratio = np.asarray(structure["leaf_ratio"], dtype=np.float64)
    cdef int64_t n_trees = tree_leaf_start.shape[0] - 1
    cdef int64_t[::1] first = np.full(n_trees, -1, dtype=np.int64)
    cdef int64_t[::1] table_first = np.zeros(n_trees, dtype=np.int64)
    cdef int64_t[::1] pos = np.full(max(1, local.shape[0]), -1, dtype=np.int64)
    cdef int64_t t, n, m, n_entries, w
    cdef int64_t n_pairs = 0, offset = 0, tables = 0
    cdef int64_t[::1] start, entry1, entry2
    cdef uint8_t[::1] slot1, slot2
    cdef double used = 0.0, size
    parts = [[np.zeros(1, dtype=np.int64)], [], [], [], []]
    for t in range(n_trees):
        n = tree_leaf_start[t + 1] - tree_leaf_start[t]
        if n < 2:
            continue
        n_entries = tree_pair_entries(tree_leaf_start[t], tree_leaf_start[t + 1], &fstart[0],
                                      &dim[0], &local[0], &pos[0], 0, NULL, NULL, NULL, NULL,
                                      NULL)
        size = 8.0 * (n * (n - 1) // 2) + 18.0 * n_entries  # and the table, below
        if used + size > max_bytes:  # found row by row
            continue
        start = np.zeros(n * (n - 1) // 2, dtype=np.int64)
        slot1 = np.zeros(max(1, n_entries), dtype=np.uint8)
        slot2 = np.zeros(max(1, n_entries), dtype=np.uint8)
        entry1 = np.zeros(max(1, n_entries), dtype=np.int64)
        entry2 = np.zeros(max(1, n_entries), dtype=np.int64)
        tree_pair_entries(tree_leaf_start[t], tree_leaf_start[t + 1], &fstart[0], &dim[0],
                          &local[0], &pos[0], offset, &start[0], &slot1[0], &slot2[0],
                          &entry1[0], &entry2[0])
        tree_ratio = ratio[fstart[tree_leaf_start[t]]:]
        ratio1 = tree_ratio[np.asarray(entry1)[:n_entries]]
        ratio2 = tree_ratio[np.asarray(entry2)[:n_entries]]
        alone, alone_of = np.unique(np.concatenate([ratio1, ratio2]), return_inverse=True)
        # (R1, R2) as one complex number: np.unique(axis=0) is several times slower
        both, both_of = np.unique(ratio1 + 1j * ratio2, return_inverse=True)
        m = tree_m[t]
        w = 2 * m
        size += 8.0 * (1 + len(alone) + len(both)) * w
        if used + size > max_bytes or (1 + len(alone) + len(both)) * w >= 2 ** 31:
            continue
        used += size
        # the block per bits x = X1 + 2 X2 of each shared feature
        blocks = np.zeros((n_entries, 4), dtype=np.int64)
        alone_of = np.ravel(alone_of)
        blocks[:, 1] = 1 + alone_of[:n_entries]
        blocks[:, 2] = 1 + alone_of[n_entries:]
        blocks[:, 3] = 1 + len(alone) + np.ravel(both_of)
        table = factor_table(alone, np.ascontiguousarray(both.real),
                             np.ascontiguousarray(both.imag), rule_points[m - 1, :m])
        first[t] = n_pairs
        table_first[t] = tables
        n_pairs += n * (n - 1) // 2
        offset += n_entries
        tables += len(table)
        for part, values in zip(parts, (start, slot1[:n_entries], slot2[:n_entries],
                                        (blocks * w).astype(np.int32).ravel(), table)):
            part.append(np.asarray(values))
    # (one more entry: never read, but a pointer to the first is taken)
    dtypes = (np.int64, np.uint8, np.uint8, np.int32, np.float64)
    starts, slots1, slots2, offsets, tables_ = (
        np.concatenate(part + [np.zeros(1, dtype)]) for part, dtype in zip(parts, dtypes))
    return {"first": np.asarray(first), "start": starts, "slot1": slots1, "slot2": slots2,
            "offset": offsets, "table_first": np.asarray(table_first), "table": tables_}


def leaf_siblings(ens, structure):
    """Per leaf l (all trees, by tree), the slot of its parent's feature when
    leaf l + 1 is its sibling, else -1. Leaves are in preorder, so a node's two
    leaf children are leaves l and l + 1, and their paths differ in that entry
    only (pattern_structure: same slots, same bits elsewhere)."""
    left = np.asarray(ens.children_left)
    right = np.asarray(ens.children_right)
    parent = np.full(len(left), -1, dtype=np.int64)
    inner = np.flatnonzero(left >= 0)
    parent[left[inner]] = inner
    parent[right[inner]] = inner
    leaf_node = np.asarray(structure["leaf_node"])
    sibling = np.full(len(leaf_node), -1, dtype=np.int8)
    n = len(leaf_node)
    if n > 1:  # (explicit ends: the module has wraparound off)
        first = leaf_node[:n - 1]
        pair = np.flatnonzero((parent[first] >= 0) & (parent[first] == parent[leaf_node[1:]]))
        sibling[pair] = np.asarray(structure["node_slot"])[first[pair]]
    return sibling


def pair_plan(ens, structure, tree_m, rule_points, double max_list_bytes=DEFAULT_LIST_BYTES):
    """What ``r2_interaction_terms`` reads besides the rows, computed once per
    call: the pattern ``structure`` (``_semivalues.pattern_structure(ens)``, at
    most 64 path features per leaf), each tree's own feature indices
    (``tree_features``), the leaf values and the lists of leaf pairs' shared
    features with their tables of psi and kappa at each tree's rule
    (``tree_m``, ``rule_points``: as ``r2_interaction_terms`` takes them) for
    the trees that fit in ``max_list_bytes`` (``pair_lists``; the others find
    them row by row: the same values, bit for bit), and the sibling leaves
    (``leaf_siblings``)."""
    if structure["leaf_dim"].max(initial=0) > 64:
        raise ValueError("a leaf has more than 64 distinct features on its path")
    local, n_local, feature_start, tree_feature, max_entries = tree_features(structure)
    rho = np.ascontiguousarray(np.asarray(ens.value, dtype=np.float64).reshape(
        len(ens.children_left), -1)[np.asarray(structure["leaf_node"]), 0])
    return {"structure": structure, "local": local, "n_local": n_local,
            "feature_start": feature_start, "tree_feature": tree_feature,
            "max_entries": max_entries, "rho": rho, "sibling": leaf_siblings(ens, structure),
            "lists": pair_lists(structure, local, np.ascontiguousarray(tree_m, np.int64),
                                np.ascontiguousarray(rule_points, np.float64),
                                max_list_bytes)}


cdef struct PairTerms:
    PairRowSize size  # first: pair_row_scratch reads it
    Forest f
    Patterns pt
    Rows rows
    const double* square_coef  # (rows, n_trees)
    const double* linear_coef
    const int64_t* tree_m  # tree t's rule: tree_m[t] - 1 in rules (stride size.m)
    Rules rules
    const int64_t* local          # tree_features: per leaf entry, its tree's index of it
    const int64_t* n_local        # per tree, its features
    const int64_t* feature_start  # tree t's from tree_feature[feature_start[t]]
    const int64_t* tree_feature
    const double* rho             # per leaf, its value
    const int8_t* sibling         # leaf_siblings
    const int64_t* list_first     # pair_lists: per tree, its lists (-1: none) and
    const int64_t* table_first    # where its table starts
    const double* table
    PairLists listed
    double* terms   # (rows, p)
    double* out     # (rows, p, p)


cdef void pair_term_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                         Interrupt* stop) noexcept nogil:
    """Rows lo:hi, trees outer: a tree's tables serve the rows while they are
    in cache (a row's trees are still added in order)."""
    cdef PairTerms w = (<const PairTerms*> work)[0]
    cdef PairRow s = (<PairRow*> scratch)[0]  # a copy: see the driver
    cdef const Patterns* pt = &w.pt
    cdef int64_t n_trees = w.f.n_trees, p = w.f.n_features, M = w.size.m
    cdef int64_t i, t, ls, nl, base, j, k, nt, mt, fj, fk
    cdef double a, b, h
    cdef PairLists lists
    for t in range(n_trees):
        if interrupted(stop):
            return
        ls = pt.tree_leaf_start[t]
        nl = pt.tree_leaf_start[t + 1] - ls
        nt = w.n_local[t]
        if nl < 2:  # no feature: no term
            continue
        base = pt.fstart[ls]
        mt = w.tree_m[t]
        lists = w.listed
        lists.first = w.list_first[t]
        lists.table = &w.table[w.table_first[t]]
        if lists.first < 0:
            lists.start = NULL
        for i in range(lo, hi):
            if interrupted(stop):
                return
            a = w.square_coef[i * n_trees + t]
            b = w.linear_coef[i * n_trees + t]
            if a == 0.0 and b == 0.0:
                continue
            block_leaf_patterns(&w.f, t, row_at(&w.rows, i), 0, 1, pt.node_slot,
                                &pt.leaf_node[ls], nl, s.left_taken, s.pattern, s.leaf_pattern)
            memset(s.H, 0, nt * nt * sizeof(double))
            memset(s.grad, 0, nt * sizeof(double))
            tree_pair_hessian(nl, &pt.dim[ls], &pt.fstart[ls], base, w.local, &w.sibling[ls],
                              pt.ratio, &w.rho[ls], nt, &w.rules.points[(mt - 1) * M],
                              &w.rules.weights[(mt - 1) * M], mt, a, b, lists, &s)
            for j in range(nt):
                fj = w.tree_feature[w.feature_start[t] + j]
                w.terms[i * p + fj] += s.grad[j]
                for k in range(j + 1, nt):
                    fk = w.tree_feature[w.feature_start[t] + k]
                    # Phi = (1/2) int of the second derivative
                    h = 0.5 * (s.H[j * nt + k] + s.H[k * nt + j])
                    w.out[(i * p + fj) * p + fk] += h
                    w.out[(i * p + fk) * p + fj] += h


def r2_interaction_terms(ens, plan, const double[:, ::1] X,
                         const double[:, ::1] square_coef, const double[:, ::1] linear_coef,
                         const int64_t[::1] tree_m, const double[:, ::1] rule_points,
                         const double[:, ::1] rule_weights, int n_threads):
    """Per row, the terms of ``_qshap.r2_terms``, sum_k a_ik Sh_j[m_k^2](x_i) +
    b_ik Sh_j[m_k](x_i) (n_rows, n_features), and the (n_features, n_features)
    matrix, 0 on the diagonal, of sum_k a_ik Phi_jk[m_k^2](x_i) + b_ik
    Phi_jk[m_k](x_i) (module comment): ``(terms, matrices)``. The terms are
    exact where the rule is exact for the first derivatives (``_qshap``'s rule
    per tree); the matrices need one node less.

    ``plan``: ``pair_plan(ens, ...)``. ``square_coef`` (a), ``linear_coef``
    (b): (n_rows, n_trees), as ``_qshap.r2_terms``. Tree t uses the
    ``tree_m[t]``-node rule ``rule_points[tree_m[t] - 1]``
    (``_qshap._tree_rules``). A row's trees are added in order: the values
    do not depend on ``n_threads``.
    """
    cdef Forest f = forest_from(ens)
    cdef Patterns pt = patterns_from(plan["structure"])
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef int64_t p = f.n_features
    if f.n_values != 1:
        raise ValueError("the R^2 interaction kernel needs one value per leaf")
    if square_coef.shape[0] != n_rows or square_coef.shape[1] != f.n_trees or \
            linear_coef.shape[0] != n_rows or linear_coef.shape[1] != f.n_trees:
        raise ValueError("game coefficients must have shape (n_rows, n_trees)")
    if rule_points.shape[1] > MAX_NODES:
        raise ValueError(f"at most {MAX_NODES} Gauss nodes, got {rule_points.shape[1]}")
    cdef double[:, :, ::1] out = np.zeros((n_rows, p, p))
    cdef double[:, ::1] terms = np.zeros((n_rows, p))
    if n_rows == 0 or f.n_trees == 0:
        return np.asarray(terms), np.asarray(out)
    cdef const int64_t[::1] local = plan["local"]
    cdef const int64_t[::1] n_local = plan["n_local"]
    cdef const int64_t[::1] feature_start = plan["feature_start"]
    cdef const int64_t[::1] tree_feature = plan["tree_feature"]
    cdef const double[::1] rho = plan["rho"]
    cdef int64_t max_local = max(1, int(np.max(plan["n_local"], initial=1)))
    cdef int64_t max_entries = plan["max_entries"]
    cdef int64_t max_dim = max(1, pt.max_dim)
    lists_of = plan["lists"]
    cdef const int64_t[::1] list_first = lists_of["first"]
    cdef const int64_t[::1] list_start = lists_of["start"]
    cdef const uint8_t[::1] list_slot1 = lists_of["slot1"]
    cdef const uint8_t[::1] list_slot2 = lists_of["slot2"]
    cdef const int32_t[::1] list_offset = lists_of["offset"]
    cdef const int8_t[::1] sibling = plan["sibling"]
    cdef const int64_t[::1] table_first = lists_of["table_first"]
    cdef const double[::1] table = lists_of["table"]
    cdef PairLists listed
    listed.start = &list_start[0]
    listed.slot1 = &list_slot1[0]
    listed.slot2 = &list_slot2[0]
    listed.offset = &list_offset[0]
    listed.first = -1
    # rows per chunk: at most ROW_CHUNK, and about sixteen chunks per thread (the
    # last chunks leave threads idle; a tree's tables serve 8 rows or more)
    cdef int64_t chunk = max(8, min(ROW_CHUNK, n_rows // (16 * max(1, n_threads))))
    cdef PairTerms w = PairTerms(
        size=PairRowSize(max_nodes=f.max_tree_nodes, max_leaves=pt.max_leaves,
                         max_entries=max_entries, max_local=max_local, max_dim=max_dim,
                         m=rule_points.shape[1]),
        f=f, pt=pt, rows=rows_of(X), square_coef=&square_coef[0, 0],
        linear_coef=&linear_coef[0, 0], tree_m=&tree_m[0],
        rules=rules_of(rule_points, rule_weights, NULL), local=&local[0], n_local=&n_local[0],
        feature_start=&feature_start[0], tree_feature=&tree_feature[0], rho=&rho[0],
        sibling=&sibling[0], list_first=&list_first[0], table_first=&table_first[0],
        table=&table[0], listed=listed, terms=&terms[0, 0], out=&out[0, 0, 0])
    parallel_units(n_rows, chunk, pair_row_scratch, pair_term_rows, &w, n_threads)
    return np.asarray(terms), np.asarray(out)
