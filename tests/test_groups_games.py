"""Feature groups in the other games: probabilistic values (any coalition weights
over the groups) and the interventional game (background=), against enumeration
of group subsets. The interventional reference builds the hybrid rows by
copying whole groups of columns from x into the background rows and averages
the model's own raw prediction (its library's predict): nothing there calls a
kernel."""
import functools
import math

import numpy as np
import pytest

import reference
from test_groups import _models, _players, brute_force
from test_interventional import _data, assert_categorical

from sklearn_r2shap import (
    banzhaf_values,
    beta_shapley_values,
    explain,
    shap_values,
    to_ensemble,
)
from sklearn_r2shap._games import semivalues as games
from sklearn_r2shap.attributions import probabilistic_values, semivalues

pd = pytest.importorskip("pandas")


# --------------------------------------------------------------------------
# probabilistic_values(feature_groups=): TreeProb with the groups as its n players
# --------------------------------------------------------------------------
GROUPS = [{"a": [0, 3], "b": [1, 4, 5]}, {"pair": [4, 5]}]


@pytest.fixture(scope="module")
def models():
    return _models()


def _weights(K, seed):
    """Arbitrary positive weights of coalition sizes 0..K-1 (no semivalue family):
    wrong K, wrong values."""
    return np.random.default_rng(seed).uniform(0.05, 1.0, size=K)


@pytest.mark.parametrize("route", ["treeprob", "quadrature"])
def test_probabilistic_values_of_groups_against_enumeration(models, route, monkeypatch):
    if route == "quadrature":  # every tree through the quadrature rule of the weights
        monkeypatch.setattr(games, "_TREEPROB_MAX_ROOTS", 1)
    for name, model, X in models:
        ensemble = to_ensemble(model)
        for seed, groups in enumerate(GROUPS):
            players = _players(groups, X.shape[1])
            K = len(players)
            w = _weights(K, seed)
            if route == "quadrature":  # the rule is used (not the TreeProb fallback)
                amplification = games._semivalue_rule(w, K)[2]
                assert amplification <= games._RULE_MAX_AMPLIFICATION
            phi = probabilistic_values(model, X[:3], w, feature_groups=groups)
            phi = phi if phi.ndim == 3 else phi[:, None, :]
            assert phi.shape[-1] == K + 1, name
            for i in range(3):
                want = brute_force(ensemble, X[i], players, lambda s, K: w[s])
                assert np.abs(want).max() > 1e-3
                np.testing.assert_allclose(phi[i, :, :-1], want, atol=1e-9,
                                           err_msg=f"{name} {route} {groups}")
                np.testing.assert_allclose(phi[i, :, -1],
                                           reference.value_function(ensemble, X[i], set()),
                                           atol=1e-12)


def test_probabilistic_values_of_groups_special_cases_and_errors(models):
    _, model, X = models[0]
    groups = GROUPS[0]
    K = len(_players(groups, X.shape[1]))
    shapley = [math.factorial(s) * math.factorial(K - 1 - s) / math.factorial(K)
               for s in range(K)]
    np.testing.assert_allclose(probabilistic_values(model, X[:20], shapley, feature_groups=groups),
                               shap_values(model, X[:20], feature_groups=groups), atol=1e-12)
    banzhaf = [0.3 ** s * 0.7 ** (K - 1 - s) for s in range(K)]
    np.testing.assert_allclose(probabilistic_values(model, X[:20], banzhaf, feature_groups=groups),
                               banzhaf_values(model, X[:20], q=0.3, feature_groups=groups),
                               atol=1e-12)
    # the weights count the players (3 here), not the 6 columns
    with pytest.raises(ValueError, match=r"0\.\.2 of the 3 players.*got shape \(6,\)"):
        probabilistic_values(model, X[:3], np.ones(6) / 6, feature_groups=groups)


# --------------------------------------------------------------------------
# feature_groups= with background=: the interventional game of the groups
# --------------------------------------------------------------------------
def interventional_brute_force(raw, x_rows, background, players,
                               weight=reference.shapley_weight):
    """Semivalues of T -> mean over b of f(x on the groups in T, b elsewhere),
    shape (n_rows, n_outputs, K); arrays or DataFrames (category columns kept)."""
    frame = hasattr(background, "iloc")
    n_bg = background.shape[0]
    K = len(players)
    masks = list(range(1 << K))
    out = []
    for r in range(x_rows.shape[0]):
        x = x_rows.iloc[r] if frame else x_rows[r]
        if frame:
            Z = pd.concat([background] * len(masks), ignore_index=True)
        else:
            Z = np.tile(background, (len(masks), 1))
        which = np.repeat(masks, n_bg)
        for k, columns in enumerate(players):
            rows = np.flatnonzero((which >> k) & 1)
            for j in columns:
                if frame:
                    Z.iloc[rows, j] = x.iloc[j]
                else:
                    Z[rows, j] = x[j]
        pred = np.asarray(raw(Z), dtype=np.float64).reshape(len(masks) * n_bg, -1)
        v = pred.reshape(len(masks), n_bg, -1).mean(axis=1)  # v(T) by bit mask
        phi = np.zeros((v.shape[1], K))
        for k in range(K):
            for T in masks:
                if not (T >> k) & 1:
                    phi[:, k] += weight(K, bin(T).count("1")) * (v[T | (1 << k)] - v[T])
        out.append(phi)
    return np.array(out)


