# Semivalues of the interventional game (doc/interventional.rst; Janzing,
# Minorics and Bloebaum 2020, "Feature relevance quantification in
# explainable AI: a causal problem"; shap's feature_perturbation=
# "interventional"): with background rows b in B,
#     v_x(S) = (1/|B|) sum_b f(z),   z_S = x_S, z_rest = b_rest,
# every split decided on the hybrid row z.
#
# One leaf, one background row. A leaf l is reached by z iff, for every
# distinct feature j on l's path, z_j satisfies all of the path's conditions
# on j (NaN routing and categorical sets included: each condition reads one
# coordinate). With a_j = [x_j satisfies them] and c_j = [b_j does], the
# leaf's indicator is the game u(S) = prod_{j in S} a_j prod_{j not in S} c_j.
# If some j has a_j = c_j = 0, u = 0. Otherwise, with
#     A = {j : a_j = 1, c_j = 0}  (x satisfies, b fails)
#     Bf = {j : a_j = 0, c_j = 1} (b satisfies, x fails),
# u(S) = 1 iff A is in S and S misses Bf; every other feature is a null player.
# The marginal u(S + i) - u(S) is +1 for i in A only at S n (A u Bf) = A - i,
# and -1 for i in Bf only at S n (A u Bf) = A. Summing a semivalue's weight
# w_n(s) over the free choice of the n - |A| - |Bf| null players, with
# w_n(s) = int t^s (1 - t)^(n - 1 - s) dmu(t) (every semivalue is such an
# integral; Shapley: mu uniform; Beta(alpha, beta) Shapley: mu = Beta(beta,
# alpha); weighted Banzhaf q: mu = delta_q), gives
#     phi_i = + W+(|A|, |Bf|),  W+(k, m) = int t^(k-1) (1 - t)^m dmu   (i in A)
#     phi_i = - W-(|A|, |Bf|),  W-(k, m) = int t^k (1 - t)^(m-1) dmu   (i in Bf)
# (Shapley: W+ = (k-1)! m! / (k+m)!, W- = k! (m-1)! / (k+m)!). The same
# closed form is used by Laberge and Pequignot (2022, "Understanding
# interventional TreeSHAP: how and why it works") and by woodelf
# (woodelf-explainer); it is derived here from the definition above.
#
# Patterns. On a leaf with d distinct path features, x gives a bit pattern a
# and b a pattern c (``row_patterns`` in _forest.pxd, the routing code every
# kernel uses). u is non-zero iff (a | c) is all ones; then Bf = ~a (fixed by
# x) and A = ~c (fixed by b). So, with h[c] the number of background rows with
# pattern c at the leaf, x's values on the leaf are
#     phi_i = sum_{c : ~c in a} h[c] W+(|~c|, d - |a|)   for i in ~c
#     phi_i = - sum_{c : ~c in a} h[c] W-(|~c|, d - |a|) for i in ~a,
# a function of a alone: a table T[a, i] per leaf, built once per tree from
# the background's histogram (3^d terms: c ranges over ~a | s, s in a), then
# every row reads its pattern's row of the table. Rows + background rows,
# not their product. Trees with too many distinct features on a path for a
# 2^d table go to ``direct_semivalues``: each row runs over the leaf's
# distinct background patterns (at most min(|B|, 2^d) of them).
import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint64_t

from ._common cimport (
    Outputs, Rows, Tables, TreeBlock, bytes_scratch, output_row, parallel_units, pattern_blocks,
    row_at, rows_of, tables_of,
)
from ._forest cimport Forest, Interrupt, Patterns, forest_from, patterns_from, row_patterns

cdef extern from *:
    """
    #if defined(_MSC_VER)
    #include <intrin.h>
    static int r2shap_popcount(unsigned long long v) { return (int)__popcnt64(v); }
    #else
    static int r2shap_popcount(unsigned long long v) { return __builtin_popcountll(v); }
    #endif
    """
    int popcount "r2shap_popcount" (unsigned long long v) noexcept nogil


