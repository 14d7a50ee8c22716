# Semivalues of the path-dependent game of each row (doc/local_attributions.rst) through
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

from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t
from libc.math cimport sqrt, isnan, INFINITY, NAN

from ._common cimport (
    Buffers, Outputs, Rows, Rules, Tables, bytes_scratch, output_row, parallel_units, row_at,
    rows_of, rules_of, tables_of, take, take_each, widest,
)
from ._forest cimport (
    DECISION_LEQ, DECISION_LT, Forest, Interrupt, Patterns, forest_from, goes_left, path_factors,
    patterns_from,
)


cdef Scratch* scratch_take(Buffers* mem, int64_t n_nodes, int64_t m,
                           int64_t n_values) noexcept nogil:
    """A Scratch and its arrays, taken from ``mem`` (NULL, ``mem`` failed, if not)."""
    cdef Scratch* sc = <Scratch*> take(mem, sizeof(Scratch))
    if sc == NULL:
        return NULL
    take_each(mem, n_nodes, &sc.ratio_prod, &sc.follow_prod)
    take_each(mem, n_nodes * m, &sc.factor, &sc.inv_factor, &sc.path_prod)
    take_each(mem, n_nodes * m * n_values, &sc.subtree, &sc.deepest)
    take_each(mem, n_nodes, &sc.left_taken)
    return sc


cdef void* gradient_scratch(void* work, Buffers* mem) noexcept nogil:
    cdef const ScratchSize* size = <const ScratchSize*> work
    return scratch_take(mem, size.n_nodes, size.m, size.n_values)


cdef void gradient_up_pass(
    const Forest* f, int64_t t, int64_t m, const double* weights,
    const double* ratio_prod, const double* follow_prod, const double* inv_factor,
    double* subtree, double* deepest, double* out,
) noexcept nogil:
    """The up pass of tree ``t`` (Lemma 2): with the leaf terms of every node
    in ``subtree`` (nodes, m, n_values) and ``deepest`` zeroed, add
    (X_k - R_k) sum_l weights[l] H_k(t_l) / f_k(t_l) to the feature of every
    edge k in ``out`` (n_outputs, p)."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t W = f.n_values
    cdef int64_t kk, k, pl, q, l, w, a, b, j, o
    cdef double d, acc
    for kk in range(n - 1, 0, -1):
        k = start + kk
        pl = f.parent[k] - start
        q = f.prev_same[k]
        d = follow_prod[kk] - ratio_prod[kk]
        j = f.feature[f.parent[k]]
        a = kk * m * W
        b = pl * m * W
        for w in range(W):
            acc = 0.0
            for l in range(m):
                acc = acc + (weights[l] * (deepest[a + l * W + w] + subtree[a + l * W + w])
                             * inv_factor[kk * m + l])
                subtree[b + l * W + w] += subtree[a + l * W + w]
                if q >= 0:
                    deepest[(q - start) * m * W + l * W + w] -= subtree[a + l * W + w]
            o = f.tree_output[t] if W == 1 else w
            out[o * f.n_features + j] += d * acc


cdef void gradient_down_pass(
    const Forest* f, int64_t t, const double* points, int64_t m,
    const double* ratio_prod, const double* follow_prod,
    double* factor, double* inv_factor, double* path_prod,
) noexcept nogil:
    """The down pass of tree ``t`` (Algorithm 9, lines 4-7) at every point
    t_l: the factor f_k, its inverse and the path product s_k of every node
    (nodes, m); the root's are 1."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t kk, k, pl, ql, q, l
    cdef double rk, xk, fk
    for l in range(m):
        path_prod[l] = 1.0
        factor[l] = 1.0
        inv_factor[l] = 1.0
    for kk in range(1, n):
        k = start + kk
        pl = f.parent[k] - start
        q = f.prev_same[k]
        rk = ratio_prod[kk]
        xk = follow_prod[kk]
        for l in range(m):
            fk = rk + points[l] * (xk - rk)
            factor[kk * m + l] = fk
            # f_k = 0 only where R = X = 0: the factor vanishes for every t
            inv_factor[kk * m + l] = 1.0 / fk if fk != 0.0 else 0.0
            path_prod[kk * m + l] = path_prod[pl * m + l] * fk
        if q >= 0:  # replace the factor of the feature's earlier edge
            ql = q - start
            for l in range(m):
                path_prod[kk * m + l] = path_prod[kk * m + l] * inv_factor[ql * m + l]


cdef void tree_gradient_uniform(
    const Forest* f, int64_t t, const double* x,
    const double* points, const double* weights, int64_t m,
    Scratch* sc, double* out,
) noexcept nogil:
    """Add sum_l weights[l] * grad F_t(points[l] * 1) to ``out`` (n_outputs, p)."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t W = f.n_values
    cdef int64_t kk, k, l, w, a
    if n == 1:
        return
    path_factors(f, t, x, sc.left_taken, sc.ratio_prod, sc.follow_prod)
    gradient_down_pass(f, t, points, m, sc.ratio_prod, sc.follow_prod, sc.factor,
                       sc.inv_factor, sc.path_prod)
    # leaf terms rho_k s_k (internal nodes hold value 0, TreeEnsemble.from_trees)
    for kk in range(n):
        k = start + kk
        a = kk * m * W
        for l in range(m):
            for w in range(W):
                sc.subtree[a + l * W + w] = f.value[k * W + w] * sc.path_prod[kk * m + l]
                sc.deepest[a + l * W + w] = 0.0
    gradient_up_pass(f, t, m, weights, sc.ratio_prod, sc.follow_prod, sc.inv_factor,
                     sc.subtree, sc.deepest, out)


cdef RuleSums rule_sums(ens, const double[:, ::1] X, const double[::1] points,
                        const double[::1] weights, const int64_t[::1] trees,
                        double[:, :, ::1] out):
    """The work of a quadrature over whole trees, row by row."""
    cdef RuleSums w
    w.f = forest_from(ens)
    w.size = ScratchSize(n_nodes=w.f.max_tree_nodes, m=points.shape[0], n_values=w.f.n_values)
    w.rows = rows_of(X)
    w.points = &points[0]
    w.weights = &weights[0]
    w.trees = &trees[0]
    w.n_trees = trees.shape[0]
    w.out = Outputs(&out[0, 0, 0], out.shape[1], out.shape[2])
    return w


cdef void uniform_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                       Interrupt* stop) noexcept nogil:
    cdef RuleSums w = (<const RuleSums*> work)[0]
    cdef Scratch sc = (<Scratch*> scratch)[0]  # a copy: see the driver
    cdef int64_t i, t
    for i in range(lo, hi):
        for t in range(w.n_trees):
            tree_gradient_uniform(&w.f, w.trees[t], row_at(&w.rows, i), w.points, w.weights,
                                  w.size.m, &sc, output_row(&w.out, i, 0))


def semivalues_uniform(ens, const double[:, ::1] X, const double[::1] points,
                       const double[::1] weights, const int64_t[::1] trees,
                       double[:, :, ::1] out, int n_threads):
    """Add sum_l weights[l] * grad F_x(points[l] * 1) of the given trees to ``out``.

    ``out`` has shape (n_rows, n_outputs, n_features). With Gauss-Legendre
    nodes and Beta-density weights this is the Beta Shapley value (Shapley
    for (1, 1)); with one point q and weight 1 the weighted Banzhaf value.
    """
    cdef RuleSums w
    if X.shape[0] == 0 or trees.shape[0] == 0:
        return
    w = rule_sums(ens, X, points, weights, trees, out)
    parallel_units(X.shape[0], 16, gradient_scratch, uniform_rows, &w, n_threads)


# Quadrature over part of a tree. grad F_t is a sum over the tree's leaves
# (header), so its leaves can be split between the pattern tables below and
# this kernel, which walks only the nodes on the paths to its own leaves (a
# rooted part of the tree, in preorder) with a Gauss rule exact for the most
# distinct features d on those paths (degree d - 1): the nodes of a part
# hold the terms of its leaves only, and the down and up passes above run
# unchanged on them.

def part_nodes(ens, const uint8_t[::1] keep_leaf):
    """The parts of the trees spanned by the leaves with ``keep_leaf`` set
    (per node): per tree, the nodes on a path to such a leaf, in preorder.

    Returns ``start`` (n_trees + 1) and, per node of a part, ``node``
    (global index), ``parent`` and ``prev`` (positions in the tree's part of
    the parent and of ``prev_same``; -1 for none).
    """
    cdef Forest f = forest_from(ens)
    cdef uint8_t[::1] keep = np.array(keep_leaf, dtype=np.uint8, copy=True)
    cdef int64_t[::1] position = np.full(f.n_nodes, -1, dtype=np.int64)
    cdef int64_t[::1] start = np.zeros(f.n_trees + 1, dtype=np.int64)
    cdef int64_t k, t, count = 0, q
    with nogil:
        for k in range(f.n_nodes - 1, -1, -1):  # preorder: children after parents
            if keep[k] and f.parent[k] >= 0:
                keep[f.parent[k]] = 1
        for t in range(f.n_trees):
            start[t] = count
            for k in range(f.tree_start[t], f.tree_start[t + 1]):
                if keep[k]:
                    position[k] = count - start[t]
                    count += 1
        start[f.n_trees] = count
    cdef int64_t[::1] node = np.empty(count, dtype=np.int64)
    cdef int64_t[::1] parent = np.empty(count, dtype=np.int64)
    cdef int64_t[::1] prev = np.empty(count, dtype=np.int64)
    cdef int64_t i = 0
    with nogil:
        for k in range(f.n_nodes):
            if not keep[k]:
                continue
            node[i] = k
            parent[i] = position[f.parent[k]] if f.parent[k] >= 0 else -1
            q = f.prev_same[k]
            prev[i] = position[q] if q >= 0 else -1
            i += 1
    return {"start": np.asarray(start), "node": np.asarray(node),
            "parent": np.asarray(parent), "prev": np.asarray(prev)}


cdef extern from *:
    """
    static double r2shap_sum_product(const double* a, const double* b, const double* c,
                                     int64_t m) {
        double acc = 0.0;
        #pragma omp simd reduction(+:acc)
        for (int64_t l = 0; l < m; l++) acc += (a[l] + b[l]) * c[l];
        return acc;
    }
    """
    double r2shap_sum_product(const double* a, const double* b, const double* c,
                              int64_t m) noexcept nogil


cdef enum:
    PART_ROWS = 64  # rows that take a tree's part (and its factors) while in cache
    PART_MIN_ROWS = 8


cpdef int64_t part_block_rows(int64_t n_rows, int n_threads) noexcept nogil:
    """Rows per block of ``part_semivalues``: PART_ROWS, or fewer (at least
    PART_MIN_ROWS) so that every thread gets about 4 blocks (issue 31: a
    LightGBM block of 436 rows gave 7 blocks, at most 1.75x on 2 threads).
    The same values for any size: a row's trees add in order."""
    cdef int64_t wanted, rows
    if n_threads <= 1:
        return PART_ROWS
    wanted = 4 * n_threads
    rows = (n_rows + wanted - 1) // wanted
    return max(<int64_t> PART_MIN_ROWS, min(<int64_t> PART_ROWS, rows))


