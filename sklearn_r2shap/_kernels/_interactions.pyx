# SHAP interaction values of the path-dependent game (doc/local_attributions.rst,
# "Interaction values"; DESIGN section 7; Lundberg et al. 2020, "From local
# explanations to global understanding with explainable AI for trees", eq. (7)-(8)).
#
# Derivation. One tree's game is a sum of products over leaves v (section 1):
#     v_x(S) = sum_v rho_v prod_{j in F_v} g_vj(S),  g_vj(S) = X_vj if j in S else R_vj,
# (F_v: the distinct features on v's path; R_vj the product of the cover ratios of
# its j-edges, X_vj = 1 if x follows them all, else 0). For i != j in F_v the
# discrete second derivative of a leaf's term is
#     v(S+i+j) - v(S+i) - v(S+j) + v(S) = rho_v D_vi D_vj prod_{k in F_v\{i,j}} g_vk(S),
# D = X - R, and 0 when i or j is not in F_v. The interaction weight of eq. (8),
#     |S|! (M - |S| - 2)! / (2 (M - 1)!) = (1/2) int_0^1 t^|S| (1 - t)^(M-2-|S|) dt,
# turns the sum over S in N\{i,j} into an integral of the multilinear extension
# (Grabisch's Shapley interaction index; players off F_v sum out to 1):
#     Phi_ij = (1/2) int_0^1 d_i d_j F(t 1) dt
#            = (1/2) sum_v rho_v D_vi D_vj int_0^1 prod_{k in F_v\{i,j}} (R_vk + t D_vk) dt,     (I1)
# and the SHAP value is the first derivative's integral (TreeGrad-Shap),
#     phi_i = sum_v rho_v D_vi int_0^1 prod_{k in F_v\{i}} (R_vk + t D_vk) dt.               (I2)
# The integrands have degree d_v - 1 at most (d_v = |F_v|), so the Gauss-Legendre
# rule with ceil(d_v / 2) nodes on (0, 1) gives both exactly. Eq. (8)'s diagonal,
# Phi_ii = phi_i - sum_{j != i} Phi_ij, is formed once per row at the end
# (``finish``), after every tree has added phi_i into [i, i] and Phi_ij into the
# upper triangle [min(i, j), max(i, j)].
#
# At the rule's nodes t in (0, 1), a factor R + t D = (1 - t) R + t X vanishes only
# where R = X = 0 (a zero-cover edge x does not take); then D = 0 too and every
# term of the leaf in (I1), (I2) is 0, so such a leaf is skipped and the other
# products are taken by division (exact to rounding: no cancellation).
#
# Two routes with the same values:
# * pattern tables (many rows, shallow trees): X_v is a 0/1 vector, so a leaf has
#   2^d_v possible terms. Per pattern A the table holds the d(d+1)/2 numbers
#   rho D_a D_b / 2 int prod_{k != a,b} and rho D_a int prod_{k != a} (a < b,
#   packed upper triangle), computed once per tree; a row finds its pattern at
#   every leaf (one bit operation per node) and adds d(d+1)/2 numbers.
# * per row (deep trees, few rows): the same numbers from the row's own X_v.
import numpy as np

from libc.stdint cimport int64_t, uint8_t

from ._common cimport (
    Buffers, Outputs, Rows, Tables, TreeBlock, bytes_scratch, output_row, parallel_units,
    pattern_blocks, row_at, rows_of, tables_of, take, take_each,
)
from ._forest cimport Forest, Interrupt, Patterns, forest_from, path_factors, patterns_from


cdef inline void leaf_terms(
    int64_t d, const double* ratio, const double* follow,
    const double* points, const double* weights, int64_t m,
    double* factor, double* acc,
) noexcept nogil:
    """The packed (upper triangle, row-major) numbers of one leaf of unit value:
    acc[a, a] = D_a int prod_{k != a}, acc[a, b] = D_a D_b / 2 int prod_{k != a, b}
    (I1, I2) for the leaf's d features with R = ``ratio``, X = ``follow``."""
    cdef int64_t a, b, l, idx
    cdef double t, product, u, da
    cdef int64_t n_packed = d * (d + 1) // 2
    for idx in range(n_packed):
        acc[idx] = 0.0
    for l in range(m):
        t = points[l]
        product = 1.0
        for b in range(d):
            factor[b] = ratio[b] + t * (follow[b] - ratio[b])
            product = product * factor[b]
        if product == 0.0:  # a factor R = X = 0: every term is 0
            for idx in range(n_packed):
                acc[idx] = 0.0
            return
        for b in range(d):
            factor[b] = 1.0 / factor[b]
        idx = 0
        for a in range(d):
            u = weights[l] * product * factor[a]
            acc[idx] += u
            idx += 1
            for b in range(a + 1, d):
                acc[idx] += u * factor[b]
                idx += 1
    idx = 0
    for a in range(d):
        da = follow[a] - ratio[a]
        acc[idx] = acc[idx] * da
        idx += 1
        for b in range(a + 1, d):
            acc[idx] = acc[idx] * (0.5 * da * (follow[b] - ratio[b]))
            idx += 1


