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


cdef Patterns patterns_from(object structure, bint maxima=True) except *:
    """Fill a Patterns with pointers into ``structure`` (pattern_structure's
    dict, which must outlive its use). Without ``maxima`` (a loop over every
    leaf: 20 us for a depth-8 model, a tenth of a row's time), ``max_leaves``
    and ``max_dim`` are -1."""
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
    p.max_leaves = -1
    p.max_dim = -1
    if not maxima:
        return p
    p.max_leaves = 1
    for k in range(n_trees):
        p.max_leaves = max(p.max_leaves, p.tree_leaf_start[k + 1] - p.tree_leaf_start[k])
    p.max_dim = 0
    for k in range(p.n_leaves):
        p.max_dim = max(p.max_dim, p.dim[k])
    return p


cdef struct PathEntry:
    # an internal node on the path from the root to the node being visited
    int64_t node         # its new index
    int64_t feature      # the feature of the edge into it (-1 for a root)
    int64_t saved        # the last_edge entry that edge replaced, restored on leaving it
    int64_t right_child  # its right child (old index), -1 once the walk went there


def forest_structure(const int64_t[::1] children_left, const int64_t[::1] children_right,
                     const int64_t[::1] feature, const int64_t[::1] tree_start,
                     int64_t n_features, bint local):
    """Preorder, node links and path structure of every tree, one walk per tree.

    Each tree is walked depth first from its root, left subtree first; a
    stack holds the internal nodes on the path to the node visited. The walk
    numbers the nodes in preorder and finds each node's nearest ancestor edge
    on the same feature (``TreeEnsemble.prev_same``).

    Parameters
    ----------
    children_left, children_right : ndarray of int64, shape (n_nodes,)
        Child indices, local to each tree when ``local`` (tree t's root is
        its local node 0) and indices into all nodes otherwise; a node whose
        left child is negative is a leaf (its right child is then ignored).
    feature : ndarray of int64, shape (n_nodes,)
        Split feature (or player) of each node; ignored for leaves.
    tree_start : ndarray of int64, shape (n_trees + 1,)
        Tree t is nodes ``tree_start[t]:tree_start[t + 1]``, its root first.
    n_features : int
        Split features must lie in ``[0, n_features)``.
    local : bool
        Whether child indices are local to their tree.

    Returns
    -------
    tuple or None
        None when any tree is broken: a child index outside its tree, a left
        child without a right one, a node reached twice (a cycle or two
        parents), a node unreachable from the root, or a split feature out of
        range (the caller names the fault). Otherwise ``(order, left, right,
        parent, feature, prev_same, n_path_features, max_depth)``: new node i
        is old node ``order[i]`` (``order`` is None when the nodes already are
        in preorder), each tree keeping its range; ``left``, ``right``,
        ``parent`` and ``prev_same`` are indices into all nodes in the new
        numbering (-1: none), ``feature`` is -1 at leaves;
        ``n_path_features`` is the largest number of distinct features on a
        root-to-leaf path and ``max_depth`` the largest number of edges.
    """
    cdef int64_t n = children_left.shape[0]
    cdef int64_t n_trees = tree_start.shape[0] - 1
    if (children_right.shape[0] != n or feature.shape[0] != n or n_trees < 0
            or tree_start[0] != 0 or tree_start[n_trees] != n):
        raise ValueError("forest_structure: arrays of mismatched lengths.")
    cdef int64_t t, max_size = 1
    for t in range(n_trees):
        if tree_start[t + 1] - tree_start[t] < 1:
            raise ValueError("forest_structure: every tree needs a node.")
        max_size = max(max_size, tree_start[t + 1] - tree_start[t])
    # (order's pages are only written, and so mapped, if some node moves)
    arrays = [np.empty(max(n, 1), dtype=np.int64) for _ in range(6)]
    cdef int64_t[::1] order_v = arrays[0], left_v = arrays[1], right_v = arrays[2]
    cdef int64_t[::1] parent_v = arrays[3], feature_v = arrays[4], prev_same_v = arrays[5]
    cdef int64_t* order = &order_v[0]
    cdef int64_t* left = &left_v[0]
    cdef int64_t* right = &right_v[0]
    cdef int64_t* parent = &parent_v[0]
    cdef int64_t* new_feature = &feature_v[0]
    cdef int64_t* prev_same = &prev_same_v[0]
    cdef uint8_t[::1] seen_v = np.zeros(max(n, 1), dtype=np.uint8)
    cdef uint8_t* seen = &seen_v[0]
    # last_edge[j]: the deepest edge on the current path whose parent splits on j
    cdef int64_t[::1] last_edge_v = np.full(max(n_features, 1), -1, dtype=np.int64)
    cdef int64_t* last_edge = &last_edge_v[0]
    cdef uint8_t[::1] path_v = np.empty(max_size * sizeof(PathEntry), dtype=np.uint8)
    cdef PathEntry* path = <PathEntry*> &path_v[0]
    cdef const int64_t* old_left = &children_left[0] if n else NULL
    cdef const int64_t* old_right = &children_right[0] if n else NULL
    cdef const int64_t* old_feature = &feature[0] if n else NULL
    cdef int64_t start, stop, lowest, highest, offset, n_path, i, k, p, j, a, b, saved
    cdef int64_t distinct, most_distinct = 0, deepest = 0
    cdef bint broken = False, identity = True
    with nogil:
        for t in range(n_trees):
            start, stop = tree_start[t], tree_start[t + 1]
            # the range a child index must lie in, as the caller numbers children
            if local:
                lowest, highest, offset = 0, stop - start, start
            else:
                lowest, highest, offset = start, stop, 0
            k, p, i, n_path, distinct = start, -1, start, 0, 0
            while True:  # visit old node k as new node i, a child of new node p
                if seen[k]:
                    broken = True
                    break
                seen[k] = 1
                if identity and k != i:  # (order is written from the first move on)
                    identity = False
                    for j in range(i):
                        order[j] = j
                if not identity:
                    order[i] = k
                parent[i] = p
                j, saved = -1, -1
                if p >= 0:
                    j = new_feature[p]
                    saved = last_edge[j]
                    last_edge[j] = i
                    distinct += saved < 0
                prev_same[i] = saved
                a = old_left[k]
                if a >= 0:
                    b = old_right[k]
                    if (b < 0 or a < lowest or a >= highest or b < lowest or b >= highest
                            or old_feature[k] < 0 or old_feature[k] >= n_features):
                        broken = True
                        break
                    new_feature[i] = old_feature[k]
                    left[i] = i + 1  # the left child is visited next
                    path[n_path].node = i
                    path[n_path].feature = j
                    path[n_path].saved = saved
                    path[n_path].right_child = b + offset
                    n_path += 1
                    k, p, i = a + offset, i, i + 1
                    continue
                left[i], right[i], new_feature[i] = -1, -1, -1
                # (the deepest paths and those of most features end at leaves)
                deepest = max(deepest, n_path)
                most_distinct = max(most_distinct, distinct)
                if j >= 0:
                    last_edge[j] = saved
                    distinct -= saved < 0
                # Up to the nearest node on the path whose right subtree is still to walk.
                while n_path > 0 and path[n_path - 1].right_child < 0:
                    n_path -= 1
                    if path[n_path].feature >= 0:
                        last_edge[path[n_path].feature] = path[n_path].saved
                        distinct -= path[n_path].saved < 0
                if n_path == 0:
                    break
                k = path[n_path - 1].right_child
                path[n_path - 1].right_child = -1
                p, i = path[n_path - 1].node, i + 1
                right[p] = i
            # (fewer nodes visited: some are unreachable from the root)
            if broken or i + 1 != stop:
                broken = True
                break
    if broken:
        return None
    if n == 0:  # (one element was allocated)
        arrays = [array[:0] for array in arrays]
    return (None if identity else arrays[0], *arrays[1:], most_distinct, deepest)


def cover_ratio(const double[::1] cover, const int64_t[::1] parent):
    """``c_k / c_parent(k)``, 1 for a root; 0.5 below a parent of cover 0 (or
    NaN), which splits its (zero) mass evenly so that v_x stays finite."""
    cdef int64_t k, p, n = cover.shape[0]
    ratio_a = np.empty(n, dtype=np.float64)
    cdef double[::1] ratio = ratio_a
    cdef double c
    with nogil:
        for k in range(n):
            p = parent[k]
            if p < 0:
                ratio[k] = 1.0
                continue
            c = cover[p]
            ratio[k] = cover[k] / c if c > 0 else 0.5
    return ratio_a