cdef void part_factors(
    const Forest* f, const int64_t* node, const int64_t* prev, int64_t n,
    const double* points, int64_t m, int64_t M, double* ratio_prod, double* factor,
    double* inv_factor,
) noexcept nogil:
    """The row-independent part of the down pass: R of every node of a part
    and, for X = 0 and X = 1, the factors R + t_l (X - R) and their inverses
    (0 where the factor is 0: then R = X = 0), at ``factor[(i 2 + X) M + l]``."""
    cdef int64_t i, l, x, qi
    cdef double rk, fk
    ratio_prod[0] = 1.0
    for x in range(2):
        for l in range(m):
            factor[x * M + l] = 1.0
            inv_factor[x * M + l] = 1.0
    for i in range(1, n):
        rk = f.ratio[node[i]]
        qi = prev[i]
        if qi >= 0:
            rk = rk * ratio_prod[qi]
        ratio_prod[i] = rk
        for x in range(2):
            for l in range(m):
                fk = rk + points[l] * (x - rk)
                factor[(i * 2 + x) * M + l] = fk
                inv_factor[(i * 2 + x) * M + l] = 1.0 / fk if fk != 0.0 else 0.0


cdef void part_gradient(
    const Forest* f, int64_t t, const int64_t* node, const int64_t* parent,
    const int64_t* prev, int64_t n, const double* x, const double* weights, int64_t m,
    int64_t M, const double* ratio_prod, const double* factor, const double* inv_factor,
    Scratch* sc, double* out,
) noexcept nogil:
    """tree_gradient_uniform on the ``n`` nodes of a part of tree ``t``
    (local positions: ``parent``, ``prev``) with the factors of
    ``part_factors``: add sum_l weights[l] * grad F_part(points[l] 1) to
    ``out`` (n_outputs, p). The weights start the path products at the root,
    so every leaf term, H_k and credit carries them (all are linear in the
    leaf terms); no division: X selects a precomputed factor and inverse."""
    cdef int64_t W = f.n_values
    cdef int64_t p_features = f.n_features
    cdef int64_t i, k, pk, pi, qi, l, w, a, b, o
    cdef double d, acc
    cdef uint8_t* follow = sc.left_taken + n  # X of every node (0 or 1)
    cdef const double* fac
    cdef const double* rep
    cdef const double* inv
    cdef double* path = sc.path_prod
    cdef double* sub = sc.subtree
    cdef double* deep = sc.deepest
    # X (path_factors on the part's nodes) and the down pass
    sc.left_taken[0] = goes_left(f, node[0], x)
    follow[0] = 1
    for l in range(m):  # the weights ride along the products (all linear)
        path[l] = weights[l]
        sub[l] = 0.0  # the root of a part of several nodes is no leaf
        deep[l] = 0.0
    for i in range(1, n):
        k = node[i]
        pi = parent[i]
        pk = node[pi]
        follow[i] = sc.left_taken[pi] == (f.left[pk] == k)
        qi = prev[i]
        fac = factor + (i * 2 + 1) * M if follow[i] else factor + i * 2 * M
        if qi >= 0:
            follow[i] = follow[i] & follow[qi]
            fac = factor + (i * 2 + follow[i]) * M
            rep = inv_factor + (qi * 2 + follow[qi]) * M  # replaces the earlier edge's factor
            for l in range(m):
                path[i * m + l] = path[pi * m + l] * fac[l] * rep[l]
        else:
            for l in range(m):
                path[i * m + l] = path[pi * m + l] * fac[l]
        sc.left_taken[i] = goes_left(f, k, x)
        if W == 1:  # leaf terms rho_k s_k (0 at internal nodes)
            d = f.value[k]
            for l in range(m):
                sub[i * m + l] = d * path[i * m + l]
                deep[i * m + l] = 0.0
    if W == 1:
        o = f.tree_output[t]
        for i in range(n - 1, 0, -1):  # up pass (gradient_up_pass): H_k first
            pi = parent[i]
            qi = prev[i]
            for l in range(m):
                sub[pi * m + l] += sub[i * m + l]
            if qi >= 0:
                for l in range(m):
                    deep[qi * m + l] -= sub[i * m + l]
        for i in range(1, n):  # then the credits, independent of each other
            d = follow[i] - ratio_prod[i]
            if d != 0.0:
                acc = r2shap_sum_product(&deep[i * m], &sub[i * m],
                                         inv_factor + (i * 2 + follow[i]) * M, m)
                out[o * p_features + f.feature[node[parent[i]]]] += d * acc
        return
    for i in range(n):
        a = i * m * W
        for l in range(m):
            for w in range(W):
                sub[a + l * W + w] = f.value[node[i] * W + w] * path[i * m + l]
                deep[a + l * W + w] = 0.0
    for i in range(n - 1, 0, -1):
        pi = parent[i]
        qi = prev[i]
        inv = inv_factor + (i * 2 + follow[i]) * M
        d = follow[i] - ratio_prod[i]
        a = i * m * W
        b = pi * m * W
        for w in range(W):
            acc = 0.0
            for l in range(m):
                acc = acc + (deep[a + l * W + w] + sub[a + l * W + w]) * inv[l]
                sub[b + l * W + w] += sub[a + l * W + w]
                if qi >= 0:
                    deep[qi * m * W + l * W + w] -= sub[a + l * W + w]
            out[w * p_features + f.feature[node[pi]]] += d * acc


cdef struct PartSums:
    ScratchSize size  # first: gradient_scratch reads it
    Forest f
    Rows rows
    int64_t block
    const int64_t* trees
    int64_t n_trees
    const int64_t* start  # the parts (part_nodes)
    const int64_t* node
    const int64_t* parent
    const int64_t* prev
    const int64_t* tree_rule  # tree t's rule in rules (stride size.m)
    Rules rules
    Outputs out


cdef void part_blocks(void* work, int64_t lo, int64_t hi, void* scratch,
                      Interrupt* stop) noexcept nogil:
    """Blocks lo:hi of rows, tree by tree; a tree's factors once per block."""
    cdef PartSums w = (<const PartSums*> work)[0]
    cdef Scratch sc = (<Scratch*> scratch)[0]  # a copy: see the driver
    cdef int64_t M = w.size.m
    cdef int64_t bi, i, t, ti, s, n, r
    for bi in range(lo, hi):
        for ti in range(w.n_trees):
            t = w.trees[ti]
            s = w.start[t]
            n = w.start[t + 1] - s
            if n <= 1:
                continue
            r = w.tree_rule[t]
            part_factors(&w.f, &w.node[s], &w.prev[s], n, &w.rules.points[r * M],
                         w.rules.size[r], M, sc.ratio_prod, sc.factor, sc.inv_factor)
            for i in range(bi * w.block, min(w.rows.n, (bi + 1) * w.block)):
                part_gradient(&w.f, t, &w.node[s], &w.parent[s], &w.prev[s], n,
                              row_at(&w.rows, i), &w.rules.weights[r * M], w.rules.size[r], M,
                              sc.ratio_prod, sc.factor, sc.inv_factor, &sc,
                              output_row(&w.out, i, 0))


def part_semivalues(ens, const double[:, ::1] X, part, const int64_t[::1] trees,
                    const int64_t[::1] tree_rule, const double[:, ::1] rule_points,
                    const double[:, ::1] rule_weights, const int64_t[::1] rule_size,
                    double[:, :, ::1] out, int n_threads):
    """Add sum_l w_l grad F(t_l 1) of the parts (``part_nodes``) of ``trees``
    to ``out`` (n_rows, n_outputs, p); tree t uses the rule of row
    ``tree_rule[t]`` (``rule_size``, ``rule_points``, ``rule_weights``).
    Parts of one node (no leaf kept, or a one-leaf tree) add nothing. Rows
    go in blocks of ``part_block_rows``, tree by tree (a row's trees in order)."""
    cdef const int64_t[::1] start = part["start"]
    cdef const int64_t[::1] node = part["node"]
    cdef const int64_t[::1] parent = part["parent"]
    cdef const int64_t[::1] prev = part["prev"]
    cdef PartSums w
    if X.shape[0] == 0 or trees.shape[0] == 0:
        return
    w.f = forest_from(ens)
    # twice the nodes: left_taken holds the decision and X of every node,
    # factor and inv_factor a part's factors at X = 0 and X = 1
    w.size = ScratchSize(n_nodes=2 * max(1, int(np.max(np.diff(part["start"]), initial=1))),
                         m=max(1, rule_points.shape[1]), n_values=w.f.n_values)
    w = PartSums(size=w.size, f=w.f, rows=rows_of(X),
                 block=part_block_rows(X.shape[0], n_threads), trees=&trees[0],
                 n_trees=trees.shape[0], start=&start[0], node=&node[0], parent=&parent[0],
                 prev=&prev[0], tree_rule=&tree_rule[0],
                 rules=rules_of(rule_points, rule_weights, &rule_size[0]),
                 out=Outputs(&out[0, 0, 0], out.shape[1], out.shape[2]))
    parallel_units((w.rows.n + w.block - 1) // w.block, 1, gradient_scratch, part_blocks, &w,
                   n_threads)


# Pattern tables (for many rows of shallow trees). In a leaf's term
#     rho_v prod_{j in F_v} ((1 - t) R_jv + t X_jv)
# only X depends on the row, and X_jv is 0 or 1: a leaf with d distinct path
# features has 2^d possible terms. For each pattern A (bit b: X of the b-th
# feature of the path, in order of first appearance from the root) the
# table holds the leaf's (unit-value) semivalue contributions
#     T[A, b] = (A_b - R_b) sum_l w_l prod_{c != b} ((1 - t_l) R_c + t_l A_c),
# computed once per tree; each row then only finds its pattern at every leaf
# (one bit operation per node) and adds d numbers per leaf. The values are
# those of the quadrature kernel above, reorganised.

