# Semivalues of the path-dependent game of each row (DESIGN.md s.2) through
# TreeGrad: the gradient of the multilinear extension
#     F(z) = sum_leaves rho_v prod_{j on path} ((1 - z_j) R_jv + z_j X_jv)
# (R_jv: product of the cover ratios of the path's j-edges, X_jv: 1 if x
# follows all of them, else 0; this is TreeGrad's factor 1 - z + z*gamma
# times R, so no cover is ever divided by). Shapley and Beta Shapley values
# are integrals of grad F(t 1) against a Beta density, computed exactly with
# Gauss-Legendre nodes (TreeGrad-Shap, Algorithms 7-8); weighted Banzhaf is
# grad F(q 1) (one node).
#
# Per tree and row: a down pass computes every node's factor f_k(t) and the
# product s_k(t) of the factors on its path, replacing the factor of a
# repeated feature (Algorithm 9, lines 4-7); an up pass sums leaf terms into
# H_k, the leaves whose deepest j-edge is the edge into k (Lemma 2), and
# credits feature j with (X_k - R_k) * sum_t w_t H_k(t) / f_k(t).
import numpy as np

from cython.parallel cimport parallel, prange
from libc.stdint cimport int64_t
from libc.stdlib cimport malloc, free

from ._forest cimport Forest, forest_from, next_node


cdef Scratch scratch_alloc(int64_t n_nodes, int64_t m, int64_t n_values) noexcept nogil:
    cdef Scratch sc
    sc.ratio_prod = <double*> malloc(n_nodes * sizeof(double))
    sc.follow_prod = <double*> malloc(n_nodes * sizeof(double))
    sc.factor = <double*> malloc(n_nodes * m * sizeof(double))
    sc.path_prod = <double*> malloc(n_nodes * m * sizeof(double))
    sc.subtree = <double*> malloc(n_nodes * m * n_values * sizeof(double))
    sc.deepest = <double*> malloc(n_nodes * m * n_values * sizeof(double))
    sc.chosen = <int64_t*> malloc(n_nodes * sizeof(int64_t))
    return sc


cdef bint scratch_failed(const Scratch* sc) noexcept nogil:
    return (sc.ratio_prod == NULL or sc.follow_prod == NULL or sc.factor == NULL
            or sc.path_prod == NULL or sc.subtree == NULL or sc.deepest == NULL
            or sc.chosen == NULL)


cdef void scratch_free(Scratch* sc) noexcept nogil:
    free(sc.ratio_prod)
    free(sc.follow_prod)
    free(sc.factor)
    free(sc.path_prod)
    free(sc.subtree)
    free(sc.deepest)
    free(sc.chosen)


cdef void tree_gradient_uniform(
    const Forest* f, int64_t t, const double* x,
    const double* points, const double* weights, int64_t m,
    Scratch* sc, double* out,
) noexcept nogil:
    """Add sum_l weights[l] * grad F_t(points[l] * 1) to ``out`` (n_outputs, p)."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t W = f.n_values
    cdef int64_t kk, k, pl, ql, q, l, w, a, b, o, j
    cdef double rk, xk, fk, fq, d, acc, leaf_value
    if n == 1:
        return
    for l in range(m):
        sc.path_prod[l] = 1.0
    for kk in range(n):
        k = start + kk
        if kk > 0:
            pl = f.parent[k] - start
            q = f.prev_same[k]
            rk = f.ratio[k]
            xk = 1.0 if sc.chosen[pl] == k else 0.0
            if q >= 0:
                ql = q - start
                rk = rk * sc.ratio_prod[ql]
                xk = xk * sc.follow_prod[ql]
            sc.ratio_prod[kk] = rk
            sc.follow_prod[kk] = xk
            for l in range(m):
                fk = rk + points[l] * (xk - rk)
                sc.factor[kk * m + l] = fk
                if q >= 0:
                    fq = sc.factor[ql * m + l]
                    # f_q = 0 only where R = X = 0, which stays 0 below.
                    sc.path_prod[kk * m + l] = sc.path_prod[pl * m + l] * fk / fq if fq != 0.0 else 0.0
                else:
                    sc.path_prod[kk * m + l] = sc.path_prod[pl * m + l] * fk
        a = kk * m * W
        if f.left[k] >= 0:
            sc.chosen[kk] = next_node(f, k, x)
            for l in range(m * W):
                sc.subtree[a + l] = 0.0
                sc.deepest[a + l] = 0.0
        else:
            for l in range(m):
                for w in range(W):
                    sc.subtree[a + l * W + w] = f.value[k * W + w] * sc.path_prod[kk * m + l]
                    sc.deepest[a + l * W + w] = 0.0
    for kk in range(n - 1, 0, -1):
        k = start + kk
        pl = f.parent[k] - start
        q = f.prev_same[k]
        d = sc.follow_prod[kk] - sc.ratio_prod[kk]
        j = f.feature[f.parent[k]]
        a = kk * m * W
        b = pl * m * W
        for w in range(W):
            acc = 0.0
            for l in range(m):
                fk = sc.factor[kk * m + l]
                if fk != 0.0:
                    acc = acc + weights[l] * (sc.deepest[a + l * W + w] + sc.subtree[a + l * W + w]) / fk
                sc.subtree[b + l * W + w] += sc.subtree[a + l * W + w]
                if q >= 0:
                    sc.deepest[(q - start) * m * W + l * W + w] -= sc.subtree[a + l * W + w]
            o = f.tree_output[t] if W == 1 else w
            out[o * f.n_features + j] += d * acc


def semivalues_uniform(ens, const double[:, ::1] X, const double[::1] points,
                       const double[::1] weights, int n_threads):
    """sum_l weights[l] * grad F_x(points[l] * 1) for every row.

    Returns shape (n_rows, n_outputs, n_features). With Gauss-Legendre nodes
    and Beta-density weights this is the Beta Shapley value (Shapley for
    (1, 1)); with one point q and weight 1 the weighted Banzhaf value.
    """
    cdef Forest f = forest_from(ens)
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef int64_t m = points.shape[0]
    cdef double[:, :, ::1] out = np.zeros((n_rows, f.n_outputs, f.n_features))
    cdef Py_ssize_t i
    cdef int64_t t
    cdef Scratch sc
    cdef int[::1] failed = np.zeros(1, dtype=np.intc)
    if n_rows == 0:
        return np.asarray(out)
    with nogil, parallel(num_threads=n_threads):
        # assigned inside the block, so each thread has its own scratch
        sc = scratch_alloc(f.max_tree_nodes, m, f.n_values)
        if scratch_failed(&sc):
            failed[0] = 1
        for i in prange(n_rows, schedule="dynamic", chunksize=16):
            if failed[0]:
                continue
            for t in range(f.n_trees):
                tree_gradient_uniform(&f, t, &X[i, 0], &points[0], &weights[0], m,
                                      &sc, &out[i, 0, 0])
        scratch_free(&sc)
    if failed[0]:
        raise MemoryError("could not allocate the kernel's per-thread scratch space")
    return np.asarray(out)
