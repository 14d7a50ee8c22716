# TreeProb (treegrad-ranker Algorithm 4, Appendix D): any probabilistic value
#     phi_i = sum_{S in N \ i} w(|S|) [v_x(S + i) - v_x(S)]
# of the path-dependent game, given by its weight vector w(0..n-1).
#
# A leaf v with d distinct path features F_v contributes to feature i in F_v
#     (X_iv - R_iv) < G_v(y) / (R_iv + X_iv y), q^(d) >,
#     G_v(y) = rho_v prod_{j in F_v} (R_jv + X_jv y)
# (the paper's rho_v c_v / c_r prod (1 + gamma_j y) with gamma = X / R
# multiplied out, so no cover is divided by), where <., .> is the inner product of
# coefficient vectors and q^(d)_k = sum_{j=0}^{n-d} C(n-d, j) w(k + j) sums
# the weights over the n - d features not on the path. A null player adds a
# factor (1 + y) and leaves the value unchanged (Lemma 3:
# <p (1 + y), q^(d+1)> = <p, q^(d)>), so every leaf is padded to one degree
# M = min(depth, n) with (1 + y)^(M - d) and paired with one q^(M); then the
# leaves below an edge can be summed before the inner product is taken
# (Karczmarz et al.'s Lemma 5 as in TreeGrad: H_k sums the leaves whose
# deepest j-edge is the edge into k).
#
# Polynomials of degree <= M are encoded by their values at the M-th roots
# of unity omega_l = exp(2 pi i l / M), a Vandermonde matrix of condition
# number 1 (section 5); <p, q> = sum_l p(omega_l) Q_l with
# Q_l = (1/M) sum_c q_c conj(omega_l)^c. The coefficients are real, so the
# values at conjugate roots are conjugate: only l = 0..floor(M/2) are
# evaluated, with the factor 2 folded into Q_l, and the real part is kept.
# Not stable for large M: the padding (1 + y)^(M - d) has coefficients up to
# ~2^M / sqrt(M), and the rounding error of the decoded values grows like
# eps 2^M / M (Appendix H); the Gauss-Legendre kernel in _semivalues.pyx
# computes semivalues without this loss.
#
# Per tree and row, one pass over the nodes in preorder keeps only the
# current root-to-node path on a stack (the paper's Theta(D^2 + L) space
# remark): entering node k computes its factor R_k + X_k omega_l and the
# product of its path's factors (the factor of a repeated feature replaced,
# Algorithm 4 line 5; kept as the product of the non-zero factors and a count
# of zero factors, because R = X = 1 vanishes at omega = -1, an evaluated
# root when M is even); leaving k (once its subtree is done) credits feature
# j of the edge into k with (X_k - R_k) Re sum_l Q_l H_k(omega_l) / f_k(omega_l)
# and passes k's subtree sum to its parent and, with a minus sign, to the
# H of the edge of j above (Lemma 2 as in TreeGrad). Where X_k != R_k the
# divisor f_k is never 0 on the unit circle (X in {0, 1}, R >= 0).
import numpy as np

from libc.stdint cimport int64_t, uint8_t

from ._common cimport (
    Buffers, Outputs, Rows, output_row, parallel_units, row_at, rows_of, take, take_each,
)
from ._forest cimport Forest, Interrupt, forest_from, path_factors


cdef struct ProbScratch:
    double* ratio_prod             # R_k, per node
    double* follow_prod            # X_k, per node
    uint8_t* left_taken            # whether x goes left, per node
    int64_t* level                 # depth of every node of the tree
    # the stack: one entry per depth of the current path
    int64_t* node                  # (depth + 1)
    int64_t* distinct              # distinct features on the path to the entry's node
    double complex* factor         # R + X omega_l, (depth + 1, m)
    double complex* inverse        # 1 / (R + X omega_l), 0 where the factor is 0
    double complex* nonzero_prod   # product of the path's non-zero factors, (depth + 1, m)
    int64_t* zeros                 # number of zero factors on the path, (depth + 1, m)
    double complex* subtree        # sum of padded leaf terms below, (depth + 1, m, n_values)
    double complex* deepest        # H minus the subtree, (depth + 1, m, n_values)


