"""shapFlex R^2 shares (doc/shapflex.rst).

Every check compares with ``reference_shapflex``, the formula written out
here with numpy (sample variances, ddof=1), applied to SHAP values from a
source independent of the package where one exists: XGBoost's
``pred_contribs``, shap's TreeExplainer, ``coef_ * (x - mean)`` computed in
the test, and brute-force baseline Shapley values of a k-NN model.
"""
import itertools
import math

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_diabetes
from sklearn.dummy import DummyRegressor
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingRegressor
from sklearn.linear_model import LinearRegression, Ridge
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.neighbors import KNeighborsRegressor
from sklearn.base import clone
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, PolynomialFeatures, StandardScaler

from sklearn_r2shap import ShapleyR2Importance, UnsupportedModelError, shapflex_decomposition


def reference_shapflex(phi, yhat, y):
    """(shares, Gelman R^2, sigma_unique) by the paper's equations, term by term."""
    e = y - yhat
    var_e = np.var(e, ddof=1)
    r2 = np.var(yhat, ddof=1) / (np.var(yhat, ddof=1) + var_e)
    ratios = []
    for j in range(phi.shape[1]):
        var_removed = np.var(e + phi[:, j], ddof=1)
        ratios.append(1.0 if var_removed <= var_e else var_e / var_removed)
    gains = 1.0 - np.array(ratios)
    shares = r2 * gains / gains.sum() if gains.sum() > 0 else np.zeros_like(gains)
    sigma_unique = (sum(np.var(e + phi[:, j], ddof=1) - var_e for j in range(phi.shape[1]))
                    / (np.var(y, ddof=1) - var_e))
    return shares, r2, sigma_unique


def assert_matches_reference(result, phi, yhat, y, rtol=1e-10):
    shares, r2, sigma_unique = reference_shapflex(phi, yhat, y)
    assert result.method == "shapflex"
    np.testing.assert_allclose(result.shares, shares, rtol=rtol, atol=1e-14)
    assert result.score == pytest.approx(r2, rel=rtol)
    assert result.sigma_unique == pytest.approx(sigma_unique, rel=rtol)
    assert result.shares.sum() == pytest.approx(result.score, rel=1e-12)


@pytest.fixture(scope="module")
def diabetes():
    return load_diabetes(return_X_y=True, as_frame=True)


def test_xgboost_model_against_pred_contribs(diabetes):
    xgb = pytest.importorskip("xgboost")
    X, y = diabetes
    model = xgb.XGBRegressor(n_estimators=60, max_depth=4, learning_rate=0.1,
                             base_score=50.0).fit(X, y)
    contributions = model.get_booster().predict(xgb.DMatrix(X), pred_contribs=True)
    phi = contributions[:, :-1].astype(np.float64)
    yhat = contributions.astype(np.float64).sum(axis=1)
    result = shapflex_decomposition(model, X, y)
    assert result.source == "tree"
    # XGBoost's contributions are float32
    assert_matches_reference(result, phi, yhat, y.to_numpy(), rtol=1e-5)
    selector = ShapleyR2Importance(model, prefit=True, method="shapflex").fit(X, y)
    np.testing.assert_array_equal(selector.feature_importances_, result.shares)
    assert selector.sigma_unique_ == result.sigma_unique


def test_sklearn_boosting_against_shap_tree_explainer(diabetes):
    shap = pytest.importorskip("shap")
    X, y = diabetes
    model = GradientBoostingRegressor(n_estimators=40, max_depth=3, random_state=0).fit(X, y)
    explainer = shap.TreeExplainer(model)
    phi = explainer.shap_values(X.to_numpy())
    yhat = phi.sum(axis=1) + explainer.expected_value
    result = shapflex_decomposition(model, X, y)
    assert_matches_reference(result, phi, np.asarray(yhat, dtype=float).ravel(), y.to_numpy(),
                             rtol=1e-9)


@pytest.mark.parametrize("model", [LinearRegression(), Ridge(alpha=3.0)])
def test_linear_model_exact_shap(diabetes, model):
    X, y = diabetes
    model.fit(X, y)
    phi = model.coef_ * (X.to_numpy() - X.to_numpy().mean(axis=0))
    result = shapflex_decomposition(model, X, y)
    assert result.source == "linear"
    assert_matches_reference(result, phi, model.predict(X), y.to_numpy())
    assert list(result.feature_names) == list(X.columns)


def test_linear_model_inside_a_pipeline(diabetes):
    X, y = diabetes
    model = make_pipeline(StandardScaler(), Ridge(alpha=1.0)).fit(X, y)
    Z = model[0].transform(X)
    phi = model[-1].coef_ * (Z - Z.mean(axis=0))
    result = shapflex_decomposition(model, X, y)
    assert result.source == "linear"
    assert_matches_reference(result, phi, model.predict(X), y.to_numpy())