cdef inline uint64_t full_mask(int64_t d) noexcept nogil:
    return (~(<uint64_t> 0)) if d >= 64 else (((<uint64_t> 1) << d) - 1)


cdef struct Histograms:
    size_t scratch_bytes  # first (bytes_scratch): pattern (uint64), then left_taken (uint8)
    Forest f
    Patterns p
    Rows background
    const int64_t* trees
    const int64_t* hist_start
    double* hist


cdef void histogram_trees(void* work, int64_t lo, int64_t hi, void* scratch,
                          Interrupt* stop) noexcept nogil:
    cdef Histograms w = (<const Histograms*> work)[0]
    cdef const Forest* f = &w.f
    cdef const Patterns* p = &w.p
    cdef uint64_t* pattern = <uint64_t*> scratch
    cdef uint8_t* left_taken = <uint8_t*> (pattern + f.max_tree_nodes)
    cdef int64_t ti, t, start, i, v
    for ti in range(lo, hi):
        t = w.trees[ti]
        start = f.tree_start[t]
        if f.tree_start[t + 1] - start == 1:
            continue
        for i in range(w.background.n):
            row_patterns(f, t, row_at(&w.background, i), p.node_slot, left_taken, pattern)
            for v in range(p.tree_leaf_start[t], p.tree_leaf_start[t + 1]):
                w.hist[w.hist_start[v] + pattern[p.leaf_node[v] - start]] += 1.0


def background_histograms(ens, structure, const double[:, ::1] B, const int64_t[::1] trees,
                          const int64_t[::1] hist_start, int n_threads):
    """h[hist_start[v] + c]: how many background rows have pattern c at leaf v.

    ``hist_start`` is indexed by the structure's leaf index (the leaves of
    ``trees``; each has a 2^d block). One thread per tree, background rows in
    order, so the counts do not depend on the thread count.
    """
    cdef Histograms w
    cdef int64_t n_hist = 0
    cdef int64_t ti, t, v
    w.p = patterns_from(structure)
    for ti in range(trees.shape[0]):
        t = trees[ti]
        for v in range(w.p.tree_leaf_start[t], w.p.tree_leaf_start[t + 1]):
            n_hist = max(n_hist, hist_start[v] + (1 << w.p.dim[v]))
    cdef double[::1] hist = np.zeros(n_hist)
    if B.shape[0] == 0 or trees.shape[0] == 0:
        return np.asarray(hist)
    w.f = forest_from(ens)
    w = Histograms(scratch_bytes=w.f.max_tree_nodes * (sizeof(uint8_t) + sizeof(uint64_t)),
                   f=w.f, p=w.p, background=rows_of(B),
                   trees=&trees[0], hist_start=&hist_start[0], hist=&hist[0])
    parallel_units(trees.shape[0], 1, bytes_scratch, histogram_trees, &w, n_threads)
    return np.asarray(hist)


cdef struct PatternColumns:
    const int64_t* column   # by leaf
    uint64_t* out           # (rows, n_columns)
    int64_t n_columns


cdef void columns_block(void* work, Forest f, TreeBlock tb) noexcept nogil:
    """Copy the block's rows' patterns at the tree's leaves to their columns."""
    cdef PatternColumns s = (<const PatternColumns*> work)[0]
    cdef int64_t i, lv
    for i in range(tb.i0, tb.i1):
        for lv in range(tb.n_leaves):
            s.out[i * s.n_columns + s.column[tb.first_leaf + lv]] = (
                tb.leaf_pattern[(i - tb.i0) * tb.n_leaves + lv])


