"""The structure TreeEnsemble.from_trees computes for all trees at once (preorder,
parents, prev_same, distinct features on a path, depth, category bitsets, linear
leaves) against plain recursive walks written here, on trees of many shapes given
one by one or stacked; and its refusal of broken child arrays."""
import dataclasses

import numpy as np
import pytest

from sklearn_r2shap._model._ensemble import (
    DECISION_CATEGORICAL,
    DECISION_LEQ,
    TreeArrays,
    TreeEnsemble,
    _preorder,
)

N_FEATURES = 5


# ------------------------------------------------------------------ trees
def _renumbered(left, right, rng):
    """The same tree with its non-root nodes numbered in a random order."""
    left, right = np.asarray(left), np.asarray(right)
    perm = np.concatenate([[0], 1 + rng.permutation(len(left) - 1)])  # new -> old
    new = np.empty_like(perm)
    new[perm] = np.arange(len(perm))
    return (np.where(left[perm] >= 0, new[np.maximum(left[perm], 0)], -1),
            np.where(right[perm] >= 0, new[np.maximum(right[perm], 0)], -1))


def random_tree(rng, n_leaves):
    """Child arrays of a random binary tree with ``n_leaves`` leaves, randomly numbered."""
    left, right, leaves = [-1], [-1], [0]
    while len(leaves) < n_leaves:
        k = leaves.pop(int(rng.integers(len(leaves))))
        left[k], right[k] = len(left), len(left) + 1
        leaves += [len(left), len(left) + 1]
        left += [-1, -1]
        right += [-1, -1]
    return _renumbered(left, right, rng)


def caterpillar(rng, depth, side):
    """A spine of ``depth`` splits, each with a leaf beside it; the spine goes down
    on ``side`` ("left", "right" or "zigzag"); randomly numbered."""
    left, right = np.full(2 * depth + 1, -1), np.full(2 * depth + 1, -1)
    spine = 0
    for level in range(depth):
        below, leaf = 2 * level + 1, 2 * level + 2
        go_left = side == "left" or (side == "zigzag" and level % 2 == 0)
        left[spine], right[spine] = (below, leaf) if go_left else (leaf, below)
        spine = below
    return _renumbered(left, right, rng)


def tree_arrays(left, right, rng, output=0, categories=False):
    """TreeArrays with random features, covers and leaf values; ``threshold``
    holds each node's own (local) index so that the new order can be read back."""
    n = len(left)
    internal = left >= 0
    decision = np.full(n, DECISION_LEQ, dtype=np.uint8)
    sets = {}
    if categories:
        decision[internal & (rng.random(n) < 0.5)] = DECISION_CATEGORICAL
        for k in np.flatnonzero(decision == DECISION_CATEGORICAL):
            size = int(rng.integers(0, 6))  # empty sets too
            sets[int(k)] = rng.choice(100, size=size, replace=False)
    return TreeArrays(
        children_left=left, children_right=right,
        default_left=rng.random(n) < 0.5,
        feature=rng.integers(0, N_FEATURES, n),
        threshold=np.arange(n, dtype=np.float64),
        decision_type=decision,
        cover=rng.uniform(1.0, 10.0, n),
        value=rng.normal(size=(n, 1)),
        categories=sets,
        output=output,
    )


def stacked(trees):
    """The same trees as one TreeArrays with ``tree_start``."""
    sizes = [len(t.feature) for t in trees]
    offsets = np.concatenate([[0], np.cumsum(sizes)])
    return TreeArrays(
        children_left=np.concatenate([t.children_left for t in trees]),
        children_right=np.concatenate([t.children_right for t in trees]),
        default_left=np.concatenate([t.default_left for t in trees]),
        feature=np.concatenate([t.feature for t in trees]),
        threshold=np.concatenate([t.threshold for t in trees]),
        decision_type=np.concatenate([t.decision_type for t in trees]),
        cover=np.concatenate([t.cover for t in trees]),
        value=np.concatenate([t.value for t in trees]),
        categories={int(k) + int(o): v for t, o in zip(trees, offsets) for k, v in
                    t.categories.items()},
        output=np.array([t.output for t in trees]),
        tree_start=offsets,
    )


