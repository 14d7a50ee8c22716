"""CatBoost adapter: routing, covers and values against CatBoost and brute force."""
import functools

import numpy as np
import pytest

catboost = pytest.importorskip("catboost")

import reference  # noqa: E402  (tests/ is on sys.path under pytest)

from sklearn_r2shap import (  # noqa: E402
    UnsupportedModelError,
    banzhaf_values,
    beta_shapley_values,
    expected_value,
    predict_raw,
    saabas_values,
    shap_values,
    to_ensemble,
)
from sklearn_r2shap._model._ensemble import DECISION_CATEGORICAL  # noqa: E402

SILENT = dict(verbose=0, allow_writing_files=False, thread_count=2, random_seed=0)
GROW_POLICIES = ["SymmetricTree", "Depthwise", "Lossguide"]
KINDS = ["regressor", "binary", "multiclass", "core"]
N_FEATURES = 5


@functools.lru_cache(maxsize=None)
def _data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(240, N_FEATURES))
    y = X[:, 0] + X[:, 1] * X[:, 2] - np.abs(X[:, 3]) + 0.1 * rng.normal(size=len(X))
    X[rng.random(X.shape) < 0.12] = np.nan
    X.setflags(write=False)
    y.setflags(write=False)
    return X, y


def _rows():
    """A few rows to explain, the first ones with NaN."""
    X, _ = _data()
    nan_rows = np.flatnonzero(np.isnan(X).any(axis=1))[:3]
    full_rows = np.flatnonzero(~np.isnan(X).any(axis=1))[:2]
    return X[np.concatenate([nan_rows, full_rows])]


@functools.lru_cache(maxsize=None)
def _model(kind, grow_policy="SymmetricTree", nan_mode="Min", depth=3, iterations=6):
    X, y = _data()
    params = dict(iterations=iterations, depth=depth, learning_rate=0.3,
                  grow_policy=grow_policy, nan_mode=nan_mode, **SILENT)
    if kind == "regressor":
        return catboost.CatBoostRegressor(**params).fit(X, y)
    if kind == "binary":
        return catboost.CatBoostClassifier(**params).fit(X, (y > 0).astype(int))
    if kind == "multiclass":
        return catboost.CatBoostClassifier(**params).fit(X, np.digitize(y, [-0.5, 0.5]))
    assert kind == "core"
    return catboost.CatBoost(dict(loss_function="RMSE", **params)).fit(X, y)


def _raw(model, X, **pool_kwargs):
    raw = model.predict(catboost.Pool(X, **pool_kwargs), prediction_type="RawFormulaVal")
    return np.asarray(raw, dtype=np.float64).reshape(len(X), -1)


def _brute_force(ens, rows):
    return np.array([reference.semivalue(ens, x) for x in rows])  # (n, n_outputs, p)


def _assert_close_relative(actual, expected, rtol=1e-10):
    scale = max(np.abs(expected).max(), 1e-12)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=rtol * scale)


@pytest.mark.parametrize("nan_mode", ["Min", "Max"])
@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
@pytest.mark.parametrize("kind", KINDS)
def test_predict_matches_catboost(kind, grow_policy, nan_mode):
    X, _ = _data()
    model = _model(kind, grow_policy, nan_mode)
    ours = predict_raw(model, X)
    np.testing.assert_allclose(ours, _raw(model, X), rtol=0, atol=1e-6)
    ens = to_ensemble(model)
    rows = _rows()
    np.testing.assert_allclose(reference.predict(ens, rows), _raw(model, rows), rtol=0, atol=1e-6)


def test_nan_mode_max_routes_nan_to_the_greater_side():
    X, _ = _data()
    low, high = _model("regressor", nan_mode="Min"), _model("regressor", nan_mode="Max")
    for model, nan_left in ((low, True), (high, False)):
        ens = to_ensemble(model)
        internal = np.flatnonzero(ens.children_left >= 0)
        expected = np.where(nan_left, ens.children_left, ens.children_right)[internal]
        np.testing.assert_array_equal(ens.default_child[internal], expected)
    # The same (NaN-free) fit, once with nan_mode Forbidden: NaN compares false
    # in CatBoost, i.e. goes to the x <= border side.
    full = ~np.isnan(X).any(axis=1)
    _, y = _data()
    forbidden = catboost.CatBoostRegressor(iterations=4, depth=3, nan_mode="Forbidden",
                                           **SILENT).fit(X[full], y[full])
    np.testing.assert_allclose(predict_raw(forbidden, X), _raw(forbidden, X), rtol=0, atol=1e-6)


