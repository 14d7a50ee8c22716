"""Pattern tables of path-dependent semivalues across row blocks
(``_games.semivalues.SemivalueGame``): tables kept for every block (resident)
or rebuilt per block beyond the memory budget, single leaves and leaf pairs,
against subset enumeration (tests/reference.py)."""

import functools
import importlib
import pickle

import numpy as np
import pytest

import reference
from sklearn_r2shap.attributions import semivalues
from sklearn_r2shap._games import semivalues as semivalue_games
from sklearn_r2shap._numerics import beta_quadrature
from test_kernels import ENSEMBLES, random_ensemble


def many_rows(name, n_rows=40):
    ens, X = random_ensemble(**ENSEMBLES[name])
    rng = np.random.default_rng(7)
    return ens, X[rng.integers(0, len(X), n_rows)] + (rng.random((n_rows, X.shape[1])) < 0.3) * (
        rng.normal(size=(n_rows, X.shape[1])))


def blocks_of_three(monkeypatch):
    from sklearn_r2shap._execution import local
    attributions = importlib.import_module("sklearn_r2shap.attributions")
    monkeypatch.setattr(attributions, "semivalue_seconds",  # dask's blocks
                        lambda ensemble, n_points: local.BLOCK_SECONDS / 3)
    monkeypatch.setattr(semivalue_games.SemivalueGame, "seconds_per_row",
                        lambda game: local.BLOCK_SECONDS / 3)
    calls = []
    block_function = semivalue_games.uniform_semivalues

    def counted(game, X, **kwargs):
        calls.append(len(X))
        return block_function(game, X, **kwargs)

    monkeypatch.setattr(attributions._games, "uniform_semivalues", counted)
    return calls


def assert_enumeration_any_threads(ens, X, every, route=None):
    """shap_values (on ``route``) on 2 threads equal enumeration (every
    ``every``-th row) and, bit for bit, the values on 1 thread."""
    got = semivalues(ens, X, n_jobs=2, route=route)
    if ens.n_outputs == 1:
        got = got[:, None, :]
    for i in range(0, len(X), every):
        want = reference.semivalue(ens, X[i], reference.shapley_weight)
        assert np.max(np.abs(got[i, :, :-1] - want)) <= 1e-12 * max(np.max(np.abs(want)), 1.0)
    again = semivalues(ens, X, n_jobs=1, route=route)
    np.testing.assert_array_equal(again.reshape(got.shape), got)


@pytest.mark.parametrize("name", ENSEMBLES)
@pytest.mark.parametrize("budget", [1 << 25, 0, 40])
def test_tables_across_blocks_match_enumeration(name, budget, monkeypatch):
    """Rows in blocks of 3, every feasible tree tabulated: all tables
    resident (large budget), none (each block builds its own), or some."""
    ens, X = many_rows(name)
    monkeypatch.setattr(semivalue_games, "_RESIDENT_TABLE_ENTRIES", budget)
    calls = blocks_of_three(monkeypatch)
    assert_enumeration_any_threads(ens, X, every=7, route="tables")
    assert calls[:2] == [3, 3] and sum(calls) == 2 * len(X)  # both calls, blocks of 3


@pytest.mark.parametrize("name", ENSEMBLES)
def test_block_decisions_equal_row_by_row_routing(name):
    """The blocks' decisions (a numeric rule applied to a column of the
    block's rows at once, 16 at a time) route every row as goes_left does:
    values on a tree's thresholds (ties of ``<`` and ``<=``), NaN (to either
    default child), NaN thresholds, extreme numbers and categories. A call of
    many rows (the blocks) equals, bit for bit, the same rows explained one
    at a time (the few-row path, a rule per row), and enumeration."""
    ens, _ = random_ensemble(**ENSEMBLES[name])
    thresholds = ens.threshold[np.isfinite(ens.threshold)]
    assert np.isnan(ens.threshold[ens.children_left >= 0]).any()  # NaN-threshold splits
    rng = np.random.default_rng(11)
    n_rows = 301  # blocks of 64 rows and a tail of fewer than 16
    X = rng.choice(thresholds, size=(n_rows, ens.n_features))
    X[rng.random(X.shape) < 0.15] = np.nan
    X[rng.random(X.shape) < 0.05] = 1e300
    X[rng.random(X.shape) < 0.05] = -1e300
    off = rng.random(X.shape) < 0.2
    X[off] = rng.normal(size=off.sum())
    for j in np.unique(ens.feature[ens.decision_type == 3]):  # categories: small integers
        X[:, j] = np.where(np.isnan(X[:, j]), np.nan, rng.integers(0, 6, n_rows))
    got = semivalues(ens, X, n_jobs=2, route="tables")
    one_at_a_time = np.concatenate([semivalues(ens, X[i:i + 1], n_jobs=1, route="tables")
                                    for i in range(n_rows)])
    np.testing.assert_array_equal(got, one_at_a_time)
    if ens.n_outputs == 1:
        got = got[:, None, :]
    for i in range(0, n_rows, 15):
        want = reference.semivalue(ens, X[i], reference.shapley_weight)
        assert np.max(np.abs(got[i, :, :-1] - want)) <= 1e-12 * max(np.max(np.abs(want)), 1.0)


