"""Feature groups as players: exact Shapley values of the group game, against
enumeration of group subsets with the reference value function (tests/reference.py)
of the model's own ensemble."""
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.decomposition import PCA
from sklearn.ensemble import (
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

import reference
from sklearn_r2shap import explain, shap_values, to_ensemble
from sklearn_r2shap.attributions import semivalues


def brute_force(ensemble, x, players, weight=None):
    """Shapley values (or the semivalue of coalition weights ``weight(size, K)``) of the
    game T -> v_x(union of the groups in T); (n_outputs, K)."""
    K = len(players)
    out = np.zeros((ensemble.n_outputs, K))
    cache = {}

    def v(T):
        if T not in cache:
            cache[T] = reference.value_function(
                ensemble, x, {j for g in T for j in players[g]})
        return cache[T]

    for k in range(K):
        others = [g for g in range(K) if g != k]
        for size in range(K):
            w = (math.factorial(size) * math.factorial(K - 1 - size) / math.factorial(K)
                 if weight is None else weight(size, K))
            for T in itertools.combinations(others, size):
                out[:, k] += w * (v(frozenset(T) | {k}) - v(frozenset(T)))
    return out


def _players(groups, n_features):
    """Players in the documented order: the groups, then the other columns."""
    grouped = [list(c) for c in groups.values()]
    rest = sorted(set(range(n_features)) - {j for g in grouped for j in g})
    return grouped + [[j] for j in rest]


def _data(n=400, p=6, seed=0, nan=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, 0] * X[:, 1] + X[:, 2] + np.sin(X[:, 3]) + X[:, 4] * X[:, 5]
    if nan:
        X[rng.uniform(size=X.shape) < 0.1] = np.nan
    return X, y


def _models():
    import catboost
    import lightgbm
    import xgboost

    X, y = _data()
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    Xn, yn = _data(nan=True, seed=1)
    Xc = Xn.copy()
    Xc[:, 2] = np.random.default_rng(2).integers(0, 5, size=len(Xc))
    return [
        ("gbr", GradientBoostingRegressor(n_estimators=5, max_depth=4, random_state=0)
         .fit(X, y), X),
        ("rf-multiclass", RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0)
         .fit(X, labels), X),
        ("hgb-nan-categorical", HistGradientBoostingClassifier(
            max_iter=4, max_depth=3, categorical_features=[2], random_state=0)
         .fit(Xc, labels), Xc),
        ("xgboost", xgboost.XGBRegressor(n_estimators=5, max_depth=4).fit(Xn, yn), Xn),
        ("lightgbm", lightgbm.LGBMClassifier(n_estimators=4, num_leaves=8, verbose=-1)
         .fit(Xn, labels), Xn),
        ("catboost", catboost.CatBoostRegressor(iterations=4, depth=3, verbose=0,
                                                random_seed=0).fit(X, y), X),
    ]


GROUPS = [{"a": [0, 3], "b": [1, 4, 5]}, {"pair": [4, 5]}, {"all": list(range(6))}]


@pytest.fixture(scope="module")
def models():
    return _models()


@pytest.mark.parametrize("route", ["tables", "quadrature"])
def test_against_enumeration_of_group_subsets(models, route, monkeypatch):
    for name, model, X in models:
        ensemble = to_ensemble(model)
        for groups in GROUPS:
            players = _players(groups, X.shape[1])
            phi = semivalues(model, X[:5], feature_groups=groups, route=route)
            phi = phi if phi.ndim == 3 else phi[:, None, :]
            assert phi.shape[-1] == len(players) + 1, name
            for i in range(5):
                np.testing.assert_allclose(phi[i, :, :-1], brute_force(ensemble, X[i], players),
                                           atol=1e-9, err_msg=f"{name} {groups}")
                np.testing.assert_allclose(phi[i, :, -1],
                                           reference.value_function(ensemble, X[i], set()),
                                           atol=1e-12)


def test_group_value_is_not_the_sum_of_members(models):
    _, model, X = models[0]
    groups = {"a": [0, 1]}  # x0 * x1 interact
    grouped = shap_values(model, X[:50], feature_groups=groups)
    members = shap_values(model, X[:50])
    # efficiency holds for both, so the group total and the members' sum share a mean...
    np.testing.assert_allclose(grouped[:, :-1].sum(axis=1), members[:, :-1].sum(axis=1),
                               atol=1e-10)
    # ...but row by row the group's value differs from the sum
    gap = np.abs(grouped[:, 0] - members[:, [0, 1]].sum(axis=1))
    assert gap.max() > 1e-3