# A row's patterns at every node of a tree, for a few rows (few_rows_block):
# internal node by internal node, its rule decides and both children's
# patterns follow from its own. Per internal node, an InnerNode: the rule
# as one comparison (x[column] < threshold goes left: x <= t is
# x < nextafter(t, inf) for every x that is not NaN; NaN threshold: another
# rule, goes_left), and per child the bit of its edge's feature, set where x
# takes the edge and the feature is new on the path, cleared where x does
# not take it and the feature is repeated (x then took its earlier edges,
# or the bit is already clear).
cdef struct InnerNode:
    double threshold
    uint32_t column
    uint16_t node        # local indices in the tree
    uint16_t left
    uint16_t right
    uint16_t unused
    uint32_t set_left    # pattern |= set where x takes the edge,
    uint32_t clear_left  # pattern &= ~clear where it does not
    uint32_t set_right
    uint32_t clear_right
    uint32_t unused2


cdef enum:
    INNER_MAX_NODES = 65536  # larger trees: row_tree_patterns


cdef extern from *:
    """
    #include <math.h>
    #if defined(__GNUC__) || defined(__clang__)
    #define r2shap_unordered(a, b) __builtin_isunordered((a), (b))
    #else
    #define r2shap_unordered(a, b) (isnan(a) || isnan(b))
    #endif
    static double r2shap_next_up(double t) { return nextafter(t, INFINITY); }
    """
    bint r2shap_unordered(double a, double b) noexcept nogil
    double r2shap_next_up(double t) noexcept nogil


cdef void edge_masks(const Forest* f, const int64_t* node_slot, int64_t child,
                     uint32_t* set_mask, uint32_t* clear_mask) noexcept nogil:
    cdef int64_t b = node_slot[child]
    cdef uint32_t bit = (<uint32_t> 1) << b if b < 32 else 0  # slot >= 32: never read
    set_mask[0] = bit if f.prev_same[child] < 0 else 0
    clear_mask[0] = 0 if f.prev_same[child] < 0 else bit


cdef object inner_nodes(const Forest* f, const int64_t* node_slot):
    """(InnerNode records as bytes, tree_inner_start): every internal node
    of every tree of at most INNER_MAX_NODES nodes, by tree, in node order
    (a parent before its children)."""
    cdef int64_t[::1] tree_inner = np.zeros(f.n_trees + 1, dtype=np.int64)
    cdef int64_t t, start, n, k, j, count = 0
    for t in range(f.n_trees):
        start = f.tree_start[t]
        n = f.tree_start[t + 1] - start
        if n <= INNER_MAX_NODES:
            for k in range(start, start + n):
                count += f.left[k] >= 0
        tree_inner[t + 1] = count
    records = np.zeros(max(count, 1) * sizeof(InnerNode), dtype=np.uint8)
    cdef uint8_t[::1] raw = records
    cdef InnerNode* rec = <InnerNode*> &raw[0]
    cdef double th
    cdef uint8_t kind
    cdef int64_t i = 0
    with nogil:
        for t in range(f.n_trees):
            start = f.tree_start[t]
            n = f.tree_start[t + 1] - start
            if n > INNER_MAX_NODES:
                continue
            for k in range(start, start + n):
                if f.left[k] < 0:
                    continue
                j = f.route_feature[k]
                kind = f.decision[k]
                th = f.threshold[k]
                if kind == DECISION_LEQ:
                    th = r2shap_next_up(th)
                if (j < 0 or (j >> 31) != 0 or (kind != DECISION_LEQ and kind != DECISION_LT)
                        or th != th or th == INFINITY):  # x < inf is not x <= inf
                    th = NAN
                    j = 0
                rec[i].threshold = th
                rec[i].column = <uint32_t> j
                rec[i].node = <uint16_t> (k - start)
                rec[i].left = <uint16_t> (f.left[k] - start)
                rec[i].right = <uint16_t> (f.right[k] - start)
                rec[i].unused = 0
                rec[i].unused2 = 0
                edge_masks(f, node_slot, f.left[k], &rec[i].set_left, &rec[i].clear_left)
                edge_masks(f, node_slot, f.right[k], &rec[i].set_right, &rec[i].clear_right)
                i += 1
    return records, np.asarray(tree_inner)


def pattern_structure(ens, paths=True):
    """Row-independent path structure of every tree.

    Returns ``node_slot`` (the bit of the edge's feature in its path's
    pattern), per leaf (all trees, by tree): ``leaf_node`` (global index),
    ``leaf_dim`` (d), ``tree_leaf_start``, and per node ``node_below_dim``,
    the largest d of the leaves below it; with ``paths`` also the keys of
    :func:`pattern_paths` (what tables and most kernels read; a game whose
    trees all take the quadrature route needs none of them).
    """
    cdef Forest f = forest_from(ens)
    cdef int64_t[::1] node_slot = np.zeros(f.n_nodes, dtype=np.int64)
    # below[k]: first the number of distinct features on the path to k, then
    # (from the leaves up) the largest such number of the leaves below k
    cdef int64_t[::1] below = np.zeros(f.n_nodes, dtype=np.int64)
    cdef int64_t k, p, q
    with nogil:
        for k in range(f.n_nodes):
            p = f.parent[k]
            if p < 0:
                continue
            q = f.prev_same[k]
            if q >= 0:
                node_slot[k] = node_slot[q]
                below[k] = below[p]
            else:
                node_slot[k] = below[p]
                below[k] = below[p] + 1
    leaf_node = np.flatnonzero(np.asarray(ens.children_left) < 0).astype(np.int64, copy=False)
    leaf_dim = np.asarray(below)[leaf_node]
    with nogil:
        for k in range(f.n_nodes - 1, -1, -1):  # preorder: children after parents
            p = f.parent[k]
            if p >= 0 and below[k] > below[p]:
                below[p] = below[k]
    structure = {
        "node_slot": np.asarray(node_slot), "leaf_node": leaf_node, "leaf_dim": leaf_dim,
        "tree_leaf_start": np.searchsorted(leaf_node, np.asarray(ens.tree_start)).astype(
            np.int64),
        "node_below_dim": np.asarray(below),
    }
    if paths:
        structure.update(pattern_paths(ens, structure))
    return structure


def pattern_paths(ens, structure):
    """The paths of the leaves of ``structure`` (:func:`pattern_structure`
    of ``ens``): ``leaf_feature_start`` and flat ``leaf_feature`` /
    ``leaf_ratio`` (feature and R of each bit), ``leaf_edge`` (global index
    of the node the feature's deepest edge on the path leads to, where a row's
    X is read); ``inner_nodes`` and ``tree_inner_start``
    (``pattern_semivalues``' patterns for a few rows).
    """
    cdef Forest f = forest_from(ens)
    cdef const int64_t[::1] node_slot = structure["node_slot"]
    cdef const int64_t[::1] leaf_dim = structure["leaf_dim"]
    leaf_feature_start = np.concatenate([[0], np.cumsum(leaf_dim)]).astype(np.int64)
    n_entries = int(leaf_feature_start[len(leaf_feature_start) - 1])
    # (every entry is written below: slots 0..d-1 all occur on a path of d features)
    cdef int64_t[::1] leaf_feature = np.empty(n_entries, dtype=np.int64)
    cdef double[::1] leaf_ratio = np.empty(n_entries)
    cdef int64_t[::1] leaf_edge = np.empty(n_entries, dtype=np.int64)
    # One pass over the nodes in preorder keeps, for each slot of the path to
    # the node, the deepest edge of the slot's feature, that feature, and its
    # R (the product of the cover ratios of the feature's edges down to that
    # edge); a leaf copies its d entries from there, where an upward walk
    # from each leaf would cost its depth. Each edge entered is stacked with
    # the entry of its slot that it replaced, put back when the walk leaves
    # the edge's subtree.
    cdef int64_t max_dim = max(1, int(np.asarray(leaf_dim).max(initial=0)))
    cdef int64_t[::1] slot_edge = np.full(max_dim, -1, dtype=np.int64)
    cdef int64_t[::1] slot_feature = np.full(max_dim, -1, dtype=np.int64)
    cdef double[::1] slot_ratio = np.ones(max_dim)
    cdef int64_t max_depth = max(f.max_tree_nodes, 1)
    cdef int64_t[::1] entered = np.empty(max_depth, dtype=np.int64)
    cdef int64_t[::1] replaced_edge = np.empty(max_depth, dtype=np.int64)
    cdef int64_t[::1] replaced_feature = np.empty(max_depth, dtype=np.int64)
    cdef double[::1] replaced_ratio = np.empty(max_depth)
    cdef int64_t n_entered = 0, entry = 0, leaf = 0, slot, c, k, p
    with nogil:
        for k in range(f.n_nodes):
            p = f.parent[k]
            while n_entered > 0 and entered[n_entered - 1] != p:  # (none left at a root)
                n_entered -= 1
                slot = node_slot[entered[n_entered]]
                slot_edge[slot] = replaced_edge[n_entered]
                slot_feature[slot] = replaced_feature[n_entered]
                slot_ratio[slot] = replaced_ratio[n_entered]
            if p >= 0:
                slot = node_slot[k]
                entered[n_entered] = k
                replaced_edge[n_entered] = slot_edge[slot]
                replaced_feature[n_entered] = slot_feature[slot]
                replaced_ratio[n_entered] = slot_ratio[slot]
                n_entered += 1
                # (the slot's entry is the feature's edge prev_same[k] when it repeats)
                slot_ratio[slot] = (f.ratio[k] * slot_ratio[slot] if f.prev_same[k] >= 0
                                    else f.ratio[k])
                slot_edge[slot] = k
                slot_feature[slot] = f.feature[p]
            if f.left[k] < 0:  # the leaves in node order, as ``leaf_node``
                for c in range(leaf_dim[leaf]):
                    leaf_feature[entry + c] = slot_feature[c]
                    leaf_ratio[entry + c] = slot_ratio[c]
                    leaf_edge[entry + c] = slot_edge[c]
                entry += leaf_dim[leaf]
                leaf += 1
    inner, tree_inner = inner_nodes(&f, &node_slot[0])
    return {
        "leaf_feature_start": leaf_feature_start, "leaf_feature": np.asarray(leaf_feature),
        "leaf_ratio": np.asarray(leaf_ratio), "leaf_edge": np.asarray(leaf_edge),
        "inner_nodes": inner, "tree_inner_start": tree_inner,
    }


# Units. A leaf whose sibling is also a leaf (children of node k, split on
# feature j at bit s) shares its path's features with it, and the two leaves'
# patterns differ only in bit s: A_left = A, A_right = A with bit s replaced
# by the bit the row takes to the right. So for single-output trees the pair
# is tabulated as one unit of 2^(d+1) rows (A, right bit), each the sum of
# both leaves' value-weighted contributions: a row adds d numbers per pair
# instead of 2d, for the same memory. Other leaves are units of their own
# (value-weighted where the tree has one output, unit-valued otherwise).