def background_patterns(ens, structure, const double[:, ::1] B, const int64_t[::1] trees,
                        const int64_t[::1] column, int64_t n_columns, int n_threads):
    """P[i, column[v]]: background row i's pattern at leaf v (leaves of ``trees``)."""
    cdef Forest f = forest_from(ens)
    cdef Patterns p = patterns_from(structure)
    cdef uint64_t[:, ::1] out = np.zeros((B.shape[0], n_columns), dtype=np.uint64)
    cdef PatternColumns s = PatternColumns(&column[0], &out[0, 0], n_columns)
    pattern_blocks(&f, &p, B, trees, 1, False, 0, columns_block, &s, n_threads)
    return np.asarray(out)


cdef struct LeafTables:
    Patterns p
    Tables tables
    const double* hist
    const int64_t* hist_start
    const double* w_plus   # (W+(k, m)): [k * w_stride + m]
    const double* w_minus
    int64_t w_stride
    double scale


cdef void leaf_tables(void* work, int64_t lo, int64_t hi, void* scratch,
                      Interrupt* stop) noexcept nogil:
    cdef LeafTables w = (<const LeafTables*> work)[0]
    cdef int64_t r, v, d, na, nb, k, b
    cdef uint64_t a, s, c, full, bits
    cdef double count, wp, minus
    cdef const double* h
    cdef double* row
    for r in range(lo, hi):
        v = w.tables.selected[r]
        d = w.p.dim[v]
        full = full_mask(d)
        h = &w.hist[w.hist_start[v]]
        for a in range(<uint64_t> 1 << d):
            row = &w.tables.data[w.tables.start[r] + a * d]
            na = popcount(a)
            nb = d - na
            minus = 0.0
            s = a
            while True:  # every s in a: c = ~a | s, A = a - s, Bf = ~a
                c = (full & ~a) | s
                count = h[c]
                if count != 0.0:
                    k = na - popcount(s)
                    if k > 0:
                        wp = count * w.w_plus[k * w.w_stride + nb]
                        bits = a & ~s
                        for b in range(d):
                            if (bits >> b) & 1:
                                row[b] = row[b] + wp
                    if nb > 0:
                        minus = minus + count * w.w_minus[k * w.w_stride + nb]
                if s == 0:
                    break
                s = (s - 1) & a
            for b in range(d):
                if not ((a >> b) & 1):
                    row[b] = row[b] - minus
                row[b] = row[b] * w.scale


def interventional_tables(structure, const int64_t[::1] leaves, const double[::1] hist,
                          const int64_t[::1] hist_start, const int64_t[::1] table_start,
                          const double[:, ::1] w_plus, const double[:, ::1] w_minus,
                          double scale, int n_threads):
    """T[a, i] of every leaf in ``leaves`` (indices into the structure's leaf
    arrays), times ``scale`` (1 / number of background rows).

    ``table_start[r]`` is where leaf ``leaves[r]``'s 2^d x d block starts;
    ``hist_start`` (by structure leaf index) where its histogram does.
    """
    cdef int64_t n_leaves = leaves.shape[0]
    cdef double[::1] tables = np.zeros(table_start[n_leaves] if n_leaves else 0)
    cdef LeafTables w
    if n_leaves == 0:
        return np.asarray(tables)
    w = LeafTables(p=patterns_from(structure), tables=tables_of(leaves, table_start, tables),
                   hist=&hist[0], hist_start=&hist_start[0],
                   w_plus=&w_plus[0, 0], w_minus=&w_minus[0, 0], w_stride=w_plus.shape[1],
                   scale=scale)
    parallel_units(n_leaves, 1, NULL, leaf_tables, &w, n_threads)
    return np.asarray(tables)


cdef struct DirectSums:
    Patterns p
    const int64_t* pattern_start  # by leaf
    const uint64_t* patterns
    const double* counts
    const double* w_plus          # (k, m) rows of w_stride
    const double* w_minus
    int64_t w_stride
    double scale
    Outputs out