cdef inline void add_leaf(
    int64_t n_packed, const int64_t* offset, const double* terms, double scale, double* out,
) noexcept nogil:
    """Add scale * terms (packed) to the row's matrix at the leaf's offsets."""
    cdef int64_t idx
    for idx in range(n_packed):
        out[offset[idx]] += scale * terms[idx]


cdef inline void add_leaf_unit(int64_t n_packed, const int64_t* offset, const double* terms,
                               double* out) noexcept nogil:
    cdef int64_t idx
    for idx in range(n_packed):
        out[offset[idx]] += terms[idx]


def packed_offsets(structure, int64_t width):
    """Where each packed number of a leaf goes in a row's (width, width)
    matrix: the diagonal at [j, j], a pair of (distinct) path features at
    [min, max]. Returns (offsets, start) with leaf v's from start[v]."""
    cdef Patterns p = patterns_from(structure)
    dim = structure["leaf_dim"]
    n_packed = dim * (dim + 1) // 2
    start_np = np.concatenate([[0], np.cumsum(n_packed)]).astype(np.int64)
    cdef const int64_t[::1] start = start_np
    cdef int64_t[::1] offsets = np.zeros(int(start_np[len(start_np) - 1]), dtype=np.int64)
    cdef int64_t v, a, b, ja, jb, idx
    with nogil:
        for v in range(p.n_leaves):
            idx = start[v]
            for a in range(p.dim[v]):
                ja = p.feature[p.fstart[v] + a]
                offsets[idx] = ja * width + ja
                idx += 1
                for b in range(a + 1, p.dim[v]):
                    jb = p.feature[p.fstart[v] + b]
                    offsets[idx] = ja * width + jb if ja < jb else jb * width + ja
                    idx += 1
    return np.asarray(offsets), start_np


cdef struct LeafTerms:
    size_t scratch_bytes  # first (bytes_scratch): follow, then factor, max_dim + 1 each
    Patterns p
    Tables tables
    const double* scale
    const double* points
    const double* weights
    const int64_t* rule_start  # rule d: points[rule_start[d]:rule_start[d + 1]]
    int64_t max_dim


cdef void leaf_tables(void* work, int64_t lo, int64_t hi, void* scratch,
                      Interrupt* stop) noexcept nogil:
    cdef LeafTerms w = (<const LeafTerms*> work)[0]
    cdef double* follow = <double*> scratch
    cdef double* factor = follow + w.max_dim + 1
    cdef int64_t i, v, d, A, b, c, n_packed, r0
    cdef double* row
    for i in range(lo, hi):
        v = w.tables.selected[i]
        d = w.p.dim[v]
        n_packed = d * (d + 1) // 2
        r0 = w.rule_start[d]
        for A in range(1 << d):
            for b in range(d):
                follow[b] = <double> ((A >> b) & 1)
            row = &w.tables.data[w.tables.start[i] + A * n_packed]
            leaf_terms(d, &w.p.ratio[w.p.fstart[v]], follow, &w.points[r0], &w.weights[r0],
                       w.rule_start[d + 1] - r0, factor, row)
            for c in range(n_packed):
                row[c] = row[c] * w.scale[i]


def interaction_tables(structure, const int64_t[::1] leaves, const int64_t[::1] table_start,
                       const double[::1] scale, const double[::1] points,
                       const double[::1] weights, const int64_t[::1] rule_start,
                       int n_threads):
    """Pattern tables of the given leaves (indices into the structure's leaf arrays).

    Leaf ``leaves[i]`` with d features gets 2^d blocks of d(d+1)/2 packed
    numbers (``leaf_terms`` for X = the pattern's bits) times ``scale[i]``,
    from ``table_start[i]``. The rule of a leaf with d features is
    ``points[rule_start[d]:rule_start[d + 1]]``.
    """
    cdef LeafTerms w
    cdef int64_t n_leaves = leaves.shape[0]
    cdef double[::1] tables = np.zeros(table_start[n_leaves] if n_leaves else 0)
    if n_leaves == 0:
        return np.asarray(tables)
    max_dim = int(np.max(structure["leaf_dim"][np.asarray(leaves)], initial=0))
    w = LeafTerms(scratch_bytes=2 * (max_dim + 1) * sizeof(double), p=patterns_from(structure),
                  tables=tables_of(leaves, table_start, tables), scale=&scale[0],
                  points=&points[0], weights=&weights[0], rule_start=&rule_start[0],
                  max_dim=max_dim)
    parallel_units(n_leaves, 1, bytes_scratch, leaf_tables, &w, n_threads)
    return np.asarray(tables)


