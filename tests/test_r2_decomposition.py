"""R^2 decomposition (Q-SHAP, doc/r2_decomposition.rst) against a brute-force reference.

The reference enumerates every feature subset (p <= 5) and uses the plain-
Python path-dependent value function of tests/reference.py, never a kernel:

* sequential mode (boosting, single trees): tree k plays the game
  S -> (r_i^(k-1) - m_k,S(x_i))^2 with r^(k-1) = y - F_{k-1}(x), F_0 the
  model's own initial prediction (``ensemble.base_value``);
* symmetric mode (averaging forests): tree k is centred, m~_k = m_k - m_k(empty),
  mu = base + sum_k m_k(empty), f~ = sum_k m~_k and the game is
  S -> (r_sym,k - m~_k,S(x_i))^2 with r_sym,k = y - mu - (f~(x) - m~_k(x)) / 2;

and R2_j = -(1/Q0) sum_k sum_i w_i Sh_j[game], Q0 = sum_i w_i (y_i - ybar_w)^2.
"""
import math

import numpy as np
import pytest
from dataclasses import replace
from sklearn.ensemble import (
    ExtraTreesRegressor,
    GradientBoostingRegressor,
    HistGradientBoostingRegressor,
    RandomForestRegressor,
)
from sklearn.metrics import r2_score
from sklearn.tree import DecisionTreeRegressor

import reference
from sklearn_r2shap import UnsupportedModelError, r2_decomposition, to_ensemble
from sklearn_r2shap._games import r2 as r2_games

ATOL = 1e-10


# --------------------------------------------------------------------------
# Brute-force reference
# --------------------------------------------------------------------------
def _subset_tables(ens, x, output=0):
    """v^t_x(S) of output ``output`` for every tree t adding to it and every
    subset S (bit mask), shape (T, 2^p), trees in the model's order."""
    p = ens.n_features
    subsets = [{j for j in range(p) if mask >> j & 1} for mask in range(1 << p)]
    if ens.n_values > 1:  # vector leaves: every tree adds to every output
        trees, column = range(ens.n_trees), output
    else:
        trees, column = [t for t in range(ens.n_trees) if ens.tree_output[t] == output], 0
    return np.array([[reference.tree_value(ens, t, x, S)[column] for S in subsets]
                     for t in trees])


def _shapley(game, p):
    """Shapley values of a game given as an array over the 2^p bit masks."""
    phi = np.zeros(p)
    for j in range(p):
        bit = 1 << j
        for mask in range(1 << p):
            if mask & bit:
                continue
            s = bin(mask).count("1")
            w = math.factorial(s) * math.factorial(p - 1 - s) / math.factorial(p)
            phi[j] += w * (game[mask | bit] - game[mask])
    return phi


def reference_decomposition(ens, X, y, sample_weight=None, symmetric=None, initial=None,
                            output=0):
    """Brute-force per-row terms L_ij (n, p); their column sums are the R2_j.

    ``initial`` overrides F_0 (to build the naive decomposition of the paper,
    which starts boosting from mean(y)). ``output``: of a multi-output model,
    the output whose trees (or leaf-vector column) and base value play,
    against ``y`` of that output.
    """
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, p = X.shape
    assert p <= 5
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    symmetric = ens.averaging if symmetric is None else symmetric
    ybar = np.sum(w * y) / np.sum(w)
    q0 = np.sum(w * (y - ybar) ** 2)
    base = float(ens.base_value[output]) if initial is None else float(initial)
    full = (1 << p) - 1
    local = np.zeros((n, p))
    for i in range(n):
        if w[i] == 0:
            continue
        table = _subset_tables(ens, reference.prepare(ens, X[i]), output)
        if symmetric:
            empty = table[:, 0]
            centred = table - empty[:, None]
            mu = base + empty.sum()
            f_tilde = centred[:, full].sum()
            for k in range(len(table)):
                r_sym = y[i] - mu - (f_tilde - centred[k, full]) / 2.0
                local[i] += _shapley((r_sym - centred[k]) ** 2, p)
        else:
            prediction = base
            for k in range(len(table)):
                residual = y[i] - prediction
                local[i] += _shapley((residual - table[k]) ** 2, p)
                prediction += table[k, full]
        local[i] *= -w[i] / q0
    return local


