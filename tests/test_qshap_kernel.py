"""The Q-SHAP kernel ``_qshap.r2_terms`` against brute-force subset enumeration.

Contract: per row i and tree k it adds a_ik Sh_j[v_k^2](x_i) + b_ik Sh_j[v_k](x_i)
(v_k the path-dependent game of tree k, any coefficients a, b). The reference
enumerates all 2^p coalitions with tests/reference.py's plain-Python value
function. The ensembles mix trees of different depths, so that the per-tree
Gauss-Legendre rules (d_t nodes for a tree whose paths have at most d_t
distinct features) differ from the ensemble's rule.
"""
import math
from dataclasses import replace

import numpy as np
import pytest

import reference
from sklearn_r2shap._kernels import _qshap
from sklearn_r2shap._model._ensemble import TreeEnsemble
from sklearn_r2shap._numerics import _gauss_legendre
from test_kernels import random_data, random_tree


def positive_covers(tree):
    """The tree with one more unit of cover at every leaf (internal covers the
    sums below), so that no cover is 0."""
    cover = np.asarray(tree.cover, dtype=np.float64) + (tree.children_left < 0)
    for k in range(len(cover) - 1, -1, -1):  # children come after their parent
        if tree.children_left[k] >= 0:
            cover[k] = cover[tree.children_left[k]] + cover[tree.children_right[k]]
    return replace(tree, cover=cover)


def mixed_ensemble(seed, p=5, depths=(1, 2, 3, 6, 4), zero_covers=True):
    """Random trees of the given depths; with ``zero_covers`` their covers are
    the counts of random data (some 0: the kernel's pair walk takes those
    trees), else every cover is positive (the leaf-pair tables take them)."""
    rng = np.random.default_rng(seed)
    data = random_data(rng, 300, p)
    trees = [random_tree(rng, data, p, depth) for depth in depths]
    if not zero_covers:
        trees = [positive_covers(tree) for tree in trees]
    ens = TreeEnsemble.from_trees(trees, base_value=rng.normal(size=1), n_features=p,
                                  averaging=False, model_type="random")
    return ens, random_data(rng, 12, p, nan_fraction=0.2)


def gauss_rule(n):
    nodes, weights = _gauss_legendre(n)
    return (nodes + 1.0) / 2.0, weights / 2.0


def path_features_by_walk(ens):
    """The most distinct features on a root-to-leaf path, per tree (recursive walk)."""
    out = []
    for t in range(ens.n_trees):
        best = 0
        stack = [(ens.tree_start[t], frozenset())]
        while stack:
            node, features = stack.pop()
            if ens.children_left[node] < 0:
                best = max(best, len(features))
                continue
            features = features | {int(ens.feature[node])}
            stack.append((ens.children_left[node], features))
            stack.append((ens.children_right[node], features))
        out.append(best)
    return np.array(out)


def semivalue_of_table(game, p, weight):
    """sum over S not containing j of weight(|S|) (v(S + j) - v(S)), per j."""
    phi = np.zeros(p)
    for j in range(p):
        bit = 1 << j
        for mask in range(1 << p):
            if not mask & bit:
                phi[j] += weight(bin(mask).count("1")) * (game[mask | bit] - game[mask])
    return phi


def shapley_weight(p):
    return lambda s: math.factorial(s) * math.factorial(p - 1 - s) / math.factorial(p)


def brute_force_terms(ens, X, a, b, weight):
    p = ens.n_features
    subsets = [{j for j in range(p) if mask >> j & 1} for mask in range(1 << p)]
    out = np.zeros((len(X), p))
    for i, x in enumerate(X):
        x = reference.prepare(ens, x)
        for t in range(ens.n_trees):
            game = np.array([reference.tree_value(ens, t, x, S)[0] for S in subsets])
            out[i] += a[i, t] * semivalue_of_table(game ** 2, p, weight)
            out[i] += b[i, t] * semivalue_of_table(game, p, weight)
    return out