cdef void leaf_table(const double* r, int64_t d, const double* points, const double* weights,
                     int64_t m, double scale, double* T, double* work) noexcept nogil:
    """T[A d + b] = scale (A_b - r_b) sum_l w_l prod_{c != b} ((1 - t_l) r_c + t_l A_c)
    for every pattern A, by prefix and suffix products (no division, so a
    zero factor needs no special case). ``work``: 2 d doubles."""
    cdef double* prefix = work
    cdef double* factor = work + d
    cdef int64_t A, b, c, l
    cdef double tl, product, suffix
    cdef double* row
    for A in range(1 << d):
        row = T + A * d
        for b in range(d):
            row[b] = 0.0
        for l in range(m):
            tl = points[l]
            product = weights[l]
            for c in range(d):
                prefix[c] = product
                factor[c] = (1.0 - tl) * r[c] + tl * ((A >> c) & 1)
                product = product * factor[c]
            suffix = 1.0
            for c in range(d - 1, -1, -1):
                row[c] = row[c] + prefix[c] * suffix
                suffix = suffix * factor[c]
        for b in range(d):
            row[b] = row[b] * scale * (((A >> b) & 1) - r[b])


cdef struct UnitTables:
    size_t scratch_bytes  # first (bytes_scratch): leaf_table's work, then a pair's two tables
    Patterns ps
    Tables tables
    const int64_t* unit_leaf
    const int64_t* unit_right
    const int64_t* unit_slot
    Rules rules  # rule d for d distinct features
    const double* scale_left
    const double* scale_right
    int64_t max_dim


cdef void unit_tables(void* work, int64_t lo, int64_t hi, void* scratch,
                      Interrupt* stop) noexcept nogil:
    cdef UnitTables w = (<const UnitTables*> work)[0]
    cdef double* leaf_work = <double*> scratch
    cdef double* left = leaf_work + 2 * (w.max_dim + 1)
    cdef double* right
    cdef double* out
    cdef const double* points
    cdef const double* weights
    cdef int64_t i, u, v, rv, d, s, P, A, Ar, b, size, m
    for i in range(lo, hi):
        u = w.tables.selected[i]
        v = w.unit_leaf[u]
        rv = w.unit_right[u]
        d = w.ps.dim[v]
        m = w.rules.size[d]
        points = w.rules.points + d * w.rules.stride
        weights = w.rules.weights + d * w.rules.stride
        out = &w.tables.data[w.tables.start[i]]
        if rv < 0:
            leaf_table(&w.ps.ratio[w.ps.fstart[v]], d, points, weights, m, w.scale_left[u], out,
                       leaf_work)
            continue
        size = (<int64_t> 1) << d
        right = left + size * d
        leaf_table(&w.ps.ratio[w.ps.fstart[v]], d, points, weights, m, w.scale_left[u], left,
                   leaf_work)
        leaf_table(&w.ps.ratio[w.ps.fstart[rv]], d, points, weights, m, w.scale_right[u], right,
                   leaf_work)
        s = w.unit_slot[u]
        for P in range(2 * size):
            A = P & (size - 1)
            Ar = (A & ~((<int64_t> 1) << s)) | ((P >> d) << s)
            for b in range(d):
                out[P * d + b] = left[A * d + b] + right[Ar * d + b]


def pattern_tables(structure, units, const int64_t[::1] selected,
                   const int64_t[::1] table_start, const double[:, ::1] rule_points,
                   const double[:, ::1] rule_weights, const int64_t[::1] rule_size,
                   const double[::1] scale_left, const double[::1] scale_right, int n_threads):
    """The tables of the given units (indices into ``units``' arrays);
    ``table_start[i]`` is where unit ``selected[i]``'s block starts. A single
    leaf's block is T[A, b] (2^d x d) times its ``scale_left``; a pair's is
    scale_left T_left[A, b] + scale_right T_right[A', b] for (A, right bit)
    (2^(d+1) x d), A' being A with bit s replaced by the right bit. A unit of
    d distinct features uses the rule of row d: ``rule_size[d]`` points
    ``rule_points[d]`` and weights ``rule_weights[d]`` (exact for degree
    d - 1, the degree of its terms' gradient).
    """
    cdef Patterns ps = patterns_from(structure)
    cdef const int64_t[::1] unit_leaf = units["leaf"]
    cdef const int64_t[::1] unit_right = units["right"]
    cdef const int64_t[::1] unit_slot = units["slot"]
    cdef int64_t n_units = selected.shape[0]
    cdef double[::1] tables = np.empty(table_start[n_units] if n_units else 0)
    cdef int64_t i, d, max_dim = 0, pair_doubles = 0
    cdef UnitTables w
    if n_units == 0:
        return np.asarray(tables)
    for i in range(n_units):  # each thread's scratch: for the largest unit
        d = ps.dim[unit_leaf[selected[i]]]
        max_dim = max(max_dim, d)
        if unit_right[selected[i]] >= 0:
            pair_doubles = max(pair_doubles, 2 * ((<int64_t> 1) << d) * d)
    w = UnitTables(scratch_bytes=(2 * (max_dim + 1) + pair_doubles) * sizeof(double), ps=ps,
                   tables=tables_of(selected, table_start, tables), unit_leaf=&unit_leaf[0],
                   unit_right=&unit_right[0], unit_slot=&unit_slot[0],
                   rules=rules_of(rule_points, rule_weights, &rule_size[0]),
                   scale_left=&scale_left[0], scale_right=&scale_right[0], max_dim=max_dim)
    parallel_units(n_units, 1, bytes_scratch, unit_tables, &w, n_threads)
    return np.asarray(tables)


cdef enum:
    BLOCK_ROWS = 512  # rows sharing a unit's table while in cache
    SUB = 64          # rows whose patterns are computed together
    BLOCKS_PER_THREAD = 4
    FEW_ROWS = 32     # rows of a few_rows_block
    FEW_ROWS_CALL = 128  # calls of at most this many rows take few_rows_block
    FEW_ROWS_PER_THREAD = 8  # and their threads at least this many rows each