def test_float32_borders():
    """Values equal to a border, or rounding to it in float32, go left like CatBoost."""
    model = _model("regressor", "Depthwise")
    ens = to_ensemble(model)
    rows, rounds_to_border = [], []
    for k in np.flatnonzero(ens.children_left >= 0)[:6]:
        t = ens.threshold[k]
        above = np.nextafter(np.float32(t), np.float32(np.inf))
        for value in (t, t + abs(t) * 1e-9 + 1e-12, above):
            row = np.zeros(N_FEATURES)
            row[ens.feature[k]] = value
            rows.append(row)
            rounds_to_border.append(value != t and np.float32(value) == t)
    assert any(rounds_to_border)
    rows = np.array(rows)
    np.testing.assert_allclose(predict_raw(model, rows), _raw(model, rows), rtol=0, atol=1e-6)


def test_oblivious_trees_are_expanded():
    model = _model("regressor", depth=3)
    ens = to_ensemble(model)
    assert ens.n_trees == model.tree_count_
    assert np.all(np.diff(ens.tree_start) == 2 ** (3 + 1) - 1)


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
def test_covers_are_leaf_weights(grow_policy):
    model = _model("regressor", grow_policy, depth=4)
    ens = to_ensemble(model)
    internal = np.flatnonzero(ens.children_left >= 0)
    np.testing.assert_array_equal(
        ens.cover[internal],
        ens.cover[ens.children_left[internal]] + ens.cover[ens.children_right[internal]],
    )
    weights, values = model.get_leaf_weights(), model.get_leaf_values()
    starts = np.concatenate([[0], np.cumsum(model.get_tree_leaf_counts())]).astype(int)
    per_tree = [(weights[a:b], values[a:b]) for a, b in zip(starts[:-1], starts[1:])]
    np.testing.assert_array_equal(ens.cover[ens.tree_start[:-1]], [w.sum() for w, _ in per_tree])
    for t, (w, _) in enumerate(per_tree):
        leaves = ens.tree_nodes(t)[ens.children_left[ens.tree_nodes(t)] < 0]
        np.testing.assert_array_equal(np.sort(ens.cover[leaves]), np.sort(w))
    # v_x(empty): the bias plus each tree's leaf-weighted mean.
    means = [np.average(v, weights=w) for w, v in per_tree]
    bias = model.get_scale_and_bias()[1]
    np.testing.assert_allclose(expected_value(model), bias + np.sum(means))


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
@pytest.mark.parametrize("kind", ["regressor", "binary", "multiclass"])
def test_shap_values_brute_force(kind, grow_policy):
    model = _model(kind, grow_policy, depth=3, iterations=3)
    ens = to_ensemble(model)
    rows = _rows()
    phi = shap_values(model, rows)
    if phi.ndim == 2:
        phi = phi[:, None, :]
    _assert_close_relative(phi[:, :, :-1], _brute_force(ens, rows))
    np.testing.assert_allclose(phi.sum(axis=2), _raw(model, rows), rtol=0, atol=1e-9)
    saabas = saabas_values(model, rows).reshape(phi.shape)
    np.testing.assert_allclose(saabas.sum(axis=2), _raw(model, rows), rtol=0, atol=1e-9)


@pytest.mark.parametrize("nan_mode", ["Min", "Max"])
@pytest.mark.parametrize("kind", ["regressor", "binary", "multiclass"])
def test_shap_values_match_catboost_on_symmetric_trees(kind, nan_mode):
    X, _ = _data()
    model = _model(kind, "SymmetricTree", nan_mode, depth=4)
    rows = X[:40]
    assert np.isnan(rows).any()
    ours = shap_values(model, rows)
    theirs = model.get_feature_importance(data=catboost.Pool(rows), type="ShapValues")
    if kind == "multiclass":
        assert ours.shape == theirs.shape == (len(rows), 3, N_FEATURES + 1)
    else:
        assert ours.shape == theirs.shape == (len(rows), N_FEATURES + 1)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5)