def test_singleton_groups_are_shap_values(models):
    for name, model, X in models:
        singletons = {f"g{j}": [j] for j in range(X.shape[1])}
        np.testing.assert_allclose(shap_values(model, X[:20], feature_groups=singletons),
                                   shap_values(model, X[:20]), atol=1e-12, err_msg=name)


def _pipeline(sparse=False):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"size": rng.normal(size=300),
                      "colour": rng.choice(["red", "green", "blue", "grey"], size=300),
                      "shape": rng.choice(["round", "square"], size=300),
                      "weight": rng.normal(size=300)})
    y = (X["size"] * (X["colour"] == "red") + (X["shape"] == "round") * X["weight"]
         + 0.1 * rng.normal(size=300))
    columns = ColumnTransformer([
        ("cat", OneHotEncoder(sparse_output=sparse), ["colour", "shape"]),
        ("num", StandardScaler(), ["size", "weight"]),
    ])
    return Pipeline([("columns", columns), ("model", GradientBoostingRegressor(
        n_estimators=10, max_depth=4, random_state=0))]).fit(X, y), X


def test_groups_input_equals_explicit_groups():
    pipeline, X = _pipeline()
    names = list(pipeline[:-1].get_feature_names_out())
    explicit = {
        "colour": [n for n in names if n.startswith("cat__colour_")],
        "shape": [n for n in names if n.startswith("cat__shape_")],
        "size": ["num__size"],
        "weight": ["num__weight"],
    }
    got = shap_values(pipeline, X.iloc[:30], feature_groups="input")
    want = shap_values(pipeline, X.iloc[:30], feature_groups=explicit)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_allclose(got.sum(axis=1), pipeline.predict(X.iloc[:30]), atol=1e-10)
    e = explain(pipeline, X.iloc[:30], feature_groups="input")
    assert list(e.feature_names) == ["colour", "shape", "size", "weight"]
    np.testing.assert_array_equal(e.values, got[:, :-1])
    np.testing.assert_array_equal(e.data, X.iloc[:30][["colour", "shape", "size", "weight"]]
                                  .to_numpy())
    # and the group values against enumeration on the transformed rows
    last, Xt = pipeline[-1], pipeline[:-1].transform(X.iloc[:5])
    players = [[names.index(n) for n in columns] for columns in explicit.values()]
    for i in range(5):
        np.testing.assert_allclose(got[i, :-1], brute_force(to_ensemble(last), Xt[i],
                                                            players)[0], atol=1e-10)


def test_groups_input_refuses_mixed_columns():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 4))
    pipeline = Pipeline([("pca", PCA(n_components=3)),
                         ("model", GradientBoostingRegressor(n_estimators=3))]).fit(X, X[:, 0])
    with pytest.raises(ValueError, match="'pca' \\(PCA\\).*pass explicit feature_groups"):
        shap_values(pipeline, X, feature_groups="input")


def test_group_errors(models):
    _, model, X = models[0]
    with pytest.raises(ValueError, match="in two groups"):
        shap_values(model, X[:3], feature_groups={"a": [0, 1], "b": [1, 2]})
    with pytest.raises(ValueError, match="no column named 'z'"):
        shap_values(model, X[:3], feature_groups={"a": ["z"]})
    with pytest.raises(ValueError, match="out of range"):
        shap_values(model, X[:3], feature_groups={"a": [9]})
    with pytest.raises(TypeError, match="mapping"):
        shap_values(model, X[:3], feature_groups=[[0, 1]])
    with pytest.raises(ValueError, match="'input'"):
        shap_values(model, X[:3], feature_groups="inputs")


# --------------------------------------------------------------------------
# The R^2 game of groups (doc/r2_decomposition.rst, DESIGN.md sections 3 and 7)
# --------------------------------------------------------------------------
def _group_shapley(game, K):
    """Shapley values of a game given over the 2^K bit masks of the groups."""
    phi = np.zeros(K)
    for k in range(K):
        for mask in range(1 << K):
            if mask >> k & 1:
                continue
            s = bin(mask).count("1")
            w = math.factorial(s) * math.factorial(K - 1 - s) / math.factorial(K)
            phi[k] += w * (game[mask | 1 << k] - game[mask])
    return phi


