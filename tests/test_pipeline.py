"""A fitted Pipeline is explained as its last step on the transformed rows.

Every public function and estimator gets the same numbers from the Pipeline
as from its last step given ``pipeline[:-1].transform(X)`` (the reference:
scikit-learn's own transform, the last step alone), with the names of
``pipeline[:-1].get_feature_names_out()``.
"""
import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestClassifier
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import Ridge
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.tree import DecisionTreeRegressor

import sklearn_r2shap as rs
from sklearn_r2shap import UnsupportedModelError
from sklearn_r2shap.ranking import multilinear_gradient, treegrad_scores


def _frame(n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({
        "a": rng.normal(size=n),
        "b": rng.normal(size=n),
        "colour": rng.choice(["red", "green", "blue", "black"], size=n),
        "c": rng.uniform(size=n),
    })
    y = (X["a"] + 2 * (X["colour"] == "red") - (X["colour"] == "blue") * X["b"]
         + 0.3 * rng.normal(size=n)).to_numpy()
    return X, y


def _column_pipeline(model, sparse=False):
    columns = ColumnTransformer([
        ("cat", OneHotEncoder(sparse_output=sparse), ["colour"]),
        ("num", StandardScaler(), ["a", "b", "c"]),
    ], sparse_threshold=1.0 if sparse else 0.0)
    return Pipeline([("columns", columns), ("model", model)])


@pytest.fixture(scope="module")
def cases():
    """(name, fitted pipeline, X, y) for the three kinds of the issue."""
    import lightgbm
    import xgboost

    X, y = _frame()
    numeric = X[["a", "b", "c"]].to_numpy()
    out = [
        ("scaler+hgb", make_pipeline(StandardScaler(), HistGradientBoostingRegressor(
            max_iter=15, max_depth=3, random_state=0)).fit(numeric, y), numeric, y),
        ("onehot+hgb", _column_pipeline(HistGradientBoostingRegressor(
            max_iter=15, max_depth=3, random_state=0)).fit(X, y), X, y),
        ("onehot-sparse+xgb", _column_pipeline(xgboost.XGBRegressor(
            n_estimators=10, max_depth=3), sparse=True).fit(X, y), X, y),
        ("onehot+lgbm", _column_pipeline(lightgbm.LGBMRegressor(
            n_estimators=10, num_leaves=6, verbose=-1)).fit(X, y), X, y),
    ]
    return out


def _last(pipeline, X):
    return pipeline[-1], pipeline[:-1].transform(X)


LOCAL = [
    ("shap_values", lambda m, X: rs.shap_values(m, X)),
    ("saabas_values", lambda m, X: rs.saabas_values(m, X)),
    ("banzhaf_values", lambda m, X: rs.banzhaf_values(m, X, q=0.3)),
    ("beta_shapley_values", lambda m, X: rs.beta_shapley_values(m, X, alpha=4, beta=1)),
    ("predict_raw", lambda m, X: rs.predict_raw(m, X)),
    ("probabilistic_values", lambda m, X: rs.probabilistic_values(
        m, X, np.full(rs.to_ensemble(m if not isinstance(m, Pipeline) else m[-1]).n_features,
                      0.01))),
    ("multilinear_gradient", lambda m, X: multilinear_gradient(m, X, np.full(
        rs.to_ensemble(m if not isinstance(m, Pipeline) else m[-1]).n_features, 0.4))[0]),
    ("treegrad_scores", lambda m, X: treegrad_scores(m, X, n_iter=5)),
]


@pytest.mark.parametrize("name, function", LOCAL, ids=[n for n, _ in LOCAL])
def test_local_functions_equal_last_step_on_transformed_rows(cases, name, function):
    for case, pipeline, X, _ in cases:
        last, Xt = _last(pipeline, X)
        got = function(pipeline, X[:40])
        want = function(last, Xt[:40])
        assert got.shape == want.shape, case
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=case)
    # the values explain the pipeline's own predictions (additivity)
    if name == "shap_values":
        for case, pipeline, X, _ in cases:
            phi = rs.shap_values(pipeline, X[:40])
            np.testing.assert_allclose(phi.sum(axis=1), pipeline.predict(X[:40]),
                                       rtol=1e-5, atol=1e-5, err_msg=case)