cdef void direct_row(void* work, Forest f, TreeBlock tb) noexcept nogil:
    """Add the values of one row (a block of one) at the tree's leaves, from
    the leaves' distinct background patterns c with (a | c) all ones."""
    cdef DirectSums s = (<const DirectSums*> work)[0]
    cdef Patterns p = s.p
    cdef double* acc = <double*> tb.scratch  # per bit of a leaf (d <= 64)
    cdef int64_t W = f.n_values
    cdef int64_t i = tb.i0
    cdef int64_t lv, v, d, e, na, nb, k, b, w, q
    cdef uint64_t a, c, full, bits
    cdef double wp, minus, value
    cdef double* target
    for lv in range(tb.n_leaves):
        v = tb.first_leaf + lv
        d = p.dim[v]
        full = full_mask(d)
        a = tb.leaf_pattern[lv]
        na = popcount(a)
        nb = d - na
        for b in range(d):
            acc[b] = 0.0
        minus = 0.0
        for q in range(s.pattern_start[v], s.pattern_start[v + 1]):
            c = s.patterns[q]
            if (a | c) != full:
                continue
            bits = full & ~c  # A (inside a)
            k = popcount(bits)
            if k > 0:
                wp = s.counts[q] * s.w_plus[k * s.w_stride + nb]
                for b in range(d):
                    if (bits >> b) & 1:
                        acc[b] = acc[b] + wp
            if nb > 0:
                minus = minus + s.counts[q] * s.w_minus[k * s.w_stride + nb]
        for b in range(d):
            if not ((a >> b) & 1):
                acc[b] = acc[b] - minus
        e = p.fstart[v]
        if W == 1:
            value = f.value[p.leaf_node[v]] * s.scale
            target = output_row(&s.out, i, f.tree_output[tb.t])
            for b in range(d):
                target[p.feature[e + b]] += value * acc[b]
        else:
            for w in range(W):
                value = f.value[p.leaf_node[v] * W + w] * s.scale
                target = output_row(&s.out, i, w)
                for b in range(d):
                    target[p.feature[e + b]] += value * acc[b]


def direct_semivalues(ens, const double[:, ::1] X, structure, const int64_t[::1] trees,
                      const int64_t[::1] pattern_start, const uint64_t[::1] patterns,
                      const double[::1] counts,
                      const double[:, ::1] w_plus, const double[:, ::1] w_minus,
                      double scale, double[:, :, ::1] out, int n_threads):
    """Add the values of ``trees`` to ``out`` (n_rows, n_outputs, p), each row
    running over its leaves' distinct background patterns
    ``patterns[pattern_start[v]:pattern_start[v + 1]]`` (with their ``counts``;
    ``pattern_start`` indexed by the structure's leaf index)."""
    cdef Forest f = forest_from(ens)
    cdef DirectSums s = DirectSums(
        patterns_from(structure), &pattern_start[0], &patterns[0], &counts[0], &w_plus[0, 0],
        &w_minus[0, 0], w_plus.shape[1], scale, Outputs(&out[0, 0, 0], out.shape[1], out.shape[2]))
    pattern_blocks(&f, &s.p, X, trees, 1, False, 64 * sizeof(double), direct_row, &s, n_threads)


cdef struct TableSums:
    Patterns p
    const double* tables
    const int64_t* table_start  # by leaf
    Outputs out


cdef void table_block(void* work, Forest f, TreeBlock tb) noexcept nogil:
    """Add, leaf by leaf, the table row T[a] of every row's pattern a times
    the leaf's value."""
    cdef TableSums s = (<const TableSums*> work)[0]
    cdef int64_t W = f.n_values
    cdef int64_t i, lv, v, d, b, w
    cdef double value
    cdef const double* row
    cdef const int64_t* feat
    cdef double* target
    for lv in range(tb.n_leaves):
        v = tb.first_leaf + lv
        d = s.p.dim[v]
        feat = &s.p.feature[s.p.fstart[v]]
        for w in range(W):
            value = f.value[s.p.leaf_node[v] * W + w]
            if value == 0.0:
                continue
            for i in range(tb.i0, tb.i1):
                row = &s.tables[s.table_start[v]
                                + tb.leaf_pattern[(i - tb.i0) * tb.n_leaves + lv] * d]
                target = output_row(&s.out, i, f.tree_output[tb.t] if W == 1 else w)
                for b in range(d):
                    target[feat[b]] += value * row[b]