cdef void* prob_scratch(void* work, Buffers* mem) noexcept nogil:
    """A ProbScratch for the sizes of a ProbSums (its first field)."""
    cdef const ProbSize* size = <const ProbSize*> work
    cdef int64_t n = size.n_nodes, levels = size.depth + 1, m = size.m
    cdef ProbScratch* sc = <ProbScratch*> take(mem, sizeof(ProbScratch))
    if sc == NULL:
        return NULL
    take_each(mem, n, &sc.ratio_prod, &sc.follow_prod)
    take_each(mem, n, &sc.left_taken)
    take_each(mem, n, &sc.level)
    take_each(mem, levels, &sc.node, &sc.distinct)
    take_each(mem, levels * m, &sc.factor, &sc.inverse, &sc.nonzero_prod)
    take_each(mem, levels * m, &sc.zeros)
    take_each(mem, levels * m * size.n_values, &sc.subtree, &sc.deepest)
    return sc


cdef inline double complex reciprocal(double complex z) noexcept nogil:
    """1 / z (0 for z = 0) with one real division; C's complex division
    (which rescales against overflow) only where |z|^2 would underflow."""
    cdef double norm = z.real * z.real + z.imag * z.imag
    if norm > 1e-280:
        return z.conjugate() * (1.0 / norm)
    if z == 0.0:
        return 0.0
    return 1.0 / z


