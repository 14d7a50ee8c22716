# Shapley values of piecewise-linear trees (doc/piecewise.rst; Guryanov,
# "Efficient computation of SHAP values for piecewise-linear decision
# trees"), by the TreeGrad quadrature of
# _semivalues.pyx with leaf values that depend on the quadrature point.
#
# Leaf l predicts b_l + sum_{k in K_l} a_lk x_k, or its fallback value fb_l
# when one of those x_k is NaN (LightGBM linear_tree). In the game, a feature
# k not in S takes its leaf mean mu_lk, so with c_l = b_l + sum_k a_lk mu_lk,
# d_lk = a_lk (x_k - mu_lk), U_l the linear features with NaN x_k and L_l the
# others, leaf l's value at S is
#     fb_l                                           if some k in U_l is in S,
#     c_l + sum_{k in L_l, k in S} d_lk              otherwise,
# weighted by the path weight w_l(S) = prod_{j on the path} (R_jl or X_jl).
# Every part is a product of one factor per feature, so the multilinear
# extension of leaf l at z = t 1 is s_l(t) V_l(t) with s_l the path product
# of f_j(t) = (1 - t) R_j + t X_j and
#     V_l(t) = fb_l + N_l(t) (c_l - fb_l + sum_{k in L_l} d_lk eps_lk(t)),
#     N_l(t) = prod_{k in U_l} rho_lk(t),
#     eps_lk = t X_k / f_k (k on the path) or t (off the path),
#     rho_lk = (1 - t) R_k / f_k (k on the path) or 1 - t (off the path):
# a linear feature's factor is "in S only" (z X or z), a NaN feature's factor
# "out of S only" ((1 - z) R or 1 - z). The TreeGrad up pass with leaf terms
# s_l V_l gives every path feature j the part (X_j - R_j) / f_j s_l V_l of its
# derivative; the terms whose factor for a linear feature k is not f_k get a
# correction at the leaf,
#     k in L_l:  s_l N_l d_lk eps_lk (1 / t - D_k),
#     k in U_l:  s_l N_l (c_l - fb_l + sum d eps) (-1 / (1 - t) - D_k),
# with D_k = (X_k - R_k) / f_k on the path and 0 off it. The rational parts
# cancel at every node, so the quadrature integrates a polynomial of degree
# |path features of l union K_l| - 1 and is exact with enough nodes.
#
# Covers (through the cover ratios) and leaf means are inputs, computed by
# ``leaf_statistics`` from background data, not read from the model. The
# second half of the file tabulates the same values per leaf and pattern for
# many rows of shallow trees (as _semivalues.pyx does for constant leaves).
import numpy as np

from libc.stdint cimport int64_t, uint64_t
from libc.math cimport isnan

from ._common cimport (
    Buffers, Outputs, Rows, Tables, TreeBlock, bytes_scratch, output_row, parallel_units,
    pattern_blocks, row_at, rows_of, tables_of, take, take_each,
)
from ._forest cimport (
    Forest, Interrupt, Patterns, add_leaf_value, forest_from, leaf_of, next_node, path_factors,
    patterns_from,
)
from ._semivalues cimport (
    RuleSums, Scratch, gradient_down_pass, gradient_scratch, gradient_up_pass, rule_sums,
)


cdef struct Linear:
    const int64_t* start    # (n_nodes + 1): entries of leaf k are start[k]:start[k + 1]
    const int64_t* feature  # (n_entries,)
    const double* coef      # (n_entries,)
    const double* mean      # (n_entries,): mu_lk
    const int64_t* node     # (n_entries,): local index of the deepest k-edge on the path, or -1
    const double* const_    # (n_nodes, n_values): c_l
    const double* fallback  # (n_nodes, n_values): fb_l