def table_semivalues(ens, const double[:, ::1] X, structure, const int64_t[::1] trees,
                     const double[::1] tables, const int64_t[::1] table_start,
                     double[:, :, ::1] out, int n_threads):
    """Add the tabulated values of ``trees`` to ``out`` (n_rows, n_outputs, p):
    every row reads, at every leaf, the table row of its pattern (times the
    leaf's value). ``table_start`` is indexed by the structure's leaf index.
    Rows in blocks of 64 (``pattern_blocks``)."""
    cdef Forest f = forest_from(ens)
    cdef TableSums s
    s.p = patterns_from(structure)
    s.tables = &tables[0]
    s.table_start = &table_start[0]
    s.out = Outputs(&out[0, 0, 0], out.shape[1], out.shape[2])
    pattern_blocks(&f, &s.p, X, trees, 64, False, 0, table_block, &s, n_threads)


# Sibling leaves. Two leaves l1, l2 that are the children of one node k have
# the same distinct path features (those of k's path and k's own, in the
# same bits), and a row's patterns at them differ only in the bit s of k's
# feature. So one table indexed by (a1, bit s of a2), 2^(d+1) rows of
# v1 T1[a1] + v2 T2[a2], gives both leaves' values with one lookup and d
# additions instead of two and 2d (single-value leaves).

cdef struct Units:
    const int64_t* first   # a leaf (structure index)
    const int64_t* second  # its sibling, or -1
    const int64_t* bit     # the bit in which the sibling's pattern differs
    const int64_t* start   # where the unit's table starts


cdef Units units_of(const int64_t[::1] first, const int64_t[::1] second,
                    const int64_t[::1] bit, const int64_t[::1] start):
    return Units(first=&first[0], second=&second[0], bit=&bit[0], start=&start[0])


cdef struct UnitTables:
    Forest f
    Patterns p
    Units units
    const double* tables
    const int64_t* table_start  # by leaf
    double* out


cdef void unit_table_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                          Interrupt* stop) noexcept nogil:
    cdef UnitTables w = (<const UnitTables*> work)[0]
    cdef int64_t u, l1, l2, d, s, q, b
    cdef uint64_t a1, a2
    cdef double v1, v2
    cdef const double* t1
    cdef const double* t2
    cdef double* dst
    for u in range(lo, hi):
        l1 = w.units.first[u]
        l2 = w.units.second[u]
        d = w.p.dim[l1]
        v1 = w.f.value[w.p.leaf_node[l1]]
        t1 = &w.tables[w.table_start[l1]]
        if l2 < 0:
            for a1 in range(<uint64_t> 1 << d):
                dst = &w.out[w.units.start[u] + a1 * d]
                for b in range(d):
                    dst[b] = v1 * t1[a1 * d + b]
            continue
        v2 = w.f.value[w.p.leaf_node[l2]]
        t2 = &w.tables[w.table_start[l2]]
        s = w.units.bit[u]
        for q in range(2):
            for a1 in range(<uint64_t> 1 << d):
                a2 = (a1 & ~((<uint64_t> 1) << s)) | ((<uint64_t> q) << s)
                dst = &w.out[w.units.start[u] + ((<uint64_t> q << d) | a1) * d]
                for b in range(d):
                    dst[b] = v1 * t1[a1 * d + b] + v2 * t2[a2 * d + b]