def test_expected_value_of_pipeline(cases):
    for case, pipeline, X, _ in cases:
        np.testing.assert_array_equal(rs.expected_value(pipeline),
                                      rs.expected_value(pipeline[-1]), err_msg=case)


def test_r2_decomposition_of_pipeline(cases):
    for case, pipeline, X, y in cases:
        last, Xt = _last(pipeline, X)
        got = rs.r2_decomposition(pipeline, X, y)
        want = rs.r2_decomposition(last, Xt, y)
        np.testing.assert_allclose(got.shares, want.shares, rtol=1e-12, atol=1e-14)
        assert got.score == pytest.approx(want.score, rel=1e-12)
        assert list(got.feature_names) == list(pipeline[:-1].get_feature_names_out()), case


def test_selector_prefit_pipeline_uses_qshap_on_transformed_features(cases):
    for case, pipeline, X, y in cases:
        last, Xt = _last(pipeline, X)
        selector = rs.ShapleyR2Importance(pipeline, prefit=True).fit(X, y)
        assert selector.method_ == "qshap", case
        want = rs.r2_decomposition(last, Xt, y)
        np.testing.assert_allclose(selector.feature_importances_, want.shares,
                                   rtol=1e-12, atol=1e-14, err_msg=case)
        names = pipeline[:-1].get_feature_names_out()
        assert list(selector.explained_feature_names_) == list(names)
        assert list(selector.decomposition_.feature_names) == list(names)


def test_selector_fits_pipeline_and_uses_qshap():
    X, y = _frame()
    pipeline = _column_pipeline(DecisionTreeRegressor(max_depth=4, random_state=0))
    selector = rs.ShapleyR2Importance(pipeline).fit(X, y)
    assert selector.method_ == "qshap"
    fitted = selector.estimator_
    assert fitted is not pipeline  # a fitted clone
    last, Xt = _last(fitted, X)
    np.testing.assert_allclose(selector.feature_importances_,
                               rs.r2_decomposition(last, Xt, y).shares, rtol=1e-12)
    # cross-fitted, too: each fold's pipeline decomposed on its held-out rows
    crossed = rs.ShapleyR2Importance(pipeline, cv=3).fit(X, y)
    assert crossed.method_ == "qshap" and crossed.cv_shares_.shape == (3, 7)


def test_selector_with_column_transformer_refuses_to_select_inputs(cases):
    _, pipeline, X, y = cases[1]
    selector = rs.ShapleyR2Importance(pipeline, prefit=True).fit(X, y)
    for call in (lambda: selector.transform(X), selector.get_support,
                 selector.get_feature_names_out):
        with pytest.raises(ValueError, match="explained_feature_names_"):
            call()


def test_selector_with_one_to_one_steps_selects_input_columns(cases):
    _, pipeline, X, y = cases[0]  # StandardScaler: x0, x1, x2 -> x0, x1, x2
    selector = rs.ShapleyR2Importance(pipeline, prefit=True, threshold=-np.inf,
                                      max_features=2).fit(X, y)
    order = np.argsort(-selector.feature_importances_, kind="mergesort")[:2]
    np.testing.assert_array_equal(selector.transform(X), X[:, np.sort(order)])


def test_selector_non_tree_pipeline_keeps_shapflex():
    X, y = _frame()
    numeric = X[["a", "b", "c"]].to_numpy()
    pipeline = make_pipeline(StandardScaler(), Ridge()).fit(numeric, y)
    selector = rs.ShapleyR2Importance(pipeline, prefit=True).fit(numeric, y)
    assert selector.method_ == "shapflex"
    assert selector.transform(numeric).shape[0] == len(numeric)


