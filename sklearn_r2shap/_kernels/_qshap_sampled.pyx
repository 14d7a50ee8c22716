# Sampled Shapley decomposition of R^2: an unbiased Monte Carlo estimate of
# the same per-row terms as _qshap.r2_terms,
#     a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i),
# for trees whose leaf pairs are too many for the exact kernel.
#
# With a constant c (any function of x_i and the tree, here the midpoint
# c = (v(empty) + v(N)) / 2 of the tree's own values),
#     a Sh[m^2] + b Sh[m] = a Sh[(m - c)^2] + (b + 2 a c) Sh[m],
# since Sh[(m - c)^2] = Sh[m^2] - 2 c Sh[m]. Sh[m] is exact (TreeGrad,
# tree_gradient_uniform). Sh_j[(m - c)^2] is the expected marginal
# contribution of j over a uniformly random order of the features the tree
# splits on (the others are null players), estimated by one antithetic pair
# of orders per replicate: an order and its reverse, averaged. For an
# additive value function the pair is exact; the midpoint c keeps the part
# of the squared game that is linear in m out of the noise.
#
# The p_t + 1 prefix values v_{S_0}, ..., v_{S_p}(x) of an order come from one
# pre-order pass over the tree: the weight of a node at prefix k is its
# parent's times the edge factor, X_e (x takes the edge: 1, else 0) when the
# edge's feature is among the first k, R_e (cover ratio) otherwise. This is
# multiplicative, also for a feature repeated on the path, because the
# path-dependent weight prod_j [j in S ? X_jl : R_jl] is a product over edges.
# All replicates and both directions share the pass (a vector of width
# 2 K (p_t + 1) per node). Cost O(nodes K p_t) per row and tree.
#
# Orders come from a counter-based generator keyed by (seed, row id, tree,
# replicate), so the estimate of a row does not depend on chunks or threads.
import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint64_t

from ._common cimport Buffers, Rows, parallel_units, row_at, rows_of, take, take_each
from ._forest cimport Forest, Interrupt, forest_from, goes_left, interrupted
from ._semivalues cimport Scratch, scratch_take, tree_gradient_uniform


cdef inline uint64_t splitmix64(uint64_t* state) noexcept nogil:
    cdef uint64_t z
    state[0] += <uint64_t> 0x9E3779B97F4A7C15ULL
    z = state[0]
    z = (z ^ (z >> 30)) * <uint64_t> 0xBF58476D1CE4E5B9ULL
    z = (z ^ (z >> 27)) * <uint64_t> 0x94D049BB133111EBULL
    return z ^ (z >> 31)


cdef inline uint64_t stream_key(uint64_t seed, uint64_t row, uint64_t tree,
                                uint64_t replicate) noexcept nogil:
    cdef uint64_t state = seed
    cdef uint64_t key = splitmix64(&state)
    state = key ^ row
    key = splitmix64(&state)
    state = key ^ tree
    key = splitmix64(&state)
    state = key ^ replicate
    return splitmix64(&state)


cdef struct SampleScratch:
    int64_t* depth      # per node of the tree
    double* weight      # (max_depth + 2, width): prefix weights on the current path
    double* value       # (width,): prefix values v_{S_k}
    int64_t* order      # (K, p_t): feature slot at each position
    int64_t* position   # (K, p_t): position of each slot
    double* estimate    # (K, p_t)
    double* lin_weights # (m,)
    int64_t* threshold  # (2 K, p_t): prefix_values' entry thresholds
    Scratch* sc         # the exact linear part's


cdef struct SampleSize:
    int64_t n_nodes
    int64_t depth
    int64_t width       # 2 K (p_max + 1)
    int64_t n_order     # K p_max
    int64_t m


cdef void* sample_scratch(void* work, Buffers* mem) noexcept nogil:
    """A SampleScratch for the sizes of the work struct's first field (a
    SampleSize)."""
    cdef const SampleSize* size = <const SampleSize*> work
    cdef int64_t n_order = size.n_order, width = size.width
    cdef SampleScratch* ss = <SampleScratch*> take(mem, sizeof(SampleScratch))
    if ss == NULL:
        return NULL
    take_each(mem, size.n_nodes, &ss.depth)
    take_each(mem, (size.depth + 2) * width, &ss.weight)
    take_each(mem, width, &ss.value)
    take_each(mem, n_order, &ss.order, &ss.position)
    take_each(mem, n_order, &ss.estimate)
    take_each(mem, size.m, &ss.lin_weights)
    take_each(mem, 2 * n_order, &ss.threshold)
    ss.sc = scratch_take(mem, size.n_nodes, size.m, 1)
    return ss




