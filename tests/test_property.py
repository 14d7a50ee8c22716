"""Property-based tests (hypothesis) over random small models of the four
libraries: NaN, a categorical column, sparse input, sample weights, early
stopping, binary and multiclass targets.

For every drawn model and data set:

* ``predict_raw`` is the library's own raw prediction (margin);
* ``shap_values`` add up to ``predict_raw`` (efficiency);
* ``shap_values`` equal the library's own contributions where it computes
  the same game (XGBoost ``pred_contribs``, LightGBM ``pred_contrib``,
  CatBoost ``ShapValues`` on its symmetric trees), or subset enumeration
  (tests/reference.py) for scikit-learn, which has none.

Examples are derandomized and few (CI reproducible, the file runs in well
under 30 s).
"""
import numpy as np
import pytest
import scipy.sparse as sp

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import reference  # noqa: E402
from sklearn_r2shap import predict_raw, shap_values, to_ensemble  # noqa: E402

SETTINGS = settings(max_examples=8, deadline=None, derandomize=True, database=None,
                    suppress_health_check=list(hypothesis.HealthCheck))
N_ROWS = 160


@st.composite
def scenarios(draw):
    return dict(
        seed=draw(st.integers(0, 2 ** 16)),
        n_features=draw(st.integers(2, 4)),
        task=draw(st.sampled_from(["regression", "binary", "multiclass"])),
        nan=draw(st.booleans()),
        categorical=draw(st.booleans()),
        sparse=draw(st.booleans()),
        weights=draw(st.booleans()),
        early_stopping=draw(st.booleans()),
    )


def _data(s):
    """X (column 0 integer codes 0..5 when categorical), y, weights, and a
    validation split for early stopping."""
    rng = np.random.default_rng(s["seed"])
    n, p = N_ROWS, s["n_features"]
    X = rng.normal(size=(n, p)).round(2)
    if s["categorical"]:
        X[:, 0] = rng.integers(0, 6, n)
    signal = np.sin(2 * X[:, 0]) + X[:, 1] * (X[:, -1] > 0) + 0.3 * rng.normal(size=n)
    if s["sparse"]:
        X[rng.random(X.shape) < 0.4] = 0.0
    if s["nan"]:
        X[rng.random(X.shape) < 0.15] = np.nan
    if s["task"] == "regression":
        y = signal
    elif s["task"] == "binary":
        y = (signal > np.median(signal)).astype(int)
    else:
        y = np.digitize(signal, np.quantile(signal, [0.33, 0.66]))
    weight = rng.uniform(0.2, 3.0, n) if s["weights"] else None
    fit, valid = slice(0, 120), slice(120, n)
    return X, y, weight, fit, valid


def _rows(X, s):
    return sp.csr_matrix(X) if s["sparse"] else X


def _as_matrix(values, n_rows):
    return np.asarray(values, dtype=np.float64).reshape(n_rows, -1)


def _check_additivity(model, rows, raw, atol):
    """predict_raw == the library's raw output, and SHAP values add up to it."""
    n = rows.shape[0]
    ours = predict_raw(model, rows, n_jobs=1)
    np.testing.assert_allclose(ours, _as_matrix(raw, n), rtol=0, atol=atol)
    phi = shap_values(model, rows, n_jobs=1)
    total = phi.sum(axis=-1).reshape(n, -1)
    np.testing.assert_allclose(total, ours, rtol=0, atol=atol)
    return phi


def _scale(raw):
    return max(1.0, float(np.max(np.abs(raw))))


@SETTINGS
@given(scenarios())
def test_xgboost(s):
    xgb = pytest.importorskip("xgboost")
    X, y, weight, fit, valid = _data(s)
    # half of the models read NaN as missing, half a sentinel (their missing=)
    missing = np.nan if s["seed"] % 2 else -7.0
    X = np.where(np.isnan(X), missing, X)
    params = dict(n_estimators=12, max_depth=3, learning_rate=0.5, n_jobs=1, missing=missing)
    if s["categorical"]:
        params.update(enable_categorical=True,
                      feature_types=["c"] + ["q"] * (s["n_features"] - 1))
    cls = xgb.XGBRegressor if s["task"] == "regression" else xgb.XGBClassifier
    fit_kwargs = {}
    if s["early_stopping"]:
        params["early_stopping_rounds"] = 2
        fit_kwargs = dict(eval_set=[(_rows(X[valid], s), y[valid])], verbose=False)
    model = cls(**params).fit(_rows(X[fit], s), y[fit],
                              sample_weight=None if weight is None else weight[fit], **fit_kwargs)
    rows = _rows(X, s)
    raw = model.predict(rows, output_margin=True)
    atol = 1e-4 * _scale(raw)  # XGBoost sums in float32
    phi = _check_additivity(model, rows, raw, atol)
    dmatrix = xgb.DMatrix(rows, missing=missing, enable_categorical=s["categorical"],
                          feature_types=params.get("feature_types"))
    n_rounds = to_ensemble(model).info["n_rounds"]
    theirs = model.get_booster().predict(dmatrix, pred_contribs=True,
                                         iteration_range=(0, n_rounds))
    np.testing.assert_allclose(phi, theirs, rtol=0, atol=atol)


