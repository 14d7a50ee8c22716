"""Interventional values (background data) against brute force and shap.

The reference enumerates every coalition S, builds the hybrid rows
z_S = x_S, z_rest = b_rest for every background row b, averages the model's
own raw prediction (its library's predict) over them, and takes the
semivalue's weights (tests/reference.py): nothing here calls a kernel.
"""
import functools
import itertools

import numpy as np
import pytest

import reference  # noqa: E402  (tests/ is on sys.path under pytest)

from sklearn_r2shap import banzhaf_values, beta_shapley_values, shap_values
from sklearn_r2shap._games import interventional as iv
from sklearn_r2shap.attributions import semivalues

pd = pytest.importorskip("pandas")


def brute_force(raw, x_rows, background, weight=reference.shapley_weight):
    """Semivalues of the interventional game, shape (n_rows, n_outputs, p).

    ``raw(rows)`` is the model's raw prediction (n, n_outputs); ``x_rows`` and
    ``background`` are arrays or DataFrames (category columns kept)."""
    frame = hasattr(background, "iloc")
    n_bg, p = background.shape
    masks = list(range(1 << p))
    out = []
    for r in range(x_rows.shape[0]):
        x = x_rows.iloc[r] if frame else x_rows[r]
        if frame:
            Z = pd.concat([background] * len(masks), ignore_index=True)
        else:
            Z = np.tile(background, (len(masks), 1))
        which = np.repeat(masks, n_bg)
        for j in range(p):
            rows = np.flatnonzero((which >> j) & 1)
            if frame:
                Z.iloc[rows, j] = x.iloc[j]
            else:
                Z[rows, j] = x[j]
        pred = np.asarray(raw(Z), dtype=np.float64).reshape(len(masks) * n_bg, -1)
        v = pred.reshape(len(masks), n_bg, -1).mean(axis=1)  # v(S) by bit mask
        phi = np.zeros((v.shape[1], p))
        for i in range(p):
            for S in masks:
                if not (S >> i) & 1:
                    phi[:, i] += weight(p, bin(S).count("1")) * (v[S | (1 << i)] - v[S])
        out.append(phi)
    return np.array(out)


def assert_categorical(model):
    """The model has categorical splits (so the test covers them)."""
    from sklearn_r2shap import to_ensemble
    from sklearn_r2shap._model._ensemble import DECISION_CATEGORICAL

    assert np.any(to_ensemble(model).decision_type == DECISION_CATEGORICAL)


def as_3d(phi):
    return phi[:, None, :] if phi.ndim == 2 else phi


def check(model, raw, X, background, *, atol=1e-9, rtol=1e-7, route=None, **kwargs):
    """Ours (on ``route``, None: by cost) against brute force, additivity and the
    expected value."""
    phi = as_3d(semivalues(model, X, background=background, route=route, **kwargs))
    ref = brute_force(raw, X, background)
    scale = max(1.0, float(np.abs(ref).max()))
    np.testing.assert_allclose(phi[:, :, :-1], ref, rtol=0, atol=atol + rtol * scale)
    mean_bg = np.asarray(raw(background), dtype=np.float64).reshape(background.shape[0], -1)
    np.testing.assert_allclose(phi[0, :, -1], mean_bg.mean(axis=0), rtol=0,
                               atol=atol + rtol * scale)
    pred = np.asarray(raw(X), dtype=np.float64).reshape(X.shape[0], -1)
    np.testing.assert_allclose(phi.sum(axis=2), pred, rtol=0, atol=atol + rtol * scale)
    assert np.any(np.abs(ref) > 1e-3)  # the check can fail
    return phi