@pytest.mark.parametrize("name", ["single-output", "repeated-features", "vector-leaves"])
def test_tables_equal_quadrature_for_beta_shapley(name, monkeypatch):
    ens, X = many_rows(name)
    blocks_of_three(monkeypatch)
    quadrature = semivalues(ens, X, semivalue="beta", alpha=4, route="quadrature")
    tables = semivalues(ens, X, semivalue="beta", alpha=4, route="tables")
    np.testing.assert_allclose(tables, quadrature, rtol=0, atol=1e-12)
    assert np.max(np.abs(quadrature[..., :-1])) > 0


def test_leaf_pairs_are_units_of_single_output_trees():
    ens, _ = random_ensemble(**ENSEMBLES["single-output"])
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    structure = semivalue_games.SemivalueGame(ens, points, weights).structure()
    units = structure["units"]
    paired = units["right"] >= 0
    assert paired.any()
    # every leaf is in exactly one unit
    covered = np.concatenate([units["leaf"], units["right"][paired]])
    np.testing.assert_array_equal(np.sort(covered), np.arange(len(structure["leaf_node"])))
    # a pair is two children of one node
    left, right = structure["leaf_node"][units["leaf"][paired]], structure[
        "leaf_node"][units["right"][paired]]
    np.testing.assert_array_equal(ens.parent[left], ens.parent[right])
    vector, _ = random_ensemble(**ENSEMBLES["vector-leaves"])
    points, weights = beta_quadrature(1, 1, vector.n_path_features - 1)
    assert np.all(semivalue_games.SemivalueGame(vector, points, weights).structure()[
        "units"]["right"] < 0)


def test_copies_of_a_game_write_the_shared_paths_once(monkeypatch):
    """Copies of one game in threads (a dask partition each) share its
    structure; the leaves' paths are built once and never replaced while
    another thread's kernel reads them (a replaced array was freed under a
    running kernel: a segmentation fault in CI)."""
    import threading
    import time

    ens, X = many_rows("single-output", n_rows=300)
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    game = semivalue_games.SemivalueGame(ens, points, weights)
    game.structure()
    calls = []
    build = semivalue_games._semivalues.pattern_paths

    def slow(*args):
        calls.append(1)
        time.sleep(0.05)  # every thread reaches the check meanwhile
        return build(*args)

    monkeypatch.setattr(semivalue_games._semivalues, "pattern_paths", slow)
    copies = [game.for_rows(len(X)) for _ in range(4)]
    structures, results = [], [None] * 4

    def run(k):
        structures.append(copies[k]._structure_with_paths())
        results[k] = copies[k].values(X, 1)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(calls) == 1
    assert all(s is structures[0] for s in structures)
    want = semivalue_games.SemivalueGame(ens, points, weights).for_rows(len(X)).values(X, 1)
    for got in results:
        np.testing.assert_array_equal(got, want)


def test_pickled_game_drops_its_tables():
    ens, X = many_rows("single-output")
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    game = semivalue_games.SemivalueGame(ens, points, weights, n_rows=len(X))
    before = semivalue_games.uniform_semivalues(game, X, n_threads=1)
    assert game._resident is not None
    copy = pickle.loads(pickle.dumps(game))
    assert copy._resident is None
    np.testing.assert_array_equal(semivalue_games.uniform_semivalues(copy, X, n_threads=1),
                                  before)