def test_one_hot_columns_are_summed_per_input_feature(diabetes):
    X, y = diabetes
    frame = X.copy()
    frame["sex"] = np.where(X["sex"] > 0, "m", "f")
    frame["bmi_band"] = np.digitize(X["bmi"], [-0.05, 0.0, 0.05]).astype(str)
    categorical = ["sex", "bmi_band"]
    numeric = [c for c in frame.columns if c not in categorical]
    model = make_pipeline(
        ColumnTransformer([("cat", OneHotEncoder(sparse_output=True), categorical),
                           ("num", StandardScaler(), numeric)], sparse_threshold=1.0),
        LinearRegression(),
    ).fit(frame, y)
    Z = model[0].transform(frame).toarray()
    terms = model[-1].coef_ * (Z - Z.mean(axis=0))
    names_out = model[0].get_feature_names_out()
    phi = np.column_stack([
        terms[:, [k for k, name in enumerate(names_out)
                  if name.split("__", 1)[1] == column
                  or (column in categorical and name.startswith(f"cat__{column}_"))]].sum(axis=1)
        for column in frame.columns
    ])
    result = shapflex_decomposition(model, frame, y)
    assert_matches_reference(result, phi, model.predict(frame), y.to_numpy())


def test_tree_model_inside_a_pipeline(diabetes):
    X, y = diabetes
    model = make_pipeline(StandardScaler(), GradientBoostingRegressor(
        n_estimators=30, max_depth=3, random_state=0)).fit(X, y)
    result = shapflex_decomposition(model, X, y)
    # one transformed column per input column: the last step's own decomposition
    alone = shapflex_decomposition(model[-1], model[0].transform(X), y)
    assert result.source == "tree"
    np.testing.assert_allclose(result.shares, alone.shares, rtol=1e-12, atol=1e-15)
    assert result.score == pytest.approx(alone.score, rel=1e-12)
    assert list(result.feature_names) == list(X.columns)


def test_tree_model_after_one_hot_columns_shares_per_input_column(diabetes):
    X, y = diabetes
    frame = X.copy()
    frame["sex"] = np.where(X["sex"] > 0, "m", "f")
    numeric = [c for c in frame.columns if c != "sex"]
    model = make_pipeline(
        ColumnTransformer([("cat", OneHotEncoder(), ["sex"]), ("num", "passthrough", numeric)]),
        GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0),
    ).fit(frame, y)
    result = shapflex_decomposition(model, frame, y)
    assert list(result.feature_names) == list(frame.columns)
    assert result.shares.shape == (frame.shape[1],)
    assert result.shares.sum() == pytest.approx(result.score, rel=1e-12)
    # the two one-hot columns of "sex" are one player: their joint exact SHAP
    # value (the Pipeline's players come in its output order: "sex" first)
    from sklearn_r2shap import explain
    explanation = explain(model, frame, feature_groups="input")
    assert list(explanation.feature_names) != list(frame.columns)
    phi = pd.DataFrame(explanation.values, columns=explanation.feature_names)[frame.columns]
    assert_matches_reference(result, phi.to_numpy(), model.predict(frame), y.to_numpy())


def test_pipeline_with_interactions_is_refused(diabetes):
    X, y = diabetes
    model = make_pipeline(PolynomialFeatures(2, interaction_only=True), Ridge()).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="not additive"):
        shapflex_decomposition(model, X, y)


def baseline_shapley(model, X):
    """Exact Shapley values of v(S) = f(x_S, b_rest), b the column means."""
    X = np.asarray(X, dtype=float)
    n_rows, p = X.shape
    baseline = X.mean(axis=0)
    values = {}
    for size in range(p + 1):
        for subset in itertools.combinations(range(p), size):
            hybrid = np.tile(baseline, (n_rows, 1))
            hybrid[:, subset] = X[:, subset]
            values[frozenset(subset)] = model.predict(hybrid)
    phi = np.zeros((n_rows, p))
    for j in range(p):
        for subset, value in values.items():
            if j in subset:
                continue
            weight = math.factorial(len(subset)) * math.factorial(p - len(subset) - 1) / math.factorial(p)
            phi[:, j] += weight * (values[subset | {j}] - value)
    return phi


@pytest.fixture(scope="module")
def knn_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(150, 4))
    X[:, 1] += 0.6 * X[:, 0]
    y = 2 * X[:, 0] + np.sin(2 * X[:, 1]) + X[:, 2] ** 2 + 0.3 * rng.normal(size=150)
    return X, y