@functools.lru_cache(maxsize=None)
def _data(seed=0, n=300, p=5, nan=0.0, categorical=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    if categorical:
        X[:, 0] = rng.integers(0, 6, size=n)
    y = X[:, 1] * X[:, 2] + np.where(X[:, 0] > 2, 1.0, -0.5) * X[:, 3] + 0.1 * rng.normal(size=n)
    if nan:
        X[rng.random(X.shape) < nan] = np.nan
    X.setflags(write=False)
    return X, y


def _split(X, n_rows=3, n_bg=12):
    return X[:n_rows].copy(), X[100:100 + n_bg].copy()


# ---------------------------------------------------------------- scikit-learn
def test_sklearn_tree_weighted():
    from sklearn.tree import DecisionTreeRegressor

    X, y = _data()
    w = np.random.default_rng(1).uniform(0.1, 3.0, size=len(y))
    model = DecisionTreeRegressor(max_depth=5, random_state=0).fit(X, y, sample_weight=w)
    rows, bg = _split(X)
    check(model, lambda Z: model.predict(Z), rows, bg)


def test_sklearn_forest_multiclass():
    from sklearn.ensemble import RandomForestClassifier

    X, y = _data()
    model = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(
        X, np.digitize(y, [-0.5, 0.5]))
    rows, bg = _split(X)
    phi = check(model, model.predict_proba, rows, bg)
    assert phi.shape == (3, 3, 6)


def test_sklearn_gradient_boosting_multiclass_weighted():
    from sklearn.ensemble import GradientBoostingClassifier

    X, y = _data()
    w = np.random.default_rng(2).uniform(0.1, 3.0, size=len(y))
    model = GradientBoostingClassifier(n_estimators=6, max_depth=3, random_state=0).fit(
        X, np.digitize(y, [-0.5, 0.5]), sample_weight=w)
    rows, bg = _split(X)
    check(model, model.decision_function, rows, bg)


def test_hist_gradient_boosting_nan_and_categorical():
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = _data(nan=0.15, categorical=True)
    model = HistGradientBoostingRegressor(max_iter=8, max_depth=4, categorical_features=[0],
                                          random_state=0).fit(X, y)
    assert_categorical(model)
    rows, bg = _split(X, n_rows=4)
    assert np.isnan(rows).any() and np.isnan(bg).any()
    check(model, model.predict, rows, bg)


def test_hist_gradient_boosting_multiclass_nan():
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = _data(nan=0.15)
    model = HistGradientBoostingClassifier(max_iter=5, max_depth=3, random_state=0).fit(
        X, np.digitize(y, [-0.5, 0.5]))
    rows, bg = _split(X)
    check(model, model.decision_function, rows, bg)


# --------------------------------------------------------------------- XGBoost
def test_xgboost_nan_weighted():
    xgb = pytest.importorskip("xgboost")
    X, y = _data(nan=0.15)
    w = np.random.default_rng(3).uniform(0.1, 3.0, size=len(y))
    model = xgb.XGBRegressor(n_estimators=10, max_depth=4, n_jobs=1).fit(X, y, sample_weight=w)
    rows, bg = _split(X)
    check(model, lambda Z: model.predict(Z, output_margin=True), rows, bg, rtol=1e-5)


def test_xgboost_categorical_frame():
    xgb = pytest.importorskip("xgboost")
    X, y = _data(nan=0.1, categorical=True)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    frame["f0"] = pd.Categorical(np.nan_to_num(X[:, 0], nan=0).astype(int))
    model = xgb.XGBRegressor(n_estimators=8, max_depth=4, enable_categorical=True,
                             tree_method="hist", max_cat_to_onehot=1, n_jobs=1).fit(frame, y)
    assert_categorical(model)
    rows, bg = frame.iloc[:3], frame.iloc[100:112]
    check(model, lambda Z: model.predict(Z, output_margin=True), rows, bg, rtol=1e-5)


def test_xgboost_multiclass():
    xgb = pytest.importorskip("xgboost")
    X, y = _data(nan=0.1)
    model = xgb.XGBClassifier(n_estimators=4, max_depth=3, n_jobs=1).fit(
        X, np.digitize(y, [-0.5, 0.5]))
    rows, bg = _split(X)
    phi = check(model, lambda Z: model.predict(Z, output_margin=True), rows, bg, rtol=1e-5)
    assert phi.shape == (3, 3, 6)


@pytest.mark.parametrize("kind", ["xgboost_vector_leaf", "catboost_multirmse"])
def test_vector_leaf_regressors(kind):
    """Vector leaves (one value per target): XGBoost multi_output_tree, CatBoost MultiRMSE."""
    X, y = _data(nan=0.1)
    Y = np.column_stack([y, np.cos(y), np.nan_to_num(X[:, 0])])
    if kind == "xgboost_vector_leaf":
        xgb = pytest.importorskip("xgboost")
        if tuple(int(v) for v in xgb.__version__.split(".")[:2]) < (3, 2):
            pytest.skip(f"XGBoost {xgb.__version__} saves no hessian sums for vector leaves "
                        "(refused by name: test_adapter_xgboost.py)")
        model = xgb.XGBRegressor(n_estimators=4, max_depth=3, multi_strategy="multi_output_tree",
                                 tree_method="hist", n_jobs=1).fit(X, Y)
        raw, rtol = (lambda Z: model.predict(Z, output_margin=True)), 1e-5
    else:
        catboost = pytest.importorskip("catboost")
        model = catboost.CatBoostRegressor(iterations=4, depth=3, loss_function="MultiRMSE",
                                           verbose=0, allow_writing_files=False, thread_count=1,
                                           random_seed=0).fit(X, Y)
        raw, rtol = (lambda Z: model.predict(Z, prediction_type="RawFormulaVal")), 1e-7
    rows, bg = _split(X)
    phi = check(model, raw, rows, bg, rtol=rtol)
    assert phi.shape == (3, 3, 6)


# -------------------------------------------------------------------- LightGBM
def test_lightgbm_categorical_nan():
    lgb = pytest.importorskip("lightgbm")
    X, y = _data(nan=0.15, categorical=True)
    model = lgb.LGBMRegressor(n_estimators=8, num_leaves=12, min_child_samples=5,
                              min_data_per_group=5, cat_smooth=1, verbose=-1,
                              n_jobs=1).fit(X, y, categorical_feature=[0])
    assert_categorical(model)
    rows, bg = _split(X)
    check(model, lambda Z: model.predict(Z, raw_score=True), rows, bg, rtol=1e-6)


def test_lightgbm_multiclass_weighted():
    lgb = pytest.importorskip("lightgbm")
    X, y = _data(nan=0.1)
    w = np.random.default_rng(4).uniform(0.1, 3.0, size=len(y))
    model = lgb.LGBMClassifier(n_estimators=4, num_leaves=8, verbose=-1, n_jobs=1).fit(
        X, np.digitize(y, [-0.5, 0.5]), sample_weight=w)
    rows, bg = _split(X)
    check(model, lambda Z: model.predict(Z, raw_score=True), rows, bg, rtol=1e-6)


# -------------------------------------------------------------------- CatBoost
@pytest.mark.parametrize("grow_policy", ["SymmetricTree", "Depthwise", "Lossguide"])
def test_catboost_nan(grow_policy):
    catboost = pytest.importorskip("catboost")
    X, y = _data(nan=0.15)
    model = catboost.CatBoostRegressor(iterations=6, depth=3, grow_policy=grow_policy,
                                       verbose=0, allow_writing_files=False, thread_count=1,
                                       random_seed=0).fit(X, y)
    rows, bg = _split(X)
    check(model, lambda Z: model.predict(Z, prediction_type="RawFormulaVal"), rows, bg,
          rtol=1e-6)


def test_catboost_multiclass_one_hot_categorical():
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

    check(model, raw, frame.iloc[:3], frame.iloc[100:112], rtol=1e-6)


# ----------------------------------------------------- other semivalues, routes
@pytest.mark.parametrize("kind", ["banzhaf", "beta"])
def test_banzhaf_and_beta_against_brute_force(kind):
    xgb = pytest.importorskip("xgboost")
    X, y = _data(nan=0.15)
    model = xgb.XGBRegressor(n_estimators=6, max_depth=4, n_jobs=1).fit(X, y)
    rows, bg = _split(X)
    if kind == "banzhaf":
        phi = banzhaf_values(model, rows, q=0.3, background=bg)
        weight = reference.banzhaf_weight(0.3)
    else:
        phi = beta_shapley_values(model, rows, alpha=4, beta=2, background=bg)
        weight = reference.beta_weight(4, 2)
    ref = brute_force(lambda Z: model.predict(Z, output_margin=True), rows, bg, weight)[:, 0]
    np.testing.assert_allclose(phi[:, :-1], ref, rtol=0, atol=1e-5 * np.abs(ref).max())
    assert np.abs(ref).max() > 1e-2


@pytest.mark.parametrize("route", ["tables", "direct"])
def test_both_routes_and_n_jobs_bit_identical(monkeypatch, route):
    lgb = pytest.importorskip("lightgbm")
    X, y = _data(seed=5, n=600, p=8, nan=0.1)
    model = lgb.LGBMRegressor(n_estimators=15, num_leaves=31, min_child_samples=3,
                              verbose=-1, n_jobs=1).fit(X, y)
    one = semivalues(model, X[:150], background=X[300:], n_jobs=1, route=route)
    two = semivalues(model, X[:150], background=X[300:], n_jobs=2, route=route)
    np.testing.assert_array_equal(one, two)
    free = shap_values(model, X[:150], background=X[300:], n_jobs=2)
    np.testing.assert_allclose(one, free, rtol=0, atol=1e-12)
    np.testing.assert_allclose(one.sum(axis=1), model.predict(X[:150], raw_score=True),
                               rtol=0, atol=1e-9)


def test_direct_route_against_brute_force(monkeypatch):
    from sklearn.tree import DecisionTreeRegressor

    X, y = _data(seed=6, nan=0.0)
    model = DecisionTreeRegressor(max_depth=8, random_state=0).fit(X, y)
    rows, bg = _split(X)
    for route in ("direct", "tables"):
        check(model, model.predict, rows, bg, route=route)


def test_inputs_sparse_frames_dask():
    import scipy.sparse
    from sklearn.ensemble import GradientBoostingRegressor

    X, y = _data(seed=7)
    X = np.where(np.abs(X) < 0.5, 0.0, X)
    model = GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0).fit(X, y)
    dense = shap_values(model, X[:40], background=X[100:150])
    np.testing.assert_array_equal(
        shap_values(model, scipy.sparse.csr_matrix(X[:40]),
                    background=scipy.sparse.csr_matrix(X[100:150])), dense)
    np.testing.assert_array_equal(
        shap_values(model, pd.DataFrame(X[:40]), background=pd.DataFrame(X[100:150])), dense)
    da = pytest.importorskip("dask.array")
    lazy = shap_values(model, da.from_array(X[:40], chunks=15), background=X[100:150],
                       n_jobs=1)
    assert isinstance(lazy, da.Array)
    np.testing.assert_array_equal(lazy.compute(scheduler="sync"), dense)
    with pytest.raises(TypeError, match="background must be in memory"):
        shap_values(model, X[:4], background=da.from_array(X[100:150]))
    with pytest.raises(ValueError, match="no rows"):
        shap_values(model, X[:4], background=X[:0])
    with pytest.raises(ValueError, match="features"):
        shap_values(model, X[:4], background=X[:5, :3])