cdef struct PatternSums:
    Patterns p
    const double* tables
    const int64_t* table_start   # by leaf
    const int64_t* offsets
    const int64_t* offset_start  # by leaf
    Outputs out                  # a row's (p + 1, p + 1) matrix per output


cdef void pattern_block(void* work, Forest f, TreeBlock tb) noexcept nogil:
    """Add every leaf's tabulated terms (I1, I2) at the block's rows' patterns."""
    cdef PatternSums s = (<const PatternSums*> work)[0]
    cdef int64_t W = f.n_values
    cdef int64_t i, lv, v, d, w, n_packed
    cdef const double* table
    for lv in range(tb.n_leaves):
        v = tb.first_leaf + lv
        d = s.p.dim[v]
        if d == 0:
            continue
        n_packed = d * (d + 1) // 2
        for i in range(tb.i0, tb.i1):
            table = &s.tables[s.table_start[v]
                              + tb.leaf_pattern[(i - tb.i0) * tb.n_leaves + lv] * n_packed]
            if W == 1:
                add_leaf_unit(n_packed, &s.offsets[s.offset_start[v]], table,
                              output_row(&s.out, i, f.tree_output[tb.t]))
            else:
                for w in range(W):
                    add_leaf(n_packed, &s.offsets[s.offset_start[v]], table,
                             f.value[s.p.leaf_node[v] * W + w], output_row(&s.out, i, w))


def pattern_interactions(ens, const double[:, ::1] X, structure, const int64_t[::1] trees,
                         const double[::1] tables, const int64_t[::1] table_start,
                         const int64_t[::1] offsets, const int64_t[::1] offset_start,
                         double[:, :, :, ::1] out, int64_t block, int n_threads):
    """Add the tabulated terms of ``trees`` to ``out`` (n_rows, n_outputs, p + 1, p + 1).

    ``table_start`` is indexed by the structure's leaf index, ``offsets``
    and ``offset_start`` are ``packed_offsets``'. With one value
    per leaf (``n_values == 1``) the tables hold the leaf value already;
    otherwise they are of unit value and each output's value multiplies them.
    Rows go in blocks of ``block`` (``pattern_blocks``).
    """
    cdef Forest f = forest_from(ens)
    cdef PatternSums s
    s.p = patterns_from(structure)
    s.tables = &tables[0]
    s.table_start = &table_start[0]
    s.offsets = &offsets[0]
    s.offset_start = &offset_start[0]
    s.out = Outputs(&out[0, 0, 0, 0], out.shape[1], out.shape[2] * out.shape[3])
    pattern_blocks(&f, &s.p, X, trees, block, False, 0, pattern_block, &s, n_threads)


cdef struct RowTerms:
    Forest f
    Patterns p
    Rows rows
    const int64_t* trees
    int64_t n_trees
    const double* points
    const double* weights
    const int64_t* rule_start
    const int64_t* offsets
    const int64_t* offset_start
    Outputs out


cdef struct RowTermsScratch:
    uint8_t* left_taken
    double* ratio_prod
    double* follow_prod
    double* follow
    double* factor
    double* terms


