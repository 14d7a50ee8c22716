"""The sampled R^2 decomposition, the cost estimate, algorithm="auto" and max_samples.

The sampled estimates are compared with the brute-force subset enumeration of
tests/test_r2_decomposition.py (independent of every kernel) and with the
exact kernel; statistical tests use fixed seeds.
"""
import io
import sys

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor

from sklearn_r2shap import (
    SampledAlgorithmWarning, ShapleyR2Importance, estimate_cost, r2_decomposition, to_ensemble,
)
from sklearn_r2shap._execution import cost as _cost
from sklearn_r2shap._execution import local as _local
from sklearn_r2shap._games import r2 as r2_games
from sklearn_r2shap._kernels import _qshap
from test_r2_decomposition import CASES, case, make_data

ATOL = 1e-12


def sampled(name, seed=0, **kwargs):
    model, X, y, w, _, _ = case(name)
    return r2_decomposition(model, X, y, sample_weight=w, algorithm="sampled",
                            random_state=seed, return_local=True, n_jobs=2, **kwargs)


@pytest.mark.parametrize("name", CASES)
def test_within_three_standard_errors_of_brute_force(name):
    """Fixed seed: every R2_j within 3 Monte Carlo standard errors of subset enumeration."""
    _, _, _, _, exact, local = case(name)
    result = sampled(name, seed=1, n_permutations=4)
    assert result.algorithm == "sampled" and exact.algorithm == "exact"
    reference = local.sum(axis=0)
    assert np.all(np.abs(result.shares - reference) <= 3 * result.mc_std_errors + ATOL)
    # the reported standard errors contain the Monte Carlo part
    assert np.all(result.std_errors + ATOL >= result.mc_std_errors)


@pytest.mark.parametrize("name", CASES)
def test_efficiency_is_exact(name):
    """Per row, the sampled terms add up to exactly the exact ones (for every draw):
    sum_j of a Sh_j[(m - c)^2] estimate is (v(N) - c)^2 - (v(empty) - c)^2 = 0."""
    _, _, _, _, exact, local = case(name)
    result = sampled(name, seed=3)
    np.testing.assert_allclose(result.local.sum(axis=1), local.sum(axis=1), rtol=0, atol=ATOL)
    assert abs(result.score - exact.score) < ATOL


def test_exact_when_trees_split_on_two_features():
    """An order and its reverse are all the orders of two players: no Monte Carlo error."""
    X, y = make_data(0, n=80, p=5)
    X = X[:, :2]
    for model in (RandomForestRegressor(n_estimators=5, max_depth=6, random_state=0),
                  GradientBoostingRegressor(n_estimators=20, max_depth=4, random_state=0)):
        model.fit(X, y)
        exact = r2_decomposition(model, X, y, algorithm="exact", return_local=True)
        result = r2_decomposition(model, X, y, algorithm="sampled", random_state=5,
                                  return_local=True)
        np.testing.assert_allclose(result.local, exact.local, rtol=0, atol=ATOL)
        np.testing.assert_allclose(result.mc_std_errors, 0.0, rtol=0, atol=1e-10)


def test_coverage_over_seeds():
    """~95% of |estimate - exact| < 1.96 Monte Carlo standard errors over many seeds."""
    X, y = make_data(1, n=40, p=5)
    model = RandomForestRegressor(n_estimators=5, max_depth=5, random_state=0).fit(X, y)
    exact = r2_decomposition(model, X, y, algorithm="exact").shares
    inside, inside_total, n = 0, 0, 0
    for seed in range(200):
        result = r2_decomposition(model, X, y, algorithm="sampled", random_state=seed,
                                  n_jobs=1)
        error = np.abs(result.shares - exact)
        inside += int(np.sum(error < 1.96 * result.mc_std_errors))
        inside_total += int(np.sum(error < 1.96 * result.std_errors))
        n += error.size
    # binomial sd at 1000 trials is 0.7%; the standard errors are estimated from
    # two replicates per row, so allow a few points below 95%
    assert 0.90 <= inside / n <= 0.99
    assert inside_total / n >= 0.95