@pytest.mark.parametrize("grow_policy", ["Depthwise", "Lossguide"])
def test_exact_on_nonsymmetric_trees_where_catboost_shap_is_not(grow_policy):
    """Ours against subset enumeration on every row of a Depthwise / Lossguide
    model; CatBoost's ShapValues on such trees are not the exact
    path-dependent Shapley values (seen on unbalanced trees; on some models
    they do not even add up to the prediction): where they differ from ours,
    they differ from the enumeration."""
    X, _ = _data()
    model = _model("regressor", grow_policy, depth=4, iterations=3)
    rows = X[:30]
    ours = shap_values(model, rows)
    exact = _brute_force(to_ensemble(model), rows)[:, 0]
    _assert_close_relative(ours[:, :-1], exact)
    np.testing.assert_allclose(ours.sum(axis=1), _raw(model, rows)[:, 0], rtol=0, atol=1e-9)
    theirs = model.get_feature_importance(data=catboost.Pool(rows), type="ShapValues")
    differs = np.abs(ours - theirs).max(axis=1) > 1e-3
    assert np.all(np.abs(theirs[differs, :-1] - exact[differs]).max(axis=1) > 1e-3)


def test_scale_bias_and_metadata():
    import pandas as pd

    X, y = _data()
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(N_FEATURES)])
    model = catboost.CatBoostRegressor(iterations=4, depth=3, **SILENT).fit(frame, y)
    model.set_scale_and_bias(1.75, 0.4)
    ens = to_ensemble(model)
    np.testing.assert_allclose(predict_raw(model, frame), _raw(model, frame), rtol=0, atol=1e-6)
    assert ens.base_value.tolist() == [0.4]
    assert list(ens.feature_names) == list(frame.columns)
    assert ens.objective == "squared_error" and ens.x_float32 and not ens.averaging
    assert ens.model_type == "CatBoostRegressor"
    # v_x(empty) is the bias plus each tree's leaf-weighted mean, times scale.
    weights, values = model.get_leaf_weights(), model.get_leaf_values()
    sizes = model.get_tree_leaf_counts()
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    means = [np.average(values[a:b], weights=weights[a:b])
             for a, b in zip(starts[:-1], starts[1:])]
    np.testing.assert_allclose(expected_value(model), 0.4 + 1.75 * np.sum(means))

    assert to_ensemble(_model("regressor")).feature_names is None
    assert to_ensemble(_model("binary")).objective == "Logloss"
    multiclass = to_ensemble(_model("multiclass"))
    assert multiclass.objective == "MultiClass" and multiclass.n_outputs == 3
    assert list(multiclass.info["classes"]) == [0, 1, 2]


def test_multi_output_regression_and_early_stopping():
    X, y = _data()
    Y = np.column_stack([y, X[:, 0] * 2])
    Y = np.nan_to_num(Y)
    model = catboost.CatBoostRegressor(iterations=4, depth=3, loss_function="MultiRMSE",
                                       **SILENT).fit(X, Y)
    ens = to_ensemble(model)
    assert ens.n_outputs == 2 and ens.n_values == 2
    np.testing.assert_allclose(predict_raw(model, X), _raw(model, X), rtol=0, atol=1e-6)
    phi = shap_values(model, _rows())
    np.testing.assert_allclose(phi.sum(axis=2), _raw(model, _rows()), atol=1e-9)

    stopped = catboost.CatBoostRegressor(iterations=300, learning_rate=0.5, depth=3,
                                         early_stopping_rounds=3, **SILENT)
    stopped.fit(X[:160], y[:160], eval_set=(X[160:], y[160:]))
    assert stopped.tree_count_ < 300
    assert to_ensemble(stopped).n_trees == stopped.tree_count_
    np.testing.assert_allclose(predict_raw(stopped, X), _raw(stopped, X), rtol=0, atol=1e-6)