def test_user_callable(knn_data):
    X, y = knn_data
    model = KNeighborsRegressor(n_neighbors=7).fit(X, y)
    phi = baseline_shapley(model, X)
    prediction = model.predict(X)
    result = shapflex_decomposition(model, X, y, shap_values=baseline_shapley)
    assert result.source == "callable"
    assert_matches_reference(result, phi, prediction, y)
    # with the expected value as a last column: the same shares
    with_base = shapflex_decomposition(
        model, X, y, shap_values=lambda est, rows: np.column_stack(
            [baseline_shapley(est, rows), est.predict(rows) - baseline_shapley(est, rows).sum(1)]))
    np.testing.assert_allclose(with_base.shares, result.shares, rtol=1e-12)
    selector = ShapleyR2Importance(KNeighborsRegressor(n_neighbors=7),
                                   shap_values=baseline_shapley).fit(X, y)
    assert selector.method_ == "shapflex"
    np.testing.assert_allclose(selector.feature_importances_, result.shares, rtol=1e-12)


def test_callable_overrides_the_tree_kernel_with_method_shapflex(diabetes):
    xgb = pytest.importorskip("xgboost")
    X, y = diabetes
    model = xgb.XGBRegressor(n_estimators=20, max_depth=3).fit(X, y)

    def contributions(est, rows):
        return est.get_booster().predict(xgb.DMatrix(rows), pred_contribs=True)

    result = ShapleyR2Importance(model, prefit=True, method="shapflex",
                                 shap_values=contributions).fit(X, y).decomposition_
    assert result.source == "callable"
    values = contributions(model, X).astype(float)
    assert_matches_reference(result, values[:, :-1], values.sum(axis=1), y.to_numpy())
    with pytest.raises(ValueError, match="method='shapflex'"):
        ShapleyR2Importance(model, prefit=True, shap_values=contributions).fit(X, y)


def test_shap_values_that_do_not_add_up_are_refused(knn_data):
    X, y = knn_data
    model = KNeighborsRegressor().fit(X, y)
    rng = np.random.default_rng(1)
    with pytest.raises(ValueError, match="do not add up"):
        shapflex_decomposition(model, X, y, shap_values=lambda est, rows: rng.normal(
            size=rows.shape))
    with pytest.raises(ValueError, match=r"shape \(150, 4\) or \(150, 5\)"):
        shapflex_decomposition(model, X, y, shap_values=lambda est, rows: np.zeros((150, 3)))
    with pytest.raises(UnsupportedModelError, match="shap_values=f"):
        shapflex_decomposition(model, X, y)
    from sklearn.linear_model import PoissonRegressor

    with pytest.raises(ValueError, match="link function"):
        shapflex_decomposition(PoissonRegressor().fit(X, np.exp(X[:, 0])), X, np.exp(X[:, 0]))


def test_no_feature_helps_gives_zero_shares(knn_data):
    X, y = knn_data
    # a model fitted against -y: removing any feature lowers the residual variance
    model = LinearRegression().fit(X, -y)
    with pytest.warns(UserWarning, match="no better than its mean"):
        result = shapflex_decomposition(model, X, y)
    np.testing.assert_array_equal(result.residual_variance_ratios, np.ones(4))
    np.testing.assert_array_equal(result.shares, np.zeros(4))
    assert result.score > 0 and result.unattributed == result.score
    assert np.isnan(result.sigma_unique)
    # a constant model: every SHAP value is zero
    with pytest.warns(UserWarning, match="no better than its mean"):
        constant = shapflex_decomposition(DummyRegressor().fit(X, y), X, y,
                                          shap_values=lambda est, rows: np.zeros(rows.shape))
    np.testing.assert_array_equal(constant.shares, np.zeros(4))
    assert constant.score == 0.0 and np.isnan(constant.sigma_unique)


def test_sigma_unique_is_undefined_where_the_model_is_worse_than_the_mean():
    # held-out data on which the fitted relation is reversed: var(e) > var(y),
    # where the formula's numerator and denominator are both negative
    rng = np.random.default_rng(5)
    X = rng.normal(size=(400, 3))
    model = LinearRegression().fit(X, X[:, 0] + 0.3 * rng.normal(size=400))
    X_new = rng.normal(size=(400, 3))
    y_new = -X_new[:, 0] + 0.3 * rng.normal(size=400)
    with pytest.warns(UserWarning, match="sigma_unique is undefined"):
        selector = ShapleyR2Importance(model, prefit=True).fit(X_new, y_new)
    assert np.isnan(selector.sigma_unique_)
    # the same model on data it fits: defined
    selector.fit(X, X[:, 0] + 0.3 * rng.normal(size=400))
    assert np.isfinite(selector.sigma_unique_)


