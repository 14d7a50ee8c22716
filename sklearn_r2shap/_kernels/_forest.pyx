# Pointers into a TreeEnsemble's arrays, and into a pattern structure's, for
# nogil kernels.
import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint32_t

ctypedef fused Element:
    int64_t
    double
    uint8_t
    uint32_t


cdef const Element* data(const Element[::1] a) noexcept:
    """The first element of ``a`` (a contiguous array of that type, which
    must outlive the pointer's use)."""
    return &a[0]


cdef Forest forest_from(object ens) except *:
    """Fill a Forest with pointers into ``ens`` (which must outlive its use)."""
    cdef Forest f
    cdef const double[:, ::1] value = ens.value
    f.left = data[int64_t](ens.children_left)
    f.right = data[int64_t](ens.children_right)
    f.default_child = data[int64_t](ens.default_child)
    f.feature = data[int64_t](ens.feature)
    # players other than the split features (feature groups): routing reads route_feature
    f.route_feature = data[int64_t](ens.feature if ens.route_feature is None
                                    else ens.route_feature)
    f.threshold = data[double](ens.threshold)
    f.decision = data[uint8_t](ens.decision_type)
    f.cat_start = data[int64_t](ens.cat_start)
    f.cat_words = data[int64_t](ens.cat_words)
    f.cat_bits = data[uint32_t](ens.cat_bitsets)
    f.ratio = data[double](ens.cover_ratio)
    f.parent = data[int64_t](ens.parent)
    f.prev_same = data[int64_t](ens.prev_same)
    f.value = &value[0, 0]
    f.tree_start = data[int64_t](ens.tree_start)
    f.tree_output = data[int64_t](ens.tree_output)
    f.n_trees = len(ens.tree_start) - 1
    f.n_nodes = len(ens.feature)
    f.n_values = value.shape[1]
    f.n_outputs = ens.n_outputs
    f.n_features = ens.n_features
    f.max_tree_nodes = int(np.max(np.diff(ens.tree_start)))
    return f


cdef Patterns patterns_from(object structure) except *:
    """Fill a Patterns with pointers into ``structure`` (pattern_structure's
    dict, which must outlive its use)."""
    cdef Patterns p
    cdef int64_t k, n_trees = len(structure["tree_leaf_start"]) - 1
    p.node_slot = data[int64_t](structure["node_slot"])
    p.leaf_node = data[int64_t](structure["leaf_node"])
    p.dim = data[int64_t](structure["leaf_dim"])
    p.fstart = data[int64_t](structure["leaf_feature_start"])
    p.feature = data[int64_t](structure["leaf_feature"])
    p.ratio = data[double](structure["leaf_ratio"])
    p.edge = data[int64_t](structure["leaf_edge"])
    p.tree_leaf_start = data[int64_t](structure["tree_leaf_start"])
    p.n_leaves = len(structure["leaf_dim"])
    p.n_entries = len(structure["leaf_feature"])
    p.max_leaves = 1
    for k in range(n_trees):
        p.max_leaves = max(p.max_leaves, p.tree_leaf_start[k + 1] - p.tree_leaf_start[k])
    p.max_dim = 0
    for k in range(p.n_leaves):
        p.max_dim = max(p.max_dim, p.dim[k])
    return p