@functools.lru_cache(maxsize=None)
def _multirmse(grow_policy):
    X, y = _data()
    Y = np.column_stack([y, np.nan_to_num(X[:, 0]) * 2, np.cos(y)])
    return catboost.CatBoostRegressor(iterations=5, depth=3, learning_rate=0.3,
                                      loss_function="MultiRMSE", grow_policy=grow_policy,
                                      **SILENT).fit(X, Y)


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
def test_multirmse_semivalues_brute_force(grow_policy):
    """MultiRMSE: vector leaves (one value per target) on symmetric and
    non-symmetric trees; every semivalue against subset enumeration."""
    model = _multirmse(grow_policy)
    ens = to_ensemble(model)
    assert ens.n_outputs == ens.n_values == 3 and ens.objective == "MultiRMSE"
    rows = _rows()
    games = [
        (shap_values(model, rows), reference.shapley_weight),
        (banzhaf_values(model, rows), reference.banzhaf_weight(0.5)),
        (banzhaf_values(model, rows, q=0.8), reference.banzhaf_weight(0.8)),
        (beta_shapley_values(model, rows, alpha=4, beta=1), reference.beta_weight(4, 1)),
        (beta_shapley_values(model, rows, alpha=1, beta=16), reference.beta_weight(1, 16)),
    ]
    for phi, weight in games:
        assert phi.shape == (len(rows), 3, N_FEATURES + 1)
        brute = np.array([reference.semivalue(ens, x, weight) for x in rows])
        _assert_close_relative(phi[:, :, :-1], brute)
        np.testing.assert_allclose(phi[:, :, -1], expected_value(model)[None, :].repeat(
            len(rows), axis=0), rtol=0, atol=1e-12)
    phi = shap_values(model, rows)
    np.testing.assert_allclose(phi.sum(axis=2), _raw(model, rows), rtol=0, atol=1e-9)


def test_multirmse_shap_matches_catboost_on_symmetric_trees():
    model = _multirmse("SymmetricTree")
    rows = _rows()
    theirs = model.get_feature_importance(catboost.Pool(rows), type="ShapValues")
    ours = shap_values(model, rows)
    assert theirs.shape == ours.shape
    _assert_close_relative(ours, theirs, rtol=1e-9)


def _categorical_frame(codes=(0, 7, 14, 21, 28, 35)):
    import pandas as pd

    rng = np.random.default_rng(1)
    n = 240
    codes = np.asarray(codes)
    cat = rng.integers(0, len(codes), size=n)
    frame = pd.DataFrame({"a": rng.normal(size=n), "c": codes[cat], "b": rng.normal(size=n)})
    y = frame["a"].to_numpy() + np.array([0.0, 1.0, -2.0, 3.0, 1.0, -1.0])[cat]
    frame.loc[::6, "a"] = np.nan
    return frame, y


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
def test_one_hot_categorical_splits(grow_policy):
    frame, y = _categorical_frame()
    model = catboost.CatBoostRegressor(iterations=5, depth=3, grow_policy=grow_policy,
                                       cat_features=["c"], one_hot_max_size=10,
                                       **SILENT).fit(frame, y)
    ens = to_ensemble(model)
    categorical = ens.decision_type == DECISION_CATEGORICAL
    assert np.any(categorical)
    # CatBoost rejects NaN categories; we send NaN to the "not equal" side.
    np.testing.assert_array_equal(ens.default_child[categorical], ens.children_right[categorical])
    test = frame.copy()
    test["c"] = np.random.default_rng(2).integers(0, 45, size=len(test))  # unseen codes too
    ours = predict_raw(model, test.to_numpy(dtype=float))
    np.testing.assert_allclose(ours, _raw(model, test, cat_features=["c"]), rtol=0, atol=1e-6)
    rows = test.iloc[:4]
    phi = shap_values(model, rows.to_numpy(dtype=float))
    _assert_close_relative(phi[:, :-1], _brute_force(ens, rows.to_numpy(dtype=float))[:, 0])
    if grow_policy == "SymmetricTree":
        theirs = model.get_feature_importance(
            data=catboost.Pool(test.iloc[:30], cat_features=["c"]), type="ShapValues")
        np.testing.assert_allclose(shap_values(model, test.iloc[:30].to_numpy(dtype=float)),
                                   theirs, rtol=0, atol=1e-5)


def test_ctr_splits_raise():
    frame, y = _categorical_frame()
    model = catboost.CatBoostRegressor(iterations=3, depth=3, cat_features=["c"],
                                       one_hot_max_size=1, **SILENT).fit(frame, y)
    with pytest.raises(UnsupportedModelError, match="CatBoostRegressor.*CTR.*OnlineCtr"):
        to_ensemble(model)


@pytest.mark.parametrize("grow_policy", GROW_POLICIES)
@pytest.mark.parametrize("codes", [("red", "green", "", "ünï", "12", "a b"),
                                   (-1, -2, -3, 4, 5, 6), (0, 7, 1500, 21, 28, 35)])