def test_feature_whose_removal_lowers_the_error_gets_zero():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(300, 3))
    model = LinearRegression().fit(X, 2 * X[:, 0] - 0.3 * X[:, 1] + 0.1 * rng.normal(size=300))
    y = 2 * X[:, 0] + 0.3 * X[:, 1] + 0.5 * X[:, 2] + 0.1 * rng.normal(size=300)
    result = shapflex_decomposition(model, X, y)
    phi = model.coef_ * (X - X.mean(axis=0))
    assert_matches_reference(result, phi, model.predict(X), y)
    assert result.residual_variance_ratios[1] == 1.0 and result.shares[1] == 0.0
    assert result.shares[0] > 0


def test_constant_y_is_refused(knn_data):
    X, _ = knn_data
    with pytest.raises(ValueError, match="constant"):
        shapflex_decomposition(LinearRegression().fit(X, X[:, 0]), X, np.ones(len(X)))


def test_sample_weight_is_row_repetition(knn_data):
    X, y = knn_data
    model = LinearRegression().fit(X, y)
    weight = np.arange(len(X)) % 3
    weighted = shapflex_decomposition(model, X, y, sample_weight=weight)
    repeated = shapflex_decomposition(model, np.repeat(X, weight, axis=0), np.repeat(y, weight))
    np.testing.assert_allclose(weighted.shares, repeated.shares, rtol=1e-10)
    assert weighted.sigma_unique == pytest.approx(repeated.sigma_unique, rel=1e-10)


def test_sigma_unique_is_one_for_uncorrelated_features():
    rng = np.random.default_rng(3)
    centred = rng.normal(size=(200, 4))
    centred -= centred.mean(axis=0)
    X, _ = np.linalg.qr(centred)  # orthogonal, centred columns
    y = X @ np.array([3.0, -2.0, 1.0, 0.5]) + 0.05 * rng.normal(size=200)
    result = shapflex_decomposition(LinearRegression().fit(X, y), X, y)
    assert result.sigma_unique == pytest.approx(1.0, rel=1e-10)


def test_method_resolution(diabetes):
    X, y = diabetes
    selector = ShapleyR2Importance(method="shapflex").fit(X, y)
    assert selector.method_ == "shapflex" and np.isfinite(selector.sigma_unique_)
    selector.set_params(method="auto").fit(X, y)  # no shapFlex attribute left from before
    assert selector.method_ == "qshap" and selector.sigma_unique_ is None
    assert ShapleyR2Importance(LinearRegression()).fit(X, y).method_ == "shapflex"
    with pytest.raises(UnsupportedModelError):
        ShapleyR2Importance(LinearRegression(), method="qshap").fit(X, y)
    with pytest.raises(ValueError, match="The 'method' parameter of ShapleyR2Importance "
                                         "must be a str among"):
        ShapleyR2Importance(method="lmg").fit(X, y)
    with pytest.raises(ValueError, match="callable"):
        ShapleyR2Importance(LinearRegression(), shap_values=np.zeros(3)).fit(X, y)
    tree = ShapleyR2Importance(HistGradientBoostingRegressor(max_iter=20), method="shapflex")
    tree.fit(X, y)
    assert tree.method_ == "shapflex" and tree.decomposition_.source == "tree"
    with pytest.raises(ValueError, match="qshap"):
        tree.local_shares(X, y)


def test_a_refused_tree_model_keeps_its_reason(diabetes):
    # a tree model the package reads but cannot explain exactly (an init
    # estimator whose prediction depends on X): "auto" falls back to shapFlex,
    # which needs the tree SHAP values, so the adapter's reason is raised
    X, y = diabetes
    model = GradientBoostingRegressor(init=LinearRegression(), n_estimators=5)
    for method in ("auto", "qshap", "shapflex"):
        with pytest.raises(UnsupportedModelError, match="init estimator"):
            ShapleyR2Importance(model, method=method).fit(X, y)
    # with SHAP values of one's own it is decomposed (here: all zero, so no shares)
    fitted = clone(model).fit(X, y)
    phi = np.zeros((len(X), X.shape[1]))
    result = shapflex_decomposition(fitted, X, y, shap_values=lambda est, rows: np.column_stack(
        [phi, fitted.predict(rows)]))
    assert result.source == "callable"
    np.testing.assert_array_equal(result.shares, np.zeros(X.shape[1]))