def ensemble(trees, n_outputs=1):
    return TreeEnsemble.from_trees(trees, base_value=np.zeros(n_outputs),
                                   n_features=N_FEATURES)


# ------------------------------------------------------------------ references
def reference_preorder(left, right, k=0):
    """Depth-first, left subtree first, by recursion."""
    if left[k] < 0:
        return [k]
    return [k] + reference_preorder(left, right, left[k]) + reference_preorder(
        left, right, right[k])


def reference_paths(left, right, feature, k=0, parent=-1, path=()):
    """(node, parent, path) of every node by recursion; path: the (child, feature)
    of each edge from the root to the node."""
    yield k, parent, path
    if left[k] >= 0:
        for child in (left[k], right[k]):
            yield from reference_paths(left, right, feature, child, k,
                                       path + ((child, feature[k]),))


def check_tree(ens, t, tree, players=None):
    """Tree ``t`` of ``ens`` against the recursive walks of ``tree`` (TreeArrays);
    returns its depth and most distinct features on a path."""
    left, right = np.asarray(tree.children_left), np.asarray(tree.children_right)
    feature = np.asarray(tree.feature) if players is None else players
    start, stop = ens.tree_start[t], ens.tree_start[t + 1]
    order = reference_preorder(left, right)
    assert stop - start == len(order) == len(left)
    position = np.empty(len(left), dtype=np.int64)  # local node -> ensemble node
    position[order] = start + np.arange(len(order))
    np.testing.assert_array_equal(ens.threshold[start:stop], np.asarray(order, dtype=float))
    internal = left[order] >= 0
    expect_left = np.where(internal, position[np.maximum(left[order], 0)], -1)
    expect_right = np.where(internal, position[np.maximum(right[order], 0)], -1)
    np.testing.assert_array_equal(ens.children_left[start:stop], expect_left)
    np.testing.assert_array_equal(ens.children_right[start:stop], expect_right)
    depth = distinct = 0
    for k, parent, path in reference_paths(left, right, feature):
        node = position[k]
        assert ens.parent[node] == (position[parent] if parent >= 0 else -1)
        # the nearest edge above splitting on the feature of the edge into k
        same = [child for child, f in path[:-1] if path and f == path[-1][1]]
        assert ens.prev_same[node] == (position[same[-1]] if same else -1)
        depth = max(depth, len(path))
        distinct = max(distinct, len({f for _, f in path}))
    return depth, distinct


def check(ens, trees, players=None):
    depth = distinct = 0
    for t, tree in enumerate(trees):
        d, m = check_tree(ens, t, tree, None if players is None else players[t])
        depth, distinct = max(depth, d), max(distinct, m)
    assert ens.max_depth == depth
    assert ens.n_path_features == distinct
    # parents: each internal node is the parent of both its children
    internal = np.flatnonzero(ens.children_left >= 0)
    np.testing.assert_array_equal(ens.parent[ens.children_left[internal]], internal)
    np.testing.assert_array_equal(ens.parent[ens.children_right[internal]], internal)
    assert np.count_nonzero(ens.parent < 0) == ens.n_trees


def assert_same_ensemble(a, b):
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and x.shape == y.shape, f.name
            np.testing.assert_array_equal(x, y, err_msg=f.name)
        else:
            assert x == y, f.name


