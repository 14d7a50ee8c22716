"""scikit-learn adapter: trees, forests, GradientBoosting, HistGradientBoosting.

Every model family is checked against the model's own raw prediction (with
NaN rows where the model accepts them), the plain-Python reference routing,
brute-force Shapley values and, where shap supports the model, shap's
TreeExplainer.
"""
import dataclasses

import numpy as np
import pytest

pytest.importorskip("sklearn")

import reference  # noqa: E402
from sklearn import ensemble, tree  # noqa: E402
from sklearn.dummy import DummyClassifier  # noqa: E402
from sklearn.exceptions import NotFittedError  # noqa: E402
from sklearn.linear_model import LinearRegression  # noqa: E402

from sklearn_r2shap import (  # noqa: E402
    UnsupportedModelError,
    expected_value,
    predict_raw,
    saabas_values,
    shap_values,
    to_ensemble,
)
from sklearn_r2shap._model import TreeArrays, TreeEnsemble  # noqa: E402

P = 5


def _data(n=160, p=P, nan=0.0, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, 0] + X[:, 1] * X[:, 2] + 0.5 * np.abs(X[:, 3]) + 0.1 * rng.normal(size=n)
    if nan:
        X[rng.random((n, p)) < nan] = np.nan
    return X, y


def _classes(y, n_classes):
    return np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))


def _raw(model, X):
    """The library's own raw (margin / proba) prediction, shape (n, n_outputs)."""
    n = len(X)
    if isinstance(model, (ensemble.HistGradientBoostingRegressor,
                          ensemble.HistGradientBoostingClassifier)):
        return model._raw_predict(X).reshape(n, -1)
    if isinstance(model, ensemble.GradientBoostingClassifier):
        return model.decision_function(X).reshape(n, -1)
    if hasattr(model, "predict_proba"):
        return model.predict_proba(X)
    return model.predict(X).reshape(n, -1)


def _fit(name):
    """Small fitted models; those that accept NaN are trained with NaN."""
    X, y = _data()
    Xn, _ = _data(nan=0.1)
    y3 = _classes(y, 3)
    kw = dict(random_state=0)
    models = {
        "dt_reg": lambda: tree.DecisionTreeRegressor(max_depth=5, **kw).fit(Xn, y),
        "dt_clf": lambda: tree.DecisionTreeClassifier(max_depth=4, **kw).fit(Xn, y3),
        "et_reg": lambda: tree.ExtraTreeRegressor(max_depth=5, **kw).fit(Xn, y),
        "et_clf": lambda: tree.ExtraTreeClassifier(max_depth=4, **kw).fit(Xn, y3),
        "rf_reg": lambda: ensemble.RandomForestRegressor(4, max_depth=4, **kw).fit(Xn, y),
        "rf_clf": lambda: ensemble.RandomForestClassifier(4, max_depth=3, **kw).fit(Xn, y3),
        "ets_reg": lambda: ensemble.ExtraTreesRegressor(4, max_depth=4, **kw).fit(Xn, y),
        "ets_clf": lambda: ensemble.ExtraTreesClassifier(4, max_depth=3, **kw).fit(Xn, y3),
        "dt_multi": lambda: tree.DecisionTreeRegressor(max_depth=4, **kw).fit(
            Xn, np.c_[y, X[:, 4]]),
        "rf_multi": lambda: ensemble.RandomForestRegressor(3, max_depth=3, **kw).fit(
            Xn, np.c_[y, X[:, 4]]),
        "gb_reg": lambda: ensemble.GradientBoostingRegressor(
            n_estimators=8, max_depth=3, subsample=0.8, **kw).fit(X, y),
        "gb_huber": lambda: ensemble.GradientBoostingRegressor(
            loss="huber", n_estimators=6, max_depth=2, **kw).fit(X, y),
        "gb_bin": lambda: ensemble.GradientBoostingClassifier(
            n_estimators=6, max_depth=3, **kw).fit(X, y > 0),
        "gb_multi": lambda: ensemble.GradientBoostingClassifier(
            n_estimators=4, max_depth=2, **kw).fit(X, y3),
        "hgb_reg": lambda: ensemble.HistGradientBoostingRegressor(
            max_iter=8, max_leaf_nodes=8, **kw).fit(Xn, y),
        "hgb_poisson": lambda: ensemble.HistGradientBoostingRegressor(
            loss="poisson", max_iter=6, max_leaf_nodes=6, **kw).fit(Xn, np.exp(y / 3)),
        "hgb_bin": lambda: ensemble.HistGradientBoostingClassifier(
            max_iter=6, max_leaf_nodes=6, **kw).fit(Xn, y > 0),
        "hgb_multi": lambda: ensemble.HistGradientBoostingClassifier(
            max_iter=4, max_leaf_nodes=5, **kw).fit(Xn, y3),
    }
    return models[name]()


