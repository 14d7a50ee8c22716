"""Inputs real users pass: XGBoost's ``missing``, LightGBM's stored column
names and pandas categories, scipy.sparse matrices, polars and pyarrow
frames, library containers, 1-D rows and parameter validation.

References: the libraries' own contributions (XGBoost ``pred_contribs``,
LightGBM ``pred_contrib``, CatBoost ``ShapValues``), their ``predict``,
scikit-learn's ``r2_score`` and subset enumeration (tests/reference.py).
"""
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.ensemble import GradientBoostingRegressor, RandomForestRegressor
from sklearn.metrics import r2_score
from sklearn.tree import DecisionTreeRegressor

import reference
from sklearn_r2shap import (
    ShapleyR2Importance,
    TreeGradRanker,
    UnsupportedModelError,
    banzhaf_values,
    beta_shapley_values,
    multilinear_gradient,
    piecewise_predict,
    piecewise_shap_values,
    predict_raw,
    probabilistic_values,
    r2_decomposition,
    saabas_values,
    shap_values,
    shapflex_decomposition,
    to_ensemble,
    treegrad_scores,
)
from sklearn_r2shap import _validation
from sklearn_r2shap._execution import local
from sklearn_r2shap.metrics import insertion_deletion

xgb = pytest.importorskip("xgboost")
lgb = pytest.importorskip("lightgbm")
pd = pytest.importorskip("pandas")

ATOL_F32 = 2e-5  # XGBoost accumulates its outputs in float32


def _sentinel_data(sentinel, seed=0, n=400):
    """Rows where about a third of the entries equal ``sentinel``, which the
    target treats as a category of its own ("missing" carries signal)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4)).round(2)
    is_missing = rng.random(X.shape) < 0.35
    y = np.where(is_missing[:, 0], 6.0, X[:, 0]) + 4.0 * is_missing[:, 1] \
        + np.where(is_missing[:, 2], 0.0, X[:, 2]) + 0.1 * rng.normal(size=n)
    X[is_missing] = sentinel
    return X, y


def _xgb_contribs(booster, X, missing):
    return booster.predict(xgb.DMatrix(X, missing=missing), pred_contribs=True)


# --------------------------------------------------------------------------
# 1. XGBoost's missing


@pytest.mark.parametrize("sentinel", [1e-8, -999.0, 0.0])
def test_xgb_regressor_missing_sentinel(sentinel):
    X, y = _sentinel_data(sentinel)
    model = xgb.XGBRegressor(n_jobs=1, n_estimators=20, max_depth=3, missing=sentinel).fit(X, y)
    phi = shap_values(model, X)
    np.testing.assert_allclose(phi, _xgb_contribs(model.get_booster(), X, sentinel),
                               atol=ATOL_F32)
    np.testing.assert_allclose(phi.sum(axis=1), model.predict(X, output_margin=True),
                               atol=ATOL_F32)
    assert to_ensemble(model).info["missing"] == sentinel
    # R^2 of the model itself (it was 0.663 vs 0.864 when the sentinel was a value)
    result = r2_decomposition(model, X, y)
    assert result.score == pytest.approx(r2_score(y, model.predict(X)), abs=1e-5)
    assert result.shares.sum() + result.unattributed == pytest.approx(result.score)


def test_xgb_missing_brute_force():
    """The sentinel is NaN for the game too: enumeration on NaN rows."""
    X, y = _sentinel_data(-1.0, seed=1, n=200)
    model = xgb.XGBRegressor(n_jobs=1, n_estimators=4, max_depth=3, missing=-1.0).fit(X, y)
    ensemble = to_ensemble(model)
    phi = shap_values(model, X[:6])
    X_nan = np.where(X[:6] == -1.0, np.nan, X[:6])
    for i in range(6):
        np.testing.assert_allclose(phi[i, :-1], reference.semivalue(ensemble, X_nan[i])[0],
                                   atol=1e-9)


@pytest.mark.parametrize("estimator", [
    lambda m: xgb.XGBClassifier(n_jobs=1, n_estimators=10, max_depth=3, missing=m),
    lambda m: xgb.XGBRFClassifier(n_jobs=1, n_estimators=6, max_depth=3, missing=m),
    lambda m: xgb.XGBRFRegressor(n_jobs=1, n_estimators=6, max_depth=3, missing=m),
])
def test_xgb_other_estimators_missing(estimator):
    X, y = _sentinel_data(1e-8, seed=2)
    model = estimator(1e-8)
    model.fit(X, (y > np.median(y)).astype(int) if "Classifier" in type(model).__name__ else y)
    phi = shap_values(model, X)
    np.testing.assert_allclose(phi, _xgb_contribs(model.get_booster(), X, 1e-8), atol=ATOL_F32)
    np.testing.assert_allclose(predict_raw(model, X)[:, 0], model.predict(X, output_margin=True),
                               atol=ATOL_F32)


def test_xgb_missing_compared_as_float32():
    """XGBoost drops an entry when float32(value) == float32(missing)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    X[:100, 0] = 0.1
    y = (X[:, 0] == 0.1) * 5.0 + X[:, 1]
    model = xgb.XGBRegressor(n_jobs=1, n_estimators=5, max_depth=2, missing=0.1).fit(X, y)
    rows = np.array([[0.1 + 1e-10, 0.0], [0.1, 0.0], [np.nan, 0.0], [0.1 + 1e-6, 0.0]])
    own = model.predict(rows, output_margin=True)
    assert own[0] == own[1] == own[2] != own[3]  # the library's own behaviour
    np.testing.assert_allclose(predict_raw(model, rows)[:, 0], own, atol=ATOL_F32)


