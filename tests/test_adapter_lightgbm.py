"""LightGBM adapter: routing, missing types, categorical splits, early stopping,
random forest mode, linear trees, and agreement with LightGBM's own
predictions and ``pred_contrib`` (TreeSHAP)."""
import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")

import reference  # noqa: E402

import sklearn_r2shap as sr  # noqa: E402
from sklearn_r2shap import UnsupportedModelError  # noqa: E402
from sklearn_r2shap._model import _lightgbm  # noqa: E402
from sklearn_r2shap._model._ensemble import (  # noqa: E402
    DECISION_CATEGORICAL,
    DECISION_LEQ,
    DECISION_LEQ_ZERO_MISSING,
)

P = 5  # features: 0 numeric with NaN, 1 numeric with many zeros, 2-3 numeric, 4 categorical
CAT = [4]
SMALL = dict(n_estimators=6, num_leaves=6, min_child_samples=5, min_data_per_group=5,
             cat_smooth=1.0, verbose=-1, random_state=0)


def make_data(n, seed, nan=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, P))
    X[rng.random(n) < 0.3, 1] = 0.0
    X[:, 4] = rng.integers(0, 8, size=n)
    y = (X[:, 0] + 2.0 * (X[:, 1] == 0) + 1.5 * np.isin(X[:, 4], [0, 2, 5])
         + X[:, 2] * X[:, 3] + 0.1 * rng.normal(size=n))
    if nan:
        X[rng.random(n) < 0.15, 0] = np.nan
        X[rng.random(n) < 0.05, 4] = np.nan
    return X, y


def make_rows(n=40, seed=7):
    """Test rows with NaN in every column, zeros, unseen and negative categories."""
    X, _ = make_data(n, seed, nan=False)
    X[::4, 0] = np.nan
    X[1::5, 1] = np.nan
    X[2::6, 2] = np.nan
    X[3::7, 3] = np.nan
    X[::3, 1] = 0.0
    X[::7, 4] = np.nan
    X[1::8, 4] = 11.0  # unseen category
    X[2::9, 4] = 40.0  # unseen, beyond the first bitset word
    X[5::9, 4] = -1.0  # negative -> right
    X[6::9, 4] = -3.0
    X[0] = np.nan
    return X


X_TRAIN, Y_TRAIN = make_data(500, 0)
Y_BINARY = (Y_TRAIN > np.median(Y_TRAIN)).astype(int)
Y_MULTI = np.digitize(Y_TRAIN, np.quantile(Y_TRAIN, [0.33, 0.66]))
ROWS = make_rows()


def fit(estimator, y=Y_TRAIN, X=X_TRAIN, **fit_params):
    return estimator.fit(X, y, categorical_feature=CAT, **fit_params)


def booster_of(model):
    return model if isinstance(model, lgb.Booster) else model.booster_


def n_iterations(model):
    ens = sr.to_ensemble(model)
    return ens.n_trees // ens.n_outputs


def library_raw(model, X):
    """LightGBM's raw score; rf mode: the average its predict() uses (see test_rf_mode)."""
    raw = booster_of(model).predict(X, raw_score=True).reshape(len(X), -1)
    if sr.to_ensemble(model).averaging:
        raw = raw / n_iterations(model)
    return raw


def library_contrib(model, X):
    """pred_contrib as (n, n_outputs, p + 1); rf mode divided by T like library_raw."""
    contrib = booster_of(model).predict(X, pred_contrib=True)
    contrib = np.asarray(contrib).reshape(len(X), -1, P + 1)
    if sr.to_ensemble(model).averaging:
        contrib = contrib / n_iterations(model)
    return contrib


def missing_types(model):
    types = set()

    def walk(node):
        if "split_index" in node:
            if node["decision_type"] == "<=":
                types.add(node["missing_type"])
            walk(node["left_child"])
            walk(node["right_child"])

    for tree in booster_of(model).dump_model()["tree_info"]:
        walk(tree["tree_structure"])
    return types


