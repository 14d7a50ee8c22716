# Raw predictions and cover-weighted node means of a TreeEnsemble. The row
# loops stop on Ctrl-C (``interrupted``, polled once per ROWS_PER_POLL rows).
import numpy as np

from cython.parallel cimport prange
from libc.stdint cimport int64_t

cdef enum:
    ROWS_PER_POLL = 64  # a clock read per row would cost a third of a small model's row

from ._forest cimport (
    Forest, Interrupt, add_leaf_value, forest_from, interrupt_new, interrupt_raise, interrupted,
    leaf_of,
)


def predict_raw(ens, const double[:, ::1] X, int n_threads):
    """f(x) in the model's raw (margin) space, shape (n_rows, n_outputs)."""
    cdef Forest f = forest_from(ens)
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef double[:, ::1] out = np.tile(np.asarray(ens.base_value), (n_rows, 1))
    cdef Py_ssize_t i, c
    cdef int64_t t
    cdef Interrupt stop = interrupt_new()
    for c in prange((n_rows + ROWS_PER_POLL - 1) // ROWS_PER_POLL, nogil=True,
                    num_threads=n_threads, schedule="static"):
        if interrupted(&stop):
            continue
        for i in range(c * ROWS_PER_POLL, min(n_rows, (c + 1) * ROWS_PER_POLL)):
            for t in range(f.n_trees):
                add_leaf_value(&f, t, leaf_of(&f, t, &X[i, 0]), &out[i, 0])
    interrupt_raise(&stop)
    return np.asarray(out)


def leaf_values(ens, const double[:, ::1] X, int n_threads):
    """The value of the leaf each row reaches in each tree, shape (n_rows, n_trees)
    (single-value leaves)."""
    cdef Forest f = forest_from(ens)
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef double[:, ::1] out = np.empty((n_rows, f.n_trees))
    cdef Py_ssize_t i, c
    cdef int64_t t
    cdef Interrupt stop = interrupt_new()
    if f.n_values != 1:
        raise ValueError("leaf_values needs one value per leaf")
    for c in prange((n_rows + ROWS_PER_POLL - 1) // ROWS_PER_POLL, nogil=True,
                    num_threads=n_threads, schedule="static"):
        if interrupted(&stop):
            continue
        for i in range(c * ROWS_PER_POLL, min(n_rows, (c + 1) * ROWS_PER_POLL)):
            for t in range(f.n_trees):
                out[i, t] = f.value[leaf_of(&f, t, &X[i, 0])]
    interrupt_raise(&stop)
    return np.asarray(out)


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
    cdef Forest f = forest_from(ens)
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef int64_t[:, ::1] out = np.empty((n_rows, f.n_trees), dtype=np.int64)
    cdef Py_ssize_t i, c
    cdef int64_t t
    cdef Interrupt stop = interrupt_new()
    for c in prange((n_rows + ROWS_PER_POLL - 1) // ROWS_PER_POLL, nogil=True,
                    num_threads=n_threads, schedule="static"):
        if interrupted(&stop):
            continue
        for i in range(c * ROWS_PER_POLL, min(n_rows, (c + 1) * ROWS_PER_POLL)):
            for t in range(f.n_trees):
                out[i, t] = leaf_of(&f, t, &X[i, 0])
    interrupt_raise(&stop)
    return np.asarray(out)