def weighted_r2(y, prediction, sample_weight=None):
    """1 - SS(y - f) / SS(y - ybar), weighted, written out."""
    w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    ybar = np.sum(w * y) / np.sum(w)
    return 1.0 - np.sum(w * (y - prediction) ** 2) / np.sum(w * (y - ybar) ** 2)


# --------------------------------------------------------------------------
# Data and models
# --------------------------------------------------------------------------
def make_data(seed, n=60, p=5, nan_fraction=0.0, noise=0.5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)).round(2)
    y = X[:, 0] + 2.0 * (X[:, 1] > 0) + X[:, 2] * X[:, 3] + noise * rng.normal(size=n)
    if nan_fraction:
        X[rng.random(size=X.shape) < nan_fraction] = np.nan
    return X, y


def _decision_tree():
    X, y = make_data(0, nan_fraction=0.15)
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    return model, X, y, None


def _decision_tree_weighted():
    X, y = make_data(1)
    w = np.random.default_rng(1).uniform(0.2, 3.0, size=len(y))
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y, sample_weight=w)
    return model, X, y, w


def _gradient_boosting():
    X, y = make_data(2)
    model = GradientBoostingRegressor(n_estimators=8, max_depth=3, learning_rate=0.3,
                                      random_state=0).fit(X, y)
    return model, X, y, None


def _gradient_boosting_heldout():
    X, y = make_data(3, n=100)
    model = GradientBoostingRegressor(n_estimators=8, max_depth=3, learning_rate=0.3,
                                      subsample=0.7, random_state=0).fit(X[:50], y[:50])
    return model, X[50:], y[50:], None


def _hist_gradient_boosting():
    X, y = make_data(4, nan_fraction=0.1)
    model = HistGradientBoostingRegressor(max_iter=8, max_depth=3, learning_rate=0.3,
                                          min_samples_leaf=5, random_state=0).fit(X, y)
    return model, X, y, None


def _random_forest():
    X, y = make_data(5)
    model = RandomForestRegressor(n_estimators=6, max_depth=4, random_state=0).fit(X, y)
    return model, X, y, None


def _random_forest_weighted_heldout():
    X, y = make_data(6, n=100)
    w = np.random.default_rng(6).uniform(0.2, 3.0, size=len(y))
    model = RandomForestRegressor(n_estimators=5, max_depth=3, random_state=0).fit(
        X[:50], y[:50], sample_weight=w[:50])
    return model, X[50:], y[50:], w[50:]


def _extra_trees():
    X, y = make_data(7)
    model = ExtraTreesRegressor(n_estimators=6, max_depth=4, random_state=0).fit(X, y)
    return model, X, y, None


def _xgboost():
    xgb = pytest.importorskip("xgboost")
    X, y = make_data(8, nan_fraction=0.1)
    model = xgb.XGBRegressor(n_estimators=8, max_depth=3, learning_rate=0.3, n_jobs=1,
                             random_state=0).fit(X, y)
    return model, X, y, None


def _xgboost_far_base_score():
    xgb = pytest.importorskip("xgboost")
    rng = np.random.default_rng(9)
    X = rng.normal(size=(60, 4)).round(2)
    y = X[:, 0] - X[:, 1] * (X[:, 2] > 0) + 0.3 * rng.normal(size=60)
    model = xgb.XGBRegressor(n_estimators=10, max_depth=3, learning_rate=0.5, base_score=50.0,
                             n_jobs=1, random_state=0).fit(X, y)
    return model, X, y, None


def _xgboost_early_stopping():
    xgb = pytest.importorskip("xgboost")
    X, y = make_data(11, n=120, noise=1.0)
    model = xgb.XGBRegressor(n_estimators=60, max_depth=3, learning_rate=0.3,
                             early_stopping_rounds=3, n_jobs=1, random_state=0)
    model.fit(X[:60], y[:60], eval_set=[(X[60:], y[60:])], verbose=False)
    return model, X[:60], y[:60], None


def _lightgbm():
    lgb = pytest.importorskip("lightgbm")
    X, y = make_data(11, nan_fraction=0.1)
    model = lgb.LGBMRegressor(n_estimators=8, num_leaves=8, max_depth=3, learning_rate=0.3,
                              min_child_samples=5, n_jobs=1, verbose=-1,
                              random_state=0).fit(X, y)
    return model, X, y, None