def reference_group_r2(ensemble, X, y, players):
    """R2_g by enumeration of group subsets: sequential mode (boosting, one tree) with
    F_0 the model's base value, symmetric mode for averaging forests."""
    K = len(players)
    masks = [{j for g in range(K) if m >> g & 1 for j in players[g]} for m in range(1 << K)]
    q0 = np.sum((y - y.mean()) ** 2)
    base = float(ensemble.base_value[0])
    full = (1 << K) - 1
    total = np.zeros(K)
    for i in range(len(y)):
        x = reference.prepare(ensemble, X[i])
        table = np.array([[reference.tree_value(ensemble, t, x, S)[0] for S in masks]
                          for t in range(ensemble.n_trees)])
        if ensemble.averaging:
            empty = table[:, 0]
            centred = table - empty[:, None]
            mu = base + empty.sum()
            f_tilde = centred[:, full].sum()
            for k in range(ensemble.n_trees):
                r_sym = y[i] - mu - (f_tilde - centred[k, full]) / 2.0
                total += _group_shapley((r_sym - centred[k]) ** 2, K)
        else:
            prediction = base
            for k in range(ensemble.n_trees):
                total += _group_shapley((y[i] - prediction - table[k]) ** 2, K)
                prediction += table[k, full]
    return -total / q0


def test_r2_decomposition_of_groups_against_enumeration():
    import xgboost
    from sklearn.ensemble import RandomForestRegressor
    from sklearn.tree import DecisionTreeRegressor

    from sklearn_r2shap import r2_decomposition

    X, y = _data(n=80)
    groups = {"a": [0, 3], "b": [1, 4, 5]}
    players = _players(groups, X.shape[1])
    for model in (DecisionTreeRegressor(max_depth=5, random_state=0).fit(X, y),
                  GradientBoostingRegressor(n_estimators=4, max_depth=3, random_state=0)
                  .fit(X, y),
                  RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, y),
                  xgboost.XGBRegressor(n_estimators=4, max_depth=3).fit(X, y)):
        result = r2_decomposition(model, X, y, feature_groups=groups, return_local=True)
        want = reference_group_r2(to_ensemble(model), X, y, players)
        assert np.abs(want).max() > 1e-3
        np.testing.assert_allclose(result.shares, want, atol=1e-10,
                                   err_msg=type(model).__name__)
        assert list(result.feature_names) == ["a", "b", "x2"]
        assert result.local.shape == (80, 3)
        np.testing.assert_allclose(result.shares.sum() + result.unattributed,
                                   result.score, atol=1e-12)


def test_r2_decomposition_groups_input_on_pipeline():
    from sklearn_r2shap import r2_decomposition

    pipeline, X = _pipeline()
    y = pipeline.predict(X) + np.random.default_rng(5).normal(size=len(X))
    result = r2_decomposition(pipeline, X, y, feature_groups="input")
    assert list(result.feature_names) == ["colour", "shape", "size", "weight"]
    names = list(pipeline[:-1].get_feature_names_out())
    explicit = {c: [n for n in names if n.split("__")[1].startswith(c)]
                for c in ["colour", "shape", "size", "weight"]}
    np.testing.assert_array_equal(
        result.shares, r2_decomposition(pipeline, X, y, feature_groups=explicit).shares)
    np.testing.assert_allclose(result.shares.sum(),
                               r2_decomposition(pipeline, X, y).shares.sum(), atol=1e-12)


def test_selector_with_groups_selects_whole_groups():
    from sklearn_r2shap import ShapleyR2Importance, r2_decomposition

    X, y = _data(n=300)
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
    groups = {"a": [0, 1], "b": [4, 5]}
    selector = ShapleyR2Importance(model, prefit=True, feature_groups=groups, max_features=2,
                                   threshold=-np.inf).fit(X, y)
    want = r2_decomposition(model, X, y, feature_groups=groups)
    np.testing.assert_array_equal(selector.feature_importances_, want.shares)
    assert list(selector.explained_feature_names_) == ["a", "b", "x2", "x3"]
    top = np.argsort(-want.shares, kind="mergesort")[:2]
    players = _players(groups, 6)
    keep = sorted(j for k in top for j in players[k])
    np.testing.assert_array_equal(selector.get_support(indices=True), keep)
    np.testing.assert_array_equal(selector.transform(X), X[:, keep])