# the categorical column 0 shares a group with a numeric one
IV_GROUPS = {"a": [0, 3], "b": [1, 2]}
IV_PLAYERS = [[0, 3], [1, 2], [4]]


def check_groups(model, raw, rows, background, *, feature_groups=IV_GROUPS,
                 players=IV_PLAYERS, rtol=1e-7, route=None):
    """Grouped interventional SHAP values (on ``route``; None: by cost) against
    enumeration, efficiency and the expected value."""
    phi = semivalues(model, rows, background=background, feature_groups=feature_groups, route=route)
    phi = phi if phi.ndim == 3 else phi[:, None, :]
    ref = interventional_brute_force(raw, rows, background, players)
    scale = max(1.0, float(np.abs(ref).max()))
    assert phi.shape[-1] == len(players) + 1
    np.testing.assert_allclose(phi[:, :, :-1], ref, rtol=0, atol=1e-9 + rtol * scale)
    mean_bg = np.asarray(raw(background), dtype=np.float64).reshape(background.shape[0], -1)
    np.testing.assert_allclose(phi[:, :, -1], np.broadcast_to(mean_bg.mean(axis=0),
                                                              phi[:, :, -1].shape),
                               rtol=0, atol=1e-9 + rtol * scale)
    pred = np.asarray(raw(rows), dtype=np.float64).reshape(rows.shape[0], -1)
    np.testing.assert_allclose(phi.sum(axis=2), pred, rtol=0, atol=1e-9 + rtol * scale)
    assert np.abs(ref).max() > 1e-3  # the check can fail
    return phi


def _split(X, n_rows=3, n_bg=12):
    return X[:n_rows].copy(), X[100:100 + n_bg].copy()


def test_interventional_groups_sklearn_nan_categorical_and_multiclass():
    from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestClassifier

    X, y = _data(nan=0.15, categorical=True)
    model = HistGradientBoostingRegressor(max_iter=8, max_depth=4, categorical_features=[0],
                                          random_state=0).fit(X, y)
    assert_categorical(model)
    rows, bg = _split(X, n_rows=4)
    assert np.isnan(rows).any() and np.isnan(bg).any()
    check_groups(model, model.predict, rows, bg)
    X, y = _data()
    forest = RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(
        X, np.digitize(y, [-0.5, 0.5]))
    rows, bg = _split(X)
    assert check_groups(forest, forest.predict_proba, rows, bg).shape == (3, 3, 4)


def test_interventional_groups_xgboost_nan_and_categorical_frame():
    xgb = pytest.importorskip("xgboost")
    X, y = _data(nan=0.15)
    model = xgb.XGBRegressor(n_estimators=8, max_depth=4, n_jobs=1).fit(X, y)
    rows, bg = _split(X)
    check_groups(model, functools.partial(model.predict, output_margin=True), rows, bg,
                 rtol=1e-5)
    X, y = _data(nan=0.1, categorical=True)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    frame["f0"] = pd.Categorical(np.nan_to_num(X[:, 0], nan=0).astype(int))
    model = xgb.XGBRegressor(n_estimators=8, max_depth=4, enable_categorical=True,
                             tree_method="hist", max_cat_to_onehot=1, n_jobs=1).fit(frame, y)
    assert_categorical(model)
    # groups by column name
    check_groups(model, functools.partial(model.predict, output_margin=True), frame.iloc[:3],
                 frame.iloc[100:112], feature_groups={"a": ["f0", "f3"], "b": ["f1", "f2"]},
                 rtol=1e-5)


def test_interventional_groups_lightgbm_categorical_nan():
    lgb = pytest.importorskip("lightgbm")
    X, y = _data(nan=0.15, categorical=True)
    model = lgb.LGBMRegressor(n_estimators=8, num_leaves=12, min_child_samples=5,
                              min_data_per_group=5, cat_smooth=1, verbose=-1,
                              n_jobs=1).fit(X, y, categorical_feature=[0])
    assert_categorical(model)
    rows, bg = _split(X)
    check_groups(model, functools.partial(model.predict, raw_score=True), rows, bg, rtol=1e-6)
    classifier = lgb.LGBMClassifier(n_estimators=4, num_leaves=8, verbose=-1, n_jobs=1).fit(
        X, np.digitize(y, [-0.5, 0.5]))
    check_groups(classifier, functools.partial(classifier.predict, raw_score=True), rows, bg,
                 rtol=1e-6)