def _catboost_symmetric():
    cb = pytest.importorskip("catboost")
    X, y = make_data(12)
    model = cb.CatBoostRegressor(iterations=8, depth=3, learning_rate=0.3, random_seed=0,
                                 thread_count=1, verbose=0,
                                 allow_writing_files=False).fit(X, y)
    return model, X, y, None


def _catboost_depthwise():
    cb = pytest.importorskip("catboost")
    X, y = make_data(13)
    model = cb.CatBoostRegressor(iterations=8, depth=3, learning_rate=0.3,
                                 grow_policy="Depthwise", random_seed=0, thread_count=1,
                                 verbose=0, allow_writing_files=False).fit(X, y)
    return model, X, y, None


CASES = {
    "decision-tree-nan": _decision_tree,
    "decision-tree-weighted": _decision_tree_weighted,
    "gradient-boosting": _gradient_boosting,
    "gradient-boosting-heldout": _gradient_boosting_heldout,
    "hist-gradient-boosting-nan": _hist_gradient_boosting,
    "random-forest": _random_forest,
    "random-forest-weighted-heldout": _random_forest_weighted_heldout,
    "extra-trees": _extra_trees,
    "xgboost-nan": _xgboost,
    "xgboost-base-score-50": _xgboost_far_base_score,
    "xgboost-early-stopping": _xgboost_early_stopping,
    "lightgbm-nan": _lightgbm,
    "catboost-symmetric": _catboost_symmetric,
    "catboost-depthwise": _catboost_depthwise,
}
FORESTS = {"random-forest", "random-forest-weighted-heldout", "extra-trees"}
# XGBoost predicts in float32: its own R^2 agrees to float32 precision only.
FLOAT32_PREDICT = {"xgboost-nan", "xgboost-base-score-50", "xgboost-early-stopping"}

_cache = {}


def case(name):
    """(model, X, y, sample_weight, result, reference local terms), computed once."""
    if name not in _cache:
        model, X, y, w = CASES[name]()
        result = r2_decomposition(model, X, y, sample_weight=w, return_local=True, n_jobs=2)
        local = reference_decomposition(to_ensemble(model), X, y, w)
        _cache[name] = (model, X, y, w, result, local)
    return _cache[name]


# --------------------------------------------------------------------------
# Against the brute-force reference
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", CASES)
def test_matches_brute_force(name):
    model, X, y, w, result, local = case(name)
    expected = local.sum(axis=0)
    assert np.abs(expected).max() > 1e-3  # the case is not trivially zero
    np.testing.assert_allclose(result.shares, expected, rtol=0, atol=ATOL)
    np.testing.assert_allclose(result.local, local, rtol=0, atol=ATOL)
    assert result.mode == ("symmetric" if name in FORESTS else "sequential")
    assert result.n_rows == len(y)


@pytest.mark.parametrize("name", CASES)
def test_nothing_lost(name):
    """importances.sum() + unattributed == the model's own R^2."""
    model, X, y, w, result, _ = case(name)
    r2 = r2_score(y, model.predict(X), sample_weight=w)
    np.testing.assert_allclose(weighted_r2(y, model.predict(X), w), r2, rtol=0, atol=1e-12)
    tol = 1e-5 if name in FLOAT32_PREDICT else ATOL
    assert abs(result.score - r2) < tol
    # float64 R^2 of the plain-Python routing of the same trees
    ens = to_ensemble(model)
    r2_ref = weighted_r2(y, reference.predict(ens, X)[:, 0], w)
    assert abs(result.score - r2_ref) < ATOL
    assert abs(result.shares.sum() + result.unattributed - r2) < tol


@pytest.mark.parametrize("name", CASES)
def test_local_and_standard_errors(name):
    _, _, y, _, result, _ = case(name)
    assert result.local.shape == (len(y), len(result.shares))
    np.testing.assert_allclose(result.local.sum(axis=0), result.shares, rtol=0, atol=1e-12)
    n = len(y)
    expected = np.sqrt(n * np.var(result.local, axis=0, ddof=1))
    np.testing.assert_allclose(result.std_errors, expected, rtol=1e-9, atol=1e-14)
    assert np.all(result.std_errors[np.abs(result.shares) > 1e-6] > 0)