cdef inline void leaf_terms(
    const Forest* f, const Linear* lin, int64_t k, int64_t kk, int64_t o, const double* x,
    const double* points, const double* weights, int64_t m, Scratch* sc, double* eps_sum,
    double* out,
) noexcept nogil:
    """Leaf ``k`` (local ``kk``): its terms s_l V_l into ``subtree`` and the
    corrections of its linear features into ``out`` (row of output ``o``);
    ``eps_sum`` (m,) is scratch for sum_k d_k eps_k(t_l)."""
    cdef int64_t W = f.n_values
    cdef int64_t e0 = lin.start[k]
    cdef int64_t e1 = lin.start[k + 1]
    cdef int64_t a = kk * m * W
    cdef int64_t l, w, e, j, q
    cdef double tl, s, n_prod, sigma, inv, d, eps, big_d, fb, scale, rest, r, acc, c
    cdef bint has_nan = False
    if e0 == e1:  # constant leaf
        for l in range(m):
            s = sc.path_prod[kk * m + l]
            for w in range(W):
                sc.subtree[a + l * W + w] = lin.const_[k * W + w] * s
        return
    # linear entries exist only with one value per leaf (W == 1)
    for e in range(e0, e1):
        if isnan(x[lin.feature[e]]):
            has_nan = True
            break
    c = lin.const_[k]
    if not has_nan:
        # V(t) = c + sum_k d_k eps_k(t); the correction of k is
        # s d R / f^2 (on the path, X = 1) or s d (off the path)
        for l in range(m):
            eps_sum[l] = 0.0
        for e in range(e0, e1):
            j = lin.feature[e]
            q = lin.node[e]
            d = lin.coef[e] * (x[j] - lin.mean[e])
            acc = 0.0
            if q < 0:
                for l in range(m):
                    eps_sum[l] += d * points[l]
                    acc = acc + weights[l] * sc.path_prod[kk * m + l]
            elif sc.follow_prod[q] != 0.0:
                r = sc.ratio_prod[q]
                for l in range(m):
                    inv = sc.inv_factor[q * m + l]
                    eps_sum[l] += d * points[l] * inv
                    acc = acc + weights[l] * sc.path_prod[kk * m + l] * inv * inv
                acc = acc * r
            out[o * f.n_features + j] += d * acc
        for l in range(m):
            sc.subtree[a + l] = (c + eps_sum[l]) * sc.path_prod[kk * m + l]
        return
    fb = lin.fallback[k]
    for l in range(m):
        tl = points[l]
        s = sc.path_prod[kk * m + l]
        n_prod = 1.0
        sigma = 0.0
        for e in range(e0, e1):
            j = lin.feature[e]
            q = lin.node[e]
            if isnan(x[j]):
                if q >= 0:
                    n_prod = n_prod * (1.0 - tl) * sc.ratio_prod[q] * sc.inv_factor[q * m + l]
                else:
                    n_prod = n_prod * (1.0 - tl)
            else:
                d = lin.coef[e] * (x[j] - lin.mean[e])
                if q >= 0:
                    eps = tl * sc.follow_prod[q] * sc.inv_factor[q * m + l]
                else:
                    eps = tl
                sigma = sigma + d * eps
        rest = c - fb + sigma
        sc.subtree[a + l] = (fb + n_prod * rest) * s
        scale = weights[l] * s * n_prod
        if scale == 0.0:
            continue
        for e in range(e0, e1):
            j = lin.feature[e]
            q = lin.node[e]
            big_d = 0.0
            if q >= 0:
                big_d = (sc.follow_prod[q] - sc.ratio_prod[q]) * sc.inv_factor[q * m + l]
            if isnan(x[j]):
                out[o * f.n_features + j] += scale * rest * (-1.0 / (1.0 - tl) - big_d)
            else:
                if q >= 0:
                    eps = tl * sc.follow_prod[q] * sc.inv_factor[q * m + l]
                else:
                    eps = tl
                if eps != 0.0:
                    d = lin.coef[e] * (x[j] - lin.mean[e])
                    out[o * f.n_features + j] += scale * d * eps * (1.0 / tl - big_d)


