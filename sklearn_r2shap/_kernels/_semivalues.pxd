from libc.stdint cimport int64_t, uint8_t

from ._common cimport Buffers, Outputs, Rows
from ._forest cimport Forest

cdef struct Scratch:
    double* ratio_prod   # R_k, per node
    double* follow_prod  # X_k, per node
    double* factor       # f_k(t_l), (nodes, m)
    double* inv_factor   # 1 / f_k(t_l), 0 where f_k = 0 (then R_k = X_k = 0), (nodes, m)
    double* path_prod    # s_k(t_l), (nodes, m)
    double* subtree      # sum of leaf terms below k, (nodes, m, n_values)
    double* deepest      # H_k, (nodes, m, n_values)
    uint8_t* left_taken  # whether x goes left, per node

# The first field of a work struct whose threads each take a Scratch
# (``gradient_scratch``, a TakeScratch of _common.parallel_units).
cdef struct ScratchSize:
    int64_t n_nodes
    int64_t m
    int64_t n_values

# A quadrature over whole trees, row by row (semivalues_uniform; the
# piecewise kernel's too).
cdef struct RuleSums:
    ScratchSize size  # first: gradient_scratch reads it
    Forest f
    Rows rows
    const double* points
    const double* weights
    const int64_t* trees
    int64_t n_trees
    Outputs out

cdef RuleSums rule_sums(ens, const double[:, ::1] X, const double[::1] points,
                        const double[::1] weights, const int64_t[::1] trees,
                        double[:, :, ::1] out)
cdef Scratch* scratch_take(Buffers* mem, int64_t n_nodes, int64_t m,
                           int64_t n_values) noexcept nogil
cdef void* gradient_scratch(void* work, Buffers* mem) noexcept nogil
cdef void gradient_down_pass(
    const Forest* f, int64_t t, const double* points, int64_t m,
    const double* ratio_prod, const double* follow_prod,
    double* factor, double* inv_factor, double* path_prod,
) noexcept nogil
cdef void gradient_up_pass(
    const Forest* f, int64_t t, int64_t m, const double* weights,
    const double* ratio_prod, const double* follow_prod, const double* inv_factor,
    double* subtree, double* deepest, double* out,
) noexcept nogil
cdef void tree_gradient_uniform(
    const Forest* f, int64_t t, const double* x,
    const double* points, const double* weights, int64_t m,
    Scratch* sc, double* out,
) noexcept nogil
