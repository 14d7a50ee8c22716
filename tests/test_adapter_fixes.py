"""Adapter and numerics fixes (issue #14): weighted covers for HistGradientBoosting,
objectives whose prediction is not the raw sum of the trees, CatBoost copies,
float32 overflow, non-finite leaves, Beta Shapley values with huge alpha/beta.

References: the libraries' own predict / contributions / node counts, plain-Python
routing (tests/reference.py) and subset enumeration with exact rational weights."""
import copy
import pickle
from fractions import Fraction

import numpy as np
import pytest
from sklearn import ensemble, tree

import reference
from sklearn_r2shap import (
    ShapleyR2Importance,
    UnsupportedModelError,
    beta_shapley_values,
    predict_raw,
    r2_decomposition,
    shap_values,
    to_ensemble,
)
from sklearn_r2shap._numerics import beta_quadrature


def _regression_data(n=300, p=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = 2 * X[:, 0] + np.sin(3 * X[:, 1]) + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=n)
    return X, y


# ---------------------------------------------------------------------------
# Item 4: HistGradientBoosting covers with sample weights


def _reference_covers(ens, X, weight):
    """Weighted number of rows reaching every node, by plain-Python routing."""
    cover = np.zeros(ens.n_nodes)
    for x, w in zip(X, weight):
        x = reference.prepare(ens, x)
        for t in range(ens.n_trees):
            cover[reference.path(ens, t, x)] += w
    return cover


def test_with_data_covers_equal_a_weighted_trees_own_covers():
    # DecisionTreeRegressor stores weighted_n_node_samples: the weighted count
    # of its training rows, the reference for routing the same rows again.
    X, y = _regression_data(200)
    X[::7, 1] = np.nan
    weight = np.random.default_rng(1).integers(0, 4, size=len(y)).astype(float)
    model = tree.DecisionTreeRegressor(max_depth=5, random_state=0).fit(X, y, sample_weight=weight)
    ens = to_ensemble(model)
    data = ens.with_data_covers(X, weight)
    np.testing.assert_allclose(data.cover, ens.cover, rtol=1e-12)
    np.testing.assert_allclose(data.cover_ratio, ens.cover_ratio, rtol=1e-12)
    # and the plain-Python routing of other rows and weights
    X2, _ = _regression_data(50, seed=2)
    w2 = np.random.default_rng(3).random(50)
    np.testing.assert_allclose(ens.with_data_covers(X2, w2).cover, _reference_covers(ens, X2, w2),
                               rtol=1e-12)


def test_with_data_covers_of_categorical_hist_gradient_boosting():
    rng = np.random.default_rng(0)
    X = np.column_stack([rng.integers(0, 6, size=300), rng.normal(size=300)]).astype(float)
    y = (X[:, 0] % 3) + X[:, 1]
    model = ensemble.HistGradientBoostingRegressor(
        max_iter=4, categorical_features=[0], random_state=0).fit(X, y)
    ens = to_ensemble(model)
    assert ens.info["covers"] == "unweighted_count"
    # unit weights reproduce HGB's own node counts
    np.testing.assert_array_equal(ens.with_data_covers(X).cover, ens.cover)
    w = rng.random(300)
    np.testing.assert_allclose(ens.with_data_covers(X, w).cover, _reference_covers(ens, X, w),
                               rtol=1e-12)


