# Shapley decomposition of R^2 (Q-SHAP; DESIGN.md section 3).
#
# For one tree with path-dependent value v_S(x) = sum_l rho_l prod_j
# [j in S ? X_jl : R_jl], the squared game is a sum over ordered leaf pairs
#     v_S(x)^2 = sum_{l1,l2} rho_1 rho_2 prod_j [j in S ? X_j1 X_j2 : R_j1 R_j2],
# whose multilinear extension at t*1 has, per pair, one factor per feature
#     g_j(t) = (1 - t) R_j1 R_j2 + t X_j1 X_j2
# (1 for features on neither path). Sh_j[v^2] is the integral over t of its
# gradient, a polynomial of degree < 2 d (d = most distinct features on a
# path): Gauss-Legendre with d nodes is exact (DESIGN.md, "Squared games by
# quadrature").
#
# Pairs l1 != l2 are grouped by their lowest common ancestor w, with l1 in
# the left subtree A_w and l2 in the right subtree B_w (each unordered pair
# once, counted twice). For a block of leaves l1 of A_w at once, one
# depth-first pass over B_w starts from each pair's factors above B_w and, at
# every edge into a node k of B_w (feature j), multiplies in the factor
#     (1 - t) R_j1 R_jk + t X_j1 X_jk
# and divides out the factor of the feature's previous edge on l2's path, if
# any (as TreeGrad does for repeated features, Algorithm 9); when the pass
# leaves k, the edge's feature is credited with the leaf terms below k whose
# deepest j-edge is k (Lemma 2). The features of l1's path that l2's path
# does not split on again below w are credited once per block from the total
# of B_w. Work per node of B_w is one loop over (Gauss point, leaf of the
# block), contiguous in the leaves; divisions only form each factor's
# inverse. Diagonal pairs l1 = l2 are a product over l1's own path. Cost
# O(L^2 d) per tree and row, as in a direct sum over pairs.
#
# Per row i and tree k the kernel adds  a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i)
# for coefficients computed outside (importance.py). For the squared error,
# a = w_i and b = -2 w_i c_ik where c_ik is the residual before tree k
# (sequential, boosting) or r_sym,k + v^k(empty) (symmetric, averaging
# ensembles; Sh[(m - c)^2] = Sh[m^2] - 2 c Sh[m] for a constant c).
import numpy as np

from cython.parallel cimport parallel, prange
from libc.stdint cimport int64_t, uint8_t
from libc.stdlib cimport malloc, free

from ._forest cimport Forest, forest_from
from ._semivalues cimport (
    Scratch, scratch_alloc, scratch_failed, scratch_free, tree_gradient_uniform,
)

# Leaves of A_w handled together in one pass over B_w (the inner loop
# length); fewer when the features are many, to bound the scratch space.
DEF MAX_BLOCK = 64
DEF BLOCK_BYTES = 8_000_000


cdef struct PairScratch:
    int64_t blk           # leaves per block
    int64_t stamp         # per-leaf marker value for ``seen``
    # tree structure (local node indices)
    int64_t* leaf_nodes   # leaves in preorder
    int64_t* leaf_rank    # leaves before node k, (nodes + 1)
    int64_t* depth        # (nodes)
    int64_t* sub_end      # one past the last node of k's subtree, (nodes)
    int64_t* stack_node   # node at each depth of the pass over B_w
    uint8_t* is_target    # some edge below k has k as its prev_same, (nodes)
    double* inv_ratio     # 1 / R_k, 0 where R_k = 0, (nodes)
    double* inv_1mt       # 1 / (1 - t_l), (m,)
    # features (global indices)
    int64_t* feats        # features on the paths of the block's leaves
    int64_t* prefix       # features on the path to the root b of B_w
    int64_t* seen         # feature -> stamp of the last leaf that set it
    uint8_t* in_feats
    uint8_t* has_excluded
    uint8_t* has_inv_base
    double* base_r        # l2's R, X of each feature above B_w, 1 if none, (p,)
    double* base_x
    double* leaf_r        # R_j1, X_j1 of the block's leaves, 1 off the path, (p, blk)
    double* leaf_x
    double* leaf_ir       # 1 / R_j1, (p, blk)
    int64_t* leaf_edge    # l1's deepest j-edge (0, the root, off the path), (p, blk)
    uint8_t* in_prefix    # (p,)
    double* excluded      # leaf terms of B_w whose path splits on j again, (p, m, blk)
    double* inv_base      # 1 / the pair's factor of j above B_w, (p, m, blk)
    # per depth of the pass over B_w, (depth, m, blk)
    double* inv           # 1 / factor of the edge into the node
    double* prod          # product of the pair's factors
    double* total         # leaf terms below the node
    double* deep          # H_k: ... whose deepest j-edge is the node's
    double* acc           # (blk,)
    double* rho           # leaf values of the block, (blk,)
    int64_t* leaf_slot    # order of j among l1's features, (p, blk)
    int64_t* touched      # features with excluded terms in this block
    int64_t n_touched
    # one leaf's distinct path features (leaf_features)
    int64_t n_slots       # most distinct features on a path
    int64_t* path         # the leaf's path, (depth,)
    int64_t* slot_of      # (p,)
    int64_t* slot_feature # (slots,)
    int64_t* slot_edge    # (slots,)
    # per leaf (rank) of the tree, per order of its features: the totals and
    # excluded terms of its pairs kept with l1's own factor, (leaves, slots, m)
    double* bucket_total
    double* bucket_excluded
    double* product       # (2 m,)