def test_sample_weight_reaches_the_final_step_of_a_pipeline(diabetes):
    X, y = diabetes
    weight = 1.0 + (np.arange(len(X)) % 4)
    pipeline = make_pipeline(StandardScaler(), Ridge(alpha=1.0))
    selector = ShapleyR2Importance(pipeline).fit(X, y, sample_weight=weight)
    expected_model = clone(pipeline).fit(X, y, ridge__sample_weight=weight)
    np.testing.assert_allclose(selector.estimator_[-1].coef_, expected_model[-1].coef_,
                               rtol=1e-12)
    unweighted = clone(pipeline).fit(X, y)
    assert not np.allclose(expected_model[-1].coef_, unweighted[-1].coef_)
    expected = shapflex_decomposition(expected_model, X, y, sample_weight=weight)
    np.testing.assert_allclose(selector.feature_importances_, expected.shares, rtol=1e-12)


def test_lightgbm_linear_leaves_use_the_piecewise_kernel(diabetes):
    lgb = pytest.importorskip("lightgbm")
    X, y = diabetes
    model = lgb.LGBMRegressor(n_estimators=30, num_leaves=8, linear_tree=True,
                              verbose=-1).fit(X, y)
    selector = ShapleyR2Importance(model, prefit=True).fit(X, y)
    assert selector.method_ == "shapflex"
    assert selector.decomposition_.source == "piecewise-linear tree"
    from sklearn_r2shap import piecewise_shap_values

    values = piecewise_shap_values(model, X, background=X)
    np.testing.assert_allclose(values.sum(axis=1), model.predict(X), rtol=1e-8)
    assert_matches_reference(selector.decomposition_, values[:, :-1], values.sum(axis=1),
                             y.to_numpy())


def test_cross_fitted_shapflex(diabetes):
    X, y = diabetes
    cv = KFold(3, shuffle=True, random_state=0)
    selector = ShapleyR2Importance(Ridge(alpha=0.5), cv=cv).fit(X, y)
    folds, sigma = [], []
    for train, test in cv.split(X, y):
        fitted = Ridge(alpha=0.5).fit(X.iloc[train], y.iloc[train])
        result = shapflex_decomposition(fitted, X.iloc[test], y.iloc[test])
        folds.append(result.shares)
        sigma.append(result.sigma_unique)
    assert selector.method_ == "shapflex"
    np.testing.assert_allclose(selector.cv_shares_, folds)
    assert selector.sigma_unique_ == pytest.approx(np.mean(sigma))


def test_pipeline_grid_search_pandas_output_and_report(diabetes):
    X, y = diabetes
    pipe = make_pipeline(ShapleyR2Importance(Ridge()), LinearRegression())
    search = GridSearchCV(pipe, {
        "shapleyr2importance__threshold": ["mean", -np.inf],
        "shapleyr2importance__estimator__alpha": [0.1, 10.0],
    }, cv=3).fit(X, y)
    assert search.best_estimator_[0].method_ == "shapflex"
    selector = ShapleyR2Importance(Ridge(alpha=0.1)).set_output(transform="pandas").fit(X, y)
    out = selector.transform(X)
    assert list(out.columns) == list(selector.get_feature_names_out())
    text = str(selector.decomposition_)
    assert "Gelman R2" in text and "sigma_unique" in text
    frame = selector.decomposition_.to_frame()
    assert frame["share"].iloc[0] == selector.feature_importances_.max()


def test_shap_package_explanation_through_the_callable(diabetes):
    shap = pytest.importorskip("shap")
    X, y = diabetes
    model = LinearRegression().fit(X, y)
    ours = shapflex_decomposition(model, X, y)
    theirs = shapflex_decomposition(
        model, X, y, shap_values=lambda est, rows: shap.LinearExplainer(est, rows)(rows))
    assert theirs.source == "callable"
    np.testing.assert_allclose(theirs.shares, ours.shares, rtol=1e-9)


def test_early_stopped_xgboost_uses_the_trees_it_predicts_with(diabetes):
    xgb = pytest.importorskip("xgboost")
    X, y = diabetes
    model = xgb.XGBRegressor(n_estimators=300, learning_rate=0.3, early_stopping_rounds=5)
    model.fit(X[:300], y[:300], eval_set=[(X[300:], y[300:])], verbose=False)
    assert model.best_iteration < 290
    contributions = model.get_booster().predict(
        xgb.DMatrix(X), pred_contribs=True, iteration_range=(0, model.best_iteration + 1))
    result = shapflex_decomposition(model, X, y)
    values = contributions.astype(np.float64)
    assert_matches_reference(result, values[:, :-1], values.sum(axis=1), y.to_numpy(), rtol=1e-5)
