# Saabas path contributions (xgboost ``approx_contribs``; doc/local_attributions.rst):
# along x's decision path, the change of the node's cover-weighted mean is
# credited to the node's split feature.
import numpy as np

from cython.parallel cimport prange
from libc.stdint cimport int64_t

from ._forest cimport (
    Forest, forest_from, next_node, Interrupt, interrupt_new, interrupted, interrupt_raise,
)


def saabas(ens, const double[:, ::1] X, const double[:, ::1] mean, int n_threads):
    """Contributions of shape (n_rows, n_outputs, n_features); bias excluded."""
    cdef Forest f = forest_from(ens)
    cdef Py_ssize_t n_rows = X.shape[0]
    cdef double[:, :, ::1] out = np.zeros((n_rows, f.n_outputs, f.n_features))
    cdef Py_ssize_t i
    cdef int64_t t, node, child, w, o, j
    cdef Interrupt stop = interrupt_new()
    for i in prange(n_rows, nogil=True, num_threads=n_threads, schedule="static"):
        if interrupted(&stop):
            continue
        for t in range(f.n_trees):
            node = f.tree_start[t]
            while f.left[node] >= 0:
                child = next_node(&f, node, &X[i, 0])
                j = f.feature[node]
                if f.n_values == 1:
                    out[i, f.tree_output[t], j] += mean[child, 0] - mean[node, 0]
                else:
                    for w in range(f.n_values):
                        out[i, w, j] += mean[child, w] - mean[node, w]
                node = child
    interrupt_raise(&stop)
    return np.asarray(out)