cdef PairScratch pair_alloc(int64_t n_nodes, int64_t n_features, int64_t n_slots,
                            int64_t max_depth, int64_t m, int64_t blk) noexcept nogil:
    """Per-thread scratch; n_slots: most distinct features on a path."""
    cdef PairScratch ps
    cdef int64_t j, u, levels = max_depth + 2
    ps.blk = blk
    ps.stamp = 0
    ps.leaf_nodes = <int64_t*> malloc(n_nodes * sizeof(int64_t))
    ps.leaf_rank = <int64_t*> malloc((n_nodes + 1) * sizeof(int64_t))
    ps.depth = <int64_t*> malloc(n_nodes * sizeof(int64_t))
    ps.sub_end = <int64_t*> malloc(n_nodes * sizeof(int64_t))
    ps.stack_node = <int64_t*> malloc(levels * sizeof(int64_t))
    ps.is_target = <uint8_t*> malloc(n_nodes * sizeof(uint8_t))
    ps.inv_ratio = <double*> malloc(n_nodes * sizeof(double))
    ps.inv_1mt = <double*> malloc(m * sizeof(double))
    ps.leaf_ir = <double*> malloc(n_features * blk * sizeof(double))
    ps.leaf_edge = <int64_t*> malloc(n_features * blk * sizeof(int64_t))
    ps.in_prefix = <uint8_t*> malloc(n_features * sizeof(uint8_t))
    ps.feats = <int64_t*> malloc(n_features * sizeof(int64_t))
    ps.prefix = <int64_t*> malloc(n_features * sizeof(int64_t))
    ps.seen = <int64_t*> malloc(n_features * sizeof(int64_t))
    ps.in_feats = <uint8_t*> malloc(n_features * sizeof(uint8_t))
    ps.has_excluded = <uint8_t*> malloc(n_features * sizeof(uint8_t))
    ps.has_inv_base = <uint8_t*> malloc(n_features * sizeof(uint8_t))
    ps.base_r = <double*> malloc(n_features * sizeof(double))
    ps.base_x = <double*> malloc(n_features * sizeof(double))
    ps.leaf_r = <double*> malloc(n_features * blk * sizeof(double))
    ps.leaf_x = <double*> malloc(n_features * blk * sizeof(double))
    ps.excluded = <double*> malloc(n_features * m * blk * sizeof(double))
    ps.inv_base = <double*> malloc(n_features * m * blk * sizeof(double))
    ps.inv = <double*> malloc(levels * m * blk * sizeof(double))
    ps.prod = <double*> malloc(levels * m * blk * sizeof(double))
    ps.total = <double*> malloc(levels * m * blk * sizeof(double))
    ps.deep = <double*> malloc(levels * m * blk * sizeof(double))
    ps.acc = <double*> malloc(blk * sizeof(double))
    ps.rho = <double*> malloc(blk * sizeof(double))
    ps.leaf_slot = <int64_t*> malloc(n_features * blk * sizeof(int64_t))
    ps.touched = <int64_t*> malloc(n_features * sizeof(int64_t))
    ps.n_touched = 0
    ps.n_slots = n_slots
    ps.path = <int64_t*> malloc(levels * sizeof(int64_t))
    ps.slot_of = <int64_t*> malloc(n_features * sizeof(int64_t))
    ps.slot_feature = <int64_t*> malloc(n_slots * sizeof(int64_t))
    ps.slot_edge = <int64_t*> malloc(n_slots * sizeof(int64_t))
    ps.bucket_total = <double*> malloc(((n_nodes + 1) // 2) * n_slots * m * sizeof(double))
    ps.bucket_excluded = <double*> malloc(((n_nodes + 1) // 2) * n_slots * m * sizeof(double))
    ps.product = <double*> malloc(2 * m * sizeof(double))
    if not pair_failed(&ps):
        for j in range(n_features):
            ps.seen[j] = -1
            ps.in_feats[j] = 0
            ps.has_excluded[j] = 0
            ps.has_inv_base[j] = 0
            ps.base_r[j] = 1.0
            ps.base_x[j] = 1.0
            ps.in_prefix[j] = 0
            for u in range(blk):
                ps.leaf_r[j * blk + u] = 1.0
                ps.leaf_x[j * blk + u] = 1.0
                ps.leaf_ir[j * blk + u] = 1.0
                ps.leaf_edge[j * blk + u] = 0
    return ps


cdef bint pair_failed(const PairScratch* ps) noexcept nogil:
    return (ps.leaf_nodes == NULL or ps.leaf_rank == NULL or ps.depth == NULL
            or ps.sub_end == NULL or ps.stack_node == NULL or ps.feats == NULL
            or ps.prefix == NULL or ps.seen == NULL or ps.in_feats == NULL
            or ps.has_excluded == NULL or ps.has_inv_base == NULL or ps.base_r == NULL
            or ps.base_x == NULL or ps.leaf_r == NULL or ps.leaf_x == NULL
            or ps.excluded == NULL or ps.inv_base == NULL or ps.inv == NULL
            or ps.prod == NULL or ps.total == NULL or ps.deep == NULL or ps.acc == NULL
            or ps.rho == NULL or ps.leaf_slot == NULL or ps.touched == NULL
            or ps.path == NULL or ps.slot_of == NULL or ps.slot_feature == NULL
            or ps.slot_edge == NULL or ps.bucket_total == NULL or ps.bucket_excluded == NULL
            or ps.product == NULL or ps.is_target == NULL
            or ps.inv_ratio == NULL or ps.inv_1mt == NULL or ps.leaf_ir == NULL
            or ps.leaf_edge == NULL or ps.in_prefix == NULL)


cdef void pair_free(PairScratch* ps) noexcept nogil:
    free(ps.leaf_nodes)
    free(ps.leaf_rank)
    free(ps.depth)
    free(ps.sub_end)
    free(ps.stack_node)
    free(ps.feats)
    free(ps.prefix)
    free(ps.seen)
    free(ps.in_feats)
    free(ps.has_excluded)
    free(ps.has_inv_base)
    free(ps.base_r)
    free(ps.base_x)
    free(ps.leaf_r)
    free(ps.leaf_x)
    free(ps.excluded)
    free(ps.inv_base)
    free(ps.inv)
    free(ps.prod)
    free(ps.total)
    free(ps.deep)
    free(ps.acc)
    free(ps.rho)
    free(ps.leaf_slot)
    free(ps.touched)
    free(ps.path)
    free(ps.slot_of)
    free(ps.slot_feature)
    free(ps.slot_edge)
    free(ps.bucket_total)
    free(ps.bucket_excluded)
    free(ps.product)
    free(ps.is_target)
    free(ps.inv_ratio)
    free(ps.inv_1mt)
    free(ps.leaf_ir)
    free(ps.leaf_edge)
    free(ps.in_prefix)


cdef inline double safe_inverse(double v) noexcept nogil:
    # a factor is 0 only where both its R and X products are 0 (zero cover),
    # and then for every t: its terms stay 0, so 1/0 is taken as 0
    cdef double nonzero = <double> (v != 0.0)
    return nonzero / (v + (1.0 - nonzero))


cdef double* inverse_base(PairScratch* ps, int64_t j, const double* points, int64_t m,
                          int64_t nb, const double* inv_factor) noexcept nogil:
    """1 / ((1 - t) R_j1 base_r + t X_j1 base_x) for the block, (m, blk)."""
    cdef int64_t blk = ps.blk, l, u
    cdef double c0, c1
    cdef double* out = ps.inv_base + j * m * blk
    cdef const double* lr = ps.leaf_r + j * blk
    cdef const double* lx = ps.leaf_x + j * blk
    cdef const double* ir = ps.leaf_ir + j * blk
    cdef const int64_t* edge = ps.leaf_edge + j * blk
    cdef double* o
    if ps.has_inv_base[j]:
        return out
    ps.has_inv_base[j] = 1
    if not ps.in_prefix[j]:
        # l1's own factor, inverted by the linear pass (1 off l1's path)
        for l in range(m):
            o = out + l * blk
            for u in range(nb):
                o[u] = inv_factor[edge[u] * m + l]
    elif ps.base_x[j] == 0.0:
        # (1 - t) R_j1 base_r: a product of known inverses
        for l in range(m):
            c0 = ps.inv_1mt[l] * safe_inverse(ps.base_r[j])
            o = out + l * blk
            for u in range(nb):
                o[u] = c0 * ir[u]
    else:
        for l in range(m):
            c0 = (1.0 - points[l]) * ps.base_r[j]
            c1 = points[l] * ps.base_x[j]
            o = out + l * blk
            for u in range(nb):
                o[u] = safe_inverse(c0 * lr[u] + c1 * lx[u])
    return out


cdef void push_node(const Forest* f, int64_t start, int64_t b, int64_t kk, int64_t level,
                    const double* ratio_prod, const double* follow_prod,
                    const double* points, int64_t m, int64_t nb, const double* inv_factor,
                    PairScratch* ps) noexcept nogil:
    """Enter node kk of B_w at ``level`` (b at 0): its factor, inverse and
    the pair products; the leaf terms if it is a leaf."""
    cdef int64_t k = start + kk, blk = ps.blk, l, u
    cdef int64_t j = f.feature[f.parent[k]]
    cdef int64_t q = f.prev_same[k] - start if f.prev_same[k] >= 0 else -1
    cdef double c0, c1, fk, v
    cdef const double* lr = ps.leaf_r + j * blk
    cdef const double* lx = ps.leaf_x + j * blk
    cdef const double* ir = ps.leaf_ir + j * blk
    cdef const double* old
    cdef double* inv = ps.inv + level * m * blk
    cdef double* prod = ps.prod + level * m * blk
    cdef const double* up = ps.prod + (level - 1) * m * blk
    cdef double* total = ps.total + level * m * blk
    cdef double* deep = ps.deep + level * m * blk
    if q > b:  # the feature's previous edge on l2's path is in B_w
        old = ps.inv + (ps.depth[q] - ps.depth[b]) * m * blk
    else:
        old = inverse_base(ps, j, points, m, nb, inv_factor)
    ps.stack_node[level] = kk
    if follow_prod[kk] == 0.0:
        # X_jk = 0: the factor is (1 - t) R_j1 R_jk, inverted without a division
        for l in range(m):
            c0 = (1.0 - points[l]) * ratio_prod[kk]
            c1 = ps.inv_1mt[l] * ps.inv_ratio[kk]
            for u in range(nb):
                inv[l * blk + u] = c1 * ir[u]
                prod[l * blk + u] = up[l * blk + u] * (c0 * lr[u]) * old[l * blk + u]
    else:
        for l in range(m):
            c0 = (1.0 - points[l]) * ratio_prod[kk]
            c1 = points[l] * follow_prod[kk]
            for u in range(nb):
                fk = c0 * lr[u] + c1 * lx[u]
                inv[l * blk + u] = safe_inverse(fk)
                prod[l * blk + u] = up[l * blk + u] * fk * old[l * blk + u]
    if f.left[k] >= 0:
        for l in range(m):
            for u in range(nb):
                total[l * blk + u] = 0.0
    else:
        v = f.value[k]
        for l in range(m):
            for u in range(nb):
                total[l * blk + u] = v * prod[l * blk + u]
    if ps.is_target[kk]:
        for l in range(m):
            for u in range(nb):
                deep[l * blk + u] = 0.0


cdef void pop_node(const Forest* f, int64_t start, int64_t b, int64_t level,
                   const double* ratio_prod, const double* follow_prod,
                   const double* weights, int64_t m, int64_t nb, double scale,
                   PairScratch* ps, double* out) noexcept nogil:
    """Leave the node at ``level`` >= 1: credit its edge's feature (Lemma 2)
    and pass its leaf terms up."""
    cdef int64_t kk = ps.stack_node[level], k = start + kk, blk = ps.blk, l, u
    cdef int64_t j = f.feature[f.parent[k]]
    cdef int64_t q = f.prev_same[k] - start if f.prev_same[k] >= 0 else -1
    cdef double rk = ratio_prod[kk], xk = follow_prod[kk], wl, s
    cdef const double* lr = ps.leaf_r + j * blk
    cdef const double* lx = ps.leaf_x + j * blk
    cdef const double* inv = ps.inv + level * m * blk
    cdef const double* total = ps.total + level * m * blk
    cdef const double* deep = ps.deep + level * m * blk
    cdef double* parent_total = ps.total + (level - 1) * m * blk
    cdef double* acc = ps.acc
    cdef double* sink
    for u in range(nb):
        acc[u] = 0.0
    if ps.is_target[kk]:
        for l in range(m):
            wl = weights[l]
            for u in range(nb):
                acc[u] += wl * (deep[l * blk + u] + total[l * blk + u]) * inv[l * blk + u]
                parent_total[l * blk + u] += total[l * blk + u]
    else:
        for l in range(m):
            wl = weights[l]
            for u in range(nb):
                acc[u] += wl * total[l * blk + u] * inv[l * blk + u]
                parent_total[l * blk + u] += total[l * blk + u]
    s = 0.0
    for u in range(nb):
        s += (lx[u] * xk - lr[u] * rk) * acc[u]
    out[j] += scale * 2.0 * s
    if q > b:
        sink = ps.deep + (ps.depth[q] - ps.depth[b]) * m * blk
        for l in range(m):
            for u in range(nb):
                sink[l * blk + u] -= total[l * blk + u]
    else:
        sink = ps.excluded + j * m * blk
        if ps.has_excluded[j]:
            for l in range(m):
                for u in range(nb):
                    sink[l * blk + u] += total[l * blk + u]
        else:
            ps.has_excluded[j] = 1
            ps.touched[ps.n_touched] = j
            ps.n_touched += 1
            for l in range(m):
                for u in range(nb):
                    sink[l * blk + u] = total[l * blk + u]


cdef int64_t leaf_features(const Forest* f, int64_t start, int64_t leaf,
                           PairScratch* ps) noexcept nogil:
    """The distinct features on the path to ``leaf`` in order of their first
    split from the root (ps.slot_feature), with the deepest edge of each
    (ps.slot_edge, whose R and X are the leaf's full products); returns how
    many. ps.slot_of maps them back to their order."""
    cdef int64_t n_edges = 0, n = 0, c = leaf, e, j
    while c > 0:
        ps.path[n_edges] = c
        n_edges += 1
        c = f.parent[start + c] - start
    ps.stamp += 1
    for e in range(n_edges - 1, -1, -1):
        c = ps.path[e]
        j = f.feature[f.parent[start + c]]
        if ps.seen[j] != ps.stamp:
            ps.seen[j] = ps.stamp
            ps.slot_of[j] = n
            ps.slot_feature[n] = j
            n += 1
        ps.slot_edge[ps.slot_of[j]] = c
    return n


cdef void block_pairs(const Forest* f, int64_t start, int64_t b, int64_t r0, int64_t nb,
                      int64_t n_prefix, const double* ratio_prod, const double* follow_prod,
                      const double* points, const double* weights, int64_t m, double scale,
                      const double* inv_factor, const double* path_prod,
                      PairScratch* ps, double* out) noexcept nogil:
    """The pairs of leaves ``leaf_nodes[r0:r0 + nb]`` (in A_w) with the
    leaves of B_w (root b). ps.base_r, base_x hold l2's R, X of the
    ``n_prefix`` features ps.prefix above B_w (the path to b)."""
    cdef int64_t blk = ps.blk, n_feats = 0, u, c, j, l, kk, level, top, lf, s, n_slots, e
    cdef int64_t slots = ps.n_slots
    cdef double c0, c1, acc_s, wl
    cdef double* prod = ps.prod
    cdef double* total = ps.total
    cdef double* acc = ps.acc
    cdef const double* lr
    cdef const double* lx
    cdef const double* ex
    cdef const double* ib
    cdef double* dst
    # each leaf's R_j1, X_j1 (the deepest edge of a feature carries its full
    # products), the order of its features, and the pair's product at level
    # 0: rho_1 s_1(t) (l1's own path, from the linear pass) with the factors
    # of the features above B_w replaced by the pair's
    for u in range(nb):
        lf = ps.leaf_nodes[r0 + u]
        ps.rho[u] = f.value[start + lf]
        n_slots = leaf_features(f, start, lf, ps)
        for s in range(n_slots):
            j = ps.slot_feature[s]
            c = ps.slot_edge[s]
            ps.leaf_r[j * blk + u] = ratio_prod[c]
            ps.leaf_x[j * blk + u] = follow_prod[c]
            ps.leaf_ir[j * blk + u] = ps.inv_ratio[c]
            ps.leaf_edge[j * blk + u] = c
            ps.leaf_slot[j * blk + u] = s
            if not ps.in_feats[j]:
                ps.in_feats[j] = 1
                ps.feats[n_feats] = j
                n_feats += 1
        for l in range(m):
            prod[l * blk + u] = ps.rho[u] * path_prod[lf * m + l]
    for c in range(n_prefix):
        j = ps.prefix[c]
        lr = ps.leaf_r + j * blk
        lx = ps.leaf_x + j * blk
        for l in range(m):
            c0 = (1.0 - points[l]) * ps.base_r[j]
            c1 = points[l] * ps.base_x[j]
            for u in range(nb):
                prod[l * blk + u] *= ((c0 * lr[u] + c1 * lx[u])
                                      * inv_factor[ps.leaf_edge[j * blk + u] * m + l])
    if f.left[start + b] >= 0:
        for l in range(m):
            for u in range(nb):
                total[l * blk + u] = 0.0
    else:
        for l in range(m):
            for u in range(nb):
                total[l * blk + u] = f.value[start + b] * prod[l * blk + u]
    # depth-first over B_w (preorder): leave every node at or below the new
    # node's level before entering it
    ps.n_touched = 0
    ps.stack_node[0] = b
    top = 0
    for kk in range(b + 1, ps.sub_end[b]):
        level = ps.depth[kk] - ps.depth[b]
        while top >= level:
            pop_node(f, start, b, top, ratio_prod, follow_prod, weights, m, nb, scale, ps, out)
            top -= 1
        push_node(f, start, b, kk, level, ratio_prod, follow_prod, points, m, nb, inv_factor,
                  ps)
        top = level
    while top >= 1:
        pop_node(f, start, b, top, ratio_prod, follow_prod, weights, m, nb, scale, ps, out)
        top -= 1
    # The features above B_w keep the pair's factor for the leaves of B_w
    # that do not split on them again: credit them here.
    for c in range(n_prefix):
        j = ps.prefix[c]
        lr = ps.leaf_r + j * blk
        lx = ps.leaf_x + j * blk
        ib = inverse_base(ps, j, points, m, nb, inv_factor)
        ex = ps.excluded + j * m * blk
        for u in range(nb):
            acc[u] = 0.0
        for l in range(m):
            wl = weights[l]
            if ps.has_excluded[j]:
                for u in range(nb):
                    acc[u] += wl * (total[l * blk + u] - ex[l * blk + u]) * ib[l * blk + u]
            else:
                for u in range(nb):
                    acc[u] += wl * total[l * blk + u] * ib[l * blk + u]
        acc_s = 0.0
        for u in range(nb):
            acc_s += (lx[u] * ps.base_x[j] - lr[u] * ps.base_r[j]) * acc[u]
        out[j] += scale * 2.0 * acc_s
    # l1's other features keep l1's own factor f_j1: their credit
    # (X_j1 - R_j1) sum_t w_t (total - excluded_j) / f_j1 is summed over the
    # w on l1's path above j's first split, and paid once per leaf
    # (tree_square_gradient). The w above it are those with fewer features
    # above B_w than j's rank s in l1's order: totals go to bucket
    # n_prefix - 1, excluded terms to j's own.
    for u in range(nb):
        dst = ps.bucket_total + ((r0 + u) * slots + n_prefix - 1) * m
        for l in range(m):
            dst[l] += total[l * blk + u]
    for c in range(ps.n_touched):
        j = ps.touched[c]
        if not ps.in_prefix[j]:
            ex = ps.excluded + j * m * blk
            for u in range(nb):
                if ps.leaf_edge[j * blk + u] > 0:
                    dst = ps.bucket_excluded + ((r0 + u) * slots + ps.leaf_slot[j * blk + u]) * m
                    for l in range(m):
                        dst[l] += ex[l * blk + u]
    # reset the per-block state
    for c in range(n_feats):
        j = ps.feats[c]
        ps.in_feats[j] = 0
        ps.has_inv_base[j] = 0
        for u in range(nb):
            ps.leaf_r[j * blk + u] = 1.0
            ps.leaf_x[j * blk + u] = 1.0
            ps.leaf_ir[j * blk + u] = 1.0
            ps.leaf_edge[j * blk + u] = 0
    for c in range(ps.n_touched):
        j = ps.touched[c]
        ps.has_excluded[j] = 0
        ps.has_inv_base[j] = 0
    for c in range(n_prefix):
        ps.has_inv_base[ps.prefix[c]] = 0


cdef void own_features(const Forest* f, int64_t start, int64_t rank, int64_t l1,
                       const double* ratio_prod, const double* follow_prod,
                       const double* inv_factor, const double* points, const double* weights,
                       int64_t m, double scale, PairScratch* ps, double* out) noexcept nogil:
    """The pair (l1, l1), whose factors are (1 - t) R^2 + t X over l1's path,
    and the credits of l1's features kept with l1's own factor in its pairs
    with the leaves to its right (block_pairs' buckets)."""
    cdef int64_t n_slots = leaf_features(f, start, l1, ps), j, s, l, c
    cdef double rho1 = f.value[start + l1], r1, x1, fd, diag, kept, tl
    cdef const double* bt = ps.bucket_total + rank * ps.n_slots * m
    cdef const double* be = ps.bucket_excluded + rank * ps.n_slots * m
    cdef double* run = ps.product + m
    for l in range(m):
        tl = points[l]
        ps.product[l] = 1.0
        run[l] = 0.0
        for s in range(n_slots):
            r1 = ratio_prod[ps.slot_edge[s]]
            x1 = follow_prod[ps.slot_edge[s]]
            ps.product[l] *= (1.0 - tl) * r1 * r1 + tl * x1
    for s in range(n_slots):
        c = ps.slot_edge[s]
        r1 = ratio_prod[c]
        x1 = follow_prod[c]
        diag = 0.0
        if rho1 != 0.0:
            for l in range(m):
                fd = (1.0 - points[l]) * r1 * r1 + points[l] * x1
                if fd != 0.0:
                    diag = diag + weights[l] * ps.product[l] / fd
        # buckets before s: the w above this feature's first split
        kept = 0.0
        for l in range(m):
            kept = kept + weights[l] * (run[l] - be[s * m + l]) * inv_factor[c * m + l]
            run[l] += bt[s * m + l]
        out[ps.slot_feature[s]] += scale * (rho1 * rho1 * (x1 - r1 * r1) * diag
                                            + 2.0 * (x1 - r1) * kept)


cdef void tree_square_gradient(
    const Forest* f, int64_t t, const double* points, const double* weights, int64_t m,
    double scale, const double* ratio_prod, const double* follow_prod,
    const double* inv_factor, const double* path_prod, PairScratch* ps, double* out,
) noexcept nogil:
    """Add scale * sum_l weights[l] grad U_t(points[l] 1) to out (U: MLE of v_t^2),
    given the tree's R and X products of this row (``path_factors``), the
    inverses of its single-tree factors and their path products
    (``gradient_down_pass``)."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t kk, k, n_leaves = 0, w, b, c, p, j, n_prefix, r0, r1, nb
    if n == 1:
        return
    for kk in range(n):
        k = start + kk
        ps.leaf_rank[kk] = n_leaves
        ps.depth[kk] = 0 if kk == 0 else ps.depth[f.parent[k] - start] + 1
        ps.is_target[kk] = 0
        ps.inv_ratio[kk] = safe_inverse(ratio_prod[kk])
        if f.left[k] < 0:
            ps.leaf_nodes[n_leaves] = kk
            n_leaves += 1
    ps.leaf_rank[n] = n_leaves
    for kk in range(1, n):
        if f.prev_same[start + kk] >= 0:
            ps.is_target[f.prev_same[start + kk] - start] = 1
    for kk in range(n - 1, -1, -1):
        k = start + kk
        ps.sub_end[kk] = kk + 1 if f.left[k] < 0 else ps.sub_end[f.right[k] - start]
    for c in range(n_leaves * ps.n_slots * m):
        ps.bucket_total[c] = 0.0
        ps.bucket_excluded[c] = 0.0
    for w in range(n):
        if f.left[start + w] < 0:
            continue
        b = f.right[start + w] - start
        # l2's R, X above B_w: the deepest edge of each feature on the path to b
        n_prefix = 0
        ps.stamp += 1
        c = b
        while c > 0:
            p = f.parent[start + c] - start
            j = f.feature[start + p]
            if ps.seen[j] != ps.stamp:
                ps.seen[j] = ps.stamp
                ps.base_r[j] = ratio_prod[c]
                ps.base_x[j] = follow_prod[c]
                ps.in_prefix[j] = 1
                ps.prefix[n_prefix] = j
                n_prefix += 1
            c = p
        r1 = ps.leaf_rank[b]
        r0 = ps.leaf_rank[f.left[start + w] - start]
        while r0 < r1:
            nb = min(ps.blk, r1 - r0)
            block_pairs(f, start, b, r0, nb, n_prefix, ratio_prod, follow_prod, points,
                        weights, m, scale, inv_factor, path_prod, ps, out)
            r0 += nb
        for c in range(n_prefix):
            ps.base_r[ps.prefix[c]] = 1.0
            ps.base_x[ps.prefix[c]] = 1.0
            ps.in_prefix[ps.prefix[c]] = 0
    for r0 in range(n_leaves):
        own_features(f, start, r0, ps.leaf_nodes[r0], ratio_prod, follow_prod, inv_factor,
                     points, weights, m, scale, ps, out)


def r2_terms(ens, const double[:, ::1] X, const double[:, ::1] square_coef,
             const double[:, ::1] linear_coef, const double[::1] points,
             const double[::1] weights, int n_threads):
    """Per-row, per-feature  sum_k a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i).

    ``square_coef`` (a) and ``linear_coef`` (b) have shape (n_rows, n_trees);
    a tree whose two coefficients are 0 for a row is skipped for that row.
    The squared-error game of tree k against a constant c_ik with weight w_i
    is a = w_i, b = -2 w_i c_ik (module doc); a second-order loss game is
    a = w_i h_ik / 2, b = w_i g_ik. Shape (n_rows, n_features).
    """
    cdef Forest f = forest_from(ens)
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef int64_t m = points.shape[0]
    cdef int64_t n_slots = max(1, ens.n_path_features)
    cdef int64_t max_depth = ens.max_depth
    cdef int64_t blk = max(1, min(MAX_BLOCK, BLOCK_BYTES // (16 * max(1, m) * f.n_features)))
    cdef double[:, ::1] out = np.zeros((n_rows, f.n_features))
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    cdef Py_ssize_t i
    cdef int64_t t, l, lp
    cdef Scratch sc
    cdef PairScratch ps
    if f.n_values != 1:
        raise ValueError("the R^2 decomposition needs one value per leaf")
    if square_coef.shape[0] != n_rows or square_coef.shape[1] != f.n_trees or \
            linear_coef.shape[0] != n_rows or linear_coef.shape[1] != f.n_trees:
        raise ValueError("game coefficients must have shape (n_rows, n_trees)")
    if n_rows == 0:
        return np.asarray(out)
    with nogil, parallel(num_threads=n_threads):
        sc = scratch_alloc(f.max_tree_nodes, m, 1)
        ps = pair_alloc(f.max_tree_nodes, f.n_features, n_slots, max_depth, m, blk)
        if scratch_failed(&sc) or pair_failed(&ps):
            failed[0] = 1
        else:
            for lp in range(m):
                ps.inv_1mt[lp] = 1.0 / (1.0 - points[lp])
        for i in prange(n_rows, schedule="dynamic", chunksize=4):
            if failed[0]:
                continue
            for t in range(f.n_trees):
                if square_coef[i, t] == 0.0 and linear_coef[i, t] == 0.0:
                    continue
                for l in range(m):
                    ps.product[l] = linear_coef[i, t] * weights[l]
                # also leaves this tree's R, X products of row i in sc
                tree_gradient_uniform(&f, t, &X[i, 0], &points[0], ps.product, m, &sc,
                                      &out[i, 0])
                if square_coef[i, t] != 0.0:
                    tree_square_gradient(&f, t, &points[0], &weights[0], m, square_coef[i, t],
                                         sc.ratio_prod, sc.follow_prod, sc.inv_factor,
                                         sc.path_prod, &ps, &out[i, 0])
        scratch_free(&sc)
        pair_free(&ps)
    if failed[0]:
        raise MemoryError("could not allocate the kernel's per-thread scratch space")
    return np.asarray(out)