def test_ranker_on_pipeline(cases):
    for case, pipeline, X, y in cases:
        last, Xt = _last(pipeline, X)
        ranker = rs.TreeGradRanker(pipeline, prefit=True, n_iter=5).fit(X[:50])
        reference = rs.TreeGradRanker(last, prefit=True, n_iter=5).fit(Xt[:50])
        np.testing.assert_allclose(ranker.row_scores_, reference.row_scores_, rtol=1e-12,
                                   atol=1e-12)
        np.testing.assert_allclose(ranker.row_scores(X[:7]), reference.row_scores(Xt[:7]),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(ranker.values(X[:7], "banzhaf"),
                                   reference.values(Xt[:7], "banzhaf"), rtol=1e-12, atol=1e-12)
    # a fitted clone of a classifier pipeline
    X, y = _frame()
    labels = (y > np.median(y)).astype(int)
    pipeline = _column_pipeline(RandomForestClassifier(n_estimators=3, max_depth=3,
                                                       random_state=0))
    ranker = rs.TreeGradRanker(pipeline, n_iter=3).fit(X, labels)
    last, Xt = _last(ranker.estimator_, X)
    np.testing.assert_allclose(ranker.row_scores_, treegrad_scores(last, Xt, n_iter=3),
                               rtol=1e-12, atol=1e-12)


def test_piecewise_explainer_on_pipeline():
    import lightgbm

    X, y = _frame()
    pipeline = _column_pipeline(lightgbm.LGBMRegressor(
        n_estimators=8, num_leaves=5, linear_tree=True, verbose=-1)).fit(X, y)
    last, Xt = _last(pipeline, X)
    explainer = rs.PiecewiseLinearExplainer(pipeline, prefit=True).fit(X)
    reference = rs.PiecewiseLinearExplainer(last, prefit=True).fit(Xt)
    np.testing.assert_allclose(explainer.feature_importances_, reference.feature_importances_,
                               rtol=1e-12)
    np.testing.assert_allclose(explainer.shap_values(X[:9]), reference.shap_values(Xt[:9]),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(
        rs.piecewise_shap_values(pipeline, X[:9], background=X),
        rs.piecewise_shap_values(last, Xt[:9], background=Xt), rtol=1e-12, atol=1e-12)


def test_pipeline_errors_name_the_step():
    X, y = _frame()
    numeric = X[["a", "b", "c"]].to_numpy()
    tree = DecisionTreeRegressor(max_depth=2).fit(numeric, y)
    ridge = Ridge().fit(numeric, y)
    not_transformer = Pipeline([("ridge", ridge), ("tree", tree)])
    with pytest.raises(TypeError, match="'ridge' \\(Ridge\\) is not a transformer"):
        rs.shap_values(not_transformer, numeric)
    unfitted = Pipeline([("scale", StandardScaler()), ("tree", tree)])
    with pytest.raises(NotFittedError, match="'scale' \\(StandardScaler\\) is not fitted"):
        rs.shap_values(unfitted, numeric)
    linear_last = make_pipeline(StandardScaler(), Ridge()).fit(numeric, y)
    with pytest.raises(UnsupportedModelError, match="last step 'ridge' .*Ridge"):
        rs.shap_values(linear_last, numeric)
    with pytest.raises(UnsupportedModelError, match="last step 'ridge'"):
        rs.r2_decomposition(linear_last, numeric, y)
    with pytest.raises(UnsupportedModelError, match="last step 'ridge'"):
        rs.TreeGradRanker(linear_last, prefit=True).fit(numeric)


def test_pipeline_on_dask_needs_transformed_rows():
    da = pytest.importorskip("dask.array")
    X, y = _frame()
    numeric = X[["a", "b", "c"]].to_numpy()
    pipeline = make_pipeline(StandardScaler(), DecisionTreeRegressor(max_depth=3)).fit(numeric, y)
    with pytest.raises(ValueError, match="transform it first"):
        rs.shap_values(pipeline, da.from_array(numeric, chunks=100))
    # a Pipeline of the model alone needs no transform
    alone = Pipeline([("tree", pipeline[-1])])
    got = rs.shap_values(alone, da.from_array(numeric, chunks=100)).compute()
    np.testing.assert_allclose(got, rs.shap_values(pipeline[-1], numeric), rtol=1e-12)