def test_selector_groups_input_on_pipeline_selects_input_columns():
    from sklearn_r2shap import ShapleyR2Importance, r2_decomposition

    pipeline, X = _pipeline()
    y = pipeline.predict(X) + np.random.default_rng(1).normal(size=len(X))
    selector = ShapleyR2Importance(pipeline, prefit=True, feature_groups="input",
                                   threshold="mean").fit(X, y)
    want = r2_decomposition(pipeline, X, y, feature_groups="input")
    np.testing.assert_array_equal(selector.feature_importances_, want.shares)
    kept = [n for n, s in zip(want.feature_names, want.shares)
            if s >= np.mean(want.shares)]
    assert sorted(selector.get_feature_names_out()) == sorted(kept)
    selector.set_output(transform="pandas")
    assert list(selector.transform(X).columns) == [c for c in X.columns if c in kept]
    # fitted by the selector, cross-fitted too
    crossed = ShapleyR2Importance(pipeline, feature_groups="input", cv=3).fit(X, y)
    assert crossed.cv_shares_.shape == (3, 4) and crossed.method_ == "qshap"
    # explicit groups of transformed columns cannot select input columns
    names = list(pipeline[:-1].get_feature_names_out())
    explicit = ShapleyR2Importance(pipeline, prefit=True,
                                   feature_groups={"colour": names[:4]}).fit(X, y)
    with pytest.raises(ValueError, match="feature_groups='input'"):
        explicit.transform(X)


def test_groups_input_with_a_passthrough_remainder():
    # remainder="passthrough" is held as an identity FunctionTransformer once fitted:
    # each passed-through column is its own group, named after the input column
    from sklearn.compose import make_column_transformer
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(3)
    X = pd.DataFrame({"band": rng.choice(["a", "b", "c"], size=200),
                      "u": rng.normal(size=200), "v": rng.normal(size=200)})
    y = (X["band"] == "b") * 2.0 + X["u"] - X["v"] ** 2
    encode = make_column_transformer((OneHotEncoder(), ["band"]), remainder="passthrough")
    pipeline = make_pipeline(encode, HistGradientBoostingRegressor(max_iter=20)).fit(X, y)
    names = list(pipeline[:-1].get_feature_names_out())
    explicit = {"band": [n for n in names if n.startswith("onehotencoder__band_")],
                "u": ["remainder__u"], "v": ["remainder__v"]}
    got = shap_values(pipeline, X.iloc[:20], feature_groups="input")
    np.testing.assert_array_equal(got, shap_values(pipeline, X.iloc[:20], feature_groups=explicit))
    assert list(explain(pipeline, X.iloc[:20], feature_groups="input").feature_names) == [
        "band", "u", "v"]


def test_banzhaf_and_beta_shapley_values_of_groups_against_enumeration(models):
    from sklearn_r2shap import banzhaf_values, beta_shapley_values

    q, alpha, beta = 0.3, 4, 2
    semivalues = {
        "banzhaf": (lambda m, X, g: banzhaf_values(m, X, q=q, feature_groups=g),
                    lambda s, K: q ** s * (1 - q) ** (K - 1 - s)),
        "beta": (lambda m, X, g: beta_shapley_values(m, X, alpha=alpha, beta=beta,
                                                     feature_groups=g),
                 lambda s, K: math.exp(math.lgamma(s + beta) + math.lgamma(K - 1 - s + alpha)
                                       - math.lgamma(K + alpha + beta - 1)
                                       - (math.lgamma(alpha) + math.lgamma(beta)
                                          - math.lgamma(alpha + beta)))),
    }
    for name, model, X in models:
        ensemble = to_ensemble(model)
        for groups in GROUPS[:2]:
            players = _players(groups, X.shape[1])
            for kind, (function, weight) in semivalues.items():
                phi = function(model, X[:3], groups)
                phi = phi if phi.ndim == 3 else phi[:, None, :]
                assert phi.shape[-1] == len(players) + 1, name
                for i in range(3):
                    np.testing.assert_allclose(
                        phi[i, :, :-1], brute_force(ensemble, X[i], players, weight),
                        atol=1e-9, err_msg=f"{name} {kind} {groups}")