def test_tree_path_features_match_a_walk():
    ens, _ = mixed_ensemble(0, depths=(1, 2, 5, 8, 3))
    d = _qshap.tree_path_features(ens)
    np.testing.assert_array_equal(d, path_features_by_walk(ens))
    assert d.max() == ens.n_path_features and len(set(d.tolist())) >= 3


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("zero_covers", [True, False])
def test_r2_terms_match_brute_force(seed, n_threads, zero_covers):
    ens, X = mixed_ensemble(seed, zero_covers=zero_covers)
    tables = _qshap._PairTables(ens, ens.n_path_features)
    several_leaves = np.diff(tables.tree_leaf_start) >= 2
    assert tables.by_pairs[several_leaves].all() != zero_covers  # which method is tested
    d = _qshap.tree_path_features(ens)
    assert d.min() < ens.n_path_features  # some tree uses a smaller rule than the ensemble's
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(len(X), ens.n_trees))
    b = rng.normal(size=(len(X), ens.n_trees))
    a[0, 1] = b[0, 1] = 0.0  # a skipped (row, tree)
    b[1] = 0.0  # square terms only
    a[2] = 0.0  # linear terms only
    points, weights = gauss_rule(ens.n_path_features)
    got = _qshap.r2_terms(ens, X, a, b, points, weights, n_threads)
    expected = brute_force_terms(ens, X, a, b, shapley_weight(ens.n_features))
    assert np.abs(expected).max() > 1e-2
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