def shapes(rng):
    yield "single leaf", [tree_arrays(np.array([-1]), np.array([-1]), rng)]
    yield "stump", [tree_arrays(*random_tree(rng, 2), rng)]
    for side in ("left", "right", "zigzag"):
        yield f"caterpillar depth 300 ({side})", [tree_arrays(*caterpillar(rng, 300, side), rng)]
    yield "random 500 leaves", [tree_arrays(*random_tree(rng, 500), rng)]
    yield "many small trees", [tree_arrays(*random_tree(rng, int(rng.integers(1, 10))), rng,
                                           output=int(rng.integers(0, 3)))
                               for _ in range(400)]
    yield "mixed", [tree_arrays(*random_tree(rng, int(rng.integers(1, 200))), rng)
                    for _ in range(30)] + [tree_arrays(*caterpillar(rng, 120, "zigzag"), rng)]


@pytest.mark.parametrize("name", [name for name, _ in shapes(np.random.default_rng(0))])
def test_structure_matches_recursive_walks(name):
    trees = dict(shapes(np.random.default_rng(0)))[name]
    ens = ensemble(trees)
    check(ens, trees)
    np.testing.assert_array_equal(ens.tree_output, [t.output for t in trees])
    # one stacked TreeArrays gives the very same ensemble
    assert_same_ensemble(ens, ensemble([stacked(trees)]))
    # and so do the trees in two stacked parts and single trees mixed
    half = len(trees) // 2
    if half:
        assert_same_ensemble(ens, ensemble([stacked(trees[:half])] + trees[half:]))


@pytest.mark.parametrize("name", ["random 500 leaves", "many small trees", "mixed"])
def test_players_structure_matches_recursive_walks(name):
    trees = dict(shapes(np.random.default_rng(1)))[name]
    ens = ensemble(trees)
    player_of_column = np.array([0, 1, 0, 2, 1])
    grouped = ens.with_players(player_of_column)
    players = [player_of_column[np.asarray(t.feature)] for t in trees]
    check(grouped, trees, players)


def test_trees_already_in_preorder_are_kept_and_copied():
    """Trees numbered in preorder (as scikit-learn numbers them) keep their order,
    and the ensemble does not share memory with the adapter's arrays."""
    rng = np.random.default_rng(2)
    trees = []
    for _ in range(50):
        left, right = random_tree(rng, int(rng.integers(1, 40)))
        order = reference_preorder(left, right)
        new = np.empty(len(order), dtype=np.int64)
        new[order] = np.arange(len(order))
        left = np.where(left[order] >= 0, new[np.maximum(left[order], 0)], -1)
        right = np.where(right[order] >= 0, new[np.maximum(right[order], 0)], -1)
        trees.append(tree_arrays(left, right, rng))
    part = stacked(trees)
    ens = ensemble([part])
    check(ens, trees)
    np.testing.assert_array_equal(ens.threshold, part.threshold)  # the identity order
    for name in ("threshold", "cover", "decision_type"):
        assert not np.shares_memory(getattr(ens, name), getattr(part, name)), name


