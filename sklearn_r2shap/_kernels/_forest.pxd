# The flat tree-ensemble arrays seen from nogil kernels, and the one routine
# that routes a row through a node (DESIGN.md section 1). Every kernel reads
# the ensemble through ``Forest`` and ``next_node``; none re-implements them.
from libc.stdint cimport int64_t, uint8_t, uint32_t
from libc.math cimport isnan, fabs

cdef enum:
    DECISION_LEQ = 0
    DECISION_LT = 1
    DECISION_LEQ_ZERO_MISSING = 2
    DECISION_CATEGORICAL = 3

cdef struct Forest:
    const int64_t* left
    const int64_t* right
    const int64_t* default_child
    const int64_t* feature
    const double* threshold
    const uint8_t* decision
    const int64_t* cat_start
    const int64_t* cat_words
    const uint32_t* cat_bits
    const double* ratio        # cover ratio c_k / c_parent(k)
    const int64_t* parent
    const int64_t* prev_same   # nearest ancestor edge on the same feature
    const double* value        # (n_nodes, n_values), row-major
    const int64_t* tree_start  # (n_trees + 1)
    const int64_t* tree_output # (n_trees)
    int64_t n_trees
    int64_t n_nodes
    int64_t n_values
    int64_t n_outputs
    int64_t n_features
    int64_t max_tree_nodes


cdef Forest forest_from(object ensemble) except *


cdef inline int64_t next_node(const Forest* f, int64_t node, const double* x) noexcept nogil:
    """The child of internal ``node`` that row ``x`` goes to."""
    cdef double v = x[f.feature[node]]
    cdef uint8_t kind = f.decision[node]
    cdef int64_t category, word
    if isnan(v):
        return f.default_child[node]
    if kind == DECISION_LEQ:
        return f.left[node] if v <= f.threshold[node] else f.right[node]
    if kind == DECISION_LT:
        return f.left[node] if v < f.threshold[node] else f.right[node]
    if kind == DECISION_LEQ_ZERO_MISSING:
        if fabs(v) <= 1.0000000180025095e-35:  # LightGBM kZeroThreshold = 1e-35f
            return f.default_child[node]
        return f.left[node] if v <= f.threshold[node] else f.right[node]
    # categorical: int(x) in the node's bitset goes left
    if v < 0 or v >= 2147483648.0:
        return f.right[node]
    category = <int64_t>v
    word = category >> 5
    if word < f.cat_words[node] and (f.cat_bits[f.cat_start[node] + word] >> (category & 31)) & 1:
        return f.left[node]
    return f.right[node]