cdef void tree_piecewise(
    const Forest* f, const Linear* lin, int64_t t, const double* x,
    const double* points, const double* weights, int64_t m,
    Scratch* sc, double* eps_sum, double* out,
) noexcept nogil:
    """Add sum_l weights[l] * grad F_t(points[l] * 1) of the piecewise-linear
    game of tree ``t`` to ``out`` (n_outputs, p)."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t W = f.n_values
    cdef int64_t o = f.tree_output[t] if W == 1 else 0
    cdef int64_t kk, k, l, a
    path_factors(f, t, x, sc.left_taken, sc.ratio_prod, sc.follow_prod)
    gradient_down_pass(f, t, points, m, sc.ratio_prod, sc.follow_prod, sc.factor,
                       sc.inv_factor, sc.path_prod)
    for l in range(m * W):
        sc.subtree[l] = 0.0
        sc.deepest[l] = 0.0
    if n == 1:  # a single leaf: only its linear features can gain
        leaf_terms(f, lin, start, 0, o, x, points, weights, m, sc, eps_sum, out)
        return
    for kk in range(1, n):
        k = start + kk
        a = kk * m * W
        for l in range(m * W):
            sc.deepest[a + l] = 0.0
        if f.left[k] < 0:
            leaf_terms(f, lin, k, kk, o, x, points, weights, m, sc, eps_sum, out)
        else:
            for l in range(m * W):
                sc.subtree[a + l] = 0.0
    gradient_up_pass(f, t, m, weights, sc.ratio_prod, sc.follow_prod, sc.inv_factor,
                     sc.subtree, sc.deepest, out)


cdef Linear linear_from(const int64_t[::1] start, const int64_t[::1] feature,
                        const double[::1] coef, const double[::1] mean,
                        const int64_t[::1] node, const double[:, ::1] const_,
                        const double[:, ::1] fallback):
    cdef Linear lin
    lin.start = &start[0]
    lin.feature = &feature[0] if feature.shape[0] else NULL
    lin.coef = &coef[0] if coef.shape[0] else NULL
    lin.mean = &mean[0] if mean.shape[0] else NULL
    lin.node = &node[0] if node.shape[0] else NULL
    lin.const_ = &const_[0, 0]
    lin.fallback = &fallback[0, 0]
    return lin


cdef struct PiecewiseSums:
    RuleSums rules  # first: gradient_scratch reads its size
    Linear lin


cdef struct PiecewiseScratch:
    Scratch* sc
    double* eps_sum  # (m,)


cdef void* piecewise_scratch(void* work, Buffers* mem) noexcept nogil:
    cdef PiecewiseScratch* s = <PiecewiseScratch*> take(mem, sizeof(PiecewiseScratch))
    if s != NULL:
        s.sc = <Scratch*> gradient_scratch(work, mem)
        take_each(mem, (<const RuleSums*> work).size.m, &s.eps_sum)
    return s


cdef void piecewise_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                         Interrupt* stop) noexcept nogil:
    cdef PiecewiseSums w = (<const PiecewiseSums*> work)[0]
    cdef const RuleSums* r = &w.rules
    cdef double* eps_sum = (<const PiecewiseScratch*> scratch).eps_sum
    cdef Scratch sc = (<const PiecewiseScratch*> scratch).sc[0]  # a copy: see the driver
    cdef int64_t i, t
    for i in range(lo, hi):
        for t in range(r.n_trees):
            tree_piecewise(&r.f, &w.lin, r.trees[t], row_at(&r.rows, i), r.points, r.weights,
                           r.size.m, &sc, eps_sum, output_row(&r.out, i, 0))


def piecewise_semivalues(ens, const double[:, ::1] X, const double[::1] cover_ratio,
                         const double[:, ::1] leaf_const, const double[:, ::1] fallback,
                         const int64_t[::1] linear_start, const int64_t[::1] linear_feature,
                         const double[::1] linear_coef, const double[::1] linear_mean,
                         const int64_t[::1] linear_node, const double[::1] points,
                         const double[::1] weights, const int64_t[::1] trees,
                         double[:, :, ::1] out, int n_threads):
    """Add sum_l weights[l] * grad F_x(points[l] * 1) of the piecewise-linear
    game of the given trees to ``out`` (n_rows, n_outputs, n_features);
    Gauss-Legendre nodes and weights on (0, 1) give the Shapley values.

    ``cover_ratio`` replaces the ensemble's own (covers from background
    data); ``leaf_const`` holds c_l = b_l + sum_k a_lk mu_lk.
    """
    cdef PiecewiseSums w
    w.rules = rule_sums(ens, X, points, weights, trees, out)
    if cover_ratio.shape[0] != w.rules.f.n_nodes or leaf_const.shape[0] != w.rules.f.n_nodes:
        raise ValueError("cover_ratio and leaf_const need one entry per node")
    if linear_feature.shape[0] and w.rules.f.n_values != 1:
        raise ValueError("linear leaves need one value per leaf")
    w.rules.f.ratio = &cover_ratio[0]
    w.lin = linear_from(linear_start, linear_feature, linear_coef, linear_mean, linear_node,
                        leaf_const, fallback)
    if X.shape[0] == 0 or trees.shape[0] == 0:
        return
    parallel_units(X.shape[0], 16, piecewise_scratch, piecewise_rows, &w, n_threads)


def linear_structure(ens, const int64_t[::1] linear_start, const int64_t[::1] linear_feature):
    """Row-independent structure of the linear terms.

    Returns ``node`` (n_entries,): for entry e of leaf l on feature k, the
    local index (within l's tree) of the deepest edge on l's path that splits
    on k, or -1 when k is not on the path; and ``leaf_dim`` (n_nodes,): the
    number of distinct features on a leaf's path or among its linear
    features (0 for internal nodes), which fixes the quadrature degree.
    """
    cdef Forest f = forest_from(ens)
    cdef int64_t n_entries = linear_feature.shape[0]
    cdef int64_t[::1] node = np.full(n_entries, -1, dtype=np.int64)
    cdef int64_t[::1] leaf_dim = np.zeros(f.n_nodes, dtype=np.int64)
    cdef int64_t[::1] tree_of = np.zeros(f.n_nodes, dtype=np.int64)
    cdef int64_t k, c, p, e, t, distinct
    for t in range(f.n_trees):
        for k in range(f.tree_start[t], f.tree_start[t + 1]):
            tree_of[k] = t
    with nogil:
        for k in range(f.n_nodes):
            if f.left[k] >= 0:
                continue
            distinct = 0
            c = k
            while f.parent[c] >= 0:
                p = f.parent[c]
                if f.prev_same[c] < 0:  # the topmost edge of its feature
                    distinct = distinct + 1
                for e in range(linear_start[k], linear_start[k + 1]):
                    if node[e] < 0 and linear_feature[e] == f.feature[p]:
                        node[e] = c - f.tree_start[tree_of[k]]
                c = p
            for e in range(linear_start[k], linear_start[k + 1]):
                if node[e] < 0:
                    distinct = distinct + 1
            leaf_dim[k] = distinct
    return np.asarray(node), np.asarray(leaf_dim)


cdef struct Statistics:
    Forest f
    Rows background
    const double* weight
    const int64_t* linear_start
    const int64_t* linear_feature
    double* cover
    double* complete
    double* entry_sum


cdef void statistics_trees(void* work, int64_t lo, int64_t hi, void* scratch,
                           Interrupt* stop) noexcept nogil:
    """Trees lo:hi, every background row: the nodes of different trees are
    disjoint, so no thread writes where another does."""
    cdef Statistics w = (<const Statistics*> work)[0]
    cdef int64_t t, i, node, e
    cdef const double* x
    cdef bint ok
    for t in range(lo, hi):
        for i in range(w.background.n):
            x = row_at(&w.background, i)
            node = w.f.tree_start[t]
            w.cover[node] += w.weight[i]
            while w.f.left[node] >= 0:
                node = next_node(&w.f, node, x)
                w.cover[node] += w.weight[i]
            if w.linear_start[node] == w.linear_start[node + 1]:
                continue
            ok = True
            for e in range(w.linear_start[node], w.linear_start[node + 1]):
                if isnan(x[w.linear_feature[e]]):
                    ok = False
                    break
            if ok:
                w.complete[node] += w.weight[i]
                for e in range(w.linear_start[node], w.linear_start[node + 1]):
                    w.entry_sum[e] += w.weight[i] * x[w.linear_feature[e]]


def leaf_statistics(ens, const double[:, ::1] B, const double[::1] weight,
                    const int64_t[::1] linear_start, const int64_t[::1] linear_feature,
                    int n_threads):
    """Route the background rows ``B`` through every tree.

    Returns ``cover`` (n_nodes,): the weight of the rows reaching each node;
    ``complete`` (n_nodes,): per leaf, the weight of its rows whose linear
    features are all non-NaN; ``entry_sum`` (n_entries,): per linear entry,
    the weighted sum of its feature over those complete rows.
    """
    cdef Statistics w
    w.f = forest_from(ens)
    cdef double[::1] cover = np.zeros(w.f.n_nodes)
    cdef double[::1] complete = np.zeros(w.f.n_nodes)
    cdef double[::1] entry_sum = np.zeros(linear_feature.shape[0])
    if B.shape[0] == 0:
        return np.asarray(cover), np.asarray(complete), np.asarray(entry_sum)
    w = Statistics(f=w.f, background=rows_of(B), weight=&weight[0],
                   linear_start=&linear_start[0], linear_feature=&linear_feature[0],
                   cover=&cover[0], complete=&complete[0], entry_sum=&entry_sum[0])
    parallel_units(w.f.n_trees, 1, NULL, statistics_trees, &w, n_threads)
    return np.asarray(cover), np.asarray(complete), np.asarray(entry_sum)


cdef struct LinearPredictions:
    Forest f
    Linear lin
    Rows rows
    double* out  # (rows, width)
    int64_t width


cdef void linear_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                      Interrupt* stop) noexcept nogil:
    cdef LinearPredictions w = (<const LinearPredictions*> work)[0]
    cdef const Forest* f = &w.f
    cdef const int64_t* start = w.lin.start
    cdef int64_t i, t, node, e
    cdef double acc
    cdef const double* x
    cdef double* row
    cdef bint nan_found
    for i in range(lo, hi):
        x = row_at(&w.rows, i)
        row = w.out + i * w.width
        for t in range(f.n_trees):
            node = leaf_of(f, t, x)
            if start[node] < start[node + 1]:  # one value per leaf
                acc = f.value[node]
                nan_found = False
                for e in range(start[node], start[node + 1]):
                    if isnan(x[w.lin.feature[e]]):
                        nan_found = True
                        break
                    acc = acc + w.lin.coef[e] * x[w.lin.feature[e]]
                if nan_found:
                    acc = w.lin.fallback[node * f.n_values]
                row[f.tree_output[t]] += acc
            else:
                add_leaf_value(f, t, node, row)


def predict_linear(ens, const double[:, ::1] X, const int64_t[::1] linear_start,
                   const int64_t[::1] linear_feature, const double[::1] linear_coef,
                   const double[:, ::1] fallback, int n_threads):
    """f(x) with linear leaves: b_l + sum_k a_lk x_k, or fb_l if one of the
    x_k is NaN. Shape (n_rows, n_outputs), base value included."""
    cdef LinearPredictions w
    cdef double[:, ::1] out = np.tile(np.asarray(ens.base_value, dtype=np.float64),
                                      (X.shape[0], 1))
    if X.shape[0] == 0:
        return np.asarray(out)
    w.f = forest_from(ens)
    w.lin.start = &linear_start[0]
    w.lin.feature = &linear_feature[0]
    w.lin.coef = &linear_coef[0]
    w.lin.fallback = &fallback[0, 0]
    w.rows = rows_of(X)
    w.out = &out[0, 0]
    w.width = out.shape[1]
    parallel_units(X.shape[0], 64, NULL, linear_rows, &w, n_threads)
    return np.asarray(out)


# Pattern tables (many NaN-free rows, shallow trees), as in _semivalues.pyx.
# In leaf l only X depends on the row (through the pattern A of 0/1 bits,
# one per distinct path feature) and so do the multipliers x_k - mu_lk. A
# linear feature off the path gets a virtual slot with R = X = 1 (factor 1).
# With P_b(t) = prod_{c != b} f_c(t) over the d' slots, f_c = (1 - t) R_c + t A_c,
# the Shapley values of the leaf's game (no NaN among its linear features) are
#     phi_b = c_l T0[A, b] - sum_e mu_e a_e T_e[A, b] + sum_e x_k a_e T_e[A, b],
#     T0[A, b] = (A_b - R_b) sum_t w_t P_b(t),
#     T_e[A, b] = A_s (A_b - R_b) sum_t w_t t P_b(t) / f_s(t)   (b != s, slot s of e),
#     T_e[A, s] = A_s sum_t w_t P_s(t),
# (f_s >= t > 0 when A_s = 1; T_e = 0 when A_s = 0). A leaf's table holds,
# for each pattern, the row c_l T0 - sum_e mu_e a_e T_e (row-independent),
# then a_e T_e[A, b] by slot b and entry e: 2^d x (1 + n_entries) x d'
# numbers. A row adds, per leaf and slot, the first row's entry plus the dot
# product of the entries' x_k with that slot's n_entries numbers.

cdef struct LinearLeaf:
    int64_t node       # the leaf's node k
    int64_t n_slots    # d': path slots, then virtual ones
    int64_t first      # its first linear entry
    int64_t n_entries
    int64_t width      # (1 + n_entries) d': numbers per pattern in its table


cdef inline LinearLeaf linear_leaf(const Patterns* p, int64_t v, const int64_t* ext_dim,
                                   const int64_t* linear_start) noexcept nogil:
    """Leaf v's slots, entries and table layout (linear_slots, linear_tables)."""
    cdef LinearLeaf leaf
    leaf.node = p.leaf_node[v]
    leaf.n_slots = ext_dim[v]
    leaf.first = linear_start[leaf.node]
    leaf.n_entries = linear_start[leaf.node + 1] - leaf.first
    leaf.width = (1 + leaf.n_entries) * leaf.n_slots
    return leaf


def linear_slots(structure, const int64_t[::1] linear_start, const int64_t[::1] linear_feature):
    """Extended slots of every leaf of a pattern structure (_semivalues.pattern_structure).

    Returns ``ext_dim`` (per leaf, d' = d + linear features off the path),
    ``ext_start`` and flat ``ext_feature`` / ``ext_ratio`` (the path slots,
    then the virtual ones with R = 1), and ``entry_slot`` (per linear
    entry, its slot in its leaf).
    """
    cdef Patterns p = patterns_from(structure)
    cdef int64_t n_leaves = p.n_leaves
    cdef int64_t[::1] ext_dim = np.zeros(n_leaves, dtype=np.int64)
    cdef int64_t[::1] entry_slot = np.full(linear_feature.shape[0], -1, dtype=np.int64)
    cdef int64_t v, k, e, b, d, extra
    with nogil:
        for v in range(n_leaves):
            k = p.leaf_node[v]
            d = p.dim[v]
            extra = 0
            for e in range(linear_start[k], linear_start[k + 1]):
                for b in range(d):
                    if p.feature[p.fstart[v] + b] == linear_feature[e]:
                        entry_slot[e] = b
                        break
                if entry_slot[e] < 0:
                    entry_slot[e] = d + extra
                    extra = extra + 1
            ext_dim[v] = d + extra
    ext_start = np.concatenate([[0], np.cumsum(ext_dim)]).astype(np.int64)
    cdef int64_t[::1] ext_start_v = ext_start
    cdef int64_t[::1] ext_feature = np.zeros(ext_start[n_leaves], dtype=np.int64)
    cdef double[::1] ext_ratio = np.ones(ext_start[n_leaves])
    with nogil:
        for v in range(n_leaves):
            k = p.leaf_node[v]
            d = p.dim[v]
            for b in range(d):
                ext_feature[ext_start_v[v] + b] = p.feature[p.fstart[v] + b]
                ext_ratio[ext_start_v[v] + b] = p.ratio[p.fstart[v] + b]
            for e in range(linear_start[k], linear_start[k + 1]):
                if entry_slot[e] >= d:
                    ext_feature[ext_start_v[v] + entry_slot[e]] = linear_feature[e]
    return np.asarray(ext_dim), ext_start, np.asarray(ext_feature), np.asarray(ext_ratio), \
        np.asarray(entry_slot)


cdef struct LinearTables:
    size_t scratch_bytes  # first (bytes_scratch): fac, prefix, others, max_dim + 1 each
    Patterns p
    const int64_t* ext_dim     # linear_slots: per leaf d', its ratios from ext_start
    const int64_t* ext_start
    const double* ext_ratio
    const int64_t* entry_slot  # per linear entry, its slot in its leaf
    const int64_t* linear_start  # leaf k's entries: linear_start[k]:linear_start[k + 1]
    const double* linear_coef    # a_lk
    const double* linear_mean    # mu_lk
    const double* leaf_const  # (n_nodes, n_values): c_l at [k * n_values]
    int64_t n_values
    Tables tables
    const double* points
    const double* weights
    int64_t m  # nodes of the Gauss rule (points, weights) on (0, 1)
    int64_t max_dim


cdef void linear_table_leaves(void* work, int64_t lo, int64_t hi, void* scratch,
                              Interrupt* stop) noexcept nogil:
    cdef LinearTables w = (<const LinearTables*> work)[0]
    cdef double* fac = <double*> scratch
    cdef double* prefix = fac + (w.max_dim + 1)
    cdef double* others = fac + 2 * (w.max_dim + 1)
    cdef int64_t i, v, k, d, dp, ne, block, A, b, c, l, e, s, e0
    cdef LinearLeaf leaf
    cdef double tl, wl, c_l, inv, a_s
    cdef const double* r
    cdef double* row
    for i in range(lo, hi):
        v = w.tables.selected[i]
        leaf = linear_leaf(&w.p, v, w.ext_dim, w.linear_start)
        k = leaf.node
        d = w.p.dim[v]
        dp = leaf.n_slots
        e0 = leaf.first
        ne = leaf.n_entries
        block = leaf.width
        r = &w.ext_ratio[w.ext_start[v]]
        c_l = w.leaf_const[k * w.n_values]
        for A in range(1 << d):
            row = &w.tables.data[w.tables.start[i] + A * block]
            for l in range(w.m):
                tl = w.points[l]
                wl = w.weights[l]
                for c in range(dp):
                    if c < d:
                        fac[c] = (1.0 - tl) * r[c] + tl * ((A >> c) & 1)
                    else:
                        fac[c] = 1.0
                # others[b] = prod_{c != b} fac[c], by prefix and suffix products
                prefix[0] = 1.0
                for c in range(dp):
                    prefix[c + 1] = prefix[c] * fac[c]
                inv = 1.0  # running suffix product
                for c in range(dp - 1, -1, -1):
                    others[c] = prefix[c] * inv
                    inv = inv * fac[c]
                for b in range(d):
                    row[b] += wl * (((A >> b) & 1) - r[b]) * others[b] * c_l
                for e in range(ne):
                    s = w.entry_slot[e0 + e]
                    a_s = ((A >> s) & 1) if s < d else 1.0
                    if a_s == 0.0:
                        continue
                    inv = 1.0 / fac[s]
                    for b in range(d):
                        if b != s:
                            row[dp + b * ne + e] += (wl * w.linear_coef[e0 + e]
                                                     * (((A >> b) & 1) - r[b])
                                                     * tl * others[b] * inv)
                    row[dp + s * ne + e] += wl * w.linear_coef[e0 + e] * others[s]
            # fold the row-independent part -mu_e of the multipliers into row 0
            for b in range(dp):
                for e in range(ne):
                    row[b] -= w.linear_mean[e0 + e] * row[dp + b * ne + e]


def linear_tables(structure, const int64_t[::1] ext_dim, const int64_t[::1] ext_start,
                  const double[::1] ext_ratio, const int64_t[::1] entry_slot,
                  const int64_t[::1] linear_start, const double[::1] linear_coef,
                  const double[::1] linear_mean, const double[:, ::1] leaf_const,
                  const int64_t[::1] leaves,
                  const int64_t[::1] table_start, const double[::1] points,
                  const double[::1] weights, int n_threads):
    """The tables of the given leaves (indices into the structure's leaf arrays);
    leaf ``leaves[i]``'s block starts at ``table_start[i]``."""
    cdef int64_t n_leaves = leaves.shape[0]
    cdef double[::1] tables = np.zeros(table_start[n_leaves] if n_leaves else 0)
    cdef LinearTables w
    if n_leaves == 0:
        return np.asarray(tables)
    max_dim = int(np.max(ext_dim)) if ext_dim.shape[0] else 1
    w = LinearTables(
        scratch_bytes=3 * (max_dim + 1) * sizeof(double), p=patterns_from(structure),
        ext_dim=&ext_dim[0], ext_start=&ext_start[0], ext_ratio=&ext_ratio[0],
        entry_slot=&entry_slot[0], linear_start=&linear_start[0], linear_coef=&linear_coef[0],
        linear_mean=&linear_mean[0], leaf_const=&leaf_const[0, 0], n_values=leaf_const.shape[1],
        tables=tables_of(leaves, table_start, tables), points=&points[0], weights=&weights[0],
        m=points.shape[0], max_dim=max_dim)
    parallel_units(n_leaves, 1, bytes_scratch, linear_table_leaves, &w, n_threads)
    return np.asarray(tables)


cdef struct LinearSums:
    Patterns p
    Rows rows
    const double* tables
    const int64_t* table_start    # by leaf
    const int64_t* ext_dim        # linear_slots: per leaf d', its features from ext_start
    const int64_t* ext_start
    const int64_t* ext_feature
    const int64_t* linear_start   # leaf k's entries, as in LinearTables
    const int64_t* linear_feature
    Outputs out


cdef void linear_block(void* work, Forest f, TreeBlock tb) noexcept nogil:
    """Add, leaf by leaf, every row's table row: per slot, the first entry
    plus the dot product of the row's x_k with the slot's entries."""
    cdef LinearSums s = (<const LinearSums*> work)[0]
    cdef double* acc = <double*> tb.scratch  # the row's multipliers x_k
    cdef int64_t o = f.tree_output[tb.t]
    cdef int64_t i, lv, v, dp, e, e0, ne, b
    cdef uint64_t A
    cdef double mult
    cdef LinearLeaf leaf
    cdef const double* row
    cdef const double* entry_row
    cdef const int64_t* feat
    cdef double* orow
    for lv in range(tb.n_leaves):
        v = tb.first_leaf + lv
        leaf = linear_leaf(&s.p, v, s.ext_dim, s.linear_start)
        dp = leaf.n_slots
        e0 = leaf.first
        ne = leaf.n_entries
        feat = &s.ext_feature[s.ext_start[v]]
        for i in range(tb.i0, tb.i1):
            A = tb.leaf_pattern[(i - tb.i0) * tb.n_leaves + lv]
            row = &s.tables[s.table_start[v] + A * leaf.width]
            orow = output_row(&s.out, i, o)
            if ne == 0:
                for b in range(dp):
                    orow[feat[b]] += row[b]
                continue
            # the multipliers x_k (0 where x does not follow k's
            # edges: the table entries are 0 there too)
            for e in range(ne):
                acc[e] = row_at(&s.rows, i)[s.linear_feature[e0 + e]]
            entry_row = row + dp
            for b in range(dp):
                mult = row[b]
                for e in range(ne):
                    mult = mult + acc[e] * entry_row[e]
                orow[feat[b]] += mult
                entry_row = entry_row + ne


def linear_pattern_values(ens, const double[:, ::1] X, structure, const int64_t[::1] trees,
                          const double[::1] tables, const int64_t[::1] table_start,
                          const int64_t[::1] ext_dim, const int64_t[::1] ext_start,
                          const int64_t[::1] ext_feature,
                          const int64_t[::1] linear_start, const int64_t[::1] linear_feature,
                          double[:, :, ::1] out, int n_threads,
                          int64_t block=256):
    """Add the tabulated values of ``trees`` for rows without NaN in any linear
    feature to ``out`` (n_rows, n_outputs, p). ``table_start`` is indexed by
    the structure's leaf index. The ensemble's cover ratios are not used:
    the rows' patterns only depend on the routing. Rows in blocks of
    ``block`` (``pattern_blocks``; one-leaf trees too: their linear terms)."""
    cdef Forest f = forest_from(ens)
    cdef LinearSums s
    cdef int64_t max_entries = (int(np.max(np.diff(linear_start)))
                                if linear_start.shape[0] > 1 else 1)
    s.p = patterns_from(structure)
    s.rows = rows_of(X)
    s.tables = &tables[0]
    s.table_start = &table_start[0]
    s.ext_dim = &ext_dim[0]
    s.ext_start = &ext_start[0]
    s.ext_feature = &ext_feature[0]
    s.linear_start = &linear_start[0]
    s.linear_feature = &linear_feature[0]
    s.out = Outputs(&out[0, 0, 0], out.shape[1], out.shape[2])
    pattern_blocks(&f, &s.p, X, trees, block, True, max_entries * sizeof(double) + 8,
                   linear_block, &s, n_threads)