@pytest.mark.parametrize("name", sorted(FORESTS))
def test_forest_telescopes(name):
    """sum_j R2_j = [SS(y - mu) - SS(y - f)] / Q0, mu = base + mean of tree means."""
    model, X, y, w, result, _ = case(name)
    ens = to_ensemble(model)
    w = np.ones(len(y)) if w is None else w
    x0 = reference.prepare(ens, X[0])
    mu = ens.base_value[0] + sum(reference.tree_value(ens, t, x0, set())[0]
                                 for t in range(ens.n_trees))
    ybar = np.sum(w * y) / np.sum(w)
    q0 = np.sum(w * (y - ybar) ** 2)
    f = model.predict(X)
    expected = (np.sum(w * (y - mu) ** 2) - np.sum(w * (y - f) ** 2)) / q0
    assert abs(result.shares.sum() - expected) < ATOL


# --------------------------------------------------------------------------
# In-sample identities of a single tree
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["decision-tree-nan", "decision-tree-weighted"])
def test_single_tree_in_sample_sums_to_r2(name):
    model, X, y, w, result, _ = case(name)
    r2 = r2_score(y, model.predict(X), sample_weight=w)
    assert r2 > 0.3
    assert abs(result.shares.sum() - r2) < ATOL
    assert abs(result.unattributed) < ATOL


def test_decision_tree_routes_nan_rows():
    """The NaN case really sends NaN rows through splits on the missing feature, both ways."""
    model, X, _, _, _, _ = case("decision-tree-nan")
    tree = model.tree_
    paths = model.decision_path(X).toarray().astype(bool)
    directions = set()
    for i in range(len(X)):
        for node in np.flatnonzero(paths[i]):
            if tree.children_left[node] >= 0 and np.isnan(X[i, tree.feature[node]]):
                directions.add(bool(tree.missing_go_to_left[node]))
    assert directions == {True, False}


# --------------------------------------------------------------------------
# Threads, chunks and weights
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["gradient-boosting", "random-forest", "lightgbm-nan"])
def test_threads_and_chunks(name, monkeypatch):
    model, X, y, w, _, _ = case(name)
    one = r2_decomposition(model, X, y, sample_weight=w, return_local=True, n_jobs=1)
    two = r2_decomposition(model, X, y, sample_weight=w, return_local=True, n_jobs=2)
    monkeypatch.setattr(r2_games, "MAX_BLOCK_ROWS", 7)
    chunked = r2_decomposition(model, X, y, sample_weight=w, return_local=True, n_jobs=2)
    np.testing.assert_array_equal(one.local, two.local)
    np.testing.assert_array_equal(one.shares, two.shares)
    np.testing.assert_array_equal(one.std_errors, two.std_errors)
    np.testing.assert_array_equal(chunked.local, one.local)
    np.testing.assert_allclose(chunked.shares, one.shares, rtol=0, atol=1e-13)
    np.testing.assert_allclose(chunked.std_errors, one.std_errors, rtol=1e-10, atol=1e-14)
    assert chunked.score == one.score


@pytest.mark.parametrize("name", ["gradient-boosting", "random-forest"])
def test_unit_weights_equal_no_weights(name):
    model, X, y, _, _, _ = case(name)
    plain = r2_decomposition(model, X, y, return_local=True)
    ones = r2_decomposition(model, X, y, sample_weight=np.ones(len(y)), return_local=True)
    np.testing.assert_allclose(ones.local, plain.local, rtol=0, atol=1e-14)
    np.testing.assert_allclose(ones.std_errors, plain.std_errors, rtol=1e-12, atol=1e-15)
    assert abs(ones.score - plain.score) < 1e-14