@pytest.mark.parametrize("seed", [0, 1])
def test_selector_with_weights_equals_selector_on_repeated_rows(seed):
    # Integer weights and repeated rows grow the same trees here (no
    # min_samples_leaf constraint, few distinct values); HGB's own node counts
    # of the repeated fit are then the reference covers.
    rng = np.random.default_rng(seed)
    X = rng.integers(0, 8, size=(60, 3)).astype(float)
    y = 2 * X[:, 0] + 3 * (X[:, 1] > 3) + X[:, 2] * X[:, 0] / 4 + rng.integers(0, 3, size=60)
    w = rng.integers(1, 4, size=60)
    X_repeated, y_repeated = X.repeat(w, axis=0), y.repeat(w)
    params = dict(min_samples_leaf=1, max_iter=3, max_depth=2, learning_rate=0.5,
                  early_stopping=False, random_state=0)
    repeated = ShapleyR2Importance(
        ensemble.HistGradientBoostingRegressor(**params)).fit(X_repeated, y_repeated)
    weighted = ShapleyR2Importance(
        ensemble.HistGradientBoostingRegressor(**params)).fit(X, y, sample_weight=w)
    ens_repeated = to_ensemble(repeated.estimator_)
    ens_weighted = weighted._tree_ensemble(weighted.estimator_)
    assert np.array_equal(ens_repeated.feature, ens_weighted.feature)
    np.testing.assert_allclose(weighted.estimator_.predict(X), repeated.estimator_.predict(X),
                               rtol=0, atol=1e-6)
    np.testing.assert_array_equal(ens_weighted.cover, ens_repeated.cover)
    np.testing.assert_allclose(weighted.feature_importances_, repeated.feature_importances_,
                               rtol=0, atol=1e-7)
    # the library's unweighted counts would not do
    library = r2_decomposition(weighted.estimator_, X, y, sample_weight=w).shares
    assert np.max(np.abs(library - repeated.feature_importances_)) > 1e-4
    # later calls explain with the same covers
    np.testing.assert_array_equal(weighted.decompose(X, y, sample_weight=w).shares,
                                  weighted.feature_importances_)


def test_prefit_model_keeps_the_library_covers():
    X, y = _regression_data(120)
    w = np.random.default_rng(0).integers(1, 4, size=len(y)).astype(float)
    model = ensemble.HistGradientBoostingRegressor(max_iter=3, random_state=0).fit(
        X, y, sample_weight=w)
    selector = ShapleyR2Importance(model, prefit=True).fit(X, y, sample_weight=w)
    np.testing.assert_array_equal(selector._tree_ensemble(model).cover, to_ensemble(model).cover)
    np.testing.assert_array_equal(
        selector.feature_importances_,
        r2_decomposition(model, X, y, sample_weight=w).shares)


# ---------------------------------------------------------------------------
# Item 6a: "squared_error" only when predict is the raw sum of the trees


def _regressors():
    import catboost
    import lightgbm
    import xgboost

    small = dict(n_estimators=5, random_state=0)
    return {
        "tree": tree.DecisionTreeRegressor(max_depth=3),
        "tree-poisson": tree.DecisionTreeRegressor(max_depth=3, criterion="poisson"),
        "forest": ensemble.RandomForestRegressor(max_depth=3, **small),
        "gb": ensemble.GradientBoostingRegressor(max_depth=2, **small),
        "gb-huber": ensemble.GradientBoostingRegressor(max_depth=2, loss="huber", **small),
        "hgb": ensemble.HistGradientBoostingRegressor(max_iter=5),
        "hgb-poisson": ensemble.HistGradientBoostingRegressor(max_iter=5, loss="poisson"),
        "hgb-gamma": ensemble.HistGradientBoostingRegressor(max_iter=5, loss="gamma"),
        "xgb": xgboost.XGBRegressor(max_depth=2, **small),
        "xgb-poisson": xgboost.XGBRegressor(max_depth=2, objective="count:poisson", **small),
        "xgb-sqlog": xgboost.XGBRegressor(max_depth=2, objective="reg:squaredlogerror", **small),
        "lgbm": lightgbm.LGBMRegressor(verbose=-1, **small),
        "lgbm-sqrt": lightgbm.LGBMRegressor(verbose=-1, reg_sqrt=True, **small),
        "lgbm-rmse": lightgbm.LGBMRegressor(verbose=-1, objective="rmse", **small),
        "lgbm-poisson": lightgbm.LGBMRegressor(verbose=-1, objective="poisson", **small),
        "lgbm-gamma": lightgbm.LGBMRegressor(verbose=-1, objective="gamma", **small),
        "lgbm-tweedie": lightgbm.LGBMRegressor(verbose=-1, objective="tweedie", **small),
        "catboost": catboost.CatBoostRegressor(iterations=5, depth=2, verbose=0,
                                               allow_writing_files=False, thread_count=1),
        "catboost-poisson": catboost.CatBoostRegressor(
            iterations=5, depth=2, verbose=0, loss_function="Poisson", allow_writing_files=False,
            thread_count=1),
        "catboost-tweedie": catboost.CatBoostRegressor(
            iterations=5, depth=2, verbose=0, loss_function="Tweedie:variance_power=1.5",
            allow_writing_files=False, thread_count=1),
    }