cdef void* row_terms_scratch(void* work, Buffers* mem) noexcept nogil:
    cdef const RowTerms* w = <const RowTerms*> work
    cdef int64_t n = w.f.max_tree_nodes, d = w.p.max_dim
    cdef RowTermsScratch* s = <RowTermsScratch*> take(mem, sizeof(RowTermsScratch))
    if s == NULL:
        return NULL
    take_each(mem, n, &s.left_taken)
    take_each(mem, n, &s.ratio_prod, &s.follow_prod)
    take_each(mem, d + 1, &s.follow, &s.factor)
    take_each(mem, d * (d + 1) // 2 + 1, &s.terms)
    return s


cdef void row_terms(void* work, int64_t lo, int64_t hi, void* scratch,
                    Interrupt* stop) noexcept nogil:
    cdef RowTerms w = (<const RowTerms*> work)[0]
    cdef RowTermsScratch s = (<const RowTermsScratch*> scratch)[0]
    cdef const Forest* f = &w.f
    cdef const Patterns* p = &w.p
    cdef int64_t W = f.n_values
    cdef int64_t i, ti, t, start, v, d, b, o, r0, n_packed
    for i in range(lo, hi):
        for ti in range(w.n_trees):
            t = w.trees[ti]
            start = f.tree_start[t]
            if f.tree_start[t + 1] - start == 1:
                continue
            path_factors(f, t, row_at(&w.rows, i), s.left_taken, s.ratio_prod, s.follow_prod)
            for v in range(p.tree_leaf_start[t], p.tree_leaf_start[t + 1]):
                d = p.dim[v]
                if d == 0:
                    continue
                for b in range(d):  # X at the feature's deepest edge on the path
                    s.follow[b] = s.follow_prod[p.edge[p.fstart[v] + b] - start]
                r0 = w.rule_start[d]
                leaf_terms(d, &p.ratio[p.fstart[v]], s.follow, &w.points[r0], &w.weights[r0],
                           w.rule_start[d + 1] - r0, s.factor, s.terms)
                n_packed = d * (d + 1) // 2
                if W == 1:
                    add_leaf(n_packed, &w.offsets[w.offset_start[v]], s.terms,
                             f.value[p.leaf_node[v]], output_row(&w.out, i, f.tree_output[t]))
                else:
                    for o in range(W):
                        add_leaf(n_packed, &w.offsets[w.offset_start[v]], s.terms,
                                 f.value[p.leaf_node[v] * W + o], output_row(&w.out, i, o))


def row_interactions(ens, const double[:, ::1] X, structure, const int64_t[::1] trees,
                     const double[::1] points, const double[::1] weights,
                     const int64_t[::1] rule_start, const int64_t[::1] offsets,
                     const int64_t[::1] offset_start, double[:, :, :, ::1] out, int n_threads):
    """Add the terms of ``trees`` to ``out`` (n_rows, n_outputs, p + 1, p + 1),
    computed per row from its own X (the per-row route; any number of
    features on a path)."""
    cdef RowTerms w
    if X.shape[0] == 0 or trees.shape[0] == 0:
        return
    w = RowTerms(f=forest_from(ens), p=patterns_from(structure), rows=rows_of(X),
                 trees=&trees[0], n_trees=trees.shape[0], points=&points[0],
                 weights=&weights[0], rule_start=&rule_start[0], offsets=&offsets[0],
                 offset_start=&offset_start[0],
                 out=Outputs(&out[0, 0, 0, 0], out.shape[1], out.shape[2] * out.shape[3]))
    parallel_units(X.shape[0], 4, row_terms_scratch, row_terms, &w, n_threads)


cdef struct Symmetric:
    Outputs out               # (p + 1, p + 1) per row and output
    int64_t side              # p + 1
    const double* expected


cdef void symmetric_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                         Interrupt* stop) noexcept nogil:
    cdef Symmetric w = (<const Symmetric*> work)[0]
    cdef int64_t n = w.side
    cdef int64_t p = n - 1
    cdef int64_t i, o, a, b
    cdef double s
    cdef double* M
    for i in range(lo, hi):
        for o in range(w.out.n_outputs):
            M = output_row(&w.out, i, o)
            for a in range(p):
                for b in range(a + 1, p):
                    M[b * n + a] = M[a * n + b]
            for a in range(p):
                s = 0.0
                for b in range(p):
                    if b != a:
                        s = s + M[a * n + b]
                M[a * n + a] -= s
                M[a * n + p] = 0.0
                M[p * n + a] = 0.0
            M[p * n + p] = w.expected[o]


def finish(double[:, :, :, ::1] out, const double[::1] expected, int n_threads):
    """Eq. (8)'s diagonal and symmetry, in place: [i, i] holds phi_i and the
    upper triangle Phi_ij; set [j, i] = [i, j], [i, i] = phi_i - sum_{j != i}
    Phi_ij, the last row and column 0 and the corner the expected value."""
    cdef Symmetric w
    if out.shape[0] == 0:
        return
    w = Symmetric(out=Outputs(&out[0, 0, 0, 0], out.shape[1], out.shape[2] * out.shape[3]),
                  side=out.shape[3], expected=&expected[0])
    parallel_units(out.shape[0], 16, NULL, symmetric_rows, &w, n_threads)