@pytest.mark.parametrize("name", ["gradient-boosting", "random-forest-weighted-heldout"])
def test_zero_weights_equal_dropping_rows(name):
    model, X, y, w, _, _ = case(name)
    rng = np.random.default_rng(0)
    w = np.ones(len(y)) if w is None else w.copy()
    drop = rng.random(len(y)) < 0.3
    assert 0 < drop.sum() < len(y) - 2
    w[drop] = 0.0
    zeroed = r2_decomposition(model, X, y, sample_weight=w, return_local=True)
    kept = r2_decomposition(model, X[~drop], y[~drop], sample_weight=w[~drop])
    np.testing.assert_allclose(zeroed.shares, kept.shares, rtol=0, atol=1e-13)
    assert abs(zeroed.score - kept.score) < 1e-13
    assert abs(zeroed.unattributed - kept.unattributed) < 1e-13
    np.testing.assert_allclose(zeroed.std_errors, kept.std_errors, rtol=1e-12)
    assert np.all(zeroed.local[drop] == 0)
    # and both agree with the reference on the kept rows
    local = reference_decomposition(to_ensemble(model), X[~drop], y[~drop], w[~drop])
    np.testing.assert_allclose(kept.shares, local.sum(axis=0), rtol=0, atol=ATOL)


def test_weights_change_the_result():
    """The weighted case is not accidentally equal to the unweighted one."""
    model, X, y, w, result, _ = case("decision-tree-weighted")
    plain = r2_decomposition(model, X, y)
    assert np.abs(plain.shares - result.shares).max() > 1e-3


def _paths(ens):
    """The split features on every root-to-leaf path (with repeats)."""
    out = []

    def walk(node, features):
        if ens.children_left[node] < 0:
            out.append(features)
            return
        walk(ens.children_left[node], features + [ens.feature[node]])
        walk(ens.children_right[node], features + [ens.feature[node]])

    for t in range(ens.n_trees):
        walk(ens.tree_start[t], [])
    return out


# --------------------------------------------------------------------------
# Hand-built ensembles with repeated features and NaN rows (no library model)
# --------------------------------------------------------------------------
@pytest.mark.parametrize("averaging", [False, True])
def test_hand_built_ensemble(averaging):
    from test_kernels import random_ensemble

    ens, _ = random_ensemble(21, p=4, n_trees=3, max_depth=5, averaging=averaging)
    ens = replace(ens, objective="squared_error")
    rng = np.random.default_rng(21)
    X = rng.normal(size=(40, 4)).round(1)
    X[rng.random(size=X.shape) < 0.15] = np.nan
    y = reference.predict(ens, X)[:, 0] + rng.normal(size=40)
    w = rng.uniform(0.5, 2.0, size=40)
    result = r2_decomposition(ens, X, y, sample_weight=w, return_local=True)
    local = reference_decomposition(ens, X, y, w)
    assert np.abs(local.sum(axis=0)).max() > 1e-3
    assert ens.n_path_features < max(  # some path splits on a feature twice
        len(reference_path) for reference_path in _paths(ens))
    np.testing.assert_allclose(result.local, local, rtol=0, atol=ATOL)
    assert result.mode == ("symmetric" if averaging else "sequential")
    r2 = weighted_r2(y, reference.predict(ens, X)[:, 0], w)
    assert abs(result.score - r2) < ATOL


# --------------------------------------------------------------------------
# XGBoost: early stopping, and a base score far from mean(y)
# --------------------------------------------------------------------------
def test_xgboost_early_stopping_uses_best_iteration_only():
    model, X, y, _, result, local = case("xgboost-early-stopping")
    n_rounds = model.get_booster().num_boosted_rounds()
    assert 3 <= model.best_iteration + 1 < n_rounds
    ens = to_ensemble(model)
    assert ens.n_trees == model.best_iteration + 1
    np.testing.assert_allclose(reference.predict(ens, X)[:, 0], model.predict(X), rtol=0,
                               atol=1e-5)
    # all trees would give another decomposition: the test can tell them apart
    all_trees = reference_decomposition(to_ensemble(model.get_booster()), X, y)
    assert np.abs(all_trees.sum(axis=0) - result.shares).max() > 1e-3
    np.testing.assert_allclose(result.shares, local.sum(axis=0), rtol=0, atol=ATOL)