def test_rule_sizes():
    """n_t = min(d_t, ceil(F_t / 2)), F_t the distinct features of tree t."""
    ens, _ = mixed_ensemble(0, p=6, depths=(1, 2, 5, 8, 3))
    d = path_features_by_walk(ens)
    n_features = np.array([
        len(set(ens.feature[k] for k in range(ens.tree_start[t], ens.tree_start[t + 1])
                if ens.children_left[k] >= 0))
        for t in range(ens.n_trees)])
    sizes = _qshap.tree_rule_sizes(ens)
    np.testing.assert_array_equal(sizes, np.maximum(1, np.minimum(d, -(-n_features // 2))))
    assert len(set(sizes.tolist())) >= 2 and sizes.max() < ens.n_path_features


@pytest.mark.parametrize("zero_covers", [True, False])
def test_one_node_short_is_not_exact(zero_covers):
    """The brute-force comparison can fail: one tree on 6 features with 6 on
    a path needs 3 nodes; Gauss-Legendre with 2 is not exact."""
    ens, X = mixed_ensemble(5, p=6, depths=(9,), zero_covers=zero_covers)
    assert _qshap.tree_rule_sizes(ens)[0] == 3
    rng = np.random.default_rng(5)
    a = rng.normal(size=(len(X), 1))
    b = np.zeros_like(a)
    expected = brute_force_terms(ens, X, a, b, shapley_weight(ens.n_features))
    scale = np.abs(expected).max()
    for n_nodes, exact in ((2, False), (3, True), (ens.n_path_features, True)):
        points, weights = gauss_rule(n_nodes)
        got = _qshap.r2_terms(ens, X, a, b, points, weights, 1)
        assert (np.abs(got - expected).max() < 1e-12 * scale) == exact


@pytest.mark.parametrize("zero_covers", [True, False])
def test_other_rules_are_used_as_given(zero_covers):
    """A rule that is not Gauss-Legendre is applied to every tree unchanged:
    one point q = 0.3 with weight 1 is the weighted Banzhaf value
    grad F(q 1), sum_S q^|S| (1 - q)^(p - 1 - |S|) (v(S + j) - v(S))."""
    ens, X = mixed_ensemble(3, zero_covers=zero_covers)
    p, q = ens.n_features, 0.3
    rng = np.random.default_rng(3)
    a = rng.normal(size=(len(X), ens.n_trees))
    b = rng.normal(size=(len(X), ens.n_trees))
    got = _qshap.r2_terms(ens, X, a, b, np.array([q]), np.array([1.0]), 1)
    expected = brute_force_terms(ens, X, a, b, lambda s: q ** s * (1 - q) ** (p - 1 - s))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-12 * np.abs(expected).max())


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_leaf_pair_tables_and_walk_agree(seed):
    """The two exact methods of the kernel, tree by tree: the leaf-pair tables
    (default) and the pair walk (trees the tables cannot take: zero covers,
    which these random trees have where a threshold sends no row one way).
    Both against brute force, on an ensemble where each method takes some
    trees."""
    rng = np.random.default_rng(seed + 10)
    data = random_data(rng, 300, 6)
    trees = [random_tree(rng, data, 6, depth) for depth in (2, 5, 7, 3, 6, 4)]
    # the first three trees with their zero covers, the last three without
    trees = trees[:3] + [positive_covers(tree) for tree in trees[3:]]
    ens = TreeEnsemble.from_trees(trees, base_value=rng.normal(size=1), n_features=6,
                                  averaging=False, model_type="random")
    X = random_data(rng, 12, 6, nan_fraction=0.2)
    tables = _qshap._PairTables(ens, ens.n_path_features)
    assert tables.by_pairs.any() and not tables.by_pairs.all()
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(len(X), ens.n_trees))
    b = rng.normal(size=(len(X), ens.n_trees))
    points, weights = gauss_rule(ens.n_path_features)
    auto = _qshap.r2_terms(ens, X, a, b, points, weights, 1)
    walk = _qshap.r2_terms(ens, X, a, b, points, weights, 1, method="walk")
    expected = brute_force_terms(ens, X, a, b, shapley_weight(ens.n_features))
    scale = np.abs(expected).max()
    np.testing.assert_allclose(auto, expected, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(walk, expected, rtol=0, atol=1e-12 * scale)
    # each tree alone: the method it takes
    for t in range(ens.n_trees):
        only = np.zeros_like(a)
        only[:, t] = 1.0
        got = _qshap.r2_terms(ens, X, a * only, b * only, points, weights, 1)
        one = _qshap.r2_terms(ens, X, a * only, b * only, points, weights, 1, method="walk")
        np.testing.assert_allclose(got, one, rtol=0, atol=1e-12 * max(1.0, np.abs(one).max()))


def test_leaf_pair_tables_take_the_trees_they_can():
    """Zero covers (a threshold no row passes) send a tree to the walk;
    positive covers to the tables."""
    rng = np.random.default_rng(0)
    data = random_data(rng, 300, 4)
    trees = [random_tree(rng, data, 4, 4) for _ in range(12)]
    ens = TreeEnsemble.from_trees(trees, base_value=np.zeros(1), n_features=4,
                                  averaging=False, model_type="random")
    tables = _qshap._PairTables(ens, 4)
    has_zero = []
    for t in range(ens.n_trees):
        nodes = slice(ens.tree_start[t], ens.tree_start[t + 1])
        has_zero.append(bool((np.asarray(ens.cover)[nodes] == 0).any()))
    n_leaves = np.diff(tables.tree_leaf_start)
    expected = ~np.array(has_zero) & (n_leaves >= 2)
    np.testing.assert_array_equal(tables.by_pairs.astype(bool), expected)
    assert expected.any() and (~expected).any()


def _pairs_by_sets(ens, tables, t):
    """Per ordered pair l1 < l2 of tree t's leaves: the shared features of
    their paths (Python sets, from the tree's nodes)."""
    paths = []
    for node in tables.leaf_node[tables.tree_leaf_start[t]:tables.tree_leaf_start[t + 1]]:
        features = set()
        while ens.parent[node] >= 0:
            node = ens.parent[node]
            features.add(int(ens.feature[node]))
        paths.append(features)
    return [len(a & b) for i, a in enumerate(paths) for b in paths[i + 1:]], paths


@pytest.mark.parametrize("block_bytes", [1, 3000, 20000, 1e9])
def test_pair_table_blocks_cover_the_pairs(block_bytes):
    """A tree's blocks take its pairs in order, each block as large as fits
    in block_bytes (or one pair), with the shared features the paths have;
    their segments take each block's pairs in order (a tree of 72 leaves has
    2,556 pairs: one block of 1e9 bytes, two segments)."""
    ens, _ = mixed_ensemble(3, p=6, depths=(7, 5, 8), zero_covers=False)
    tables = _qshap._PairTables(ens, ens.n_path_features)
    per_entry, per_pair = _qshap.entry_bytes(4)
    trees = np.flatnonzero(np.diff(tables.tree_leaf_start) >= 3)
    assert len(trees) >= 2
    for t in trees:
        shared, paths = _pairs_by_sets(ens, tables, t)
        assert tables.n_entries[t] == sum(shared)
        assert tables.max_union[t] == max(len(a | b) for i, a in enumerate(paths)
                                          for b in paths[i + 1:])
        blocks, segments = tables.blocks(t, 4, block_bytes)
        n_leaves = len(paths)
        order = [(l1, l2) for l1 in range(n_leaves) for l2 in range(l1 + 1, n_leaves)]
        assert len(blocks) >= 2 and blocks[-1, 4] == len(segments)
        if block_bytes == 1e9:
            assert len(blocks) == 2 and len(segments) == -(-len(order) // 2048)
        first = 0
        for k, (l1, l2, pairs, entries, seg) in enumerate(blocks[:-1]):
            assert order[first] == (l1, l2) and pairs >= 1
            assert entries == sum(shared[first:first + pairs])
            size = entries * per_entry + pairs * per_pair
            assert size <= block_bytes or pairs == 1
            if first + pairs < len(order):  # the next pair did not fit
                assert size + shared[first + pairs] * per_entry + per_pair > block_bytes
            # segments: consecutive, numbered from the block's first pair and entry
            within = segments[seg:blocks[k + 1, 4]]
            assert within[:, 2].sum() == pairs and len(within) >= 1
            for s1, s2, s_pairs, s_first, s_entry in within:
                assert order[first + s_first] == (s1, s2)
                assert s_entry == sum(shared[first:first + s_first])
            first += pairs
        assert first == len(order)
        if block_bytes == 1:
            assert len(blocks) - 1 == len(order)


@pytest.mark.parametrize("seed, p, depths", [(0, 5, (6, 2, 4, 7)), (1, 5, (6, 2, 4, 7)),
                                            (2, 5, (6, 2, 4, 7)), (3, 6, (7, 5, 8))])
def test_pair_table_blocks_give_the_same_values(seed, p, depths):
    """Forcing small blocks (every pair its own block; a few pairs; a few
    blocks) gives the values of one table per tree, for any threads, and
    both match brute force (seed 3: a tree of 72 leaves, whose one table is
    built in two segments), also over several groups of rows."""
    ens, X = mixed_ensemble(seed, p=p, depths=depths, zero_covers=False)
    X = X[:12 if p == 5 else 5]  # brute force over 2^6 coalitions of 72 leaves is slow
    tables = _qshap._PairTables(ens, ens.n_path_features)
    several_leaves = np.diff(tables.tree_leaf_start) >= 2
    assert tables.by_pairs[several_leaves].all() and several_leaves.sum() >= 2
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(len(X), ens.n_trees))
    b = rng.normal(size=(len(X), ens.n_trees))
    a[0, 1] = b[0, 1] = 0.0
    a[1] = 0.0  # linear terms only: the rows skip the pairs
    points, weights = gauss_rule(ens.n_path_features)
    one = _qshap.r2_terms(ens, X, a, b, points, weights, 1, block_bytes=1e9)
    expected = brute_force_terms(ens, X, a, b, shapley_weight(ens.n_features))
    np.testing.assert_allclose(one, expected, rtol=0, atol=1e-12 * np.abs(expected).max())
    for block_bytes in (1, 500, 5000):
        n_blocks = [len(tables.blocks(t, ens.n_path_features, block_bytes)[0]) - 1
                    for t in range(ens.n_trees)]
        assert max(n_blocks) > 1
        for n_threads in (1, 2):
            got = _qshap.r2_terms(ens, X, a, b, points, weights, n_threads,
                                  block_bytes=block_bytes)
            np.testing.assert_array_equal(got, one)
    # 300 rows: several groups of rows (each building the blocks' tables)
    many = random_data(np.random.default_rng(seed + 100), 300, p, nan_fraction=0.2)
    a = rng.normal(size=(len(many), ens.n_trees))
    b = rng.normal(size=(len(many), ens.n_trees))
    a[::7] = 0.0
    one = _qshap.r2_terms(ens, many, a, b, points, weights, 1, block_bytes=1e9)
    for n_threads in (1, 2):
        got = _qshap.r2_terms(ens, many, a, b, points, weights, n_threads, block_bytes=500)
        np.testing.assert_array_equal(got, one)


def test_row_groups_follow_the_threads_with_the_same_values():
    """Trees of several blocks run by groups of rows, at least 4 per thread
    (issue 31: 8 groups kept at most 8 of 16 threads busy); a row's terms do
    not depend on its group, so 1, 2, 3 and 8 threads, with 113, 75 and 64
    rows per group, give the same values to the bit."""
    ens, _ = mixed_ensemble(0, p=5, depths=(6, 2, 4, 7), zero_covers=False)
    rows = random_data(np.random.default_rng(7), 900, 5, nan_fraction=0.2)
    rng = np.random.default_rng(8)
    a = rng.normal(size=(len(rows), ens.n_trees))
    b = rng.normal(size=(len(rows), ens.n_trees))
    a[::11] = 0.0
    points, weights = gauss_rule(ens.n_path_features)
    assert [_qshap.group_rows(len(rows), n, 1, len(points)) for n in (1, 2, 3, 8)] == [
        113, 113, 75, 64]
    one = _qshap.r2_terms(ens, rows, a, b, points, weights, 1, block_bytes=500)
    for n_threads in (2, 3, 8):
        got = _qshap.r2_terms(ens, rows, a, b, points, weights, n_threads, block_bytes=500)
        np.testing.assert_array_equal(got, one)


def test_deep_lightgbm_trees_take_blocked_tables():
    """LightGBM trees of 255 leaves (min_child_samples=5): every tree takes
    the tables, in several blocks at the default size; forced small blocks,
    the default, one table per tree and the walk agree, for any threads."""
    lgb = pytest.importorskip("lightgbm")
    from dataclasses import replace

    from sklearn_r2shap._model import to_ensemble

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 20))
    y = X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + 0.3 * X[:, 3:].sum(axis=1) + rng.normal(size=1500)
    model = lgb.LGBMRegressor(n_estimators=2, num_leaves=255, min_child_samples=5,
                              learning_rate=0.1, n_jobs=1, verbose=-1, random_state=0).fit(X, y)
    ens = to_ensemble(model)
    ens = replace(ens, tree_output=np.zeros(ens.n_trees, dtype=np.int64))
    tables = _qshap._PairTables(ens, ens.n_path_features)
    assert tables.by_pairs.all() and (np.diff(tables.tree_leaf_start) > 200).all()
    m = ens.n_path_features
    assert all(len(tables.blocks(t, m, _qshap.DEFAULT_BLOCK_BYTES)[0]) > 2
               for t in range(ens.n_trees))
    rows = np.ascontiguousarray(X[:4])
    a = rng.uniform(0.5, 1.5, size=(len(rows), ens.n_trees))
    b = rng.normal(size=(len(rows), ens.n_trees))
    points, weights = gauss_rule(m)
    walk = _qshap.r2_terms(ens, rows, a, b, points, weights, 1, method="walk")
    one = _qshap.r2_terms(ens, rows, a, b, points, weights, 1, block_bytes=1e12)
    scale = np.abs(walk).max()
    np.testing.assert_allclose(one, walk, rtol=0, atol=1e-10 * scale)
    for block_bytes, n_threads in ((None, 1), (None, 2), (100000, 2), (1e12, 2)):
        got = _qshap.r2_terms(ens, rows, a, b, points, weights, n_threads,
                              block_bytes=block_bytes)
        np.testing.assert_array_equal(got, one)