def test_string_negative_and_large_categories_by_their_hashes(codes, grow_policy):
    # Not codes 0..1023: the categories are numbered by CatBoost's own hashes
    # and rows are encoded through CatBoost (info["encode_rows"]).
    frame, y = _categorical_frame(codes)
    model = catboost.CatBoostRegressor(iterations=5, depth=3, grow_policy=grow_policy,
                                       cat_features=["c"], one_hot_max_size=10,
                                       **SILENT).fit(frame, y)
    ens = to_ensemble(model)
    assert "encode_rows" in ens.info and np.any(ens.decision_type == DECISION_CATEGORICAL)
    test = frame.iloc[:30].copy()
    unseen = ["zzz", "RED", "red ", 3, 1024] if isinstance(codes[0], str) else [3, 99, -7, 1024, 8]
    test["c"] = test["c"].astype(object)
    test.loc[test.index[:5], "c"] = unseen
    raw = _raw(model, test, cat_features=["c"])
    np.testing.assert_allclose(predict_raw(model, test), raw, rtol=0, atol=1e-6)
    phi = shap_values(model, test)
    np.testing.assert_allclose(phi.sum(axis=1), raw[:, 0], rtol=0, atol=1e-6)
    # an object array and a pandas category column give the same values
    np.testing.assert_array_equal(shap_values(model, test.to_numpy(dtype=object)), phi)
    as_category = test.astype({"c": "category"}) if isinstance(codes[0], str) else test
    np.testing.assert_array_equal(shap_values(model, as_category), phi)
    encoded = ens.info["encode_rows"](test.iloc[:4])
    _assert_close_relative(phi[:4, :-1], _brute_force(ens, encoded)[:, 0])
    if grow_policy == "SymmetricTree":
        theirs = model.get_feature_importance(
            data=catboost.Pool(test, cat_features=["c"]), type="ShapValues")
        np.testing.assert_allclose(phi, theirs, rtol=0, atol=1e-5)


def test_float_categories_are_refused_like_catboost():
    frame, y = _categorical_frame(("x", "y", "z", "w", "v", "u"))
    model = catboost.CatBoostRegressor(iterations=3, depth=3, cat_features=["c"],
                                       one_hot_max_size=10, **SILENT).fit(frame, y)
    rows = frame.iloc[:2].copy()
    rows["c"] = [0.5, "x"]
    with pytest.raises(ValueError, match="neither an integer nor a string"):
        shap_values(model, rows)


def test_text_features_and_unfitted_raise():
    import pandas as pd

    rng = np.random.default_rng(3)
    words = np.array(["good day", "bad day", "great", "awful thing", "fine"])
    frame = pd.DataFrame({"a": rng.normal(size=120), "t": words[rng.integers(0, 5, size=120)]})
    model = catboost.CatBoostClassifier(iterations=2, depth=2, text_features=["t"],
                                        **SILENT).fit(frame, (frame["a"] > 0).astype(int))
    with pytest.raises(UnsupportedModelError, match="CatBoostClassifier uses text features"):
        to_ensemble(model)
    with pytest.raises(UnsupportedModelError, match="CatBoostRegressor is not fitted"):
        to_ensemble(catboost.CatBoostRegressor())


def test_string_category_without_splits_is_a_null_player():
    frame, y = _categorical_frame()
    frame["s"] = "same"  # constant: CatBoost never splits on it
    model = catboost.CatBoostRegressor(iterations=4, depth=3, cat_features=["s"],
                                       **SILENT).fit(frame[["a", "s", "b"]], y)
    rows = frame[["a", "s", "b"]].iloc[:20].copy()
    rows.loc[rows.index[:3], "s"] = ["other", "x", "same"]
    phi = shap_values(model, rows)
    np.testing.assert_array_equal(phi[:, 1], 0.0)
    np.testing.assert_allclose(phi.sum(axis=1), _raw(model, rows, cat_features=["s"])[:, 0],
                               rtol=0, atol=1e-6)
    theirs = model.get_feature_importance(data=catboost.Pool(rows, cat_features=["s"]),
                                          type="ShapValues")
    np.testing.assert_allclose(phi, theirs, rtol=0, atol=1e-5)
