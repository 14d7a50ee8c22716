# Raw predictions and cover-weighted node means of a TreeEnsemble. The row
# loops stop on Ctrl-C (``interrupted``, polled once per ROWS_PER_POLL rows).
import numpy as np

from libc.stdint cimport int64_t

from ._common cimport Rows, parallel_units, row_at, rows_of
from ._forest cimport Forest, Interrupt, add_leaf_value, forest_from, leaf_of

cdef enum:
    ROWS_PER_POLL = 64  # a clock read per row would cost a third of a small model's row

cdef enum Reading:
    RAW          # add the leaf values to the row's outputs
    LEAF_VALUE   # the leaf's value per tree
    LEAF         # the leaf's node per tree


cdef struct Routes:
    Forest f
    Rows rows
    Reading reading
    double* values   # RAW: (rows, width = outputs); LEAF_VALUE: (rows, width = trees)
    int64_t* leaves  # LEAF: (rows, width = trees)
    int64_t width


cdef void route_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                     Interrupt* stop) noexcept nogil:
    cdef Routes w = (<const Routes*> work)[0]
    cdef int64_t i, t, leaf
    for i in range(lo, hi):
        for t in range(w.f.n_trees):
            leaf = leaf_of(&w.f, t, row_at(&w.rows, i))
            if w.reading == RAW:
                add_leaf_value(&w.f, t, leaf, w.values + i * w.width)
            elif w.reading == LEAF_VALUE:
                w.values[i * w.width + t] = w.f.value[leaf]
            else:
                w.leaves[i * w.width + t] = leaf


cdef route(ens, const double[:, ::1] X, Reading reading, out, int n_threads):
    cdef Routes w
    cdef double[:, ::1] values
    cdef int64_t[:, ::1] leaves
    w.f = forest_from(ens)
    w.rows = rows_of(X)
    w.reading = reading
    w.width = out.shape[1]
    w.values = NULL
    w.leaves = NULL
    if X.shape[0] == 0:
        return out
    if reading == LEAF:
        leaves = out
        w.leaves = &leaves[0, 0]
    else:
        values = out
        w.values = &values[0, 0]
    parallel_units(X.shape[0], ROWS_PER_POLL, NULL, route_rows, &w, n_threads)
    return out


def predict_raw(ens, const double[:, ::1] X, int n_threads):
    """f(x) in the model's raw (margin) space, shape (n_rows, n_outputs)."""
    return route(ens, X, RAW, np.tile(np.asarray(ens.base_value, dtype=np.float64),
                                      (X.shape[0], 1)), n_threads)


def leaf_values(ens, const double[:, ::1] X, int n_threads):
    """The value of the leaf each row reaches in each tree, shape (n_rows, n_trees)
    (single-value leaves)."""
    if forest_from(ens).n_values != 1:
        raise ValueError("leaf_values needs one value per leaf")
    return route(ens, X, LEAF_VALUE, np.empty((X.shape[0], len(ens.tree_start) - 1)),
                 n_threads)


def node_means(ens):
    """v(empty) of every subtree: the cover-weighted mean of its leaves.

    ``mean[k] = sum_children ratio[c] * mean[c]``, the recursion of the
    path-dependent value function with no feature known (doc/local_attributions.rst).
    Shape (n_nodes, n_values).
    """
    cdef Forest f = forest_from(ens)
    cdef double[:, ::1] mean = np.where(
        (np.asarray(ens.children_left) < 0)[:, None], ens.value, 0.0)
    cdef int64_t k, p, w
    with nogil:
        for k in range(f.n_nodes - 1, -1, -1):  # children after parents
            p = f.parent[k]
            if p >= 0:
                for w in range(f.n_values):
                    mean[p, w] += f.ratio[k] * mean[k, w]
    return np.asarray(mean)


def apply(ens, const double[:, ::1] X, int n_threads):
    """The leaf (global node index) each row reaches in each tree, shape
    (n_rows, n_trees), routed by ``next_node`` exactly as ``predict_raw``."""
    return route(ens, X, LEAF, np.empty((X.shape[0], len(ens.tree_start) - 1), dtype=np.int64),
                 n_threads)
