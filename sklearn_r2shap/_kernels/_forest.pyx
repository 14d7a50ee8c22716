# Pointers into a TreeEnsemble's arrays for nogil kernels.
import numpy as np

from libc.stdint cimport int64_t, uint8_t, uint32_t


cdef Forest forest_from(object ens) except *:
    """Fill a Forest with pointers into ``ens`` (which must outlive its use)."""
    cdef Forest f
    cdef const int64_t[::1] left = ens.children_left
    cdef const int64_t[::1] right = ens.children_right
    cdef const int64_t[::1] default_child = ens.default_child
    cdef const int64_t[::1] feature = ens.feature
    # players other than the split features (feature groups): routing reads route_feature
    cdef const int64_t[::1] route_feature = (ens.feature if ens.route_feature is None
                                             else ens.route_feature)
    cdef const double[::1] threshold = ens.threshold
    cdef const uint8_t[::1] decision = ens.decision_type
    cdef const int64_t[::1] cat_start = ens.cat_start
    cdef const int64_t[::1] cat_words = ens.cat_words
    cdef const uint32_t[::1] cat_bits = ens.cat_bitsets
    cdef const double[::1] ratio = ens.cover_ratio
    cdef const int64_t[::1] parent = ens.parent
    cdef const int64_t[::1] prev_same = ens.prev_same
    cdef const double[:, ::1] value = ens.value
    cdef const int64_t[::1] tree_start = ens.tree_start
    cdef const int64_t[::1] tree_output = ens.tree_output
    f.left = &left[0]
    f.right = &right[0]
    f.default_child = &default_child[0]
    f.feature = &feature[0]
    f.route_feature = &route_feature[0]
    f.threshold = &threshold[0]
    f.decision = &decision[0]
    f.cat_start = &cat_start[0]
    f.cat_words = &cat_words[0]
    f.cat_bits = &cat_bits[0]
    f.ratio = &ratio[0]
    f.parent = &parent[0]
    f.prev_same = &prev_same[0]
    f.value = &value[0, 0]
    f.tree_start = &tree_start[0]
    f.tree_output = &tree_output[0]
    f.n_trees = tree_start.shape[0] - 1
    f.n_nodes = feature.shape[0]
    f.n_values = value.shape[1]
    f.n_outputs = ens.n_outputs
    f.n_features = ens.n_features
    f.max_tree_nodes = int(np.max(np.diff(ens.tree_start)))
    return f