cdef inline void leave(
    const Forest* f, int64_t t, int64_t top, int64_t m,
    const double complex* weights, ProbScratch* sc, double* out,
) noexcept nogil:
    """Credit the edge into the node at stack level ``top`` (>= 1) and pass
    its subtree sum up (lines 13-18)."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t W = f.n_values
    cdef int64_t kk = sc.node[top]
    cdef int64_t k = start + kk
    cdef int64_t q = f.prev_same[k]
    cdef int64_t j = f.feature[f.parent[k]]
    cdef double d = sc.follow_prod[kk] - sc.ratio_prod[kk]
    cdef int64_t a = top * m * W
    cdef int64_t b = (top - 1) * m * W
    cdef int64_t c = sc.level[q - start] * m * W if q >= 0 else 0
    cdef int64_t l, w, o
    cdef double complex acc, s
    for w in range(W):
        acc = 0.0
        for l in range(m):
            s = sc.subtree[a + l * W + w]
            if d != 0.0:  # then f_k(omega_l) != 0
                acc = acc + weights[l] * (sc.deepest[a + l * W + w] + s) * sc.inverse[top * m + l]
            sc.subtree[b + l * W + w] = sc.subtree[b + l * W + w] + s
            if q >= 0:
                sc.deepest[c + l * W + w] = sc.deepest[c + l * W + w] - s
        o = f.tree_output[t] if W == 1 else w
        out[o * f.n_features + j] += d * acc.real


cdef void tree_probabilistic(
    const Forest* f, int64_t t, const double* x, int64_t M,
    const double complex* points, const double complex* weights, const double complex* pad,
    ProbScratch* sc, double* out,
) noexcept nogil:
    """Add tree ``t``'s probabilistic values of row ``x`` to ``out`` (n_outputs, p).

    ``points`` / ``weights``: the m = M // 2 + 1 roots of unity evaluated and
    their decoding weights Q_l; ``pad`` (m, M + 1): (1 + omega_l)^e.
    """
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t W = f.n_values
    cdef int64_t m = M // 2 + 1
    cdef int64_t kk, k, q, l, w, a, zeros, e, top, dep, up, prev
    cdef double rk, xk
    cdef double complex fk, prod
    if n == 1:
        return
    path_factors(f, t, x, sc.left_taken, sc.ratio_prod, sc.follow_prod)
    sc.level[0] = 0
    sc.node[0] = 0
    sc.distinct[0] = 0
    for l in range(m):
        sc.nonzero_prod[l] = 1.0
        sc.zeros[l] = 0
    for l in range(m * W):
        sc.subtree[l] = 0.0
        sc.deepest[l] = 0.0
    top = 0
    for kk in range(1, n):
        k = start + kk
        dep = sc.level[f.parent[k] - start] + 1
        sc.level[kk] = dep
        while top >= dep:  # the subtrees of the deeper nodes on the stack are done
            leave(f, t, top, m, weights, sc, out)
            top = top - 1
        # enter k: the (padded) polynomial of its path at the roots of unity
        up = dep - 1
        q = f.prev_same[k]
        prev = sc.level[q - start] if q >= 0 else 0
        rk = sc.ratio_prod[kk]
        xk = sc.follow_prod[kk]
        sc.node[dep] = kk
        sc.distinct[dep] = sc.distinct[up] + (1 if q < 0 else 0)
        for l in range(m):
            fk = rk + xk * points[l]
            sc.factor[dep * m + l] = fk
            sc.inverse[dep * m + l] = reciprocal(fk)
            prod = sc.nonzero_prod[up * m + l]
            zeros = sc.zeros[up * m + l]
            if q >= 0:  # p(y) / (R_q + X_q y) * (R_k + X_k y), Algorithm 4 line 5
                if sc.factor[prev * m + l] == 0.0:
                    zeros = zeros - 1
                else:
                    prod = prod * sc.inverse[prev * m + l]
            if fk == 0.0:
                zeros = zeros + 1
            else:
                prod = prod * fk
            sc.nonzero_prod[dep * m + l] = prod
            sc.zeros[dep * m + l] = zeros
        a = dep * m * W
        if f.left[k] < 0:  # a leaf: rho_v G_v (1 + y)^(M - d), line 10
            e = M - sc.distinct[dep]
            for l in range(m):
                if sc.zeros[dep * m + l] == 0:
                    prod = sc.nonzero_prod[dep * m + l] * pad[l * (M + 1) + e]
                else:
                    prod = 0.0
                for w in range(W):
                    sc.subtree[a + l * W + w] = f.value[k * W + w] * prod
                    sc.deepest[a + l * W + w] = 0.0
        else:
            for l in range(m * W):
                sc.subtree[a + l] = 0.0
                sc.deepest[a + l] = 0.0
        top = dep
    while top >= 1:
        leave(f, t, top, m, weights, sc, out)
        top = top - 1


def tree_depths(ens):
    """The depth (edges on the longest root-to-leaf path) of every tree."""
    cdef Forest f = forest_from(ens)
    cdef int64_t[::1] depth = np.zeros(f.n_nodes, dtype=np.int64)
    cdef int64_t[::1] tree_depth = np.zeros(f.n_trees, dtype=np.int64)
    cdef int64_t k, t
    with nogil:
        for k in range(f.n_nodes):  # parents come before their children
            if f.parent[k] >= 0:
                depth[k] = depth[f.parent[k]] + 1
        for t in range(f.n_trees):
            for k in range(f.tree_start[t], f.tree_start[t + 1]):
                if depth[k] > tree_depth[t]:
                    tree_depth[t] = depth[k]
    return np.asarray(tree_depth)


def reduce_weights(weights, M):
    """q^(M)_k = sum_{j=0}^{n-M} C(n-M, j) w(k + j), k < M (Lemma 3 applied
    n - M times: q^(d)_k = q^(d+1)_k + q^(d+1)_(k+1); sums of the weights,
    no cancellation for non-negative ones)."""
    q = np.asarray(weights, dtype=np.float64)
    for _ in range(len(q) - M):
        q = q[:len(q) - 1] + q[1:]
    return q


def encoding(q):
    """Roots of unity, decoding weights and padding powers for q = q^(M).

    Returns ``points`` (m,), ``weights`` (m,) and ``pad`` (m, M + 1) for
    l = 0..M // 2: omega_l, Q_l (times 2 where omega_l is not real) and
    (1 + omega_l)^e.
    """
    M = len(q)
    m = M // 2 + 1
    l = np.arange(m)
    points = np.exp(2j * np.pi * l / M)
    if M % 2 == 0:
        points[M // 2] = -1.0  # exactly: R = X = 1 gives a factor that is exactly 0 there
    # Q_l = (1/M) sum_c q_c conj(omega_l)^c, with the exponent c l reduced mod M
    c = np.arange(M)
    Q = (np.exp(-2j * np.pi * ((np.outer(l, c) % M) / M)) @ q) / M
    Q[1:] *= 2.0
    if M % 2 == 0:
        Q[M // 2] /= 2.0
    pad = np.ones((m, M + 1), dtype=np.complex128)
    for e in range(1, M + 1):
        pad[:, e] = pad[:, e - 1] * (1.0 + points)
    return points, Q, pad


cdef struct ProbSize:
    int64_t n_nodes
    int64_t depth
    int64_t m
    int64_t n_values


cdef struct ProbSums:
    ProbSize size  # first: prob_scratch reads it
    Forest f
    Rows rows
    const int64_t* trees        # those with M_t > 0, in order
    int64_t n_trees
    const int64_t* tree_m       # M_t, per tree; tree t's encoding (encoding(q^(M_t))):
    const int64_t* point_start  # its points and weights from point_start[t],
    const int64_t* pad_start    # its pad from pad_start[t]
    const double complex* points
    const double complex* weights
    const double complex* pad
    Outputs out


cdef void prob_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                    Interrupt* stop) noexcept nogil:
    cdef ProbSums w = (<const ProbSums*> work)[0]
    cdef ProbScratch sc = (<ProbScratch*> scratch)[0]  # a copy: see the driver
    cdef int64_t i, ti, t
    for i in range(lo, hi):
        for ti in range(w.n_trees):
            t = w.trees[ti]
            tree_probabilistic(&w.f, t, row_at(&w.rows, i), w.tree_m[t],
                               &w.points[w.point_start[t]], &w.weights[w.point_start[t]],
                               &w.pad[w.pad_start[t]], &sc, output_row(&w.out, i, 0))


def treeprob(ens, const double[:, ::1] X, weights, double[:, :, ::1] out, int n_threads,
             trees=None):
    """Add the probabilistic values with weights w(0..n-1) of every row to
    ``out`` (n_rows, n_outputs, n_features), tree t encoded with
    M_t = min(depth_t, n) roots of unity; only the trees listed in ``trees``
    (all by default). The game has n = len(weights) players, the nodes'
    ``feature`` 0..n-1: the features, or fewer players (feature groups,
    ``TreeEnsemble.with_players``; the other columns of ``out`` stay 0)."""
    cdef Forest f = forest_from(ens)
    cdef Py_ssize_t n_rows = X.shape[0]
    n = len(weights)
    depths = tree_depths(ens)
    tree_m_np = np.minimum(depths, n).astype(np.int64)
    if trees is not None:
        keep = np.zeros(len(tree_m_np), dtype=bool)
        keep[np.asarray(trees, dtype=np.int64)] = True
        tree_m_np[~keep] = 0  # skipped below
    sizes = sorted(set(int(M) for M in tree_m_np if M > 0))
    point_parts, weight_parts, pad_parts = [], [], []
    point_at, pad_at = {}, {}
    n_points = n_pad = 0
    for M in sizes:
        points, Q, pad = encoding(reduce_weights(weights, M))
        point_at[M], pad_at[M] = n_points, n_pad
        point_parts.append(points)
        weight_parts.append(Q)
        pad_parts.append(pad.ravel())
        n_points += len(points)
        n_pad += pad.size
    cdef int64_t[::1] tree_m = tree_m_np
    cdef int64_t[::1] point_start = np.array(
        [point_at.get(int(M), 0) for M in tree_m_np], dtype=np.int64).reshape(-1)
    cdef int64_t[::1] pad_start = np.array(
        [pad_at.get(int(M), 0) for M in tree_m_np], dtype=np.int64).reshape(-1)
    cdef const double complex[::1] points_v = np.concatenate(
        point_parts or [np.ones(1, np.complex128)]).astype(np.complex128)
    cdef const double complex[::1] weights_v = np.concatenate(
        weight_parts or [np.ones(1, np.complex128)]).astype(np.complex128)
    cdef const double complex[::1] pad_v = np.concatenate(
        pad_parts or [np.ones(1, np.complex128)]).astype(np.complex128)
    cdef int64_t m_max = max(sizes) // 2 + 1 if sizes else 1
    cdef int64_t max_depth = int(depths.max(initial=0))
    cdef ProbSums w
    cdef const int64_t[::1] listed
    if n_rows == 0 or not sizes:
        return
    listed = np.flatnonzero(tree_m_np > 0).astype(np.int64)
    w = ProbSums(size=ProbSize(n_nodes=f.max_tree_nodes, depth=max_depth, m=m_max,
                               n_values=f.n_values),
                 f=f, rows=rows_of(X), trees=&listed[0], n_trees=listed.shape[0],
                 tree_m=&tree_m[0],
                 point_start=&point_start[0], pad_start=&pad_start[0], points=&points_v[0],
                 weights=&weights_v[0], pad=&pad_v[0],
                 out=Outputs(&out[0, 0, 0], out.shape[1], out.shape[2]))
    parallel_units(n_rows, 8, prob_scratch, prob_rows, &w, n_threads)