cdef void prefix_values(
    const Forest* f, int64_t t, const double* x, const int64_t* node_slot,
    int64_t n_blocks, int64_t P, const int64_t* threshold, uint8_t* left_taken,
    SampleScratch* ss,
) noexcept nogil:
    """ss.value[b * (P + 1) + k] = v_{S_k}(x) for every block b (an order or
    its reverse) whose slot s enters at prefix threshold[b * P + s] + 1."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t width = n_blocks * (P + 1)
    cdef int64_t kk, k, p, s, b, q, thr, d
    cdef double xe, re, rho
    cdef double* w0
    cdef double* w1
    for q in range(width):
        ss.value[q] = 0.0
        ss.weight[q] = 1.0
    ss.depth[0] = 0
    if f.left[start] < 0:
        rho = f.value[start]
        for q in range(width):
            ss.value[q] = rho
        return
    left_taken[0] = goes_left(f, start, x)
    for kk in range(1, n):
        k = start + kk
        p = f.parent[k] - start
        d = ss.depth[p] + 1
        ss.depth[kk] = d
        s = node_slot[start + p]
        xe = 1.0 if left_taken[p] == (f.left[start + p] == k) else 0.0
        re = f.ratio[k]
        w0 = ss.weight + (d - 1) * width
        w1 = ss.weight + d * width
        for b in range(n_blocks):
            thr = threshold[b * P + s]
            # prefixes k <= position: the feature is not yet in S (factor R)
            for q in range(b * (P + 1), b * (P + 1) + thr + 1):
                w1[q] = w0[q] * re
            for q in range(b * (P + 1) + thr + 1, (b + 1) * (P + 1)):
                w1[q] = w0[q] * xe
        if f.left[k] < 0:
            rho = f.value[k]
            for q in range(width):
                ss.value[q] += rho * w1[q]
        else:
            left_taken[kk] = goes_left(f, k, x)


cdef void sample_tree(
    const Forest* f, int64_t t, const double* x, const int64_t* node_slot,
    const int64_t* slot_feature, int64_t P, int64_t K, uint64_t seed, uint64_t row,
    double a, double bcoef, const double* points, const double* weights, int64_t m,
    Scratch* sc, SampleScratch* ss, int64_t* threshold, double* linear, double* sampled,
    int64_t n_features,
) noexcept nogil:
    """Add the exact part (b + 2 a c) Sh[m] to ``linear`` (n_features) and
    replicate r's estimate of a Sh[(m - c)^2] to ``sampled[r]`` (K, n_features)."""
    cdef int64_t r, s, k, j, q
    cdef uint64_t state
    cdef double c, g0, g1, vf, vr, mid, u
    cdef double* val
    # K random orders of the P slots (Fisher-Yates); block 2r is order r,
    # block 2r + 1 its reverse
    for r in range(K):
        state = stream_key(seed, row, <uint64_t> t, <uint64_t> r)
        for s in range(P):
            ss.order[r * P + s] = s
        for s in range(P - 1, 0, -1):
            u = (splitmix64(&state) >> 11) * (1.0 / 9007199254740992.0)
            k = <int64_t> (u * (s + 1))
            if k > s:
                k = s
            q = ss.order[r * P + s]
            ss.order[r * P + s] = ss.order[r * P + k]
            ss.order[r * P + k] = q
        for k in range(P):
            s = ss.order[r * P + k]
            threshold[(2 * r) * P + s] = k
            threshold[(2 * r + 1) * P + s] = P - 1 - k
    prefix_values(f, t, x, node_slot, 2 * K, P, threshold, sc.left_taken, ss)
    # v(empty) and v(N) do not depend on the order: the midpoint c is a
    # constant of (x, tree), and the estimate stays unbiased
    c = 0.5 * (ss.value[0] + ss.value[P])
    for q in range(m):
        ss.lin_weights[q] = (bcoef + 2.0 * a * c) * weights[q]
    tree_gradient_uniform(f, t, x, points, ss.lin_weights, m, sc, linear)
    if a == 0.0:
        return
    for r in range(K):
        for s in range(P):
            ss.estimate[r * P + s] = 0.0
        val = ss.value + (2 * r) * (P + 1)
        for k in range(P):
            # order r: the slot at position k enters between prefixes k and k + 1
            g0 = val[k] - c
            g1 = val[k + 1] - c
            ss.estimate[r * P + ss.order[r * P + k]] += g1 * g1 - g0 * g0
        val = ss.value + (2 * r + 1) * (P + 1)
        for k in range(P):
            # reversed order: position k holds the slot at P - 1 - k of order r
            g0 = val[k] - c
            g1 = val[k + 1] - c
            ss.estimate[r * P + ss.order[r * P + P - 1 - k]] += g1 * g1 - g0 * g0
        for s in range(P):
            sampled[r * n_features + slot_feature[s]] += 0.5 * a * ss.estimate[r * P + s]