def test_xgb_booster_missing_argument():
    X, y = _sentinel_data(0.0, seed=3)
    booster = xgb.train({"max_depth": 3, "nthread": 1}, xgb.DMatrix(X, y, missing=0.0),
                        num_boost_round=10)
    ensemble = to_ensemble(booster, missing=0.0)
    np.testing.assert_allclose(shap_values(ensemble, X), _xgb_contribs(booster, X, 0.0),
                               atol=ATOL_F32)
    # without missing= a Booster reads NaN as missing, as DMatrix does by default
    np.testing.assert_allclose(shap_values(booster, X), _xgb_contribs(booster, X, np.nan),
                               atol=ATOL_F32)


def test_missing_argument_errors():
    X, y = _sentinel_data(-5.0, seed=4, n=100)
    model = xgb.XGBRegressor(n_jobs=1, n_estimators=2, missing=-5.0).fit(X, y)
    assert to_ensemble(model, missing=-5.0).info["missing"] == -5.0
    with pytest.raises(ValueError, match="has missing=-5.0"):
        to_ensemble(model, missing=0.0)
    tree = DecisionTreeRegressor(max_depth=2).fit(X, y)
    with pytest.raises(ValueError, match="XGBoost models only"):
        to_ensemble(tree, missing=0.0)
    with pytest.raises(ValueError, match="not a TreeEnsemble"):
        to_ensemble(to_ensemble(model), missing=0.0)


# --------------------------------------------------------------------------
# 2. LightGBM's column names


def _spaced_frame(seed=0, n=300):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.normal(size=(n, 3)), columns=["age years", "hours per week", "x"])
    y = X.iloc[:, 0] - 2 * X.iloc[:, 1] * (X.iloc[:, 2] > 0) + 0.1 * rng.normal(size=n)
    return X, y