MODELS = {
    "regressor": lambda: fit(lgb.LGBMRegressor(**SMALL)),
    "zero_as_missing": lambda: fit(lgb.LGBMRegressor(zero_as_missing=True, **SMALL)),
    "no_missing": lambda: fit(lgb.LGBMRegressor(use_missing=False, **SMALL)),
    "binary": lambda: fit(lgb.LGBMClassifier(**SMALL), Y_BINARY),
    "multiclass": lambda: fit(lgb.LGBMClassifier(**SMALL), Y_MULTI),
    "multiclassova": lambda: fit(lgb.LGBMClassifier(objective="multiclassova", **SMALL), Y_MULTI),
    "rf": lambda: fit(lgb.LGBMRegressor(boosting_type="rf", subsample=0.7, subsample_freq=1,
                                        **SMALL)),
    "rf_binary": lambda: fit(lgb.LGBMClassifier(boosting_type="rf", subsample=0.7,
                                                subsample_freq=1, **SMALL), Y_BINARY),
    "dart": lambda: fit(lgb.LGBMRegressor(boosting_type="dart", **SMALL)),
    "booster": lambda: lgb.train(
        {k: v for k, v in SMALL.items() if k not in ("n_estimators", "random_state")}
        | {"objective": "regression"},
        lgb.Dataset(X_TRAIN, Y_TRAIN, categorical_feature=CAT), num_boost_round=6),
}
_CACHE = {}


def get_model(name):
    if name not in _CACHE:
        _CACHE[name] = MODELS[name]()
    return _CACHE[name]


@pytest.mark.parametrize(
    "name, expected",
    [("regressor", {"NaN", "None"}), ("zero_as_missing", {"Zero"}), ("no_missing", {"None"})],
)
def test_missing_types_and_decision_types(name, expected):
    model = get_model(name)
    assert missing_types(model) == expected
    ens = sr.to_ensemble(model)
    internal = ~ens.is_leaf
    assert np.any(ens.decision_type[internal] == DECISION_CATEGORICAL)
    numeric = internal & (ens.decision_type != DECISION_CATEGORICAL)
    kind = DECISION_LEQ_ZERO_MISSING if expected == {"Zero"} else DECISION_LEQ
    assert np.all(ens.decision_type[numeric] == kind)
    # categorical nodes send NaN right
    cat = np.flatnonzero(ens.decision_type == DECISION_CATEGORICAL)
    assert np.array_equal(ens.default_child[cat], ens.children_right[cat])


def test_missing_none_sends_nan_where_zero_goes():
    model = get_model("no_missing")
    ens = sr.to_ensemble(model)
    numeric = np.flatnonzero(~ens.is_leaf & (ens.decision_type == DECISION_LEQ))
    zero_left = 0.0 <= ens.threshold[numeric]
    expected = np.where(zero_left, ens.children_left[numeric], ens.children_right[numeric])
    assert np.array_equal(ens.default_child[numeric], expected)
    assert zero_left.any() and (~zero_left).any()


@pytest.mark.parametrize("name", sorted(MODELS))
def test_predict_raw_matches_lightgbm(name):
    model = get_model(name)
    ens = sr.to_ensemble(model)
    expected = library_raw(model, ROWS)
    got = sr.predict_raw(model, ROWS)
    assert got.shape == expected.shape == (len(ROWS), ens.n_outputs)
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)
    np.testing.assert_allclose(reference.predict(ens, ROWS[:6]), expected[:6], rtol=0, atol=1e-6)
    assert np.all(ens.base_value == 0.0)
    assert ens.info["allow_nan"] is True
    assert ens.x_float32 is False