MODELS = ["dt_reg", "dt_clf", "et_reg", "et_clf", "rf_reg", "rf_clf", "ets_reg", "ets_clf",
          "dt_multi", "rf_multi", "gb_reg", "gb_huber", "gb_bin", "gb_multi", "hgb_reg",
          "hgb_poisson", "hgb_bin", "hgb_multi"]

# (model_type, objective, averaging, x_float32, n_values, n_outputs)
EXPECTED = {
    "dt_reg": ("DecisionTreeRegressor", "squared_error", False, True, 1, 1),
    "dt_clf": ("DecisionTreeClassifier", "gini", False, True, 3, 3),
    "et_reg": ("ExtraTreeRegressor", "squared_error", False, True, 1, 1),
    "et_clf": ("ExtraTreeClassifier", "gini", False, True, 3, 3),
    "rf_reg": ("RandomForestRegressor", "squared_error", True, True, 1, 1),
    "rf_clf": ("RandomForestClassifier", "gini", True, True, 3, 3),
    "ets_reg": ("ExtraTreesRegressor", "squared_error", True, True, 1, 1),
    "ets_clf": ("ExtraTreesClassifier", "gini", True, True, 3, 3),
    "dt_multi": ("DecisionTreeRegressor", "squared_error", False, True, 2, 2),
    "rf_multi": ("RandomForestRegressor", "squared_error", True, True, 2, 2),
    "gb_reg": ("GradientBoostingRegressor", "squared_error", False, True, 1, 1),
    "gb_huber": ("GradientBoostingRegressor", "huber", False, True, 1, 1),
    "gb_bin": ("GradientBoostingClassifier", "log_loss", False, True, 1, 1),
    "gb_multi": ("GradientBoostingClassifier", "log_loss", False, True, 1, 3),
    "hgb_reg": ("HistGradientBoostingRegressor", "squared_error", False, False, 1, 1),
    "hgb_poisson": ("HistGradientBoostingRegressor", "poisson", False, False, 1, 1),
    "hgb_bin": ("HistGradientBoostingClassifier", "log_loss", False, False, 1, 1),
    "hgb_multi": ("HistGradientBoostingClassifier", "log_loss", False, False, 1, 3),
}


@pytest.fixture(scope="module", params=MODELS)
def fitted(request):
    return request.param, _fit(request.param)


def _test_rows(model, n=40):
    """Fresh rows, with NaN in some rows where the model accepts NaN."""
    X, _ = _data(n=n, seed=1)
    if to_ensemble(model).info["allow_nan"]:
        X[::3, 1] = np.nan
        X[1::4, [0, 2]] = np.nan
        X[2, :] = np.nan
    return X


def test_metadata(fitted):
    name, model = fitted
    ens = to_ensemble(model)
    got = (ens.model_type, ens.objective, ens.averaging, ens.x_float32, ens.n_values,
           ens.n_outputs)
    assert got == EXPECTED[name]
    n_trees = len(getattr(model, "estimators_", [model]))
    if hasattr(model, "_predictors"):
        n_trees = sum(len(it) for it in model._predictors)
    elif hasattr(model, "n_estimators_"):
        n_trees = model.estimators_.size
    assert ens.n_trees == ens.info["n_trees_total"] == n_trees
    assert ens.n_features == P and ens.feature_names is None