def test_single_background_row_is_a_baseline_shapley_value():
    # One background row b: v(S) = f(x_S, b_rest), the baseline game.
    from sklearn.ensemble import RandomForestRegressor

    X, y = _data(seed=8)
    model = RandomForestRegressor(n_estimators=4, max_depth=5, random_state=0).fit(X, y)
    rows = X[:3]
    phi = shap_values(model, rows, background=X[200:201])
    check(model, model.predict, rows, X[200:201])
    np.testing.assert_allclose(phi[:, -1], model.predict(X[200:201])[0])


# ------------------------------------------------------------------------ shap
@pytest.mark.parametrize("library", ["sklearn", "xgboost", "lightgbm"])
def test_against_shap_interventional(library):
    shap = pytest.importorskip("shap")
    X, y = _data(seed=9, n=400, p=6)
    if library == "sklearn":
        from sklearn.ensemble import GradientBoostingRegressor

        model = GradientBoostingRegressor(n_estimators=20, max_depth=4, random_state=0).fit(X, y)
    elif library == "xgboost":
        xgb = pytest.importorskip("xgboost")
        # shap 0.49 cannot parse the vector base_score XGBoost 3.1 writes
        pytest.importorskip("shap", minversion="0.51")
        model = xgb.XGBRegressor(n_estimators=20, max_depth=4, n_jobs=1).fit(X, y)
    else:
        lgb = pytest.importorskip("lightgbm")
        model = lgb.LGBMRegressor(n_estimators=20, num_leaves=15, verbose=-1, n_jobs=1).fit(X, y)
    rows, bg = X[:30], X[200:300]
    explainer = shap.TreeExplainer(model, data=bg, feature_perturbation="interventional")
    theirs = explainer.shap_values(rows, check_additivity=False)
    ours = shap_values(model, rows, background=bg)
    np.testing.assert_allclose(ours[:, :-1], theirs, rtol=0, atol=1e-5)
    np.testing.assert_allclose(ours[0, -1], explainer.expected_value, rtol=0, atol=1e-5)