SQUARED_ERROR = {"tree", "forest", "gb", "hgb", "xgb", "lgbm", "lgbm-rmse", "catboost"}
LOG_LINK = {"hgb-poisson", "hgb-gamma", "xgb-poisson", "lgbm-poisson", "lgbm-gamma",
            "lgbm-tweedie", "catboost-poisson", "catboost-tweedie"}


@pytest.mark.parametrize("name", sorted(_regressors()))
def test_squared_error_means_predict_is_the_raw_sum(name):
    pytest.importorskip("catboost")
    X, y = _regression_data(200)
    y = np.abs(y) + 0.5  # positive, for Poisson, Gamma and Tweedie
    model = _regressors()[name].fit(X, y)
    ens = to_ensemble(model)
    assert (ens.objective == "squared_error") == (name in SQUARED_ERROR)
    if ens.objective == "squared_error":
        np.testing.assert_allclose(predict_raw(ens, X)[:, 0], model.predict(X),
                                   rtol=1e-6, atol=1e-6)
    elif name in LOG_LINK:  # boosted with a log link: the Tweedie D^2 is decomposed
        from sklearn.metrics import d2_tweedie_score

        result = r2_decomposition(model, X, y)
        assert result.score_name == "d2_tweedie"
        expected = d2_tweedie_score(y, model.predict(X), power=result.power)
        assert abs(result.score - expected) < 1e-6
    else:
        with pytest.raises(UnsupportedModelError):
            r2_decomposition(model, X, y)


def test_lightgbm_reg_sqrt_is_not_read_as_squared_error():
    lightgbm = pytest.importorskip("lightgbm")
    X, y = _regression_data(300)
    y = 3 * np.abs(y)
    model = lightgbm.LGBMRegressor(n_estimators=20, reg_sqrt=True, verbose=-1).fit(X, y)
    ens = to_ensemble(model)
    assert ens.objective == "regression_sqrt"
    assert ens.info["objective_string"].split()[:2] == ["regression", "sqrt"]
    # the trees sum to the raw score; predict squares it back
    raw = model.predict(X, raw_score=True)
    np.testing.assert_allclose(predict_raw(ens, X)[:, 0], raw, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(model.predict(X), np.sign(raw) * raw**2, rtol=1e-9)
    np.testing.assert_allclose(shap_values(model, X[:20]),
                               model.predict(X[:20], pred_contrib=True), rtol=1e-7, atol=1e-9)
    with pytest.raises(UnsupportedModelError, match="regression_sqrt"):
        r2_decomposition(model, X, y)
    # the selector no longer takes Q-SHAP; shapFlex refuses raw-scale SHAP values
    with pytest.raises(ValueError, match="do not add up to its predictions"):
        ShapleyR2Importance(model, prefit=True).fit(X, y)


# ---------------------------------------------------------------------------
# Item 7: CatBoost copies explain like the original


@pytest.mark.parametrize("kind", ["regressor", "classifier", "core"])
def test_catboost_copies_explain_the_same(kind, tmp_path):
    catboost = pytest.importorskip("catboost")
    X, y = _regression_data(200, p=5)
    params = dict(iterations=6, depth=3, verbose=0, allow_writing_files=False, thread_count=1,
                  random_seed=0)
    if kind == "regressor":
        model, fresh = catboost.CatBoostRegressor(**params).fit(X, y), catboost.CatBoostRegressor()
    elif kind == "classifier":
        model = catboost.CatBoostClassifier(**params).fit(X, (y > 0).astype(int))
        fresh = catboost.CatBoostClassifier()
    else:
        model = catboost.CatBoost(dict(loss_function="RMSE", **params)).fit(X, y)
        fresh = catboost.CatBoost()
    path = str(tmp_path / "model.cbm")
    model.save_model(path)
    fresh.load_model(path)
    expected = shap_values(model, X[:6])
    native = model.get_feature_importance(catboost.Pool(X[:6]), type="ShapValues")
    np.testing.assert_allclose(expected, native, rtol=1e-6, atol=1e-9)
    for copied in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model), fresh):
        assert to_ensemble(copied).n_features == 5
        np.testing.assert_array_equal(shap_values(copied, X[:6]), expected)


