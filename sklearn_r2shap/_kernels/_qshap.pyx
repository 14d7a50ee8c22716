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
# "Computation: squared games by quadrature"). Pairs are grouped by their
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
# ensemble's d (leaf-wise LightGBM trees; deep trees on few features).
#
# Per row i and tree k the kernel adds  a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i)
# for coefficients computed outside (importance.py). For the squared error,
# a = w_i and b = -2 w_i c_ik where c_ik is the residual before tree k
# (sequential, boosting) or r_sym,k + v^k(empty) (symmetric, averaging
# ensembles; Sh[(m - c)^2] = Sh[m^2] - 2 c Sh[m] for a constant c).
import numpy as np

from cython.parallel cimport parallel, prange
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free

from ._forest cimport (
    Forest, forest_from, next_node, Interrupt, interrupt_new, interrupted, interrupt_raise,
)
from ._semivalues cimport (
    Scratch, scratch_alloc, scratch_failed, scratch_free, tree_gradient_uniform,
)


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


cdef PairScratch pair_alloc(int64_t n_features, int64_t n_slots, int64_t m) noexcept nogil:
    cdef PairScratch ps
    cdef int64_t j
    ps.slot_of = <int64_t*> malloc(n_features * sizeof(int64_t))
    ps.slot_feature = <int64_t*> malloc(n_slots * sizeof(int64_t))
    ps.r1 = <double*> malloc(n_slots * sizeof(double))
    ps.x1 = <double*> malloc(n_slots * sizeof(double))
    ps.prefix_r = <double*> malloc(n_slots * sizeof(double))
    ps.prefix_x = <double*> malloc(n_slots * sizeof(double))
    ps.base_r = <double*> malloc(n_slots * sizeof(double))
    ps.base_x = <double*> malloc(n_slots * sizeof(double))
    ps.base_factor = <double*> malloc(n_slots * m * sizeof(double))
    ps.excluded = <double*> malloc(n_slots * m * sizeof(double))
    ps.product = <double*> malloc(m * sizeof(double))
    ps.weights = <double*> malloc(m * sizeof(double))
    if ps.slot_of != NULL:
        for j in range(n_features):
            ps.slot_of[j] = -1
    return ps


cdef bint pair_failed(const PairScratch* ps) noexcept nogil:
    return (ps.slot_of == NULL or ps.slot_feature == NULL or ps.r1 == NULL or ps.x1 == NULL
            or ps.prefix_r == NULL or ps.prefix_x == NULL or ps.base_r == NULL
            or ps.base_x == NULL or ps.base_factor == NULL or ps.excluded == NULL
            or ps.product == NULL or ps.weights == NULL)


cdef void pair_free(PairScratch* ps) noexcept nogil:
    free(ps.slot_of)
    free(ps.slot_feature)
    free(ps.r1)
    free(ps.x1)
    free(ps.prefix_r)
    free(ps.prefix_x)
    free(ps.base_r)
    free(ps.base_x)
    free(ps.base_factor)
    free(ps.excluded)
    free(ps.product)
    free(ps.weights)


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
            j = f.feature[f.parent[k]]
            sl = ps.slot_of[j]
            r1 = ps.r1[sl] if sl >= 0 else 1.0
            x1 = ps.x1[sl] if sl >= 0 else 1.0
            q = f.prev_same[k] - start if f.prev_same[k] >= 0 else -1
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
        sl = ps.slot_of[j]
        r1 = ps.r1[sl] if sl >= 0 else 1.0
        x1 = ps.x1[sl] if sl >= 0 else 1.0
        q = f.prev_same[k] - start if f.prev_same[k] >= 0 else -1
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