@pytest.mark.parametrize("name", ENSEMBLES)
def test_mixed_route_splits_trees_and_matches_enumeration(name, monkeypatch):
    """Leaves of one tree through the tables and through the quadrature kernel
    on the part of the tree above the others (NaN rows, categorical splits,
    vector leaves), in blocks, resident or not: the values of enumeration,
    bit for bit the same for any number of threads."""
    ens, X = many_rows(name)
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    game = semivalue_games.SemivalueGame(ens, points, weights, len(X), route="mixed")
    routes = game.routes(len(X))
    assert np.any((routes > 0) & (routes < game.structure()["tree_max_dim"]))
    for budget in (1 << 25, 40):
        monkeypatch.setattr(semivalue_games, "_RESIDENT_TABLE_ENTRIES", budget)
        blocks_of_three(monkeypatch)
        assert_enumeration_any_threads(ens, X, every=5, route="mixed")


def test_part_nodes_are_the_paths_to_the_quadrature_leaves():
    ens, _ = random_ensemble(**ENSEMBLES["repeated-features"])
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    game = semivalue_games.SemivalueGame(ens, points, weights)
    structure = game.structure()
    routes = np.full(ens.n_trees, 2, dtype=np.int64)
    part = game._part(routes)
    leaf_node, leaf_dim = structure["leaf_node"], structure["leaf_dim"]
    for t in range(ens.n_trees):
        s, e = part["start"][t], part["start"][t + 1]
        nodes = part["node"][s:e]
        deep = leaf_node[structure["tree_leaf_start"][t]:structure["tree_leaf_start"][t + 1]]
        deep = deep[leaf_dim[structure["tree_leaf_start"][t]:
                             structure["tree_leaf_start"][t + 1]] > 2]
        want = set()
        for v in deep:  # every node on the path to a leaf of more than 2 features
            while v >= 0:
                want.add(int(v))
                v = ens.parent[v]
        assert set(nodes.tolist()) == want and np.all(np.diff(nodes) > 0)
        # positions of the parent and of the feature's earlier edge in the part
        for i, k in enumerate(nodes):
            parent, prev = part["parent"][s + i], part["prev"][s + i]
            assert (nodes[parent] if parent >= 0 else -1) == ens.parent[k]
            assert (nodes[prev] if prev >= 0 else -1) == ens.prev_same[k]


def test_each_tree_and_leaf_takes_its_own_rule(monkeypatch):
    """Leaves of d distinct features integrate a polynomial of degree d - 1:
    ceil(d / 2) Gauss points; the values equal those of the ensemble's rule."""
    ens, X = random_ensemble(seed=6, p=8, n_trees=4, max_depth=9)
    assert ens.n_path_features >= 6
    rule_of = functools.partial(beta_quadrature, 4, 1)
    points, weights = rule_of(ens.n_path_features - 1)
    game = semivalue_games.SemivalueGame(ens, points, weights, len(X), rule_of=rule_of)
    sizes = game.rules[2]
    np.testing.assert_array_equal(sizes[1:], (np.arange(1, len(sizes)) + 1) // 2)
    assert sizes[-1] == len(points) > sizes[2]
    np.testing.assert_array_equal(game.rules[0][-1], points)
    single = semivalue_games.SemivalueGame(ens, points, weights, len(X))
    assert np.all(single.rules[2] == len(points))
    for route in ("quadrature", "tables", "mixed"):
        own = semivalue_games.SemivalueGame(ens, points, weights, len(X), rule_of=rule_of,
                                            route=route)
        same = semivalue_games.SemivalueGame(ens, points, weights, len(X), route=route)
        np.testing.assert_allclose(own.values(X, 1), same.values(X, 1), rtol=0, atol=1e-12)


def test_auto_routes_mix_within_the_table_budget(monkeypatch):
    """Deep trees, many rows, a small memory budget: the greedy choice keeps
    the tables within the budget, tabulates some trees' shallow leaves only,
    and gives the values of the quadrature route."""
    ens, _ = random_ensemble(seed=5, p=9, n_trees=4, max_depth=12)
    rng = np.random.default_rng(3)
    X = rng.normal(size=(3000, 9)).round(1)
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    rule_of = functools.partial(beta_quadrature, 1, 1)
    budget = 3000
    monkeypatch.setattr(semivalue_games, "_RESIDENT_TABLE_ENTRIES", budget)
    game = semivalue_games.SemivalueGame(ens, points, weights, len(X), rule_of=rule_of)
    resident = game.resident()
    max_dim = game.structure()["tree_max_dim"]
    assert np.any((resident > 0) & (resident < max_dim))
    assert game.curves()["entries"][np.arange(ens.n_trees), resident].sum() <= budget
    got = game.values(X, 2)
    quadrature = semivalue_games.SemivalueGame(ens, points, weights, len(X), rule_of=rule_of,
                                               route="quadrature")
    want = quadrature.values(X, 2)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.max(np.abs(want)))
    i = int(np.argmax(np.abs(want).sum(axis=(1, 2))))
    exact = reference.semivalue(ens, X[i], reference.shapley_weight)[0]
    np.testing.assert_allclose(got[i, 0], exact, rtol=0, atol=1e-12 * np.max(np.abs(want)))