def test_ranker_predicts_like_lightgbm():
    group = [50] * (len(X_TRAIN) // 50)
    rank = np.digitize(Y_TRAIN, np.quantile(Y_TRAIN, [0.25, 0.5, 0.75]))
    model = lgb.LGBMRanker(**SMALL).fit(X_TRAIN, rank, group=group, categorical_feature=CAT)
    ens = sr.to_ensemble(model)
    assert ens.objective == "lambdarank"
    np.testing.assert_allclose(sr.predict_raw(model, ROWS)[:, 0], model.predict(ROWS), atol=1e-9)


def test_rf_mode_averages_the_trees():
    # LightGBM's rf mode divides by the number of trees in predict(), not in
    # predict(raw_score=True) or pred_contrib, which return the plain sum.
    reg = get_model("rf")
    ens = sr.to_ensemble(reg)
    assert ens.averaging
    T = ens.n_trees
    np.testing.assert_allclose(sr.predict_raw(reg, ROWS)[:, 0], reg.predict(ROWS), atol=1e-9)
    np.testing.assert_allclose(sr.predict_raw(reg, ROWS)[:, 0] * T,
                               reg.booster_.predict(ROWS, raw_score=True), atol=1e-9)
    clf = get_model("rf_binary")
    logit = np.log(clf.predict_proba(ROWS)[:, 1]) - np.log(clf.predict_proba(ROWS)[:, 0])
    np.testing.assert_allclose(sr.predict_raw(clf, ROWS)[:, 0], logit, atol=1e-8)


@pytest.mark.parametrize("name", ["regressor", "zero_as_missing", "no_missing", "binary",
                                  "multiclass", "rf", "dart"])
def test_shap_matches_pred_contrib(name):
    model = get_model(name)
    phi = sr.shap_values(model, ROWS)
    expected = library_contrib(model, ROWS)
    phi = phi.reshape(expected.shape)
    scale = np.abs(expected).max()
    np.testing.assert_allclose(phi, expected, rtol=0, atol=1e-9 * scale)
    # additivity: every row sums to the raw prediction
    np.testing.assert_allclose(phi.sum(axis=-1), library_raw(model, ROWS), atol=1e-9)


@pytest.mark.parametrize("name", ["regressor", "zero_as_missing", "no_missing", "multiclass",
                                  "rf"])
def test_shap_matches_brute_force(name):
    model = get_model(name)
    ens = sr.to_ensemble(model)
    rows = ROWS[[0, 1, 2, 5, 6, 9]]  # all-NaN row, NaN per column, negative category
    phi = sr.shap_values(model, rows).reshape(len(rows), ens.n_outputs, P + 1)
    for i, x in enumerate(rows):
        brute = reference.semivalue(ens, x)
        scale = np.abs(brute).max()
        assert scale > 0
        np.testing.assert_allclose(phi[i, :, :-1], brute, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(phi[i, :, -1], reference.value_function(ens, x, ()),
                                   atol=1e-10 * scale)


def test_saabas_adds_up():
    # LightGBM has no approximate (Saabas) contributions to compare with.
    model = get_model("multiclass")
    phi = sr.saabas_values(model, ROWS)
    np.testing.assert_allclose(phi.sum(axis=-1), library_raw(model, ROWS), atol=1e-9)


@pytest.mark.filterwarnings("ignore:The argument 'eval_set' is deprecated")
def test_early_stopping_uses_best_iteration():
    X_fit, y_fit = X_TRAIN[:350], Y_TRAIN[:350]
    X_val, y_val = X_TRAIN[350:], Y_TRAIN[350:]
    model = lgb.LGBMRegressor(**(SMALL | dict(n_estimators=300, learning_rate=0.5))).fit(
        X_fit, y_fit, eval_set=[(X_val, y_val)], categorical_feature=CAT,
        callbacks=[lgb.early_stopping(3, verbose=False)])
    best = model.best_iteration_
    assert 0 < best < 300
    ens = sr.to_ensemble(model)
    assert ens.n_trees == best and ens.info["best_iteration"] == best
    np.testing.assert_allclose(sr.predict_raw(model, ROWS)[:, 0], model.predict(ROWS), atol=1e-9)

    # A booster that keeps every tree still predicts with best_iteration by default.
    params = {k: v for k, v in SMALL.items() if k not in ("n_estimators", "random_state")}
    params |= {"objective": "regression", "learning_rate": 0.5}
    booster = lgb.train(
        params, lgb.Dataset(X_fit, y_fit, categorical_feature=CAT), num_boost_round=300,
        valid_sets=[lgb.Dataset(X_val, y_val, categorical_feature=CAT)],
        callbacks=[lgb.early_stopping(3, verbose=False)], keep_training_booster=True)
    assert booster.num_trees() > booster.best_iteration > 0
    ens = sr.to_ensemble(booster)
    assert ens.n_trees == booster.best_iteration < ens.info["n_trees_total"]
    full = booster.predict(ROWS, raw_score=True, num_iteration=-1)
    default = booster.predict(ROWS, raw_score=True)
    assert np.abs(full - default).max() > 1e-6
    np.testing.assert_allclose(sr.predict_raw(booster, ROWS)[:, 0], default, atol=1e-9)


def test_multiclass_tree_outputs():
    model = get_model("multiclass")
    ens = sr.to_ensemble(model)
    assert ens.n_outputs == 3 and ens.n_values == 1
    assert np.array_equal(ens.tree_output, np.arange(ens.n_trees) % 3)
    assert np.array_equal(ens.info["classes"], [0, 1, 2])


@pytest.mark.parametrize("objective, expected", [
    ("regression", "squared_error"), ("l2", "squared_error"),
    ("mean_squared_error", "squared_error"), ("huber", "huber"), ("l1", "regression_l1"),
])
def test_objective_names(objective, expected):
    params = SMALL | dict(n_estimators=2)
    model = fit(lgb.LGBMRegressor(objective=objective, **params))
    assert sr.to_ensemble(model).objective == expected


def test_classifier_objective_names():
    assert sr.to_ensemble(get_model("binary")).objective == "binary"
    assert sr.to_ensemble(get_model("binary")).info["objective_string"] == "binary sigmoid:1"
    assert sr.to_ensemble(get_model("multiclass")).objective == "multiclass"


def test_custom_objective():
    def squared(y_true, y_pred):
        return y_pred - y_true, np.ones_like(y_pred)

    model = fit(lgb.LGBMRegressor(objective=squared, **(SMALL | dict(n_estimators=2))))
    ens = sr.to_ensemble(model)
    assert ens.objective == "custom"
    np.testing.assert_allclose(sr.predict_raw(model, ROWS)[:, 0], model.predict(ROWS), atol=1e-9)


def test_feature_names():
    pd = pytest.importorskip("pandas")
    names = [f"x{i}" for i in range(P)]
    frame = pd.DataFrame(X_TRAIN, columns=names)
    model = lgb.LGBMRegressor(**SMALL).fit(frame, Y_TRAIN, categorical_feature=CAT)
    ens = sr.to_ensemble(model)
    assert list(ens.feature_names) == names
    rows = pd.DataFrame(ROWS, columns=names)
    np.testing.assert_allclose(sr.predict_raw(model, rows)[:, 0], model.predict(rows), atol=1e-9)
    assert list(sr.to_ensemble(model.booster_).feature_names) == names
    assert sr.to_ensemble(get_model("booster")).feature_names is None


def _route_to_leaf(ens, t, x):
    node = ens.tree_start[t]
    while ens.children_left[node] >= 0:
        node = reference.route(ens, node, x)
    return node


def test_linear_trees():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(400, 4))
    X[:, 3] = rng.integers(0, 5, size=400)
    X[rng.random(400) < 0.1, 1] = np.nan
    y = 3 * X[:, 0] + np.nan_to_num(X[:, 1]) * X[:, 2] + X[:, 3] + 0.1 * rng.normal(size=400)
    model = lgb.LGBMRegressor(linear_tree=True, n_estimators=8, num_leaves=5, verbose=-1,
                              random_state=0).fit(X, y, categorical_feature=[3])
    ens = sr.to_ensemble(model)
    assert ens.has_linear_leaves and len(ens.linear_coef) > 0
    rows = rng.normal(size=(60, 4))
    rows[:, 3] = rng.integers(0, 6, size=60)
    rows[::3, 0] = np.nan
    rows[1::4, 1] = np.nan
    rows[2::5, 2] = np.nan

    n_fallback = 0
    predicted = np.zeros(len(rows))
    for i, x in enumerate(rows):
        for t in range(ens.n_trees):
            leaf = _route_to_leaf(ens, t, x)
            lo, hi = ens.linear_start[leaf], ens.linear_start[leaf + 1]
            features = ens.linear_feature[lo:hi]
            if np.isnan(x[features]).any():
                predicted[i] += ens.linear_fallback[leaf, 0]
                n_fallback += 1
            else:
                predicted[i] += ens.value[leaf, 0] + ens.linear_coef[lo:hi] @ x[features]
    assert n_fallback > 0
    np.testing.assert_allclose(predicted, model.booster_.predict(rows, raw_score=True),
                               rtol=0, atol=1e-9)
    with pytest.raises(UnsupportedModelError, match="linear leaves"):
        sr.shap_values(model, rows)


def test_single_leaf_trees():
    # min_child_samples too large to split: LightGBM keeps one constant tree.
    model = lgb.LGBMRegressor(n_estimators=3, min_child_samples=400, verbose=-1).fit(
        X_TRAIN, Y_TRAIN)
    ens = sr.to_ensemble(model)
    assert np.all(ens.is_leaf)
    np.testing.assert_allclose(sr.predict_raw(model, ROWS)[:, 0], model.predict(ROWS), atol=1e-9)
    np.testing.assert_allclose(sr.shap_values(model, ROWS), library_contrib(model, ROWS)[:, 0],
                               atol=1e-9)


def test_unsupported_inputs_raise():
    with pytest.raises(UnsupportedModelError, match="not supported.*LightGBM"):
        _lightgbm.convert(object())


@pytest.mark.parametrize("field, bad, match", [
    ("missing_type", "Sometimes", "unsupported missing_type 'Sometimes'"),
    ("decision_type", ">", "unsupported decision_type '>'"),
])
def test_unknown_split_kinds_raise(monkeypatch, field, bad, match):
    booster = get_model("booster")
    dump = booster.dump_model()
    dump["tree_info"][0]["tree_structure"][field] = bad
    monkeypatch.setattr(booster, "dump_model", lambda **kwargs: dump)
    with pytest.raises(UnsupportedModelError, match=match):
        sr.to_ensemble(booster)


def test_categorical_values_between_minus_one_and_zero():
    model = get_model("regressor")
    rows = np.tile(ROWS[1], (2, 1))
    rows[:, 4] = [-0.5, 0.0]
    assert booster_of(model).predict(rows[:1], raw_score=True) == pytest.approx(
        booster_of(model).predict(rows[1:], raw_score=True))
    np.testing.assert_allclose(sr.predict_raw(model, rows)[:, 0],
                               library_raw(model, rows)[:, 0], atol=1e-9)


def test_zero_as_missing_threshold_is_float32():
    model = get_model("zero_as_missing")
    rows = np.tile(ROWS[1], (3, 1))
    rows[:, 1] = [0.0, 1.00000001e-35, 1e-30]
    rows[:, 0] = 1.0
    np.testing.assert_allclose(sr.predict_raw(model, rows)[:, 0],
                               library_raw(model, rows)[:, 0], atol=1e-9)


def test_pandas_category_columns():
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(5)
    frame = pd.DataFrame({"a": rng.normal(size=300),
                          "c": pd.Categorical(rng.choice([10, 20, 30, 40], size=300))})
    y = frame["a"] + 3.0 * (frame["c"].astype(int) == 20)
    model = lgb.LGBMRegressor(**SMALL).fit(frame, y)
    assert sr.to_ensemble(model).info["pandas_categorical"] == [[10, 20, 30, 40]]
    np.testing.assert_allclose(sr.predict_raw(model, frame)[:, 0], model.predict(frame),
                               atol=1e-9)


# --------------------------------------------------------------------------
# Two readings of one model: model_to_string (numeric trees) and the JSON dump
# --------------------------------------------------------------------------
def _read_both(model, monkeypatch):
    """The ensemble read from the model string, then from the JSON dump."""
    import dataclasses

    text = sr.to_ensemble(model)
    with monkeypatch.context() as patch:
        patch.setattr(_lightgbm, "_read_text", lambda text, model_type: None)
        dumped = sr.to_ensemble(model)
    for field in dataclasses.fields(text):
        a, b = getattr(text, field.name), getattr(dumped, field.name)
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape, field.name
            np.testing.assert_array_equal(a, b, err_msg=field.name)
        else:
            assert a == b, field.name
    return text


NUMERIC_SETTINGS = {  # MODELS' settings, fitted without categorical columns below
    "regressor": (lgb.LGBMRegressor, {}, Y_TRAIN),
    "zero_as_missing": (lgb.LGBMRegressor, dict(zero_as_missing=True), Y_TRAIN),
    "no_missing": (lgb.LGBMRegressor, dict(use_missing=False), Y_TRAIN),
    "binary": (lgb.LGBMClassifier, {}, Y_BINARY),
    "multiclass": (lgb.LGBMClassifier, {}, Y_MULTI),
    "multiclassova": (lgb.LGBMClassifier, dict(objective="multiclassova"), Y_MULTI),
    "rf": (lgb.LGBMRegressor, dict(boosting_type="rf", subsample=0.7, subsample_freq=1),
           Y_TRAIN),
    "rf_binary": (lgb.LGBMClassifier,
                  dict(boosting_type="rf", subsample=0.7, subsample_freq=1), Y_BINARY),
    "dart": (lgb.LGBMRegressor, dict(boosting_type="dart"), Y_TRAIN),
}


@pytest.mark.parametrize("name", sorted(NUMERIC_SETTINGS))
def test_model_string_reads_as_the_json_dump(name, monkeypatch):
    cls, params, y = NUMERIC_SETTINGS[name]
    model = cls(**(SMALL | params)).fit(X_TRAIN, y, categorical_feature=[])
    calls = []
    original = _lightgbm._numeric_tree
    with monkeypatch.context() as patch:
        patch.setattr(_lightgbm, "_numeric_tree",
                      lambda *args: calls.append(1) or original(*args))
        ens = _read_both(model, monkeypatch)
    assert len(calls) == ens.n_trees  # every tree came from the model string
    np.testing.assert_allclose(sr.predict_raw(model, ROWS), library_raw(model, ROWS),
                               rtol=0, atol=1e-9)


def test_model_string_with_early_stopping_and_single_leaves(monkeypatch):
    X_fit, y_fit = X_TRAIN[:350], Y_TRAIN[:350]
    model = lgb.LGBMRegressor(**(SMALL | dict(n_estimators=300, learning_rate=0.5))).fit(
        X_fit, y_fit, eval_set=[(X_TRAIN[350:], Y_TRAIN[350:])], categorical_feature=[],
        callbacks=[lgb.early_stopping(3, verbose=False)])
    assert 0 < model.best_iteration_ < 300
    assert _read_both(model, monkeypatch).n_trees == model.best_iteration_
    single = lgb.LGBMRegressor(n_estimators=3, min_child_samples=400, verbose=-1).fit(
        X_TRAIN, Y_TRAIN)
    ens = _read_both(single, monkeypatch)
    assert np.all(ens.is_leaf) and np.all(ens.cover > 0)


def test_categorical_and_linear_models_are_read_from_the_json_dump(monkeypatch):
    linear = lgb.LGBMRegressor(linear_tree=True, n_estimators=3, num_leaves=4,
                               verbose=-1).fit(X_TRAIN[:, :4], Y_TRAIN)
    for model in (get_model("regressor"), linear):
        assert _lightgbm._read_text(booster_of(model).model_to_string(), "m") is None
    numeric = lgb.LGBMRegressor(**SMALL).fit(X_TRAIN, Y_TRAIN, categorical_feature=[])
    dump = _lightgbm._read_text(numeric.booster_.model_to_string(), "m")
    assert dump is not None and len(dump["trees"]) == SMALL["n_estimators"]


@pytest.mark.parametrize("code, match", [
    ("12", "unsupported missing_type 3"),  # missing-type bits 3
    ("1", "categorical split in a tree without categories"),  # num_cat=0 but bit 0
])
def test_model_string_unknown_decision_types_raise(monkeypatch, code, match):
    model = lgb.LGBMRegressor(**SMALL).fit(X_TRAIN, Y_TRAIN, categorical_feature=[])
    text = model.booster_.model_to_string()
    start = text.index("decision_type=") + len("decision_type=")
    end = text.index("\n", start)
    bad = " ".join(code for _ in text[start:end].split())
    booster = model.booster_
    monkeypatch.setattr(booster, "model_to_string",
                        lambda **kwargs: text[:start] + bad + text[end:])
    with pytest.raises(UnsupportedModelError, match=match):
        sr.to_ensemble(booster)