def test_xgboost_base_score_far_from_mean():
    """Regression: boosting must start from the model's base_score, not mean(y).

    With base_score = 50 and y ~ N(0, 1) the first trees carry the intercept
    correction. Our R2_j plus the unattributed part add up to the model's
    R^2, and the unattributed part is exactly the constant terms of
    doc/r2_decomposition.rst: the intercept term plus every tree's empty-coalition game,
        R2_0 = -(1/Q0) [ SS(y - F_0) - Q0
                         + sum_k sum_i w_i ((r^(k-1) - m_k(empty))^2 - (r^(k-1))^2) ].
    The paper's naive start F_0 = mean(y) gives feature values that are far
    off and cannot add up to the model's R^2.
    """
    model, X, y, _, result, local = case("xgboost-base-score-50")
    ens = to_ensemble(model)
    assert ens.base_value[0] == pytest.approx(50.0)
    assert abs(np.mean(y)) < 1
    r2 = r2_score(y, model.predict(X))
    assert r2 > 0.3
    assert abs(result.shares.sum() + result.unattributed - r2) < 1e-5
    np.testing.assert_allclose(result.shares, local.sum(axis=0), rtol=0, atol=ATOL)

    # the constant terms, from the plain-Python value function
    n = len(y)
    q0 = np.sum((y - y.mean()) ** 2)
    constant = np.sum((y - ens.base_value[0]) ** 2) - q0
    for i in range(n):
        x = reference.prepare(ens, X[i])
        residual = y[i] - ens.base_value[0]
        for k in range(ens.n_trees):
            empty = reference.tree_value(ens, k, x, set())[0]
            constant += (residual - empty) ** 2 - residual ** 2
            residual -= reference.tree_value(ens, k, x, set(range(ens.n_features)))[0]
    expected_unattributed = -constant / q0
    assert abs(result.unattributed - expected_unattributed) < 1e-9
    assert abs(result.unattributed) > 1e-3  # the constant terms do not vanish here

    # the naive decomposition (F_0 = mean(y)) is far off and loses the R^2
    naive = reference_decomposition(ens, X, y, initial=y.mean()).sum(axis=0)
    assert np.abs(naive - result.shares).max() > 0.1
    naive_total = 1.0 - np.sum((y - y.mean() - (model.predict(X) - 50.0)) ** 2) / q0
    assert abs(naive_total - r2) > 0.1


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------
def _non_squared_losses():
    X, y = make_data(31, n=40)
    yield "absolute_error", GradientBoostingRegressor(
        loss="absolute_error", n_estimators=3, max_depth=2).fit(X, y)
    xgb = pytest.importorskip("xgboost")
    yield "reg:absoluteerror", xgb.XGBRegressor(
        objective="reg:absoluteerror", n_estimators=3, max_depth=2, n_jobs=1).fit(X, y)
    lgb = pytest.importorskip("lightgbm")
    yield "l1", lgb.LGBMRegressor(objective="l1", n_estimators=3, num_leaves=4,
                                  min_child_samples=5, verbose=-1, n_jobs=1).fit(X, y)
    cb = pytest.importorskip("catboost")
    yield "MAE", cb.CatBoostRegressor(loss_function="MAE", iterations=3, depth=2, verbose=0,
                                      thread_count=1, allow_writing_files=False).fit(X, y)


def test_non_squared_losses_raise():
    X, y = make_data(31, n=40)
    for objective, model in _non_squared_losses():
        with pytest.raises(UnsupportedModelError, match=objective):
            r2_decomposition(model, X, y)


def test_bad_targets_raise():
    model, X, y, _, _, _ = case("gradient-boosting")
    with pytest.raises(ValueError, match="constant"):
        r2_decomposition(model, X, np.full(len(y), 3.0))
    with pytest.raises(ValueError, match="rows"):
        r2_decomposition(model, X, y[:-1])
    bad = y.copy()
    bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        r2_decomposition(model, X, bad)
    with pytest.raises(ValueError):
        r2_decomposition(model, X, y, sample_weight=np.ones(len(y) - 1))
    with pytest.raises(ValueError):
        r2_decomposition(model, X, y, sample_weight=-np.ones(len(y)))
    # constant y under the weights: only the rows with weight are constant
    w = np.zeros(len(y))
    w[:5] = 1.0
    y_const = y.copy()
    y_const[:5] = 1.0
    with pytest.raises(ValueError, match="constant"):
        r2_decomposition(model, X, y_const, sample_weight=w)