@SETTINGS
@given(scenarios())
def test_lightgbm(s):
    lgb = pytest.importorskip("lightgbm")
    X, y, weight, fit, valid = _data(s)
    params = dict(n_estimators=12, num_leaves=6, min_child_samples=5, learning_rate=0.5,
                  n_jobs=1, verbose=-1)
    cls = lgb.LGBMRegressor if s["task"] == "regression" else lgb.LGBMClassifier
    fit_kwargs = dict(categorical_feature=[0] if s["categorical"] else "auto")
    if s["early_stopping"]:
        fit_kwargs.update(eval_set=[(_rows(X[valid], s), y[valid])],
                          callbacks=[lgb.early_stopping(2, verbose=False)])
    model = cls(**params).fit(_rows(X[fit], s), y[fit],
                              sample_weight=None if weight is None else weight[fit], **fit_kwargs)
    rows = _rows(X, s)
    raw = model.predict(rows, raw_score=True)
    atol = 1e-9 * _scale(raw)
    phi = _check_additivity(model, rows, raw, atol)
    theirs = model.predict(rows, pred_contrib=True)
    if isinstance(theirs, list):  # sparse input, multiclass: one matrix per class
        theirs = np.stack([part.toarray() for part in theirs], axis=1)
    elif sp.issparse(theirs):
        theirs = theirs.toarray()
    np.testing.assert_allclose(phi, np.asarray(theirs).reshape(phi.shape), rtol=0, atol=atol)


@SETTINGS
@given(scenarios())
def test_catboost(s):
    catboost = pytest.importorskip("catboost")
    pd = pytest.importorskip("pandas")
    X, y, weight, fit, valid = _data(s)
    categorical = s["categorical"] and not s["sparse"]
    params = dict(iterations=10, depth=3, learning_rate=0.5, verbose=0, thread_count=1,
                  random_seed=0, allow_writing_files=False)
    if s["task"] == "multiclass":
        params["loss_function"] = "MultiClass"
    cls = catboost.CatBoostRegressor if s["task"] == "regression" else catboost.CatBoostClassifier

    def pool(part):
        if categorical:  # one-hot splits on integer codes (CatBoost rejects NaN categories)
            frame = pd.DataFrame(X[part]).rename(columns=str)
            frame["0"] = np.nan_to_num(frame["0"]).astype(int)
            return catboost.Pool(frame, None if part is None else y[part], cat_features=["0"])
        return catboost.Pool(_rows(X[part], s), y[part])

    if categorical:
        X[:, 0] = np.nan_to_num(X[:, 0])
        params["one_hot_max_size"] = 10
    fit_kwargs = dict(eval_set=pool(valid), early_stopping_rounds=2) if s["early_stopping"] \
        else {}
    train = pool(fit)
    if weight is not None:
        train.set_weight(weight[fit])
    model = cls(**params).fit(train, **fit_kwargs)
    everything = pool(slice(None))
    raw = model.predict(everything, prediction_type="RawFormulaVal")
    rows = X if categorical else _rows(X, s)
    atol = 1e-6 * _scale(raw)
    phi = _check_additivity(model, rows, raw, atol)
    theirs = model.get_feature_importance(data=everything, type="ShapValues")
    np.testing.assert_allclose(phi, theirs.reshape(phi.shape), rtol=0, atol=1e-5 * _scale(raw))


@SETTINGS
@given(scenarios(), st.sampled_from(["tree", "forest", "boosting", "hist"]))
def test_sklearn(s, kind):
    from sklearn import ensemble, tree

    X, y, weight, fit, valid = _data(s)
    classify = s["task"] != "regression"
    if kind == "hist" and s["sparse"]:
        kind = "boosting"  # HistGradientBoosting does not take sparse X
    if kind == "boosting":
        X = np.nan_to_num(X)  # GradientBoosting does not take NaN
    if kind == "tree":
        model = (tree.DecisionTreeClassifier if classify else tree.DecisionTreeRegressor)(
            max_depth=4, random_state=0)
    elif kind == "forest":
        model = (ensemble.RandomForestClassifier if classify else ensemble.RandomForestRegressor)(
            n_estimators=4, max_depth=3, random_state=0)
    elif kind == "boosting":
        cls = ensemble.GradientBoostingClassifier if classify else ensemble.GradientBoostingRegressor
        model = cls(n_estimators=8, max_depth=2, random_state=0,
                    n_iter_no_change=2 if s["early_stopping"] else None)
    else:
        cls = (ensemble.HistGradientBoostingClassifier if classify
               else ensemble.HistGradientBoostingRegressor)
        model = cls(max_iter=8, max_depth=3, random_state=0,
                    early_stopping=s["early_stopping"], validation_fraction=0.25,
                    n_iter_no_change=2,
                    categorical_features=[0] if s["categorical"] else None)
    model.fit(_rows(X[:N_ROWS], s), y, sample_weight=weight)
    rows = _rows(X, s)
    if kind in ("tree", "forest"):
        raw = model.predict_proba(rows) if classify else model.predict(rows)
    else:
        raw = model.decision_function(rows) if classify else model.predict(rows)
    phi = _check_additivity(model, rows, raw, 1e-9 * _scale(raw))
    ensemble_ = to_ensemble(model)
    dense = rows.toarray() if s["sparse"] else rows
    for i in (0, 1):
        exact = reference.semivalue(ensemble_, dense[i])
        ours = phi[i].reshape(ensemble_.n_outputs, -1)[:, :-1]
        np.testing.assert_allclose(ours, exact, rtol=0, atol=1e-9 * _scale(raw))