@pytest.mark.parametrize("library", ["xgboost", "lightgbm", "sklearn"])
def test_rows_on_thresholds(library):
    # Integer features: XGBoost's thresholds are data values (x < t), so rows
    # and background rows sit exactly on them; LightGBM and scikit-learn
    # (x <= t) see float32-rounded values next to theirs.
    X, y = _data(seed=10)
    X = np.round(X * 2) / 2 + np.float32(0.1)  # values float32 cannot hold exactly
    if library == "xgboost":
        xgb = pytest.importorskip("xgboost")
        model = xgb.XGBRegressor(n_estimators=8, max_depth=4, n_jobs=1).fit(X, y)
        raw = functools.partial(model.predict, output_margin=True)
    elif library == "lightgbm":
        lgb = pytest.importorskip("lightgbm")
        model = lgb.LGBMRegressor(n_estimators=8, num_leaves=10, verbose=-1, n_jobs=1).fit(X, y)
        raw = functools.partial(model.predict, raw_score=True)
    else:
        from sklearn.ensemble import RandomForestRegressor

        model = RandomForestRegressor(n_estimators=3, max_depth=5, random_state=0).fit(X, y)
        raw = model.predict
    rows, bg = _split(X, n_rows=4, n_bg=15)
    check(model, raw, rows, bg, rtol=1e-6)