def tree_rule_sizes(ens):
    """n_t = min(d_t, ceil(F_t / 2)) per tree: the Gauss-Legendre nodes exact
    for tree t's games (module comment); at least 1."""
    d = tree_path_features(ens)
    internal = np.asarray(ens.children_left) >= 0
    tree_of = np.repeat(np.arange(len(d)), np.diff(ens.tree_start))
    pairs = np.unique(np.stack([tree_of[internal], np.asarray(ens.feature)[internal]]), axis=1)
    n_features = np.bincount(pairs[0], minlength=len(d))
    return np.maximum(1, np.minimum(d, (n_features + 1) // 2))


def _tree_rules(ens, points, weights):
    """Per tree, the number of nodes and the rows (padded to len(points)) of
    the quadrature rule it uses: its own Gauss-Legendre rule (tree_rule_sizes,
    at most len(points)) when the given one is the Gauss-Legendre rule on
    [0, 1], else the given rule."""
    from ..explain import _gauss_legendre

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
        tree_m = np.clip(tree_rule_sizes(ens), 1, m)
    return tree_m, rule_points, rule_weights


def r2_terms(ens, const double[:, ::1] X, const double[:, ::1] square_coef,
             const double[:, ::1] linear_coef, const double[::1] points,
             const double[::1] weights, int n_threads):
    """Per-row, per-feature  sum_k a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i).

    ``square_coef`` (a) and ``linear_coef`` (b) have shape (n_rows, n_trees);
    a tree whose two coefficients are 0 for a row is skipped for that row.
    The squared-error game of tree k against a constant c_ik with weight w_i
    is a = w_i, b = -2 w_i c_ik (module doc); a second-order loss game is
    a = w_i h_ik / 2, b = w_i g_ik. Shape (n_rows, n_features).

    ``points``, ``weights``: a quadrature rule on [0, 1] exact for the
    ensemble's games (Gauss-Legendre with ``n_path_features`` nodes). When
    it is that Gauss-Legendre rule, each tree uses the smaller Gauss-Legendre
    rule exact for its own games instead (``tree_rule_sizes``; the same
    values up to rounding); any other rule is used as given.
    """
    cdef Forest f = forest_from(ens)
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef int64_t m = points.shape[0]
    cdef int64_t n_slots = max(1, min(ens.max_depth, f.n_features))
    cdef double[:, ::1] out = np.zeros((n_rows, f.n_features))
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    cdef Interrupt stop = interrupt_new()
    cdef Py_ssize_t i
    cdef int64_t t, l, mt
    cdef const int64_t[::1] tree_m
    cdef const double[:, ::1] rule_points
    cdef const double[:, ::1] rule_weights
    cdef Scratch sc
    cdef PairScratch ps
    if f.n_values != 1:
        raise ValueError("the R^2 decomposition needs one value per leaf")
    if np.any(np.asarray(ens.tree_output) != 0):
        # the shared up pass credits output tree_output[t]; out has one output
        raise ValueError("the R^2 kernel needs every tree to write to output 0 (the game "
                         "coefficients carry the class)")
    if square_coef.shape[0] != n_rows or square_coef.shape[1] != f.n_trees or \
            linear_coef.shape[0] != n_rows or linear_coef.shape[1] != f.n_trees:
        raise ValueError("game coefficients must have shape (n_rows, n_trees)")
    if n_rows == 0:
        return np.asarray(out)
    tree_m, rule_points, rule_weights = _tree_rules(ens, np.asarray(points), np.asarray(weights))
    with nogil, parallel(num_threads=n_threads):
        sc = scratch_alloc(f.max_tree_nodes, m, 1)
        ps = pair_alloc(f.n_features, n_slots, m)
        if scratch_failed(&sc) or pair_failed(&ps):
            failed[0] = 1
        for i in prange(n_rows, schedule="dynamic", chunksize=4):
            if failed[0] or interrupted(&stop):
                continue
            for t in range(f.n_trees):
                if interrupted(&stop):
                    break
                if square_coef[i, t] == 0.0 and linear_coef[i, t] == 0.0:
                    continue
                mt = tree_m[t]
                for l in range(mt):
                    ps.weights[l] = linear_coef[i, t] * rule_weights[mt - 1, l]
                tree_gradient_uniform(&f, t, &X[i, 0], &rule_points[mt - 1, 0], ps.weights, mt,
                                      &sc, &out[i, 0])
                tree_square_gradient(&f, t, &rule_points[mt - 1, 0], &rule_weights[mt - 1, 0],
                                     mt, square_coef[i, t], &sc, &ps, &out[i, 0])
        scratch_free(&sc)
        pair_free(&ps)
    interrupt_raise(&stop)
    if failed[0]:
        raise MemoryError("could not allocate the kernel's per-thread scratch space")
    return np.asarray(out)