def test_unbiased_mean_over_seeds():
    """The mean of many independent estimates approaches the exact values."""
    X, y = make_data(2, n=30, p=5)
    model = GradientBoostingRegressor(n_estimators=10, max_depth=4, random_state=0).fit(X, y)
    exact = r2_decomposition(model, X, y, algorithm="exact").shares
    runs = [r2_decomposition(model, X, y, algorithm="sampled", random_state=seed, n_jobs=1)
            for seed in range(100)]
    mean = np.mean([r.shares for r in runs], axis=0)
    se = np.sqrt(np.mean([r.mc_std_errors ** 2 for r in runs], axis=0) / len(runs))
    assert np.all(np.abs(mean - exact) <= 4 * se + ATOL)
    assert np.std([r.shares for r in runs], axis=0).max() > 0  # it does sample


def test_reproducible_across_threads_and_chunks(monkeypatch):
    model, X, y, w, _, _ = case("random-forest")
    one = r2_decomposition(model, X, y, algorithm="sampled", random_state=7, n_jobs=1,
                           return_local=True)
    again = r2_decomposition(model, X, y, algorithm="sampled", random_state=7, n_jobs=1,
                             return_local=True)
    np.testing.assert_array_equal(one.local, again.local)
    monkeypatch.setattr(r2_games, "MAX_BLOCK_ROWS", 7)
    chunked = r2_decomposition(model, X, y, algorithm="sampled", random_state=7, n_jobs=2,
                               return_local=True)
    np.testing.assert_allclose(chunked.local, one.local, rtol=0, atol=1e-15)
    other = r2_decomposition(model, X, y, algorithm="sampled", random_state=8, n_jobs=1)
    assert np.abs(other.shares - one.shares).max() > 0


def test_more_permutations_less_noise():
    model, X, y, w, _, _ = case("gradient-boosting")
    few = r2_decomposition(model, X, y, algorithm="sampled", random_state=0, n_permutations=2)
    many = r2_decomposition(model, X, y, algorithm="sampled", random_state=0, n_permutations=32)
    assert np.sum(many.mc_std_errors) < np.sum(few.mc_std_errors)
    one = r2_decomposition(model, X, y, algorithm="sampled", random_state=0, n_permutations=1)
    assert np.all(np.isnan(one.mc_std_errors)) and np.all(np.isfinite(one.shares))
    with pytest.raises(ValueError, match="n_permutations"):
        r2_decomposition(model, X, y, algorithm="sampled", n_permutations=0)


# --------------------------------------------------------------------------
# Cost estimate and algorithm="auto"
# --------------------------------------------------------------------------
def _walk_units(ens, t):
    """Per row: sum over internal nodes of leaves(left) * nodes(right), plus the leaves,
    by recursion on the children (independent of the kernel's parent-pointer count)."""
    left, right = ens.children_left, ens.children_right

    def count(k):  # (leaves, nodes, units) of the subtree at k
        if left[k] < 0:
            return 1, 1, 1
        la, na, ua = count(left[k])
        lb, nb, ub = count(right[k])
        return la + lb, na + nb + 1, ua + ub + la * nb

    return count(ens.tree_start[t])[2]