@pytest.mark.parametrize("route", ["tables", "direct"])
def test_tree_groups_give_the_same_values(monkeypatch, route):
    # Many small groups of trees (summaries rebuilt per call, sparse blocks)
    # against one group.
    import scipy.sparse
    xgb = pytest.importorskip("xgboost")
    X, y = _data(seed=11, nan=0.1)
    model = xgb.XGBRegressor(n_estimators=12, max_depth=4, n_jobs=1).fit(X, y)
    one = semivalues(model, X[:50], background=X[100:180], route=route)
    monkeypatch.setattr(iv, "_TABLE_GROUP_ENTRIES", 300)
    monkeypatch.setattr(iv, "_PATTERN_GROUP_ENTRIES", 300)
    from sklearn_r2shap import to_ensemble
    game = iv.InterventionalGame(to_ensemble(model), X[100:180], "beta", (1, 1), 50, 1,
                                 route=route)
    assert len(game.groups) > 3
    np.testing.assert_array_equal(
        semivalues(model, X[:50], background=X[100:180], route=route), one)
    # XGBoost reads an absent sparse entry as missing, as NaN in X
    np.testing.assert_array_equal(
        semivalues(model, scipy.sparse.csr_matrix(np.nan_to_num(X[:50])),
                   background=X[100:180], route=route), one)


def test_lightgbm_zero_as_missing_and_xgboost_missing_value():
    # LightGBM missing_type=Zero (|x| <= 1e-35 takes the default child) and
    # XGBoost's missing=0: hybrid rows mix zeros of x and of the background.
    lgb = pytest.importorskip("lightgbm")
    xgb = pytest.importorskip("xgboost")
    X, y = _data(seed=12)
    X = np.where(np.abs(X) < 0.4, 0.0, X)
    model = lgb.LGBMRegressor(n_estimators=6, num_leaves=10, zero_as_missing=True, verbose=-1,
                              n_jobs=1).fit(X, y)
    from sklearn_r2shap import to_ensemble
    from sklearn_r2shap._model._ensemble import DECISION_LEQ_ZERO_MISSING

    assert np.any(to_ensemble(model).decision_type == DECISION_LEQ_ZERO_MISSING)
    rows, bg = _split(X)
    assert (rows == 0).any() and (bg == 0).any()
    check(model, functools.partial(model.predict, raw_score=True), rows, bg, rtol=1e-6)
    model = xgb.XGBRegressor(n_estimators=6, max_depth=4, missing=0.0, n_jobs=1).fit(X, y)
    check(model, functools.partial(model.predict, output_margin=True), rows, bg, rtol=1e-5)