def test_category_bitsets_match_the_sets():
    rng = np.random.default_rng(3)
    trees = [tree_arrays(*random_tree(rng, int(rng.integers(1, 30))), rng, categories=True)
             for _ in range(60)]
    ens = ensemble([stacked(trees[:20])] + trees[20:])
    categorical = np.flatnonzero(ens.decision_type == DECISION_CATEGORICAL)
    assert len(categorical) > 50
    for t, tree in enumerate(trees):
        start = ens.tree_start[t]
        for i, local in enumerate(reference_preorder(tree.children_left, tree.children_right)):
            node = start + i
            if ens.decision_type[node] != DECISION_CATEGORICAL:
                assert ens.cat_words[node] == 0
                continue
            cats = tree.categories.get(local, np.zeros(0, dtype=np.int64))
            words = ens.cat_bitsets[ens.cat_start[node]:ens.cat_start[node] + ens.cat_words[node]]
            assert len(words) == (int(cats.max()) // 32 + 1 if len(cats) else 1)
            bits = {32 * w + b for w in range(len(words)) for b in range(32)
                    if (int(words[w]) >> b) & 1}
            assert bits == set(cats.tolist())
    # the runs of words follow the node order without gaps
    runs = ens.cat_start[categorical]
    np.testing.assert_array_equal(np.diff(runs), ens.cat_words[categorical][:-1])
    assert len(ens.cat_bitsets) == runs[-1] + ens.cat_words[categorical][-1]


def test_linear_leaves_follow_the_node_order():
    rng = np.random.default_rng(4)
    trees = []
    for _ in range(20):
        tree = tree_arrays(*random_tree(rng, int(rng.integers(1, 12))), rng)
        leaves = np.flatnonzero(tree.children_left < 0)
        tree.linear_terms = {int(k): (rng.choice(N_FEATURES, int(rng.integers(0, 3)),
                                                 replace=False), rng.normal(size=3))
                             for k in leaves if rng.random() < 0.7}
        tree.linear_terms = {k: (f, c[:len(f)]) for k, (f, c) in tree.linear_terms.items()}
        tree.fallback_value = rng.normal(size=(len(tree.feature), 1))
        trees.append(tree)
    ens = ensemble(trees)
    for t, tree in enumerate(trees):
        order = reference_preorder(tree.children_left, tree.children_right)
        for i, local in enumerate(order):
            node = ens.tree_start[t] + i
            run = slice(ens.linear_start[node], ens.linear_start[node + 1])
            features, coefs = tree.linear_terms.get(local, ((), ()))
            np.testing.assert_array_equal(ens.linear_feature[run], features)
            np.testing.assert_array_equal(ens.linear_coef[run], coefs)
            np.testing.assert_array_equal(ens.linear_fallback[node], tree.fallback_value[local])


# ------------------------------------------------------------------ broken trees
BROKEN = {
    "cycle": ([1, 2, 0], [-1, -1, -1]),
    "cycle through right children": ([1, -1, 3, -1, -1], [2, -1, 0, -1, -1]),
    "two parents": ([1, 3, -1, -1, -1], [2, 3, -1, -1, -1]),
    "unreachable": ([1, -1, -1, -1], [2, -1, -1, -1]),
    "unreachable subtree": ([1, -1, -1, 4, -1, -1], [2, -1, -1, 5, -1, -1]),
}
MESSAGES = {"cycle": "cycle", "cycle through right children": "cycle",
            "two parents": "cycle|unreachable", "unreachable": "unreachable",
            "unreachable subtree": "unreachable"}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_child_arrays_are_refused(name):
    left, right = (np.asarray(a) for a in BROKEN[name])
    with pytest.raises(ValueError, match=MESSAGES[name]):
        _preorder(left, right)
    rng = np.random.default_rng(5)
    good = [tree_arrays(*random_tree(rng, 5), rng) for _ in range(3)]
    bad = tree_arrays(left, right, rng)
    # the message names the broken tree, given alone, among others or stacked
    for trees, index in (([bad], 0), (good + [bad] + good, 3), ([stacked(good + [bad])], 3)):
        with pytest.raises(ValueError, match=f"tree {index}: .*({MESSAGES[name]})"):
            ensemble(trees)


def test_missing_right_child_and_outside_index_are_refused():
    rng = np.random.default_rng(6)
    with pytest.raises(ValueError, match="tree 0: node 1 has a left child but no right child"):
        ensemble([tree_arrays(np.array([1, 3, -1, -1]), np.array([2, -1, -1, -1]), rng)])
    with pytest.raises(ValueError, match="tree 1 has a child index outside the tree"):
        ensemble([tree_arrays(*random_tree(rng, 3), rng),
                  tree_arrays(np.array([1, -1, -1]), np.array([3, -1, -1]), rng)])
    with pytest.raises(ValueError, match="tree_start"):
        ensemble([dataclasses.replace(stacked([tree_arrays(*random_tree(rng, 3), rng)] * 2),
                                      tree_start=np.array([0, 0, 10]))])