def test_allow_nan_matches_model_predict(fitted):
    _, model = fitted
    X = _test_rows(model, n=3)
    X[0, 0] = np.nan
    if to_ensemble(model).info["allow_nan"]:
        assert np.all(np.isfinite(_raw(model, X)))
        assert np.all(np.isfinite(predict_raw(model, X)))
    else:
        with pytest.raises(ValueError, match="NaN"):
            _raw(model, X)
        with pytest.raises(UnsupportedModelError, match="NaN"):
            predict_raw(model, X)


def test_predict_raw_matches_library(fitted):
    _, model = fitted
    X = _test_rows(model)
    ens = to_ensemble(model)
    expected = _raw(model, X)
    np.testing.assert_allclose(predict_raw(model, X), expected, rtol=0, atol=1e-6)
    # independent plain-Python routing
    np.testing.assert_allclose(reference.predict(ens, X[:5]), expected[:5], rtol=0, atol=1e-6)


def test_shap_matches_brute_force(fitted):
    _, model = fitted
    X = _test_rows(model)[:3]  # rows 0 and 1 have NaN where allowed, row 2 is all NaN
    ens = to_ensemble(model)
    phi = shap_values(model, X).reshape(len(X), ens.n_outputs, P + 1)
    for r, x in enumerate(X):
        brute = reference.semivalue(ens, x)
        scale = max(np.abs(brute).max(), 1e-12)
        assert np.abs(phi[r, :, :P] - brute).max() <= 1e-10 * scale
    np.testing.assert_allclose(phi.sum(axis=2), _raw(model, X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(phi[0, :, P], expected_value(model), rtol=0, atol=1e-12)


def test_saabas_additive(fitted):
    _, model = fitted
    X = _test_rows(model)[:6]
    phi = saabas_values(model, X)
    np.testing.assert_allclose(phi.sum(axis=-1).reshape(len(X), -1), _raw(model, X),
                               rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------
# scikit-learn trees


def test_classifier_tree_values_are_fractions():
    model = _fit("dt_clf")
    ens = to_ensemble(model)
    value = model.tree_.value[:, 0, :]
    # sklearn >= 1.4 stores class fractions, so the leaves need no normalising
    np.testing.assert_allclose(value.sum(axis=1), 1.0, atol=1e-12)
    leaves = np.flatnonzero(ens.is_leaf)
    np.testing.assert_allclose(np.sort(ens.value[leaves], axis=0),
                               np.sort(value[model.tree_.children_left < 0], axis=0))


def test_random_forest_classifier_proba_outputs():
    model = _fit("rf_clf")
    X = _test_rows(model, n=8)
    phi = shap_values(model, X)
    assert phi.shape == (8, 3, P + 1)
    np.testing.assert_allclose(phi.sum(axis=2), model.predict_proba(X), atol=1e-12)
    # the expected values are the cover-weighted class fractions: they sum to 1
    assert expected_value(model).sum() == pytest.approx(1.0, abs=1e-12)
    # each tree's leaf holds class fractions times 1/T
    ens = to_ensemble(model)
    leaf = ens.value[ens.is_leaf] * len(model.estimators_)
    np.testing.assert_allclose(leaf.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(leaf >= 0)


def test_missing_values_routing_follows_missing_go_to_left():
    X, y = _data(n=200, nan=0.25, seed=3)
    model = tree.DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    t = model.tree_
    internal = t.children_left >= 0
    # the tree learned both directions for NaN, so the test exercises both
    assert 0 < t.missing_go_to_left[internal].sum() < internal.sum()
    Xt = np.full((P, P), 0.3)
    Xt[np.arange(P), np.arange(P)] = np.nan
    np.testing.assert_allclose(predict_raw(model, Xt)[:, 0], model.predict(Xt), atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda: tree.DecisionTreeRegressor(max_depth=5, random_state=0),
    lambda: tree.ExtraTreeClassifier(max_depth=5, random_state=0),
    lambda: ensemble.RandomForestRegressor(3, max_depth=5, random_state=0),
    lambda: ensemble.HistGradientBoostingClassifier(max_iter=4, random_state=0),
])
def test_nan_at_predict_time_only(make):
    """Models fitted without NaN still route NaN by their stored default side."""
    X, y = _data()
    model = make()
    model.fit(X, y > 0 if hasattr(model, "predict_proba") else y)
    Xt, _ = _data(n=50, nan=0.3, seed=9)
    np.testing.assert_allclose(predict_raw(model, Xt), _raw(model, Xt), rtol=0, atol=1e-10)
    ens = to_ensemble(model)
    x = Xt[np.isnan(Xt).any(axis=1)][0]
    brute = reference.semivalue(ens, x)
    phi = shap_values(model, x[None]).reshape(ens.n_outputs, P + 1)[:, :P]
    assert np.abs(phi - brute).max() <= 1e-10 * max(np.abs(brute).max(), 1e-12)


def test_float32_thresholds():
    """Rows equal to a threshold after rounding to float32 route as sklearn does."""
    X, y = _data(n=100, seed=5)
    X = X + 1e-9  # float64 values with float32 neighbours on either side
    model = tree.DecisionTreeRegressor(max_depth=6, random_state=0).fit(X, y)
    t = model.tree_
    internal = np.flatnonzero(t.children_left >= 0)
    rows = np.tile(X[:1], (len(internal) * 2, 1))
    for i, k in enumerate(internal):
        rows[2 * i, t.feature[k]] = t.threshold[k] + 1e-9
        rows[2 * i + 1, t.feature[k]] = np.nextafter(np.float32(t.threshold[k]), np.float32(9))
    np.testing.assert_allclose(predict_raw(model, rows)[:, 0], model.predict(rows), atol=1e-12)


def test_sample_weighted_tree_uses_weighted_covers():
    X, y = _data(n=150, seed=2)
    w = np.random.default_rng(2).uniform(0.05, 5.0, len(y)) ** 2
    model = tree.DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y, sample_weight=w)
    ens = to_ensemble(model)
    order = np.argsort(ens.cover)
    np.testing.assert_allclose(ens.cover[order],
                               np.sort(model.tree_.weighted_n_node_samples), rtol=1e-12)
    assert ens.cover[0] == pytest.approx(w.sum())

    x = X[7]
    phi = shap_values(model, x[None])[0]
    brute = reference.semivalue(ens, x)[0]
    np.testing.assert_allclose(phi[:P], brute, atol=1e-10 * np.abs(brute).max())
    # the same tree with unweighted counts as covers is a different game
    t = model.tree_
    unweighted = TreeEnsemble.from_trees(
        [TreeArrays(t.children_left, t.children_right, t.missing_go_to_left.astype(bool),
                    t.feature, t.threshold, np.zeros(t.node_count, np.uint8),
                    t.n_node_samples.astype(float), t.value[:, :, 0])],
        base_value=[0.0], n_features=P, x_float32=True)
    other = reference.semivalue(unweighted, x)[0]
    assert np.abs(other - brute).max() > 1e-3 * np.abs(brute).max()


def test_deep_tree_with_repeated_features():
    X = np.random.default_rng(4).normal(size=(300, 3))
    y = np.sin(3 * X[:, 0]) + X[:, 1] * X[:, 2]
    model = tree.DecisionTreeRegressor(max_depth=14, random_state=0).fit(X, y)
    ens = to_ensemble(model)
    assert ens.max_depth >= 10 and ens.n_path_features == 3
    rows = X[:4]
    phi = shap_values(model, rows)
    for r, x in enumerate(rows):
        brute = reference.semivalue(ens, x)[0]
        assert np.abs(phi[r, :3] - brute).max() <= 1e-10 * np.abs(brute).max()
    np.testing.assert_allclose(phi.sum(axis=1), model.predict(rows), atol=1e-10)


@pytest.mark.filterwarnings("ignore:Value .*friedman_mse:FutureWarning")
def test_criterion_names():
    X, y = _data(n=80)
    fmse = tree.DecisionTreeRegressor(criterion="friedman_mse", max_depth=2).fit(X, y)
    mae = ensemble.RandomForestRegressor(2, criterion="absolute_error", max_depth=2).fit(X, y)
    ent = tree.DecisionTreeClassifier(criterion="entropy", max_depth=2).fit(X, y > 0)
    assert to_ensemble(fmse).objective == "squared_error"
    assert to_ensemble(mae).objective == "absolute_error"
    assert to_ensemble(ent).objective == "entropy"


def test_feature_names_from_dataframe():
    pd = pytest.importorskip("pandas")
    X, y = _data(n=80)
    df = pd.DataFrame(X, columns=list("abcde"))
    model = ensemble.RandomForestRegressor(2, max_depth=3, random_state=0).fit(df, y)
    ens = to_ensemble(model)
    assert list(ens.feature_names) == list("abcde")
    np.testing.assert_allclose(predict_raw(model, df)[:, 0], model.predict(df), atol=1e-12)


# ---------------------------------------------------------------------------
# GradientBoosting


def test_gradient_boosting_base_value_is_init_prediction():
    X, y = _data()
    reg = ensemble.GradientBoostingRegressor(n_estimators=3, random_state=0).fit(X, y)
    assert to_ensemble(reg).base_value[0] == pytest.approx(y.mean(), rel=1e-12)
    clf = ensemble.GradientBoostingClassifier(n_estimators=3, random_state=0).fit(X, y > 0)
    p = np.mean(y > 0)
    assert to_ensemble(clf).base_value[0] == pytest.approx(np.log(p / (1 - p)), rel=1e-12)
    zero = ensemble.GradientBoostingRegressor(n_estimators=3, init="zero").fit(X, y)
    assert to_ensemble(zero).base_value[0] == 0.0
    np.testing.assert_allclose(predict_raw(zero, X)[:, 0], zero.predict(X), atol=1e-10)


def test_gradient_boosting_multiclass_one_tree_per_class():
    model = _fit("gb_multi")
    ens = to_ensemble(model)
    assert ens.n_trees == model.n_estimators_ * 3
    np.testing.assert_array_equal(ens.tree_output, np.tile(np.arange(3), model.n_estimators_))


def test_gradient_boosting_early_stopping_uses_kept_stages():
    X, y = _data(n=200)
    model = ensemble.GradientBoostingRegressor(
        n_estimators=300, n_iter_no_change=2, validation_fraction=0.3, learning_rate=0.5,
        max_depth=2, random_state=0).fit(X, y)
    assert model.n_estimators_ < 300
    ens = to_ensemble(model)
    assert ens.n_trees == model.n_estimators_
    np.testing.assert_allclose(predict_raw(model, X)[:, 0], model.predict(X), atol=1e-10)


def test_gradient_boosting_dummy_init_constant_strategies():
    X, y = _data()
    model = ensemble.GradientBoostingClassifier(
        n_estimators=3, init=DummyClassifier(strategy="uniform"), random_state=0
    ).fit(X, y > 0)
    assert to_ensemble(model).base_value[0] == pytest.approx(0.0, abs=1e-12)
    np.testing.assert_allclose(predict_raw(model, X)[:, 0], model.decision_function(X),
                               atol=1e-10)


def test_gradient_boosting_nonconstant_init_raises():
    X, y = _data()
    model = ensemble.GradientBoostingRegressor(n_estimators=3, init=LinearRegression()).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="GradientBoostingRegressor.*init"):
        to_ensemble(model)
    stratified = ensemble.GradientBoostingClassifier(
        n_estimators=2, init=DummyClassifier(strategy="stratified", random_state=0)
    ).fit(X, y > 0)
    with pytest.raises(UnsupportedModelError, match="stratified"):
        shap_values(stratified, X[:2])


# ---------------------------------------------------------------------------
# HistGradientBoosting


def _categorical_data(n=400, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    cats = np.array([1, 3, 4, 7, 9, 40])
    X[:, 2] = rng.choice(cats, n)
    X[rng.random(n) < 0.1, 2] = np.nan
    X[rng.random(n) < 0.1, 1] = np.nan
    effect = {1: 0.0, 3: 2.0, 4: -1.0, 7: 3.0, 9: 1.0, 40: -2.0}
    y = np.array([effect[v] if v == v else 1.5 for v in X[:, 2]])
    y = y + np.nan_to_num(X[:, 0]) + 0.3 * rng.normal(size=n)
    return X, y


def _categorical_rows(X):
    rows = X[:16].copy()
    # known, unseen (0, 2, 5, 8, 12, 300, 2**31+5), negative, NaN
    rows[:12, 2] = [1, 40, 0, 2, 5, 8, 12, 300, -1, np.nan, 2.0**31 + 5, 9]
    return rows


def test_hist_gradient_boosting_categorical():
    X, y = _categorical_data()
    model = ensemble.HistGradientBoostingRegressor(
        max_iter=10, max_leaf_nodes=8, categorical_features=[2], random_state=0).fit(X, y)
    ens = to_ensemble(model)
    assert ens.info["categorical_features"] == [2]
    # both NaN directions occur at categorical splits, so both encodings are tested
    directions = {bool(node["missing_go_to_left"]) for it in model._predictors
                  for node in it[0].nodes if node["is_categorical"] and not node["is_leaf"]}
    assert directions == {True, False}
    # HGB moves categorical columns first internally; the ensemble uses input columns
    assert set(ens.feature[ens.decision_type == 3]) == {2}
    rows = _categorical_rows(X)
    expected = model._raw_predict(rows)
    np.testing.assert_allclose(predict_raw(model, rows), expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(reference.predict(ens, rows[:12]), expected[:12], atol=1e-10)
    phi = shap_values(model, rows[:4])
    np.testing.assert_allclose(phi.sum(axis=1), expected[:4, 0], atol=1e-10)
    for r in (2, 8, 9):  # unseen category, negative, NaN
        brute = reference.semivalue(ens, rows[r])[0]
        assert np.abs(shap_values(model, rows[r:r + 1])[0, :4] - brute).max() <= (
            1e-10 * np.abs(brute).max())


def test_hist_gradient_boosting_noninteger_category_is_missing():
    X, y = _categorical_data()
    model = ensemble.HistGradientBoostingRegressor(
        max_iter=10, max_leaf_nodes=8, categorical_features=[2], random_state=0).fit(X, y)
    rows = X[:8].copy()
    rows[:, 2] = [1.5, 3.5, 4.25, 7.9, 9.5, 40.5, 0.5, 2.5]
    np.testing.assert_allclose(predict_raw(model, rows), model._raw_predict(rows), atol=1e-10)


def test_hist_gradient_boosting_early_stopping_keeps_all_predictors():
    X, y = _data(n=300, nan=0.05)
    model = ensemble.HistGradientBoostingRegressor(
        max_iter=200, early_stopping=True, n_iter_no_change=2, validation_fraction=0.3,
        learning_rate=0.5, random_state=0).fit(X, y)
    assert model.n_iter_ < 200
    ens = to_ensemble(model)
    # HGB predicts with every fitted iteration, including the last n_iter_no_change
    assert ens.n_trees == model.n_iter_ == len(model._predictors)
    np.testing.assert_allclose(predict_raw(model, X)[:, 0], model.predict(X), atol=1e-10)


def test_hist_gradient_boosting_categorical_dataframe_names():
    pd = pytest.importorskip("pandas")
    X, y = _categorical_data(seed=1)
    df = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    model = ensemble.HistGradientBoostingClassifier(
        max_iter=5, max_leaf_nodes=6, categorical_features=["c"], random_state=0
    ).fit(df, y > 1)
    ens = to_ensemble(model)
    assert list(ens.feature_names) == ["a", "b", "c", "d"]
    rows = pd.DataFrame(_categorical_rows(X), columns=df.columns)
    np.testing.assert_allclose(predict_raw(model, rows)[:, 0], model.decision_function(rows),
                               atol=1e-10)


def test_hist_gradient_boosting_string_categories_raise():
    pd = pytest.importorskip("pandas")
    X, y = _data(n=120)
    df = pd.DataFrame(X[:, :3], columns=["a", "b", "c"])
    df["c"] = pd.Categorical(np.where(X[:, 2] > 0, "hi", "lo"))
    model = ensemble.HistGradientBoostingRegressor(max_iter=3).fit(df, y)
    with pytest.raises(UnsupportedModelError, match="not non-negative integer codes"):
        to_ensemble(model)


def test_hist_gradient_boosting_leaves_include_learning_rate():
    X, y = _data(nan=0.1)
    slow = ensemble.HistGradientBoostingRegressor(
        max_iter=1, learning_rate=0.05, random_state=0).fit(X, y)
    fast = ensemble.HistGradientBoostingRegressor(
        max_iter=1, learning_rate=0.5, random_state=0).fit(X, y)
    a, b = to_ensemble(slow), to_ensemble(fast)
    np.testing.assert_allclose(b.value[b.is_leaf], 10 * a.value[a.is_leaf], rtol=1e-10)
    np.testing.assert_array_equal(a.cover, b.cover)
    assert a.cover[0] == len(y)


# ---------------------------------------------------------------------------
# shap's TreeExplainer (tree_path_dependent)


@pytest.mark.parametrize("name", ["rf_reg", "gb_reg", "hgb_reg"])
def test_agrees_with_shap_tree_explainer(name):
    shap = pytest.importorskip("shap")
    model = _fit(name)
    X = _test_rows(model, n=20)
    explainer = shap.TreeExplainer(model, feature_perturbation="tree_path_dependent")
    phi = shap_values(model, X)
    np.testing.assert_allclose(phi[:, :P], explainer.shap_values(X), rtol=0, atol=1e-6)
    np.testing.assert_allclose(phi[:, P], np.ravel(explainer.expected_value)[0], atol=1e-6)
    saabas = saabas_values(model, X)
    np.testing.assert_allclose(saabas[:, :P], explainer.shap_values(X, approximate=True),
                               rtol=0, atol=1e-6)


# ---------------------------------------------------------------------------
# unsupported models


def test_unfitted_raises_not_fitted():
    for model in (tree.DecisionTreeRegressor(), ensemble.RandomForestClassifier(),
                  ensemble.GradientBoostingRegressor(),
                  ensemble.HistGradientBoostingClassifier()):
        with pytest.raises(NotFittedError):
            to_ensemble(model)


def test_other_sklearn_models_raise():
    # IsolationForest is supported (tests/test_isolation_forest.py)
    X, y = _data(n=60)
    for model in (ensemble.AdaBoostRegressor(n_estimators=2).fit(X, y),
                  ensemble.RandomTreesEmbedding(n_estimators=2).fit(X),
                  LinearRegression().fit(X, y)):
        with pytest.raises(UnsupportedModelError, match=type(model).__name__):
            to_ensemble(model)


def test_multi_output_classifier_raises():
    X, y = _data(n=60)
    model = tree.DecisionTreeClassifier(max_depth=2).fit(X, np.c_[y > 0, y > 1])
    with pytest.raises(UnsupportedModelError, match="multi-output classifier"):
        to_ensemble(model)


def test_ensemble_is_a_copy_free_of_model_state():
    """Editing the ensemble must not touch the fitted model (and vice versa)."""
    model = _fit("dt_reg")
    ens = to_ensemble(model)
    before = model.tree_.value.copy()
    ens.value[:] = 0.0
    np.testing.assert_array_equal(model.tree_.value, before)
    assert dataclasses.is_dataclass(ens)