# ---------------------------------------------------------------------------
# Item 9: float32 overflow and non-finite leaves


@pytest.mark.parametrize("make", [
    lambda: tree.DecisionTreeRegressor(max_depth=3),
    lambda: ensemble.RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0),
    lambda: ensemble.GradientBoostingRegressor(n_estimators=3, max_depth=2),
])
def test_values_too_large_for_float32_are_refused_like_predict(make):
    X, y = _regression_data(100)
    model = make().fit(X, y)
    bad = X[:3].copy()
    bad[1, 2] = 1e300
    with pytest.raises(ValueError, match="too large"):
        model.predict(bad)
    with pytest.raises(ValueError, match="too large for float32"):
        shap_values(model, bad)
    fine = X[:3].copy()
    fine[1, 2] = 3e38  # rounds to float32's largest value: predict accepts it
    np.testing.assert_allclose(shap_values(model, fine).sum(axis=1), model.predict(fine))


def test_xgboost_and_catboost_accept_huge_values_as_their_predict_does():
    xgboost = pytest.importorskip("xgboost")
    catboost = pytest.importorskip("catboost")
    X, y = _regression_data(100)
    bad = X[:3].copy()
    bad[0, 0], bad[1, 0] = 1e300, -1e300
    for model in (xgboost.XGBRegressor(n_estimators=3, max_depth=2).fit(X, y),
                  catboost.CatBoostRegressor(iterations=3, depth=2, verbose=0, thread_count=1,
                                             allow_writing_files=False).fit(X, y)):
        np.testing.assert_allclose(shap_values(model, bad).sum(axis=1), model.predict(bad),
                                   rtol=1e-5, atol=1e-6)


def test_infinite_leaf_values_are_refused_at_conversion():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = X[:, 0] + rng.normal(size=60)
    w = rng.choice([-1.0, 1.0, 2.0], size=60)
    model = tree.DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y, sample_weight=w)
    assert not np.all(np.isfinite(model.tree_.value))
    with pytest.raises(ValueError, match="not finite"):
        to_ensemble(model)
    with pytest.raises(ValueError, match="negative sample_weight"):
        shap_values(model, X[:2])


# ---------------------------------------------------------------------------
# Item 10: Beta Shapley values for any alpha, beta


def _beta_moment(alpha, beta, k):
    """E[t^k] under the Beta(beta, alpha) density, exactly."""
    moment = Fraction(1)
    for j in range(k):
        moment *= Fraction(beta + j, alpha + beta + j)
    return moment


def exact_beta_weight(alpha, beta):
    """w(n, s) = B(s + beta, n - 1 - s + alpha) / B(alpha, beta) as an exact ratio
    of products (scipy's beta function underflows for alpha = 10**6)."""
    def weight(n, s):
        w = Fraction(1)
        for i in range(s):
            w *= Fraction(beta + i, alpha + beta + i)
        for i in range(n - 1 - s):
            w *= Fraction(alpha + i, alpha + beta + s + i)
        return float(w)
    return weight