def test_lightgbm_names_with_spaces():
    X, y = _spaced_frame()
    model = lgb.LGBMRegressor(n_estimators=15, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
    assert list(model.booster_.feature_name()) == ["age_years", "hours_per_week", "x"]
    np.testing.assert_allclose(shap_values(model, X), model.predict(X, pred_contrib=True),
                               atol=1e-10)
    result = r2_decomposition(model, X, y)
    assert list(result.feature_names) == list(X.columns)  # the user's names
    assert result.score == pytest.approx(r2_score(y, model.predict(X)))
    booster = lgb.train({"verbose": -1, "num_leaves": 8, "num_threads": 1}, lgb.Dataset(X, y),
                        num_boost_round=5)
    np.testing.assert_allclose(shap_values(booster, X), booster.predict(X, pred_contrib=True),
                               atol=1e-10)
    # the names are still checked
    with pytest.raises(ValueError, match="feature names"):
        shap_values(model, X[["hours per week", "age years", "x"]])
    renamed = X.set_axis(["age_years", "hours_per_week", "x"], axis=1)
    np.testing.assert_allclose(shap_values(model, renamed), shap_values(model, X))


def test_lightgbm_iris_frame():
    """scikit-learn's iris frame: names such as 'sepal length (cm)'."""
    from sklearn.datasets import load_iris

    X, y = load_iris(return_X_y=True, as_frame=True)
    model = lgb.LGBMClassifier(n_estimators=5, num_leaves=4, verbose=-1, n_jobs=1).fit(X, y)
    assert model.booster_.feature_name()[0] == "sepal_length_(cm)"
    phi = shap_values(model, X)
    np.testing.assert_allclose(phi, model.predict(X, pred_contrib=True).reshape(phi.shape),
                               atol=1e-10)
    ranker = TreeGradRanker(model, prefit=True, n_iter=3).fit(X)
    assert list(ranker.get_feature_names_out()) == [
        name for name, kept in zip(X.columns, ranker.get_support()) if kept]


def test_lightgbm_selector_keeps_user_names():
    X, y = _spaced_frame(seed=1)
    model = lgb.LGBMRegressor(n_estimators=10, verbose=-1, n_jobs=1)
    selector = ShapleyR2Importance(model).fit(X, y)
    assert list(selector.decomposition_.feature_names) == list(X.columns)


# --------------------------------------------------------------------------
# 6b. LightGBM pandas categoricals


def _category_frame(seed=0, n=400):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame({
        "colour": pd.Categorical(rng.choice(["red", "green", "blue", "grey"], n)),
        "size": pd.Categorical(rng.choice(["S", "M", "L"], n)),
        "x": rng.normal(size=n),
    })
    effect = X["colour"].map({"red": 3.0, "green": -2.0, "blue": 0.5, "grey": 6.5}).astype(float)
    y = effect + X["size"].map({"S": 0.0, "M": 1.0, "L": -1.0}).astype(float) + X["x"]
    return X, y


def test_lightgbm_category_codes_refused_like_lightgbm():
    X, y = _category_frame()
    model = lgb.LGBMRegressor(n_estimators=20, min_child_samples=5, verbose=-1, n_jobs=1).fit(X, y)
    np.testing.assert_allclose(shap_values(model, X), model.predict(X, pred_contrib=True),
                               atol=1e-10)
    codes = X.assign(colour=X["colour"].cat.codes)
    with pytest.raises(ValueError, match="categorical_feature do not match"):
        model.predict(codes)  # LightGBM's own behaviour
    with pytest.raises(ValueError, match="'category' columns"):
        shap_values(model, codes)
    with pytest.raises(ValueError, match="'category' columns"):
        r2_decomposition(model, codes, y)


def test_lightgbm_numpy_model_with_category_frame():
    """A model fitted on codes, given a frame with category columns: LightGBM
    codes them by the frame's own categories."""
    X, y = _category_frame(seed=1)
    codes = np.column_stack([X["colour"].cat.codes, X["size"].cat.codes, X["x"]])
    model = lgb.LGBMRegressor(n_estimators=10, min_child_samples=5, verbose=-1, n_jobs=1)
    model.fit(codes, y, categorical_feature=[0, 1])
    frame = X.set_axis(["Column_0", "Column_1", "Column_2"], axis=1)
    np.testing.assert_allclose(shap_values(model, frame), model.predict(frame, pred_contrib=True),
                               atol=1e-10)


# --------------------------------------------------------------------------
# 6c. polars and pyarrow frames


@pytest.mark.parametrize("library", ["polars", "pyarrow"])
@pytest.mark.parametrize("fit", [
    lambda X, y: RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(X, y),
    lambda X, y: xgb.XGBRegressor(n_jobs=1, n_estimators=5, max_depth=3).fit(X, y),
    lambda X, y: lgb.LGBMRegressor(n_estimators=5, verbose=-1, n_jobs=1).fit(X, y),
])
def test_other_frames_checked_by_name(library, fit):
    module = pytest.importorskip(library)
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    X.iloc[:10, 1] = np.nan
    y = X["a"].fillna(0) - X["b"].fillna(1) * X["c"]
    model = fit(X, y)
    frame = module.from_pandas(X) if library == "polars" else module.Table.from_pandas(X)
    np.testing.assert_allclose(shap_values(model, frame), shap_values(model, X))
    np.testing.assert_allclose(predict_raw(model, frame)[:, 0], model.predict(X), rtol=1e-6,
                               atol=1e-6)
    reordered = frame.select(["c", "a", "b"])
    with pytest.raises(ValueError, match="feature names"):
        shap_values(model, reordered)
    with pytest.raises(ValueError, match="feature names"):
        r2_decomposition(model, reordered, y)
    result = r2_decomposition(model, frame, y)
    assert list(result.feature_names) == ["a", "b", "c"]


def test_polars_non_numeric_column():
    pl = pytest.importorskip("polars")
    X = np.random.default_rng(0).normal(size=(50, 2))
    model = DecisionTreeRegressor(max_depth=2).fit(X, X[:, 0])
    frame = pl.DataFrame({"x0": ["u"] * 50, "x1": X[:, 1]})
    with pytest.raises(ValueError, match="non-numeric column 'x0'"):
        shap_values(model, frame)


# --------------------------------------------------------------------------
# 3. Sparse input


def _sparse_data(seed=0, n=300, p=5):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[rng.random(X.shape) < 0.5] = 0.0
    y = X[:, 0] + 3.0 * (X[:, 1] == 0) - X[:, 2] * (X[:, 3] != 0) + 0.1 * rng.normal(size=n)
    return sp.csr_matrix(X), y


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 16 rows, recording the largest block made dense."""
    seen = []
    original = _validation._sparse_to_dense

    def record(ensemble, X):
        seen.append(X.shape[0])
        return original(ensemble, X)

    monkeypatch.setattr(local, "_block_rows", lambda n_features: 16)
    monkeypatch.setattr(_validation, "_sparse_to_dense", record)
    return seen


@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_sparse_xgboost_absent_is_missing(layout, small_blocks):
    X, y = _sparse_data()
    model = xgb.XGBRegressor(n_jobs=1, n_estimators=20, max_depth=3).fit(X, y)
    X = X.asformat(layout)
    phi = shap_values(model, X)
    np.testing.assert_allclose(phi, model.get_booster().predict(xgb.DMatrix(X),
                                                                pred_contribs=True),
                               atol=ATOL_F32)
    np.testing.assert_allclose(phi.sum(axis=1), model.predict(X, output_margin=True),
                               atol=ATOL_F32)
    assert max(small_blocks) <= 16  # never the whole matrix at once
    # densifying with toarray() is a different input for XGBoost (absent -> 0)
    dense = model.predict(X.toarray(), output_margin=True)
    assert np.abs(dense - model.predict(X, output_margin=True)).max() > 0.5
    result = r2_decomposition(model, X, y)
    assert result.score == pytest.approx(r2_score(y, model.predict(X)), abs=1e-5)


def test_sparse_xgboost_stored_entries():
    """Stored zeros are values; stored entries equal to missing are missing."""
    X, y = _sparse_data(seed=1)
    for missing in (np.nan, 0.0):
        model = xgb.XGBRegressor(n_jobs=1, n_estimators=10, max_depth=3, missing=missing).fit(X, y)
        rows = sp.csr_matrix((np.array([0.0, 1.0, 0.0]), ([0, 0, 1], [1, 0, 2])), shape=(2, 5))
        assert rows.nnz == 3
        np.testing.assert_allclose(predict_raw(model, rows)[:, 0],
                                   model.predict(rows, output_margin=True), atol=ATOL_F32)


@pytest.mark.parametrize("layout", ["csr", "csc"])
def test_sparse_lightgbm_absent_is_zero(layout, small_blocks):
    X, y = _sparse_data(seed=2)
    model = lgb.LGBMRegressor(n_estimators=20, num_leaves=8, verbose=-1, n_jobs=1).fit(X, y)
    X = X.asformat(layout)
    np.testing.assert_allclose(shap_values(model, X),
                               model.predict(X, pred_contrib=True).toarray(), atol=1e-10)
    assert max(small_blocks) <= 16
    result = r2_decomposition(model, X, y)
    assert result.score == pytest.approx(r2_score(y, model.predict(X)))


@pytest.mark.parametrize("make", [
    lambda: DecisionTreeRegressor(max_depth=5, random_state=0),
    lambda: RandomForestRegressor(n_estimators=4, max_depth=4, random_state=0),
    lambda: GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0),
])
def test_sparse_sklearn_absent_is_zero(make, small_blocks):
    X, y = _sparse_data(seed=3)
    model = make().fit(X, y)
    phi = shap_values(model, X)
    np.testing.assert_allclose(phi.sum(axis=1), model.predict(X), atol=1e-10)
    np.testing.assert_allclose(phi, shap_values(model, X.toarray()), atol=1e-12)
    np.testing.assert_allclose(saabas_values(model, X), saabas_values(model, X.toarray()))
    np.testing.assert_allclose(banzhaf_values(model, X), banzhaf_values(model, X.toarray()))
    local = r2_decomposition(model, X, y, return_local=True)
    dense = r2_decomposition(model, X.toarray(), y, return_local=True)
    np.testing.assert_allclose(local.local, dense.local, atol=1e-14)
    assert local.score == pytest.approx(r2_score(y, model.predict(X)))
    assert max(small_blocks) <= 16


def test_sparse_catboost_absent_is_zero():
    catboost = pytest.importorskip("catboost")
    X, y = _sparse_data(seed=4, n=200)
    model = catboost.CatBoostRegressor(iterations=10, depth=3, verbose=0,
                                       random_seed=0, thread_count=1).fit(X, y)
    np.testing.assert_allclose(predict_raw(model, X)[:, 0], model.predict(X), atol=1e-10)
    phi = shap_values(model, X)
    np.testing.assert_allclose(phi, shap_values(model, X.toarray()))
    np.testing.assert_allclose(phi.sum(axis=1), model.predict(X), atol=1e-10)


def test_sparse_ranking_and_semivalues_by_blocks(small_blocks):
    X, y = _sparse_data(seed=5, n=70)
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    dense = X.toarray()
    z = np.random.default_rng(0).random((70, 5))
    for a, b in zip(multilinear_gradient(model, X, z), multilinear_gradient(model, dense, z)):
        np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_allclose(treegrad_scores(model, X, n_iter=5),
                               treegrad_scores(model, dense, n_iter=5), atol=1e-12)
    np.testing.assert_allclose(beta_shapley_values(model, X, alpha=4),
                               beta_shapley_values(model, dense, alpha=4), atol=1e-12)
    weights = np.full(5, 0.0625)
    np.testing.assert_allclose(probabilistic_values(model, X, weights),
                               probabilistic_values(model, dense, weights), atol=1e-12)
    rankings = np.argsort(-z, axis=1, kind="stable")
    curves = insertion_deletion(model, X, rankings)
    reference_curves = insertion_deletion(model, dense, rankings)
    np.testing.assert_allclose(curves.insertion, reference_curves.insertion, atol=1e-12)
    np.testing.assert_allclose(curves.deletion, reference_curves.deletion, atol=1e-12)
    np.testing.assert_allclose(curves.insertion[:, -1], model.predict(X), atol=1e-12)
    ranker = TreeGradRanker(model, prefit=True, n_iter=5).fit(X)
    reference_ranker = TreeGradRanker(model, prefit=True, n_iter=5).fit(dense)
    np.testing.assert_allclose(ranker.row_scores_, reference_ranker.row_scores_, atol=1e-12)
    np.testing.assert_allclose(ranker.values(X), reference_ranker.values(dense), atol=1e-12)
    assert ranker.transform(X).shape[0] == 70
    assert max(small_blocks) <= 16


def test_sparse_multiclass_by_blocks(small_blocks):
    X, y = _sparse_data(seed=6, n=90)
    labels = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    model = lgb.LGBMClassifier(n_estimators=5, num_leaves=6, verbose=-1, n_jobs=1).fit(X, labels)
    phi = shap_values(model, X)
    own = np.stack([part.toarray() for part in model.predict(X, pred_contrib=True)], axis=1)
    np.testing.assert_allclose(phi, own, atol=1e-10)
    output = labels.astype(np.int64)
    np.testing.assert_allclose(treegrad_scores(model, X, n_iter=3, class_index=output),
                               treegrad_scores(model, X.toarray(), n_iter=3, class_index=output),
                               atol=1e-12)


def test_sparse_selector_fit():
    X, y = _sparse_data(seed=7)
    selector = ShapleyR2Importance(DecisionTreeRegressor(max_depth=4, random_state=0)).fit(X, y)
    dense = ShapleyR2Importance(DecisionTreeRegressor(max_depth=4, random_state=0)).fit(
        X.toarray(), y)
    np.testing.assert_allclose(selector.feature_importances_, dense.feature_importances_)
    assert selector.score_ == pytest.approx(dense.score_)


def test_sparse_piecewise_background_and_rows(small_blocks):
    X, y = _sparse_data(seed=8, n=200)
    model = lgb.LGBMRegressor(linear_tree=True, n_estimators=5, num_leaves=4,
                              verbose=-1, n_jobs=1).fit(X.toarray(), y)
    dense = X.toarray()
    phi = piecewise_shap_values(model, X, background=X)
    np.testing.assert_allclose(phi, piecewise_shap_values(model, dense, background=dense),
                               atol=1e-10)
    np.testing.assert_allclose(piecewise_predict(model, X)[:, 0],
                               model.predict(dense, raw_score=True), atol=1e-10)
    assert max(small_blocks) <= 16


@pytest.mark.parametrize("container", ["dmatrix", "dataset"])
def test_library_containers_refused(container):
    X, y = _sparse_data(seed=9, n=50)
    model = DecisionTreeRegressor(max_depth=2).fit(X, y)
    data = xgb.DMatrix(X) if container == "dmatrix" else lgb.Dataset(X)
    with pytest.raises(TypeError, match="pass the data it was built from"):
        shap_values(model, data)
    with pytest.raises(TypeError, match="pass the data it was built from"):
        r2_decomposition(model, data, y)


# --------------------------------------------------------------------------
# 10, 11. Parameters and 1-D rows


def test_ranker_negative_sample_weight():
    X, y = _sparse_data(seed=10, n=60)
    with pytest.raises(ValueError, match="non-negative"):
        TreeGradRanker(n_iter=2).fit(X.toarray(), y, sample_weight=np.r_[-1.0, np.ones(59)])


def test_n_jobs_validation():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    model = DecisionTreeRegressor(max_depth=3).fit(X, X[:, 0])
    np.testing.assert_array_equal(shap_values(model, X, n_jobs=2 ** 40),
                                  shap_values(model, X, n_jobs=1))
    for bad in (1.5, "2", True, 0):
        with pytest.raises(ValueError, match="n_jobs"):
            shap_values(model, X, n_jobs=bad)
    with pytest.raises(ValueError, match="n_jobs"):
        TreeGradRanker(model, prefit=True, n_jobs=1.5).fit(X)


def _one_dimensional_calls():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 3))
    y = X[:, 0] + rng.normal(size=40)
    model = DecisionTreeRegressor(max_depth=3).fit(X, y)
    row = X[0]
    return [
        lambda: shap_values(model, row),
        lambda: saabas_values(model, row),
        lambda: banzhaf_values(model, row),
        lambda: predict_raw(model, row),
        lambda: probabilistic_values(model, row, np.ones(3) / 3),
        lambda: multilinear_gradient(model, row, np.ones(3)),
        lambda: treegrad_scores(model, row),
        lambda: insertion_deletion(model, row, np.arange(3)),
        lambda: r2_decomposition(model, row, y[:3]),
        lambda: piecewise_shap_values(model, row, background=X),
        lambda: shapflex_decomposition(model, row, y[:3]),
        lambda: TreeGradRanker(model, prefit=True).fit(row),
        lambda: ShapleyR2Importance(model, prefit=True).fit(row, y[:3]),
    ]


@pytest.mark.parametrize("k", range(13))
def test_one_dimensional_row_says_reshape(k):
    with pytest.raises(ValueError, match=r"reshape\(1, -1\)"):
        _one_dimensional_calls()[k]()


def test_shapflex_one_row_frame_unsupported_model():
    """A 1-D X to shapFlex used to fail with 'not enough values to unpack'."""
    from sklearn.linear_model import LinearRegression

    X = np.random.default_rng(0).normal(size=(30, 2))
    model = LinearRegression().fit(X, X[:, 0])
    with pytest.raises(ValueError, match="reshape"):
        shapflex_decomposition(model, X[:, 0], X[:, 0])


def test_unsupported_model_error_is_still_raised():
    # sanity: the validator does not swallow the adapters' errors
    with pytest.raises(UnsupportedModelError):
        shap_values(object(), np.zeros((2, 2)))