def _table_units(ens, t, d):
    """Per row: (pairs + features shared by a pair's paths) times the tree's
    Gauss-Legendre nodes, min(d, ceil(F_t / 2), ceil(most features on a
    pair's paths / 2)), from the leaves' path feature sets."""
    paths = []
    stack = [(ens.tree_start[t], frozenset())]
    while stack:
        node, features = stack.pop()
        if ens.children_left[node] < 0:
            paths.append(features)
            continue
        features = features | {int(ens.feature[node])}
        stack += [(ens.children_left[node], features), (ens.children_right[node], features)]
    pairs = [(a, b) for i, a in enumerate(paths) for b in paths[i + 1:]]
    shared = sum(len(a & b) for a, b in pairs)
    union = max(len(a | b) for a, b in pairs)
    n_features = len(frozenset().union(*paths))
    nodes = max(1, min(max(len(a) for a in paths), -(-n_features // 2), -(-union // 2), d))
    return (len(pairs) + shared) * nodes


def _walk_nodes(ens, t, d):
    """The tree's Gauss-Legendre nodes, min(d, d_t, ceil(F_t / 2)) (d_t: most
    features on a path, F_t: the tree's features), by a walk of its paths."""
    longest, features = 0, set()
    stack = [(ens.tree_start[t], frozenset())]
    while stack:
        node, path = stack.pop()
        if ens.children_left[node] < 0:
            longest = max(longest, len(path))
            continue
        features.add(int(ens.feature[node]))
        path = path | {int(ens.feature[node])}
        stack += [(ens.children_left[node], path), (ens.children_right[node], path)]
    return max(1, min(d, longest, -(-len(features) // 2)))


def _exact_units(ens):
    """The exact kernel's operations per row: tables for the trees that take them
    (``_PairTables.by_pairs``), the walk (times the tree's nodes) for the others
    but single leaves (skipped)."""
    by_pairs = _qshap._PairTables(ens, ens.n_path_features).by_pairs
    d = ens.n_path_features
    return sum(_table_units(ens, t, d) if by_pairs[t]
               else _walk_units(ens, t) * _walk_nodes(ens, t, d)
               for t in range(ens.n_trees) if ens.children_left[ens.tree_start[t]] >= 0)


def test_estimate_cost_counts():
    model, X, y, w, _, _ = case("gradient-boosting")
    ens = to_ensemble(model)
    cost = estimate_cost(model, X, n_jobs=1)
    assert _qshap._PairTables(ens, ens.n_path_features).by_pairs.any()
    assert cost.exact_operations == pytest.approx(_exact_units(ens) * len(X), rel=1e-12)
    nodes = np.diff(ens.tree_start)
    assert cost.sampled_operations > np.sum(nodes) * len(X)
    double = estimate_cost(model, 2 * len(X), n_jobs=1)
    assert double.exact_seconds == pytest.approx(2 * cost.exact_seconds)
    two = estimate_cost(model, X, n_jobs=2)
    assert two.exact_seconds == pytest.approx(cost.exact_seconds / 2)
    assert "exact" in str(cost) and "sampled" in str(cost)
    with pytest.raises(ValueError):
        estimate_cost(model, -1)


def test_estimate_cost_prepares_its_call(monkeypatch):
    """estimate_cost reads its arguments as every public function does
    (``_prepare.prepare``): a Pipeline's last step, the rows checked once."""
    from sklearn.base import clone
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from sklearn_r2shap import decomposition

    model, X, y, w, _, _ = case("gradient-boosting")
    prepared = []
    prepare = decomposition.prepare
    monkeypatch.setattr(decomposition, "prepare",
                        lambda *args, **kwargs: prepared.append(1) or prepare(*args, **kwargs))
    cost = estimate_cost(model, X, n_jobs=1)
    assert prepared == [1]
    pipeline = make_pipeline(StandardScaler(), clone(model)).fit(X, y)
    through = estimate_cost(pipeline, X, n_jobs=1)
    assert (through.n_rows, through.n_trees) == (cost.n_rows, cost.n_trees)
    assert estimate_cost(pipeline, len(X), n_jobs=1).n_trees == cost.n_trees
    with pytest.raises(ValueError, match="features"):
        estimate_cost(model, X[:, 1:])


def test_estimate_cost_routes_and_growth():
    """Structure of the exact estimate (never wall time): trees that take the
    leaf-pair tables are costed per table operation (plus their building,
    shared by a block of at least exact_rows_per_block rows, at most
    EXACT_BUILD_SHARE of its work), trees that walk per walk operation; more
    trees or rows cost more."""
    from sklearn_r2shap._execution import cost as _cost
    from sklearn_r2shap._model._ensemble import TreeEnsemble
    from test_kernels import random_data, random_tree
    from test_qshap_kernel import mixed_ensemble

    tables, _ = mixed_ensemble(0, zero_covers=False)
    rng = np.random.default_rng(0)
    data = random_data(rng, 300, 5)
    trees = [random_tree(rng, data, 5, depth) for depth in (1, 2, 3, 6, 4)]
    # the trees with a zero cover (a threshold no row of data passes)
    walk = TreeEnsemble.from_trees(
        [tree for tree in trees if (np.asarray(tree.cover) == 0).any()],
        base_value=np.zeros(1), n_features=5, averaging=False, model_type="random")
    assert walk.n_trees >= 2
    assert _qshap._PairTables(tables).by_pairs.any()
    assert not _qshap._PairTables(walk).by_pairs.any()
    on_tables = estimate_cost(tables, 100, n_jobs=1)
    per_op = on_tables.exact_seconds / on_tables.exact_operations
    assert _cost.EXACT_SECONDS_PER_TABLE_POINT < per_op
    assert per_op <= _cost.EXACT_SECONDS_PER_TABLE_POINT * (1 + _cost.EXACT_BUILD_SHARE)
    on_walk = estimate_cost(walk, 100, n_jobs=1)
    assert on_walk.exact_seconds == pytest.approx(
        on_walk.exact_operations * _cost.EXACT_SECONDS_PER_WALK_POINT, rel=1e-12)
    assert _cost.exact_rows_per_block(tables) >= _cost.EXACT_MIN_BLOCK_ROWS
    costs = [estimate_cost(tables, n, n_jobs=1).exact_seconds for n in (10, 100, 1000)]
    assert costs[0] < costs[1] < costs[2]
    # the same first four trees (same seed), without the fifth
    fewer, _ = mixed_ensemble(0, depths=(1, 2, 3, 6), zero_covers=False)
    assert fewer.n_trees == tables.n_trees - 1
    assert estimate_cost(fewer, 100, n_jobs=1).exact_seconds < costs[1]


def test_cost_counts_the_pair_tables_once_per_ensemble():
    """_exact_parts keeps the last ensemble's counts (one cost estimate asks three
    times): the same answer as counting, for that ensemble only, and no
    reference that keeps the ensemble alive."""
    import gc
    import weakref

    from sklearn_r2shap._execution import cost as _cost
    from test_qshap_kernel import mixed_ensemble

    first, _ = mixed_ensemble(0, zero_covers=False)
    second, _ = mixed_ensemble(0, depths=(1, 2, 3, 6), zero_covers=False)
    for ensemble in (first, first, second, first):
        assert _cost._exact_parts(ensemble) == _cost._count_exact_parts(ensemble)
    assert _cost._exact_parts(second) != _cost._exact_parts(first)
    alive = weakref.ref(first)
    del first, ensemble
    gc.collect()
    assert alive() is None


def test_auto_chooses_by_budget():
    model, X, y, w, _, _ = case("random-forest")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = r2_decomposition(model, X, y, random_state=0)
    assert auto.algorithm == "exact" and auto.mc_std_errors is None
    with pytest.warns(SampledAlgorithmWarning, match="exact_budget=0"):
        cheap = r2_decomposition(model, X, y, exact_budget=0, random_state=0)
    assert cheap.algorithm == "sampled"
    forced = r2_decomposition(model, X, y, algorithm="exact", exact_budget=0)
    assert forced.algorithm == "exact"
    np.testing.assert_array_equal(forced.shares, auto.shares)
    with pytest.raises(ValueError, match="algorithm"):
        r2_decomposition(model, X, y, algorithm="fast")
    with pytest.raises(ValueError, match="exact_budget"):
        r2_decomposition(model, X, y, exact_budget=-1)


def test_auto_goes_sampled_for_a_default_random_forest():
    """The cost model puts a default forest on 5,000 rows far beyond the budget."""
    from sklearn.datasets import make_friedman1

    X, y = make_friedman1(n_samples=5000, random_state=0)
    model = RandomForestRegressor(n_estimators=2, random_state=0).fit(X, y)
    cost = estimate_cost(model, 2000 * 50, n_jobs=2)  # 100 trees ~ 50 x 2 trees
    assert cost.exact_seconds > 100 * _cost.DEFAULT_EXACT_BUDGET
    assert cost.sampled_seconds < cost.exact_seconds / 100


def test_estimator_records_algorithm():
    X, y = make_data(3, n=60)
    selector = ShapleyR2Importance(RandomForestRegressor(n_estimators=5, max_depth=4,
                                                        random_state=0),
                                   algorithm="sampled", random_state=0).fit(X, y)
    assert selector.algorithm_ == "sampled"
    assert selector.decomposition_.algorithm == "sampled"
    exact = ShapleyR2Importance(RandomForestRegressor(n_estimators=5, max_depth=4,
                                                     random_state=0)).fit(X, y)
    assert exact.algorithm_ == "exact"
    folds = ShapleyR2Importance(GradientBoostingRegressor(n_estimators=5, random_state=0),
                                algorithm="sampled", cv=3, random_state=0).fit(X, y)
    assert folds.algorithm_ == "sampled"
    with pytest.raises(ValueError, match="algorithm"):
        ShapleyR2Importance(algorithm="quick").fit(X, y)


# --------------------------------------------------------------------------
# max_samples
# --------------------------------------------------------------------------
def test_max_samples_estimates_the_full_data():
    X, y = make_data(4, n=400, p=5)
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
    full = r2_decomposition(model, X, y, algorithm="exact")
    half = r2_decomposition(model, X, y, algorithm="exact", max_samples=0.5, random_state=0)
    assert half.n_rows_sampled == 200 and half.n_rows == 400
    assert half.score == full.score
    # standard errors of a subset of half the rows are about sqrt(2) larger
    assert np.all(half.std_errors > full.std_errors)
    assert np.all(np.abs(half.shares - full.shares) <= 3 * half.std_errors)
    runs = np.array([r2_decomposition(model, X, y, algorithm="exact", max_samples=100,
                                      random_state=seed).shares for seed in range(60)])
    # without-replacement subsets: unbiased for the full-data sums
    se = runs.std(axis=0, ddof=1) / np.sqrt(len(runs))
    assert np.all(np.abs(runs.mean(axis=0) - full.shares) <= 4 * se)
    same = r2_decomposition(model, X, y, algorithm="exact", max_samples=10_000)
    assert same.n_rows_sampled is None
    np.testing.assert_array_equal(same.shares, full.shares)
    both = r2_decomposition(model, X, y, algorithm="sampled", max_samples=0.25, random_state=0)
    assert both.algorithm == "sampled" and both.n_rows_sampled == 100
    assert "of 400 rows" in str(both)


def test_max_samples_rejects_bad_values():
    X, y = make_data(5, n=50)
    model = GradientBoostingRegressor(n_estimators=5, random_state=0).fit(X, y)
    for bad in (0, 1, 0.0, 1.5, -3, "half", True):
        with pytest.raises(ValueError, match="max_samples"):
            r2_decomposition(model, X, y, max_samples=bad)
    with pytest.raises(ValueError, match="return_local"):
        r2_decomposition(model, X, y, max_samples=10, return_local=True)


# --------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------
def test_progress_plain_lines(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import fails: plain lines
    stream = io.StringIO()
    progress = _local.Progress(100, 1, "R^2 decomposition", estimate=12.0, stream=stream)
    progress.update(40)
    progress.update(60)
    progress.close()
    lines = stream.getvalue().splitlines()
    assert lines[0] == "R^2 decomposition: 100 rows, estimated 12 s"
    assert lines[1].startswith("R^2 decomposition: 40/100 rows,") and "left" in lines[1]
    assert lines[2].startswith("R^2 decomposition: 100/100 rows,")
    silent = io.StringIO()
    _local.Progress(10, 0, "x", stream=silent).update(10)
    assert silent.getvalue() == ""


def test_exact_path_leaves_global_random_state_alone():
    model, X, y, w, _, _ = case("gradient-boosting")
    np.random.seed(0)
    expected = np.random.random_sample()
    np.random.seed(0)
    r2_decomposition(model, X, y, algorithm="exact")
    assert np.random.random_sample() == expected


@pytest.mark.parametrize("algorithm", ["exact", "sampled"])
def test_rows_are_streamed_in_chunks(algorithm, monkeypatch):
    """Memory is bounded in rows: the kernel never sees more than one chunk."""
    X, y = make_data(6, n=600, p=5)
    model = GradientBoostingRegressor(n_estimators=5, max_depth=2, random_state=0).fit(X, y)
    full = r2_decomposition(model, X, y, algorithm=algorithm, random_state=0)
    seen = []
    call = r2_games.R2Terms.__call__

    def spy(self, X_chunk, *args):
        seen.append(len(X_chunk))
        return call(self, X_chunk, *args)

    monkeypatch.setattr(r2_games.R2Terms, "__call__", spy)
    monkeypatch.setattr(r2_games, "MAX_BLOCK_ROWS", 128)
    chunked = r2_decomposition(model, X, y, algorithm=algorithm, random_state=0)
    assert max(seen) <= 128 and sum(seen) == 600
    np.testing.assert_allclose(chunked.shares, full.shares, rtol=0, atol=1e-13)
    np.testing.assert_allclose(chunked.std_errors, full.std_errors, rtol=1e-10, atol=1e-15)