def unit_tables(ens, structure, const double[::1] tables, const int64_t[::1] table_start,
                const int64_t[::1] unit_first, const int64_t[::1] unit_second,
                const int64_t[::1] unit_bit, const int64_t[::1] unit_start, int n_threads):
    """Tables of units (a leaf, or two sibling leaves), leaf values included.

    ``table_start`` (by structure leaf index) locates each leaf's 2^d x d
    table in ``tables``; unit u covers leaf ``unit_first[u]`` and, if
    ``unit_second[u] >= 0``, its sibling, whose pattern differs in bit
    ``unit_bit[u]``; its table starts at ``unit_start[u]``."""
    cdef int64_t n_units = unit_first.shape[0]
    cdef double[::1] out = np.empty(unit_start[n_units] if n_units else 0)
    cdef UnitTables w
    w.f = forest_from(ens)
    if w.f.n_values != 1:
        raise ValueError("unit_tables needs one value per leaf")
    if n_units == 0:
        return np.asarray(out)
    w.p = patterns_from(structure)
    w.units = units_of(unit_first, unit_second, unit_bit, unit_start)
    w.tables = &tables[0]
    w.table_start = &table_start[0]
    w.out = &out[0]
    parallel_units(n_units, 1, NULL, unit_table_rows, &w, n_threads)
    return np.asarray(out)


cdef struct UnitSums:
    Patterns p
    Units units
    const int64_t* tree_unit_start  # tree t's units: tree_unit_start[t]:tree_unit_start[t + 1]
    const double* tables
    Outputs out


cdef void unit_block(void* work, Forest f, TreeBlock tb) noexcept nogil:
    """Add, unit by unit, the table row of every row's (pattern, right bit)."""
    cdef UnitSums s = (<const UnitSums*> work)[0]
    cdef int64_t i, u, l1, l2, lv1, lv2, d, b, bit
    cdef uint64_t index
    cdef const double* row
    cdef const int64_t* feat
    cdef double* target
    for u in range(s.tree_unit_start[tb.t], s.tree_unit_start[tb.t + 1]):
        l1 = s.units.first[u]
        l2 = s.units.second[u]
        d = s.p.dim[l1]
        feat = &s.p.feature[s.p.fstart[l1]]
        lv1 = l1 - tb.first_leaf
        lv2 = l2 - tb.first_leaf
        bit = s.units.bit[u]
        for i in range(tb.i0, tb.i1):
            index = tb.leaf_pattern[(i - tb.i0) * tb.n_leaves + lv1]
            if l2 >= 0:
                index = index | (((tb.leaf_pattern[(i - tb.i0) * tb.n_leaves + lv2] >> bit)
                                  & 1) << d)
            row = &s.tables[s.units.start[u] + index * d]
            target = output_row(&s.out, i, f.tree_output[tb.t])
            for b in range(d):
                target[feat[b]] += row[b]


def unit_semivalues(ens, const double[:, ::1] X, structure, const int64_t[::1] trees,
                    const int64_t[::1] tree_unit_start, const int64_t[::1] unit_first,
                    const int64_t[::1] unit_second, const int64_t[::1] unit_bit,
                    const int64_t[::1] unit_start, const double[::1] tables,
                    double[:, :, ::1] out, int n_threads):
    """Add the values of ``trees`` (single-value leaves) to ``out`` (n_rows,
    n_outputs, p) from their units' tables (``unit_tables``); tree t's units
    are ``tree_unit_start[t]:tree_unit_start[t + 1]``. Rows in blocks of 64
    (``pattern_blocks``), unit by unit within a block."""
    cdef Forest f = forest_from(ens)
    cdef UnitSums s
    if f.n_values != 1:
        raise ValueError("unit_semivalues needs one value per leaf")
    s.p = patterns_from(structure)
    s.units = units_of(unit_first, unit_second, unit_bit, unit_start)
    s.tree_unit_start = &tree_unit_start[0]
    s.tables = &tables[0]
    s.out = Outputs(&out[0, 0, 0], out.shape[1], out.shape[2])
    pattern_blocks(&f, &s.p, X, trees, 64, False, 0, unit_block, &s, n_threads)