@pytest.mark.parametrize("grow_policy", ["SymmetricTree", "Depthwise"])
def test_interventional_groups_catboost_nan(grow_policy):
    catboost = pytest.importorskip("catboost")
    X, y = _data(nan=0.15)
    model = catboost.CatBoostRegressor(iterations=6, depth=3, grow_policy=grow_policy,
                                       verbose=0, allow_writing_files=False, thread_count=1,
                                       random_seed=0).fit(X, y)
    rows, bg = _split(X)
    check_groups(model, lambda Z: model.predict(Z, prediction_type="RawFormulaVal"), rows, bg,
                 rtol=1e-6)


def test_interventional_groups_catboost_one_hot_categorical_multiclass():
    catboost = pytest.importorskip("catboost")
    X, y = _data(categorical=True)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    frame["f0"] = frame["f0"].astype(int)
    model = catboost.CatBoostClassifier(iterations=4, depth=3, cat_features=["f0"],
                                        one_hot_max_size=10, verbose=0,
                                        allow_writing_files=False, thread_count=1,
                                        random_seed=0).fit(frame, np.digitize(y, [-0.5, 0.5]))
    assert_categorical(model)

    def raw(Z):
        return model.predict(catboost.Pool(Z, cat_features=["f0"]),
                             prediction_type="RawFormulaVal")

    check_groups(model, raw, frame.iloc[:3], frame.iloc[100:112], rtol=1e-6)


@pytest.mark.parametrize("route", ["tables", "direct"])
def test_interventional_groups_banzhaf_beta_and_both_routes(monkeypatch, route):
    xgb = pytest.importorskip("xgboost")
    X, y = _data(nan=0.15)
    model = xgb.XGBRegressor(n_estimators=6, max_depth=4, n_jobs=1).fit(X, y)
    raw = functools.partial(model.predict, output_margin=True)
    rows, bg = _split(X)
    check_groups(model, raw, rows, bg, rtol=1e-5, route=route)
    for phi, weight in (
            (semivalues(model, rows, semivalue="weighted_banzhaf", q=0.3, background=bg,
                        feature_groups=IV_GROUPS, route=route), reference.banzhaf_weight(0.3)),
            (semivalues(model, rows, semivalue="beta", alpha=4, beta=2, background=bg,
                        feature_groups=IV_GROUPS, route=route), reference.beta_weight(4, 2))):
        ref = interventional_brute_force(raw, rows, bg, IV_PLAYERS, weight)[:, 0]
        assert np.abs(ref).max() > 1e-2
        np.testing.assert_allclose(phi[:, :-1], ref, rtol=0, atol=1e-5 * np.abs(ref).max())


def test_interventional_singleton_groups_are_the_interventional_values():
    from sklearn.ensemble import GradientBoostingClassifier

    X, y = _data(seed=3, nan=0.0)
    model = GradientBoostingClassifier(n_estimators=5, max_depth=3, random_state=0).fit(
        X, np.digitize(y, [-0.5, 0.5]))
    singletons = {f"g{j}": [j] for j in range(X.shape[1])}
    np.testing.assert_allclose(
        shap_values(model, X[:30], background=X[100:160], feature_groups=singletons),
        shap_values(model, X[:30], background=X[100:160]), rtol=0, atol=1e-12)


def test_interventional_groups_input_on_a_pipeline_against_input_columns():
    # feature_groups="input": hybrid rows of the *input* columns through the whole Pipeline
    from test_groups import _pipeline

    pipeline, X = _pipeline()
    rows, bg = X.iloc[:3], X.iloc[100:110]
    phi = shap_values(pipeline, rows, background=bg, feature_groups="input")
    players = [[list(X.columns).index(c)] for c in ["colour", "shape", "size", "weight"]]
    ref = interventional_brute_force(pipeline.predict, rows, bg, players)[:, 0]
    assert np.abs(ref).max() > 1e-2
    np.testing.assert_allclose(phi[:, :-1], ref, rtol=0, atol=1e-10)
    np.testing.assert_allclose(phi[:, -1], pipeline.predict(bg).mean(), atol=1e-10)
    e = explain(pipeline, rows, background=bg, feature_groups="input")
    np.testing.assert_array_equal(e.values, phi[:, :-1])
    assert list(e.feature_names) == ["colour", "shape", "size", "weight"]
    assert e.description == "interventional SHAP values of feature groups"
    with pytest.raises(ValueError, match="interactions=True"):
        explain(pipeline, rows, feature_groups="input", interactions=True)