cpdef int64_t pattern_block_rows(int64_t n_rows, int n_threads) noexcept nogil:
    """Rows per block of ``pattern_semivalues``: BLOCK_ROWS, or fewer (a
    multiple of 8, at least 16) so that every thread gets about
    BLOCKS_PER_THREAD blocks. The executor hands the kernel a block of rows sized by the
    model's cost (about 1,000 rows of a depth-8 ensemble, 400 of a LightGBM
    one with 255 leaves): at 512 rows a block that gave 2 or 3 work units
    for any number of threads (issue 31). Any size gives the same values:
    each row adds its trees, and a tree's units, in order."""
    cdef int64_t wanted, rows
    if n_threads <= 1:
        return BLOCK_ROWS
    wanted = BLOCKS_PER_THREAD * n_threads
    rows = (n_rows + wanted - 1) // wanted
    rows = ((rows + 7) // 8) * 8
    return max(<int64_t> 16, min(<int64_t> BLOCK_ROWS, rows))


# A numeric rule at one node for a contiguous column of rows, 16 rows per
# step with SSE2 (any x86-64), else row by row; the same comparisons either
# way. A NaN goes to the default child: "v < t" is false for NaN and
# "!(v >= t)" true, so the default child picks the comparison.
cdef extern from *:
    """
    #if defined(__SSE2__) || defined(_M_X64) || (defined(_M_IX86_FP) && _M_IX86_FP >= 2)
    #include <emmintrin.h>
    #define R2SHAP_DECIDE(VECTOR, SCALAR) do { \
        const __m128d t = _mm_set1_pd(threshold); \
        const __m128i one = _mm_set1_epi8(1); \
        for (; r + 16 <= n; r += 16) { \
            __m128 q[4]; int h; \
            for (h = 0; h < 4; h++) \
                q[h] = _mm_shuffle_ps( \
                    _mm_castpd_ps(VECTOR(_mm_loadu_pd(column + r + 4 * h), t)), \
                    _mm_castpd_ps(VECTOR(_mm_loadu_pd(column + r + 4 * h + 2), t)), \
                    _MM_SHUFFLE(2, 0, 2, 0)); \
            _mm_storeu_si128((__m128i*)(taken + r), _mm_and_si128(_mm_packs_epi16( \
                _mm_packs_epi32(_mm_castps_si128(q[0]), _mm_castps_si128(q[1])), \
                _mm_packs_epi32(_mm_castps_si128(q[2]), _mm_castps_si128(q[3]))), one)); \
        } \
        for (; r < n; r++) { const double v = column[r]; taken[r] = (SCALAR); } \
    } while (0)
    #else
    #define R2SHAP_DECIDE(VECTOR, SCALAR) do { \
        for (; r < n; r++) { const double v = column[r]; taken[r] = (SCALAR); } \
    } while (0)
    #endif
    static void r2shap_numeric_decisions(const double* column, int64_t n, double threshold,
                                         int leq, int nan_left, uint8_t* taken) {
        int64_t r = 0;
        if (!leq && !nan_left) R2SHAP_DECIDE(_mm_cmplt_pd, v < threshold);
        else if (!leq) R2SHAP_DECIDE(_mm_cmpnge_pd, !(v >= threshold));
        else if (!nan_left) R2SHAP_DECIDE(_mm_cmple_pd, v <= threshold);
        else R2SHAP_DECIDE(_mm_cmpngt_pd, !(v > threshold));
    }
    """
    void r2shap_numeric_decisions(const double* column, int64_t n, double threshold, int leq,
                                  int nan_left, uint8_t* taken) noexcept nogil


cdef inline void sub_decisions(
    const Forest* f, int64_t k, const double* X, int64_t stride, const double* columns,
    int64_t column_stride, int64_t n_rows, uint8_t* taken,
) noexcept nogil:
    """goes_left at node ``k`` for ``n_rows`` rows (row r at X + r stride,
    its value of column j also at columns[j column_stride + r]): ``taken[r]``.
    A numeric rule reads the contiguous column (r2shap_numeric_decisions);
    other rules, and a NaN threshold (every number goes right), row by row."""
    cdef int64_t j = f.route_feature[k]
    cdef uint8_t kind = f.decision[k]
    cdef double threshold = f.threshold[k]
    cdef int64_t r
    if j >= 0 and (kind == DECISION_LT or kind == DECISION_LEQ) and threshold == threshold:
        r2shap_numeric_decisions(columns + j * column_stride, n_rows, threshold,
                                 kind == DECISION_LEQ, f.default_child[k] == f.left[k], taken)
    else:
        for r in range(n_rows):
            taken[r] = goes_left(f, k, X + r * stride)


cdef void sub_patterns(
    const Forest* f, int64_t t, const double* X, int64_t stride, const double* columns,
    int64_t column_stride, int64_t n_rows, const int64_t* node_slot, uint8_t* left_taken,
    uint32_t* pattern,
) noexcept nogil:
    """row_patterns for ``n_rows`` <= SUB rows (row r at X + r stride, and
    transposed: column j at columns + j column_stride), node by node:
    ``pattern[k SUB + r]``, ``left_taken[k SUB + r]`` (local node k).
    Tabulated leaves have at most 30 distinct features on their path; nodes
    of slot 32 or more (on paths left to the quadrature kernel) are skipped."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t kk, k, p, b, r
    cdef uint32_t mask, is_left
    cdef bint repeated
    cdef uint32_t* here
    cdef const uint32_t* above
    cdef const uint8_t* taken
    for r in range(n_rows):
        pattern[r] = 0
    sub_decisions(f, start, X, stride, columns, column_stride, n_rows, left_taken)
    for kk in range(1, n):
        k = start + kk
        p = f.parent[k] - start
        b = node_slot[k]
        if b >= 32:  # only on paths to leaves left to the quadrature kernel
            continue
        mask = ~((<uint32_t> 1) << b)
        is_left = f.left[start + p] == k
        repeated = f.prev_same[k] >= 0
        here = pattern + kk * SUB
        above = pattern + p * SUB
        taken = left_taken + p * SUB
        if repeated:
            for r in range(n_rows):
                here[r] = (above[r] & mask) | (((taken[r] == is_left) & (above[r] >> b)) << b)
        else:
            for r in range(n_rows):
                here[r] = (above[r] & mask) | ((<uint32_t> (taken[r] == is_left)) << b)
        if f.left[k] >= 0:
            sub_decisions(f, k, X, stride, columns, column_stride, n_rows,
                          left_taken + kk * SUB)


# Prefetched into L2, not L1: a tree's table lines of 32 rows (about 8,000 for
# 200 trees of depth 8) overflow L1 before they are read (issue 41: 10 rows of
# depth 8, 9.8 -> 3.5 ms).
cdef extern from *:
    """
    #if defined(__GNUC__) || defined(__clang__)
    #define r2shap_prefetch(p) __builtin_prefetch((const void*)(p), 0, 2)
    #elif defined(_MSC_VER) && (defined(_M_X64) || defined(_M_IX86))
    #include <xmmintrin.h>
    #define r2shap_prefetch(p) _mm_prefetch((const char*)(p), _MM_HINT_T1)
    #else
    #define r2shap_prefetch(p) ((void)(p))
    #endif
    """
    void r2shap_prefetch(const void* p) noexcept nogil


cdef inline void row_tree_patterns(
    const Forest* f, int64_t start, int64_t n, const double* x, const int64_t* node_slot,
    uint8_t* left_taken, uint32_t* pattern,
) noexcept nogil:
    """sub_patterns for one row: ``pattern[k]``, ``left_taken[k]`` (local
    node k), the same patterns (for structures without InnerNode records,
    and trees of more than INNER_MAX_NODES nodes). A leaf's decision is
    computed too (never read): no branch on the node's kind. Nodes of slot
    32 or more are skipped. The arrays are read through local pointers: a
    store into ``left_taken`` (bytes) could otherwise change ``f``'s fields."""
    cdef const int64_t* parent = f.parent + start
    cdef const int64_t* left = f.left + start
    cdef const int64_t* prev_same = f.prev_same + start
    cdef const int64_t* route = f.route_feature + start
    cdef const uint8_t* decision = f.decision + start
    cdef const double* threshold = f.threshold + start
    cdef const int64_t* slot = node_slot + start
    cdef int64_t kk, p, b, j
    cdef uint32_t above, bit, keep
    cdef double v
    cdef uint8_t kind
    left_taken[0] = goes_left(f, start, x)
    pattern[0] = 0
    for kk in range(1, n):
        p = parent[kk] - start
        b = slot[kk]
        if b >= 32:  # only on paths to leaves left to the quadrature kernel
            continue
        above = pattern[p]
        bit = left_taken[p] == (left[p] == kk + start)
        keep = (above >> b) | (prev_same[kk] < 0)  # repeated: x took the earlier edges
        pattern[kk] = (above & ~((<uint32_t> 1) << b)) | ((bit & keep) << b)
        j = route[kk]  # goes_left, its numeric cases first
        v = x[j if j >= 0 else 0]
        kind = decision[kk]
        if kind == DECISION_LT and v == v:
            left_taken[kk] = v < threshold[kk]
        elif kind == DECISION_LEQ and v == v:
            left_taken[kk] = v <= threshold[kk]
        elif left[kk] >= 0:  # other rules (next_node) at internal nodes only
            left_taken[kk] = goes_left(f, start + kk, x)
        else:
            left_taken[kk] = 0


cdef inline void inner_tree_patterns(
    const Forest* f, int64_t start, const InnerNode* inner, int64_t n_inner, const double* x,
    uint32_t* pattern, const double* const* lines, int64_t n_lines,
) noexcept nogil:
    """row_tree_patterns from the tree's InnerNode records: the same
    patterns at every node whose path has at most 32 distinct features
    (others: unspecified, never read), with one comparison per internal node
    and no branch but for NaN and other rules. The cache lines
    ``lines[:n_lines]`` are prefetched meanwhile, one per internal node."""
    cdef int64_t i
    cdef uint32_t above, go
    cdef double v
    cdef const InnerNode* rec
    pattern[0] = 0
    for i in range(n_inner):
        if i < n_lines:
            r2shap_prefetch(lines[i])
        rec = inner + i
        v = x[rec.column]
        above = pattern[rec.node]
        if r2shap_unordered(v, rec.threshold):  # NaN x, or another rule
            go = goes_left(f, start + rec.node, x)
        else:
            go = v < rec.threshold
        go = 0 - go  # all ones where x goes left
        pattern[rec.left] = (above | (rec.set_left & go)) & ~(rec.clear_left & ~go)
        pattern[rec.right] = (above | (rec.set_right & ~go)) & ~(rec.clear_right & go)
    for i in range(n_inner, n_lines):
        r2shap_prefetch(lines[i])


# A unit as few_rows_block reads it: what its table row's offset and its
# additions need, in one record (unit_records).
cdef struct UnitRecord:
    int64_t fstart    # its features: the structure's leaf_feature[fstart:fstart + dim]
    uint32_t leaf     # local index of its (left) leaf
    uint32_t right    # of its right leaf (a pair), else its leaf's
    uint8_t slot      # the bit s of the right leaf's pattern that a pair reads
    uint8_t dim       # d (at most 30 where tabulated; 255 for more)
    uint8_t pair      # 1 for a pair, else 0
    uint8_t unused[5]


cdef object unit_records(const Forest* f, ens, structure, units):
    """The UnitRecord of every unit, as bytes: made once and kept in
    ``units["_unit_records"]`` with the arrays they are made from (made
    again where any of them is another array)."""
    sources = (ens.tree_start, structure["leaf_node"], structure["leaf_dim"],
               structure["leaf_feature_start"], units["leaf"], units["right"], units["slot"],
               units["tree_unit_start"])
    kept = units.get("_unit_records")
    if kept is not None and all([a is b for a, b in zip(kept[0], sources)]):
        return kept[1]
    cdef Patterns p = patterns_from(structure, False)
    cdef const int64_t[::1] unit_leaf = units["leaf"]
    cdef const int64_t[::1] unit_right = units["right"]
    cdef const int64_t[::1] unit_slot = units["slot"]
    cdef const int64_t[::1] tree_unit_start = units["tree_unit_start"]
    cdef int64_t n_units = unit_leaf.shape[0]
    records = np.zeros(max(n_units, 1) * sizeof(UnitRecord), dtype=np.uint8)
    cdef uint8_t[::1] raw = records
    cdef UnitRecord* rec = <UnitRecord*> &raw[0]
    cdef int64_t t, u, v, rv, start
    with nogil:
        for t in range(f.n_trees):
            start = f.tree_start[t]
            for u in range(tree_unit_start[t], tree_unit_start[t + 1]):
                v = unit_leaf[u]
                rv = unit_right[u]
                rec[u].fstart = p.fstart[v]
                rec[u].dim = <uint8_t> min(p.dim[v], 255)
                rec[u].slot = <uint8_t> (unit_slot[u] if rv >= 0 else 0)
                rec[u].pair = rv >= 0
                rec[u].leaf = <uint32_t> (p.leaf_node[v] - start)
                rec[u].right = <uint32_t> (p.leaf_node[rv if rv >= 0 else v] - start)
    units["_unit_records"] = (sources, records)
    return records


cdef inline void few_rows_add(
    const Forest* f, const Patterns* ps, int64_t t, const UnitRecord* recs, int64_t n_units,
    const double* const* rows, int64_t nr, bint scaled, double* out, int64_t out_row,
    int64_t out_output,
) noexcept nogil:
    """Add the table rows ``rows[r n_units + uu]`` (NULL: not tabulated) of
    tree ``t``'s units (``recs``) to ``nr`` rows of ``out`` (row r at out +
    r out_row), unit by unit in order as the block kernel does."""
    cdef int64_t W = f.n_values
    cdef int64_t start = f.tree_start[t]
    cdef int64_t uu, d, e, r, w, o
    cdef const int64_t* feat
    cdef const double* row
    cdef double* orow
    cdef double value
    o = f.tree_output[t]
    for r in range(nr):
        for uu in range(n_units):
            row = rows[r * n_units + uu]
            if row == NULL:
                continue
            d = recs[uu].dim
            feat = ps.feature + recs[uu].fstart
            if scaled:
                orow = out + r * out_row + o * out_output
                for e in range(d):
                    orow[feat[e]] += row[e]
            else:
                for w in range(W):
                    value = f.value[(start + recs[uu].leaf) * W + w]
                    orow = out + r * out_row + w * out_output
                    for e in range(d):
                        orow[feat[e]] += value * row[e]


cdef void few_rows_block(
    const Forest* f, const Patterns* ps, const int64_t* trees, int64_t n_trees,
    const double* X, int64_t stride, int64_t nr, const UnitRecord* recs,
    const int64_t* tree_unit_start,
    const double* tables, const int64_t* table_start, bint scaled, int64_t max_units,
    double* out, int64_t out_row, int64_t out_output,
    const InnerNode* inner, const int64_t* tree_inner, uint8_t* left_taken, uint32_t* pattern,
    const double** rows, const double** lines,
) noexcept nogil:
    """pattern_semivalues' block of ``nr`` <= FEW_ROWS rows: tree by tree,
    each row's patterns node by node (no row loops), the table rows of the
    tree's units found, and added one tree later: their cache lines are
    prefetched during the next tree's patterns. The additions into ``out``
    are the block kernel's, in its order. ``rows``: 2 FEW_ROWS max_units
    pointers, ``lines``: 4 FEW_ROWS max_units."""
    cdef int64_t ti, t, start, n, r, uu, u, d, A, first, n_units, lo, hi
    cdef const UnitRecord* rec
    cdef int64_t prev_t = -1, prev_first = 0, prev_units = 0
    cdef int64_t half = FEW_ROWS * max_units
    cdef const double** here = rows
    cdef const double** last = rows + half
    cdef const double** swap
    cdef const double* row
    cdef const uint32_t* pat
    cdef const double** next_lines = lines
    cdef const double** prev_lines = lines + 2 * half
    cdef int64_t n_next = 0, n_prev = 0
    for ti in range(n_trees):
        t = trees[ti]
        start = f.tree_start[t]
        n = f.tree_start[t + 1] - start
        if n == 1:
            continue
        first = tree_unit_start[t]
        n_units = tree_unit_start[t + 1] - first
        n_next = 0
        for r in range(nr):
            pat = pattern + r * f.max_tree_nodes
            # the last tree's lines, prefetched a share during each row's patterns
            # (all during the first row's: more than the core keeps in flight)
            lo = n_prev * r // nr
            hi = n_prev * (r + 1) // nr
            if inner != NULL and n <= INNER_MAX_NODES:
                inner_tree_patterns(f, start, inner + tree_inner[t],
                                    tree_inner[t + 1] - tree_inner[t], X + r * stride,
                                    pattern + r * f.max_tree_nodes, prev_lines + lo, hi - lo)
            else:
                for uu in range(lo, hi):
                    r2shap_prefetch(prev_lines[uu])
                row_tree_patterns(f, start, n, X + r * stride, ps.node_slot,
                                  left_taken + r * f.max_tree_nodes,
                                  pattern + r * f.max_tree_nodes)
            for uu in range(n_units):
                u = first + uu
                if table_start[u] < 0:  # left to the quadrature kernel
                    here[r * n_units + uu] = NULL
                    continue
                rec = recs + u
                d = rec.dim
                A = pat[rec.leaf] | (((pat[rec.right] >> rec.slot) & rec.pair) << d)
                row = tables + table_start[u] + A * d
                here[r * n_units + uu] = row
                next_lines[n_next] = row
                next_lines[n_next + 1] = row + d - 1
                n_next += 1 + ((<size_t> row ^ <size_t> (row + d - 1)) >= 64)
        if prev_t >= 0:
            few_rows_add(f, ps, prev_t, recs + prev_first, prev_units, last, nr, scaled,
                         out, out_row, out_output)
        prev_t = t
        prev_first = first
        prev_units = n_units
        swap = last
        last = here
        here = swap
        swap = prev_lines
        prev_lines = next_lines
        next_lines = swap
        n_prev = n_next
    for uu in range(n_prev):
        r2shap_prefetch(prev_lines[uu])
    if prev_t >= 0:
        few_rows_add(f, ps, prev_t, recs + prev_first, prev_units, last, nr, scaled,
                     out, out_row, out_output)


cdef struct FewRows:
    const Forest* f
    const Patterns* ps
    const int64_t* trees
    int64_t n_trees
    Rows rows
    int64_t n_parts
    const UnitRecord* recs
    const int64_t* tree_unit_start
    const double* tables
    const int64_t* table_start
    bint scaled
    int64_t max_units
    double* out
    int64_t out_row       # out's strides, in doubles
    int64_t out_output
    const InnerNode* inner
    const int64_t* tree_inner


cdef struct FewRowsScratch:
    uint8_t* left_taken    # FEW_ROWS rows' (few_rows_block)
    uint32_t* pattern
    const double** rows    # 6 FEW_ROWS max_units: table rows, then their lines


cdef void* few_rows_scratch(void* work, Buffers* mem) noexcept nogil:
    cdef const FewRows* w = <const FewRows*> work
    cdef FewRowsScratch* s = <FewRowsScratch*> take(mem, sizeof(FewRowsScratch))
    if s != NULL:
        take_each(mem, w.f.max_tree_nodes * FEW_ROWS, &s.left_taken)
        take_each(mem, w.f.max_tree_nodes * FEW_ROWS, &s.pattern)
        s.rows = <const double**> take(mem, 6 * FEW_ROWS * w.max_units * sizeof(double*))
    return s


cdef void few_rows_parts(void* work, int64_t lo, int64_t hi, void* scratch,
                         Interrupt* stop) noexcept nogil:
    """Parts lo:hi of the rows, FEW_ROWS rows a block."""
    cdef FewRows w = (<const FewRows*> work)[0]
    cdef const FewRowsScratch* s = <const FewRowsScratch*> scratch
    cdef int64_t part, r1, c0, c1
    for part in range(lo, hi):
        c0 = part * w.rows.n // w.n_parts
        r1 = (part + 1) * w.rows.n // w.n_parts
        while c0 < r1:
            c1 = min(c0 + FEW_ROWS, r1)
            few_rows_block(w.f, w.ps, w.trees, w.n_trees, row_at(&w.rows, c0), w.rows.stride,
                           c1 - c0, w.recs, w.tree_unit_start, w.tables, w.table_start,
                           w.scaled, w.max_units, w.out + c0 * w.out_row, w.out_row, w.out_output,
                           w.inner, w.tree_inner, s.left_taken, s.pattern, s.rows,
                           s.rows + 2 * FEW_ROWS * w.max_units)
            c0 = c1


cdef int few_rows_call(
    const Forest* f, const Patterns* ps, ens, structure, units, const int64_t[::1] trees,
    const double[:, ::1] X, const double[::1] tables, const int64_t[::1] table_start,
    bint scaled, double[:, :, ::1] out, int64_t max_units, const InnerNode* inner,
    const int64_t* tree_inner, int n_threads,
) except -1:
    """pattern_semivalues for at most FEW_ROWS_CALL rows: few_rows_block on
    at most FEW_ROWS rows at a time, a share of the rows per thread, at least
    FEW_ROWS_PER_THREAD each (a row's additions are its own: the same bits
    for any split). Called from a
    function of its own (called in the parallel region, it made the bulk loop
    there compile about 10% slower)."""
    cdef const uint8_t[::1] unit_raw = unit_records(f, ens, structure, units)
    cdef const int64_t[::1] tree_unit_start = units["tree_unit_start"]
    cdef int64_t n_parts = max(1, min(<int64_t> n_threads, X.shape[0] // FEW_ROWS_PER_THREAD))
    cdef FewRows w = FewRows(
        f=f, ps=ps, trees=&trees[0], n_trees=trees.shape[0], rows=rows_of(X), n_parts=n_parts,
        recs=<const UnitRecord*> &unit_raw[0],
        tree_unit_start=&tree_unit_start[0], tables=&tables[0], table_start=&table_start[0],
        scaled=scaled, max_units=max_units, out=&out[0, 0, 0],
        out_row=out.strides[0] // sizeof(double), out_output=out.strides[1] // sizeof(double),
        inner=inner, tree_inner=tree_inner)
    return parallel_units(n_parts, 1, few_rows_scratch, few_rows_parts, &w, n_parts)


cdef struct PatternRows:
    Forest f
    Patterns ps
    Rows rows
    int64_t block
    int64_t column_stride  # rows of a block's transposed columns: min(block, rows)
    const int64_t* trees
    int64_t n_trees
    const int64_t* tree_unit_start  # tree t's units: tree_unit_start[t]:tree_unit_start[t + 1]
    const int64_t* unit_leaf        # per unit (UnitRecord): leaf, right leaf, slot
    const int64_t* unit_right
    const int64_t* unit_slot
    const double* tables            # unit u's table from tables[table_start[u]]
    const int64_t* table_start
    bint scaled
    int64_t max_units
    Outputs out


cdef struct PatternScratch:
    uint32_t* pattern
    uint32_t* unit_offset
    uint8_t* left_taken
    double* columns  # the block's rows transposed: column j at j column_stride


cdef void* pattern_rows_scratch(void* work, Buffers* mem) noexcept nogil:
    cdef const PatternRows* w = <const PatternRows*> work
    cdef PatternScratch* s = <PatternScratch*> take(mem, sizeof(PatternScratch))
    if s != NULL:
        take_each(mem, w.f.max_tree_nodes * SUB, &s.left_taken)
        take_each(mem, w.f.max_tree_nodes * SUB, &s.pattern)
        take_each(mem, w.block * w.max_units, &s.unit_offset)
        take_each(mem, w.column_stride * w.rows.stride, &s.columns)
    return s


cdef void pattern_row_blocks(void* work, int64_t lo, int64_t hi, void* scratch,
                             Interrupt* stop) noexcept nogil:
    """Blocks lo:hi of rows: per tree, every row's offset at every unit, then
    unit by unit. What the loops read is in locals whose address is never
    taken (a store into the rows' values cannot change them: no reloads)."""
    cdef const PatternRows* w = <const PatternRows*> work
    cdef Forest f = w.f
    cdef const int64_t* leaf_node = w.ps.leaf_node
    cdef const int64_t* dim = w.ps.dim
    cdef const int64_t* fstart = w.ps.fstart
    cdef const int64_t* feature = w.ps.feature
    cdef const int64_t* node_slot = w.ps.node_slot
    cdef const int64_t* trees = w.trees
    cdef const int64_t* tree_unit_start = w.tree_unit_start
    cdef const int64_t* unit_leaf = w.unit_leaf
    cdef const int64_t* unit_right = w.unit_right
    cdef const int64_t* unit_slot = w.unit_slot
    cdef const int64_t* table_start = w.table_start
    cdef const double* tables = w.tables
    cdef const double* X = w.rows.data
    cdef int64_t stride = w.rows.stride, n_rows = w.rows.n, n_trees = w.n_trees
    cdef double* out = w.out.data
    cdef int64_t n_outputs = w.out.n_outputs, width = w.out.width
    cdef bint scaled = w.scaled
    cdef int64_t block = w.block, column_stride = w.column_stride
    cdef int64_t W = f.n_values
    cdef uint32_t* pattern = (<PatternScratch*> scratch).pattern
    cdef uint32_t* unit_offset = (<PatternScratch*> scratch).unit_offset
    cdef uint8_t* left_taken = (<PatternScratch*> scratch).left_taken
    cdef double* columns = (<PatternScratch*> scratch).columns
    cdef int64_t bi, i, i0, i1, ti, t, start, n, u, v, rv, d, o, k, e, uu, n_units, j
    cdef int64_t r0, nr, r, a, c, s, sb
    cdef double value
    cdef const double* table
    cdef const double* row
    cdef const int64_t* feat
    cdef double* orow
    for bi in range(lo, hi):
        i0 = bi * block
        i1 = min(i0 + block, n_rows)
        for i in range(i0, i1):  # every node's decisions read a contiguous column
            for j in range(stride):
                columns[j * column_stride + (i - i0)] = X[i * stride + j]
        for ti in range(n_trees):
            t = trees[ti]
            start = f.tree_start[t]
            n = f.tree_start[t + 1] - start
            if n == 1:
                continue
            n_units = tree_unit_start[t + 1] - tree_unit_start[t]
            # 1. every row's pattern (and right bit) at every unit: node by
            # node for SUB rows at a time (independent rows, no chain)
            for sb in range((i1 - i0 + SUB - 1) // SUB):
                r0 = i0 + sb * SUB
                nr = min(<int64_t> SUB, i1 - r0)
                sub_patterns(&f, t, X + r0 * stride, stride, columns + (r0 - i0),
                             column_stride, nr, node_slot, left_taken, pattern)
                for uu in range(n_units):
                    u = tree_unit_start[t] + uu
                    if table_start[u] < 0:  # left to the quadrature kernel
                        continue
                    v = unit_leaf[u]
                    rv = unit_right[u]
                    a = (leaf_node[v] - start) * SUB
                    if rv >= 0:
                        c = (leaf_node[rv] - start) * SUB
                        s = unit_slot[u]
                        for r in range(nr):
                            unit_offset[uu * block + (r0 - i0) + r] = (
                                (pattern[a + r] | (((pattern[c + r] >> s) & 1) << dim[v]))
                                * dim[v])
                    else:
                        for r in range(nr):
                            unit_offset[uu * block + (r0 - i0) + r] = pattern[a + r] * dim[v]
            # 2. unit by unit
            for uu in range(n_units):
                u = tree_unit_start[t] + uu
                if table_start[u] < 0:
                    continue
                v = unit_leaf[u]
                d = dim[v]
                feat = &feature[fstart[v]]
                table = &tables[table_start[u]]
                if scaled:
                    o = f.tree_output[t]
                    for i in range(i0, i1):
                        row = table + unit_offset[uu * block + (i - i0)]
                        orow = out + (i * n_outputs + o) * width
                        for e in range(d):
                            orow[feat[e]] += row[e]
                else:
                    for i in range(i0, i1):
                        row = table + unit_offset[uu * block + (i - i0)]
                        for k in range(W):
                            value = f.value[leaf_node[v] * W + k]
                            orow = out + (i * n_outputs + k) * width
                            for e in range(d):
                                orow[feat[e]] += value * row[e]


def pattern_semivalues(ens, const double[:, ::1] X, structure, units,
                       const int64_t[::1] trees, const double[::1] tables,
                       const int64_t[::1] table_start, bint scaled,
                       double[:, :, ::1] out, int n_threads):
    """Add the tabulated contributions of ``trees`` to ``out`` (n_rows, n_outputs, p).

    ``table_start`` is indexed by unit (-1 where the unit is not tabulated:
    its leaves go to the quadrature kernel). ``scaled``: the tables hold
    value-weighted contributions (one output per tree), else unit-valued ones
    of single leaves. Rows go in
    blocks; in a block, tree by tree, first every row's pattern at every
    unit, then unit by unit, so that a unit's table stays in cache. At most
    FEW_ROWS_CALL rows (a call for a few rows, an explainer's) go row by row
    instead (few_rows_block, the lines of a tree's table rows prefetched
    while the next tree's patterns are found), with the same additions in the
    same order.
    """
    cdef Forest f = forest_from(ens)
    cdef Patterns ps = patterns_from(structure, False)  # pattern_semivalues reads no maxima
    cdef const int64_t[::1] unit_leaf = units["leaf"]
    cdef const int64_t[::1] unit_right = units["right"]
    cdef const int64_t[::1] unit_slot = units["slot"]
    cdef const int64_t[::1] tree_unit_start = units["tree_unit_start"]
    cdef int64_t block = pattern_block_rows(X.shape[0], n_threads)
    cdef int64_t max_units = widest(&tree_unit_start[0], tree_unit_start.shape[0])
    # without InnerNode records (a structure of another origin): row_tree_patterns
    cdef const uint8_t[::1] inner_raw = structure.get("inner_nodes")
    cdef const int64_t[::1] inner_start = structure.get("tree_inner_start")
    cdef const InnerNode* inner = (<const InnerNode*> &inner_raw[0]
                                   if inner_raw is not None and inner_start is not None else NULL)
    cdef const int64_t* tree_inner = &inner_start[0] if inner != NULL else NULL
    cdef PatternRows w
    if X.shape[0] == 0 or trees.shape[0] == 0:
        return
    if X.shape[0] <= FEW_ROWS_CALL:  # row by row, FEW_ROWS_PER_THREAD or more a thread
        few_rows_call(&f, &ps, ens, structure, units, trees, X, tables, table_start, scaled,
                      out, max_units, inner, tree_inner, n_threads)
        return
    w = PatternRows(
        f=f, ps=ps, rows=rows_of(X), block=block, column_stride=min(block, X.shape[0]),
        trees=&trees[0], n_trees=trees.shape[0], tree_unit_start=&tree_unit_start[0],
        unit_leaf=&unit_leaf[0], unit_right=&unit_right[0], unit_slot=&unit_slot[0],
        tables=&tables[0], table_start=&table_start[0], scaled=scaled, max_units=max_units,
        out=Outputs(&out[0, 0, 0], out.shape[1], out.shape[2]))
    parallel_units((w.rows.n + block - 1) // block, 1, pattern_rows_scratch, pattern_row_blocks, &w,
                   n_threads)


# TreeGrad at any point z in [0, 1]^p (treegrad-ranker Algorithm 9), with the
# corner case of zero factors: at z_j = 1 a feature x does not follow gives
# the factor X = 0 (and at z_j = 0 a zero-cover edge R = 0). A path's product
# is kept as (product of the non-zero factors, number of zero factors); a
# leaf with one zero factor still has a non-zero derivative along that one
# feature, so the up-pass sums leaf terms with no zero factor (H0) and with
# exactly one (H1) separately.

cdef struct GradScratch:
    double* ratio_prod
    double* follow_prod
    uint8_t* left_taken
    double* factor
    double* nonzero_prod
    int64_t* zeros
    double* total0
    double* total1
    double* deepest0
    double* deepest1


cdef void* grad_scratch(void* work, Buffers* mem) noexcept nogil:
    """A GradScratch for trees of as many nodes as the work struct's first
    field (an int64_t) says."""
    cdef int64_t n = (<const int64_t*> work)[0]
    cdef GradScratch* g = <GradScratch*> take(mem, sizeof(GradScratch))
    if g == NULL:
        return NULL
    take_each(mem, n, &g.ratio_prod, &g.follow_prod, &g.factor, &g.nonzero_prod)
    take_each(mem, n, &g.total0, &g.total1, &g.deepest0, &g.deepest1)
    take_each(mem, n, &g.left_taken)
    take_each(mem, n, &g.zeros)
    return g




cdef double tree_gradient_at(
    const Forest* f, int64_t t, int64_t output, const double* x, const double* z,
    GradScratch* g, double* grad,
) noexcept nogil:
    """Add grad F_t(z) of ``output`` to ``grad`` (p,) and return F_t(z)."""
    cdef int64_t start = f.tree_start[t]
    cdef int64_t n = f.tree_start[t + 1] - start
    cdef int64_t W = f.n_values
    cdef int64_t kk, k, pl, q, j, column
    cdef double fk, fq, d, h0, h1, value
    if W == 1:
        if f.tree_output[t] != output:
            return 0.0
        column = 0
    else:
        column = output
    if n == 1:
        return f.value[start * W + column]
    path_factors(f, t, x, g.left_taken, g.ratio_prod, g.follow_prod)
    g.nonzero_prod[0] = 1.0
    g.zeros[0] = 0
    g.total0[0] = 0.0
    g.total1[0] = 0.0
    g.deepest0[0] = 0.0
    g.deepest1[0] = 0.0
    for kk in range(1, n):
        k = start + kk
        pl = f.parent[k] - start
        j = f.feature[f.parent[k]]
        fk = g.ratio_prod[kk] + z[j] * (g.follow_prod[kk] - g.ratio_prod[kk])
        g.factor[kk] = fk
        g.nonzero_prod[kk] = g.nonzero_prod[pl]
        g.zeros[kk] = g.zeros[pl]
        q = f.prev_same[k]
        if q >= 0:  # replace the factor of the feature's earlier edge (Algorithm 9, l. 4-5)
            fq = g.factor[q - start]
            if fq == 0.0:
                g.zeros[kk] -= 1
            else:
                g.nonzero_prod[kk] /= fq
        if fk == 0.0:
            g.zeros[kk] += 1
        else:
            g.nonzero_prod[kk] *= fk
        value = f.value[k * W + column]  # 0 at internal nodes
        g.total0[kk] = value * g.nonzero_prod[kk] if g.zeros[kk] == 0 else 0.0
        g.total1[kk] = value * g.nonzero_prod[kk] if g.zeros[kk] == 1 else 0.0
        g.deepest0[kk] = 0.0
        g.deepest1[kk] = 0.0
    for kk in range(n - 1, 0, -1):
        k = start + kk
        pl = f.parent[k] - start
        q = f.prev_same[k]
        h0 = g.deepest0[kk] + g.total0[kk]
        h1 = g.deepest1[kk] + g.total1[kk]
        d = g.follow_prod[kk] - g.ratio_prod[kk]
        fk = g.factor[kk]
        grad[f.feature[f.parent[k]]] += d * (h0 / fk if fk != 0.0 else h1)
        g.total0[pl] += g.total0[kk]
        g.total1[pl] += g.total1[kk]
        if q >= 0:
            g.deepest0[q - start] -= g.total0[kk]
            g.deepest1[q - start] -= g.total1[kk]
    return g.total0[0]


cdef struct PointGradients:
    int64_t n_nodes  # first: grad_scratch reads it
    Forest f
    Rows rows
    Rows points  # z, one per row
    const int64_t* output
    double* grad    # (rows, f.n_features)
    double* value


cdef void gradient_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                        Interrupt* stop) noexcept nogil:
    cdef PointGradients w = (<const PointGradients*> work)[0]
    cdef GradScratch g = (<GradScratch*> scratch)[0]  # a copy: see the driver
    cdef int64_t i, t
    cdef double* row_grad
    for i in range(lo, hi):
        row_grad = w.grad + i * w.f.n_features
        for t in range(w.f.n_trees):
            w.value[i] += tree_gradient_at(&w.f, t, w.output[i], row_at(&w.rows, i),
                                           row_at(&w.points, i), &g, row_grad)


def treegrad(ens, const double[:, ::1] X, const double[:, ::1] Z, const int64_t[::1] output,
             int n_threads):
    """grad F_x(z) and F_x(z) (base included) of one output per row.

    ``Z`` (n_rows, p): one point per row; ``output`` (n_rows,): the output
    (class) of each row. Returns (gradients (n_rows, p), values (n_rows,)).
    """
    cdef Forest f = forest_from(ens)
    cdef double[:, ::1] grad = np.zeros((X.shape[0], f.n_features))
    cdef double[::1] value = np.asarray(ens.base_value)[np.asarray(output)].astype(np.float64)
    cdef PointGradients w
    if X.shape[0] == 0:
        return np.asarray(grad), np.asarray(value)
    w = PointGradients(n_nodes=f.max_tree_nodes, f=f, rows=rows_of(X), points=rows_of(Z),
                       output=&output[0], grad=&grad[0, 0],
                       value=&value[0])
    parallel_units(X.shape[0], 8, grad_scratch, gradient_rows, &w, n_threads)
    return np.asarray(grad), np.asarray(value)


# TreeGrad-Ranker (treegrad-ranker Algorithms 2, 10) evaluates grad F at
# 2 n_iter points per row, so the row's part of the game is laid out once:
# per leaf l (value v_l) and distinct feature j on its path, R_lj and
# D_lj = X_lj - R_lj (the pattern structure's entries). Then
#     dF/dz_j = sum_{l: j on l's path} v_l D_lj prod_{i != j} (R_li + z_i D_li)
# (the derivative of the product in the header), computed per leaf with
# prefix and suffix products: no division, so the zero factors of Algorithm
# 9's corner case (z_j = 1 where X = 0, z_j = 0 where R = 0) need no special
# case. O(sum_l d_l) per point, no tree walk inside the iterations.

cdef struct RankerScratch:
    double* leaf_value    # (n_leaves) the row's output at each leaf
    int64_t* leaf_dim
    double* ratio         # (n_entries) R_lj
    double* diff          # D_lj = X_lj - R_lj
    int64_t* feature
    uint8_t* left_taken   # (max_tree_nodes) path_factors' output
    double* ratio_prod
    double* follow_prod
    double* prefix        # (4 max_dim) prefix products and factors at z and 1 - z
    double* state         # (5 p) z, gradient sum, Adam moments, flipped z


cdef struct RankerSize:
    int64_t n_leaves
    int64_t n_entries
    int64_t max_nodes
    int64_t max_dim
    int64_t p


cdef void* ranker_scratch(void* work, Buffers* mem) noexcept nogil:
    """A RankerScratch for the sizes of the work struct's first field (a
    RankerSize)."""
    cdef const RankerSize* size = <const RankerSize*> work
    cdef int64_t n_leaves = max(size.n_leaves, 1), n_entries = max(size.n_entries, 1)
    cdef RankerScratch* r = <RankerScratch*> take(mem, sizeof(RankerScratch))
    if r == NULL:
        return NULL
    take_each(mem, n_leaves, &r.leaf_value)
    take_each(mem, n_leaves, &r.leaf_dim)
    take_each(mem, n_entries, &r.ratio, &r.diff)
    take_each(mem, n_entries, &r.feature)
    take_each(mem, size.max_nodes, &r.left_taken)
    take_each(mem, size.max_nodes, &r.ratio_prod, &r.follow_prod)
    take_each(mem, 4 * max(size.max_dim, 1), &r.prefix)
    take_each(mem, 5 * max(size.p, 1), &r.state)
    return r




cdef int64_t ranker_row_game(
    const Forest* f, const double* x, int64_t output, const Patterns* ps, RankerScratch* r,
) noexcept nogil:
    """Lay out the leaves (value, R, D, feature) of row ``x``'s game of
    ``output``; return the number of leaves kept (leaves of value 0 add
    nothing to F, constant trees nothing to its gradient)."""
    cdef int64_t W = f.n_values
    cdef int64_t n_leaves = 0, n_entries = 0
    cdef int64_t t, start, column, v, b, e
    cdef double value
    for t in range(f.n_trees):
        if W == 1:
            if f.tree_output[t] != output:
                continue
            column = 0
        else:
            column = output
        start = f.tree_start[t]
        if f.tree_start[t + 1] - start == 1:
            continue
        path_factors(f, t, x, r.left_taken, r.ratio_prod, r.follow_prod)
        for v in range(ps.tree_leaf_start[t], ps.tree_leaf_start[t + 1]):
            value = f.value[ps.leaf_node[v] * W + column]
            if value == 0.0:
                continue
            r.leaf_value[n_leaves] = value
            r.leaf_dim[n_leaves] = ps.dim[v]
            n_leaves += 1
            for b in range(ps.dim[v]):
                e = ps.fstart[v] + b
                r.ratio[n_entries] = ps.ratio[e]
                r.diff[n_entries] = r.follow_prod[ps.edge[e] - start] - ps.ratio[e]
                r.feature[n_entries] = ps.feature[e]
                n_entries += 1
    return n_leaves


cdef void ranker_gradient(const RankerScratch* r, int64_t n_leaves, int64_t max_dim,
                          const double* z, double* grad) noexcept nogil:
    """Add grad F(z) + grad F(1 - z) of the laid-out game to ``grad``."""
    cdef double* prefix_z = r.prefix
    cdef double* prefix_flip = r.prefix + max_dim
    cdef double* factor_z = r.prefix + 2 * max_dim
    cdef double* factor_flip = r.prefix + 3 * max_dim
    cdef int64_t l, b, d, e = 0
    cdef double zj, product_z, product_flip, suffix_z, suffix_flip
    for l in range(n_leaves):
        d = r.leaf_dim[l]
        product_z = 1.0
        product_flip = 1.0
        for b in range(d):
            zj = z[r.feature[e + b]]
            prefix_z[b] = product_z
            prefix_flip[b] = product_flip
            factor_z[b] = r.ratio[e + b] + zj * r.diff[e + b]
            factor_flip[b] = r.ratio[e + b] + (1.0 - zj) * r.diff[e + b]
            product_z = product_z * factor_z[b]
            product_flip = product_flip * factor_flip[b]
        suffix_z = r.leaf_value[l]
        suffix_flip = suffix_z
        for b in range(d - 1, -1, -1):
            grad[r.feature[e + b]] += r.diff[e + b] * (prefix_z[b] * suffix_z
                                                       + prefix_flip[b] * suffix_flip)
            suffix_z = suffix_z * factor_z[b]
            suffix_flip = suffix_flip * factor_flip[b]
        e += d


cdef struct RankerRows:
    RankerSize size  # first: ranker_scratch reads it
    Forest f
    Patterns ps
    Rows rows
    const int64_t* output
    int64_t n_iter
    double step_size
    bint adam
    double* zeta    # (rows, size.p)


cdef void ranker_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                      Interrupt* stop) noexcept nogil:
    cdef const RankerRows* w = <const RankerRows*> work
    cdef RankerScratch r = (<RankerScratch*> scratch)[0]  # a copy: see the driver
    cdef Forest f = w.f
    cdef Patterns ps = w.ps
    cdef Rows rows = w.rows
    cdef int64_t p = w.size.p, max_dim = w.size.max_dim, n_iter = w.n_iter
    cdef double step_size = w.step_size
    cdef bint adam = w.adam
    cdef const int64_t* output = w.output
    cdef double* z = r.state
    cdef double* grad = r.state + p
    cdef double* moment1 = r.state + 2 * p
    cdef double* moment2 = r.state + 3 * p
    cdef double* zeta
    cdef int64_t i, it, j, n_leaves
    cdef double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, m_hat, v_hat, gj, zj
    for i in range(lo, hi):
        zeta = w.zeta + i * p
        n_leaves = ranker_row_game(&f, row_at(&rows, i), output[i], &ps, &r)
        for j in range(p):
            z[j] = 0.5
            moment1[j] = 0.0
            moment2[j] = 0.0
        for it in range(1, n_iter + 1):
            for j in range(p):
                grad[j] = 0.0
            ranker_gradient(&r, n_leaves, max_dim, z, grad)
            for j in range(p):
                gj = 0.5 * grad[j]
                zeta[j] += (gj - zeta[j]) / it
                if adam:
                    moment1[j] = beta1 * moment1[j] + (1.0 - beta1) * gj
                    moment2[j] = beta2 * moment2[j] + (1.0 - beta2) * gj * gj
                    m_hat = moment1[j] / (1.0 - beta1 ** it)
                    v_hat = moment2[j] / (1.0 - beta2 ** it)
                    zj = z[j] + step_size * m_hat / sqrt(v_hat + eps)
                else:
                    zj = z[j] + step_size * gj
                z[j] = 0.0 if zj < 0.0 else (1.0 if zj > 1.0 else zj)


def treegrad_ranker(ens, structure, const double[:, ::1] X, const int64_t[::1] output,
                    int n_iter, double step_size, bint adam, int n_threads):
    """TreeGrad-Ranker scores zeta of every row (treegrad-ranker Algorithms 2, 10).

    From z = 1/2, g = (grad F(z) + grad F(1 - z)) / 2, zeta = running mean of
    g, z updated by gradient ascent (``adam=False``) or Adam (beta1 = 0.9,
    beta2 = 0.999, eps = 1e-8, z += step * m_hat / sqrt(v_hat + eps)) and
    clipped to [0, 1]. ``structure``: ``pattern_structure(ens)``. Returns
    zeta, shape (n_rows, p).
    """
    cdef Forest f = forest_from(ens)
    cdef Patterns ps = patterns_from(structure)
    cdef double[:, ::1] zeta = np.zeros((X.shape[0], f.n_features))
    cdef RankerRows w
    if X.shape[0] == 0:
        return np.asarray(zeta)
    w = RankerRows(size=RankerSize(n_leaves=ps.n_leaves, n_entries=ps.n_entries,
                                   max_nodes=f.max_tree_nodes, max_dim=ps.max_dim,
                                   p=f.n_features),
                   f=f, ps=ps, rows=rows_of(X), output=&output[0], n_iter=n_iter,
                   step_size=step_size, adam=adam, zeta=&zeta[0, 0])
    parallel_units(X.shape[0], 1, ranker_scratch, ranker_rows, &w, n_threads)
    return np.asarray(zeta)