def tree_slots(ens):
    """Per tree, the features it splits on, and each node's slot among them.

    Returns (node_slot, slot_start, slot_feature): node_slot[k] is the index
    of node k's feature among slot_feature[slot_start[t]:slot_start[t + 1]]
    (-1 for leaves).
    """
    feature = np.asarray(ens.feature)
    left = np.asarray(ens.children_left)
    tree_start = np.asarray(ens.tree_start)
    node_slot = np.full(len(feature), -1, dtype=np.int64)
    slot_start = np.zeros(len(tree_start), dtype=np.int64)
    slot_feature = []
    for t in range(len(tree_start) - 1):
        lo, hi = tree_start[t], tree_start[t + 1]
        internal = left[lo:hi] >= 0
        used = np.unique(feature[lo:hi][internal])
        node_slot[lo:hi][internal] = np.searchsorted(used, feature[lo:hi][internal])
        slot_feature.append(used)
        slot_start[t + 1] = slot_start[t] + len(used)
    slot_feature = (np.concatenate(slot_feature) if slot_feature else np.zeros(0)).astype(np.int64)
    return node_slot, slot_start, slot_feature


cdef struct SampledTerms:
    SampleSize size  # first: sample_scratch reads it
    Forest f
    Rows rows
    const double* square_coef  # (rows, n_trees)
    const double* linear_coef
    const int64_t* node_slot
    const int64_t* slot_start
    const int64_t* slot_feature
    int64_t K
    uint64_t seed
    const int64_t* row_ids
    const double* points
    const double* weights
    double* linear   # (rows, n_features)
    double* sampled  # (rows, K, n_features)


cdef void sampled_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                       Interrupt* stop) noexcept nogil:
    cdef SampledTerms w = (<const SampledTerms*> work)[0]
    cdef SampleScratch ss = (<SampleScratch*> scratch)[0]  # copies: see the driver
    cdef Scratch sc = ss.sc[0]
    cdef int64_t n_trees = w.f.n_trees, p = w.f.n_features
    cdef int64_t i, t, P
    cdef double a, b
    for i in range(lo, hi):
        for t in range(n_trees):
            if interrupted(stop):
                return
            P = w.slot_start[t + 1] - w.slot_start[t]
            a = w.square_coef[i * n_trees + t]
            b = w.linear_coef[i * n_trees + t]
            if P == 0 or (a == 0.0 and b == 0.0):
                continue
            sample_tree(&w.f, t, row_at(&w.rows, i), w.node_slot,
                        &w.slot_feature[w.slot_start[t]], P, w.K, w.seed,
                        <uint64_t> w.row_ids[i], a, b, w.points, w.weights, w.size.m, &sc, &ss,
                        ss.threshold, w.linear + i * p, w.sampled + i * w.K * p, p)