@pytest.mark.parametrize("n_rows, n_threads", [(1, 1), (1, 2), (100, 2), (600, 1), (600, 3),
                                               (600, 64), (5000, 2)])
def test_row_blocks_by_threads_stay_in_bounds(n_rows, n_threads):
    """Issue 31: the kernels' row blocks shrink with the thread count (about
    4 blocks a thread) within bounds; one thread keeps the full blocks."""
    from sklearn_r2shap._kernels import _semivalues
    for size, low, high in ((_semivalues.pattern_block_rows(n_rows, n_threads), 16, 512),
                            (_semivalues.part_block_rows(n_rows, n_threads), 8, 64)):
        assert low <= size <= high
        if n_threads == 1 or n_rows >= 4 * n_threads * high:
            assert size == high


def test_row_blocks_of_the_issue_31_models():
    """XGBoost depth 8 gave 1,521-row executor blocks (3 table blocks of 512:
    at most 1.5x on 2 threads), LightGBM 255 leaves 436 (1 table block, 7
    part blocks)."""
    from sklearn_r2shap._kernels import _semivalues
    assert _semivalues.pattern_block_rows(1521, 2) == 192  # 8 blocks
    assert _semivalues.pattern_block_rows(436, 2) == 56    # 8 blocks
    assert _semivalues.part_block_rows(436, 2) == 55       # 8 blocks


@pytest.mark.parametrize("route", ["tables", "mixed"])
def test_one_block_split_by_threads_matches_enumeration(route):
    """One executor block of 700 rows (512-row table blocks and 64-row part
    blocks on one thread, smaller ones on 2, 3 and 8 threads): the values of
    enumeration, bit for bit the same for every thread count."""
    ens, X = many_rows("single-output", n_rows=700)
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    game = semivalue_games.SemivalueGame(ens, points, weights, len(X), route=route)
    one = semivalue_games.uniform_semivalues(game, X, n_threads=1)
    one = one if one.ndim == 3 else one[:, None, :]
    for i in range(0, len(X), 97):
        want = reference.semivalue(ens, X[i], reference.shapley_weight)
        assert np.max(np.abs(one[i, :, :-1] - want)) <= 1e-12 * max(np.max(np.abs(want)), 1.0)
    for n_threads in (2, 3, 8):
        got = semivalue_games.uniform_semivalues(game, X, n_threads=n_threads)
        np.testing.assert_array_equal(got.reshape(one.shape), one)


@pytest.mark.parametrize("name", ["single-output", "repeated-features", "vector-leaves"])
@pytest.mark.parametrize("route", [None, "tables", "quadrature"])
def test_blocks_are_sized_by_the_routes_taken(name, route):
    """The executor's rows per block come from the game's own estimate (the
    routes it takes), at most the every-node quadrature estimate (issue 31:
    blocks sized by that upper estimate, 5 to 15 times the time of the
    tables, gave too few row blocks to share among threads)."""
    from sklearn_r2shap._execution.cost import semivalue_seconds
    ens, _ = random_ensemble(**ENSEMBLES[name])
    points, weights = beta_quadrature(1, 1, ens.n_path_features - 1)
    game = semivalue_games.SemivalueGame(ens, points, weights, 10_000, route=route)
    upper = semivalue_seconds(ens, len(points))
    estimate = game.seconds_per_row()
    assert 0 < estimate <= upper
    if route == "tables":  # a table row is a fraction of the walk of every node
        assert estimate < 0.5 * upper
