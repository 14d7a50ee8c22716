# Saabas path contributions (xgboost ``approx_contribs``; doc/local_attributions.rst):
# along x's decision path, the change of the node's cover-weighted mean is
# credited to the node's split feature.
import numpy as np

from libc.stdint cimport int64_t

from ._common cimport Outputs, Rows, output_row, parallel_units, row_at, rows_of
from ._forest cimport Forest, Interrupt, forest_from, next_node

cdef enum:
    ROWS_PER_CHUNK = 16


cdef struct PathSums:
    Forest f
    Rows rows
    const double* mean  # (nodes, values)
    Outputs out


cdef void path_rows(void* work, int64_t lo, int64_t hi, void* scratch,
                    Interrupt* stop) noexcept nogil:
    cdef PathSums w = (<const PathSums*> work)[0]
    cdef const Forest* f = &w.f
    cdef int64_t i, t, node, child, v, W = f.n_values
    cdef double* row
    for i in range(lo, hi):
        for t in range(f.n_trees):
            node = f.tree_start[t]
            row = output_row(&w.out, i, f.tree_output[t]) if W == 1 else output_row(&w.out, i, 0)
            while f.left[node] >= 0:
                child = next_node(f, node, row_at(&w.rows, i))
                for v in range(W):
                    row[v * w.out.width + f.feature[node]] += (
                        w.mean[child * W + v] - w.mean[node * W + v])
                node = child


def saabas(ens, const double[:, ::1] X, const double[:, ::1] mean, int n_threads):
    """Contributions of shape (n_rows, n_outputs, n_features); bias excluded."""
    cdef PathSums w
    cdef double[:, :, ::1] out
    w.f = forest_from(ens)
    out = np.zeros((X.shape[0], w.f.n_outputs, w.f.n_features))
    if X.shape[0] == 0 or w.f.n_features == 0:
        return np.asarray(out)
    w.rows = rows_of(X)
    w.mean = &mean[0, 0]
    w.out = Outputs(&out[0, 0, 0], out.shape[1], out.shape[2])
    parallel_units(X.shape[0], ROWS_PER_CHUNK, NULL, path_rows, &w, n_threads)
    return np.asarray(out)