def sampled_r2_terms(ens, const double[:, ::1] X, const double[:, ::1] square_coef,
                     const double[:, ::1] linear_coef, const double[::1] points,
                     const double[::1] weights, slots, int n_replicates,
                     uint64_t seed, const int64_t[::1] row_ids, int n_threads):
    """Unbiased estimates of  sum_k a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i).

    ``points``, ``weights``: Gauss-Legendre rule exact for Sh[m] (degree
    < d). ``slots``: :func:`tree_slots` of ``ens``. Each of the
    ``n_replicates`` replicates uses one antithetic pair of feature orders
    per row and tree, drawn from (seed, row_ids[i], tree, replicate).

    Returns (linear, sampled): ``linear`` (n_rows, n_features) is the exact
    part, ``sampled`` (n_rows, n_replicates, n_features) the replicates of
    the Monte Carlo part; the estimate is ``linear + sampled.mean(axis=1)``.
    """
    cdef Forest f = forest_from(ens)
    cdef const int64_t[::1] node_slot = slots[0]
    cdef const int64_t[::1] slot_start = slots[1]
    cdef const int64_t[::1] slot_feature = slots[2]
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef int64_t m = points.shape[0]
    cdef int64_t K = n_replicates
    cdef int64_t P_max = 1
    cdef int64_t t, P
    cdef Py_ssize_t i
    cdef double[:, ::1] linear = np.zeros((n_rows, f.n_features))
    cdef double[:, :, ::1] sampled = np.zeros((n_rows, max(K, 1), f.n_features))
    cdef SampledTerms w
    if f.n_values != 1:
        raise ValueError("the R^2 decomposition needs one value per leaf")
    if np.any(np.asarray(ens.tree_output) != 0):
        # the shared up pass credits output tree_output[t]; out has one output
        raise ValueError("the R^2 kernel needs every tree to write to output 0 (the game "
                         "coefficients carry the class)")
    if K < 1:
        raise ValueError("n_replicates must be >= 1")
    if square_coef.shape[0] != n_rows or square_coef.shape[1] != f.n_trees or \
            linear_coef.shape[0] != n_rows or linear_coef.shape[1] != f.n_trees or \
            row_ids.shape[0] != n_rows:
        raise ValueError("game coefficients must have shape (n_rows, n_trees), row_ids (n_rows,)")
    for t in range(f.n_trees):
        P_max = max(P_max, slot_start[t + 1] - slot_start[t])
    if n_rows == 0:
        return np.asarray(linear), np.asarray(sampled)
    w = SampledTerms(
        size=SampleSize(n_nodes=f.max_tree_nodes, depth=ens.max_depth,
                        width=2 * K * (P_max + 1), n_order=K * P_max, m=m),
        f=f, rows=rows_of(X), square_coef=&square_coef[0, 0],
        linear_coef=&linear_coef[0, 0], node_slot=&node_slot[0], slot_start=&slot_start[0],
        slot_feature=&slot_feature[0], K=K, seed=seed, row_ids=&row_ids[0], points=&points[0],
        weights=&weights[0], linear=&linear[0, 0], sampled=&sampled[0, 0, 0])
    parallel_units(n_rows, 1, sample_scratch, sampled_rows, &w, n_threads)
    return np.asarray(linear), np.asarray(sampled)


def cost_units(ens):
    """Per tree: (exact, sampled) operation counts per row.

    exact: sum over internal nodes w of leaves(left of w) * nodes(right of w)
    plus the leaves (the pair walk of _qshap, times its quadrature points
    outside); sampled: nodes * (features the tree splits on + 1).
    """
    cdef Forest f = forest_from(ens)
    cdef int64_t t, kk, k, start, n, p
    cdef double[::1] exact = np.zeros(f.n_trees)
    cdef int64_t[::1] leaves = np.zeros(f.max_tree_nodes, dtype=np.int64)
    cdef int64_t[::1] nodes = np.zeros(f.max_tree_nodes, dtype=np.int64)
    for t in range(f.n_trees):
        start = f.tree_start[t]
        n = f.tree_start[t + 1] - start
        for kk in range(n):
            leaves[kk] = 1 if f.left[start + kk] < 0 else 0
            nodes[kk] = 1
        for kk in range(n - 1, 0, -1):
            p = f.parent[start + kk] - start
            leaves[p] += leaves[kk]
            nodes[p] += nodes[kk]
        for kk in range(n):
            k = start + kk
            if f.left[k] >= 0:
                exact[t] += <double> leaves[f.left[k] - start] * <double> nodes[f.right[k] - start]
            else:
                exact[t] += 1.0
    return np.asarray(exact)