@pytest.mark.parametrize("alpha, beta", [(1, 1), (2, 1), (16, 1), (1, 16), (3, 7),
                                         (10**6, 1), (1, 10**6), (10**6, 10**6), (10**9, 5)])
def test_beta_quadrature_is_exact_with_few_nodes(alpha, beta):
    for degree in (0, 1, 6, 25):
        t, w = beta_quadrature(alpha, beta, degree)
        assert len(t) == max(1, -(-(degree + 1) // 2))
        assert np.all(w > 0) and np.all((t > 0) & (t < 1))
        for k in range(degree + 1):
            want = _beta_moment(alpha, beta, k)
            got = Fraction(float(w @ t**k))
            assert abs(float((got - want) / want)) < 1e-13


@pytest.mark.parametrize("alpha, beta", [(10**6, 1), (1, 10**6), (10**6, 3), (5, 10**6),
                                         (10**6, 10**6), (4, 4)])
def test_beta_shapley_values_with_huge_parameters_match_enumeration(alpha, beta):
    X, y = _regression_data(300, p=5)
    model = tree.DecisionTreeRegressor(max_depth=6, random_state=0).fit(X, y)
    ens = to_ensemble(model)
    phi = beta_shapley_values(model, X[:3], alpha=alpha, beta=beta)
    weight = exact_beta_weight(alpha, beta)
    for i in range(3):
        want = reference.semivalue(ens, X[i], weight)[0]
        np.testing.assert_allclose(phi[i, :-1], want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_preorder_equals_a_recursive_walk():
    """``_preorder`` (one tree through the all-trees walk) gives the recursive
    preorder, and refuses broken trees, naming what is wrong."""
    from sklearn_r2shap._model import _ensemble
    from test_conversion_speed import random_tree, reference_preorder

    rng = np.random.default_rng(0)
    for _ in range(200):
        left, right = random_tree(rng, int(rng.integers(1, 200)))
        np.testing.assert_array_equal(_ensemble._preorder(left, right),
                                      reference_preorder(left, right))
    broken = {"cycle": ([1, 2, 0], [-1, -1, -1]),
              "unreachable": ([1, -1, -1, -1], [2, -1, -1, -1])}
    for message, (left, right) in broken.items():
        with pytest.raises(ValueError, match=message):
            _ensemble._preorder(np.asarray(left), np.asarray(right))


def test_selector_converts_each_fitted_model_once_per_fit(monkeypatch):
    """Within one fit every fold model is read once; the memo is dropped after fit, so a
    model refitted in place is read again by a later decomposition."""
    from sklearn.datasets import make_friedman1
    from sklearn_r2shap import ShapleyR2Importance
    from sklearn_r2shap._estimators import _selector

    X, y = make_friedman1(n_samples=200, n_features=6, random_state=0)
    calls = []
    convert = _selector.to_ensemble

    def counting(model):
        calls.append(model)  # held, so that no two fold models can share an id()
        return convert(model)

    monkeypatch.setattr(_selector, "to_ensemble", counting)  # where the selectors read models
    selector = ShapleyR2Importance(ensemble.GradientBoostingRegressor(n_estimators=5,
                                                                      random_state=0),
                                   test="fdr", cv=3).fit(X, y)
    assert len(calls) == len({id(model) for model in calls}) == 3  # the 3 fold models, once each
    assert "_ensemble_memo" not in selector.__dict__
    calls.clear()
    selector.estimator_.set_params(n_estimators=3).fit(X, -y)  # refitted in place
    refreshed = selector.decompose(X, -y)
    assert len(calls) == 1
    np.testing.assert_allclose(refreshed.shares.sum() + refreshed.unattributed,
                               float(refreshed.score))
