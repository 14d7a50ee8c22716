"""TreeExplainer: the prepared explainer with shap's interface.

Checked against the functions (the same values; bit for bit when they are
given the explainer), against shap's own TreeExplainer (shapes, expected
value, values), across batch splits, threads and pickling, after a refit,
and for every argument of shap's that it refuses."""

import gc
import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import (GradientBoostingClassifier, GradientBoostingRegressor,
                              HistGradientBoostingRegressor, RandomForestClassifier,
                              RandomForestRegressor)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.tree import DecisionTreeRegressor

import sklearn_r2shap
from sklearn_r2shap import (TreeExplainer, expected_value, explain, saabas_values,
                            shap_interaction_values, shap_values)

xgboost = pytest.importorskip("xgboost")
lightgbm = pytest.importorskip("lightgbm")
catboost = pytest.importorskip("catboost")


def _regression(n=400, p=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[rng.random((n, p)) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) + np.sin(np.nan_to_num(X[:, 1])) * np.nan_to_num(X[:, 2]) + (
        0.1 * rng.normal(size=n))
    return X, y


def _models():
    X, y = _regression()
    Xf = np.nan_to_num(X)
    labels = (y > np.median(y)).astype(int) + (y > np.quantile(y, 0.8))
    return {
        "tree": (DecisionTreeRegressor(max_depth=5, random_state=0).fit(Xf, y), Xf),
        "forest": (RandomForestRegressor(n_estimators=8, max_depth=7, random_state=0).fit(Xf, y),
                   Xf),
        "forest-classifier": (RandomForestClassifier(n_estimators=5, max_depth=5, random_state=0)
                              .fit(Xf, labels > 0), Xf),
        "gb-multiclass": (GradientBoostingClassifier(n_estimators=10, max_depth=3,
                                                     random_state=0).fit(Xf, labels), Xf),
        "hgb": (HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(X, y), X),
        "xgboost": (xgboost.XGBRegressor(n_estimators=30, max_depth=6, n_jobs=1).fit(X, y), X),
        "xgboost-binary": (xgboost.XGBClassifier(n_estimators=20, max_depth=4, n_jobs=1)
                           .fit(X, labels > 0), X),
        "xgboost-multiclass": (xgboost.XGBClassifier(n_estimators=10, max_depth=3, n_jobs=1)
                               .fit(X, labels), X),
        "lightgbm": (lightgbm.LGBMRegressor(n_estimators=30, num_leaves=31, verbose=-1,
                                            n_jobs=1).fit(X, y), X),
        "lightgbm-multiclass": (lightgbm.LGBMClassifier(n_estimators=10, verbose=-1, n_jobs=1)
                                .fit(X, labels), X),
        "catboost": (catboost.CatBoostRegressor(iterations=30, depth=5, verbose=False,
                                                thread_count=1, random_seed=0).fit(Xf, y), Xf),
        "catboost-multiclass": (catboost.CatBoostClassifier(
            iterations=10, depth=4, verbose=False, thread_count=1, random_seed=0,
            loss_function="MultiClass").fit(Xf, labels), Xf),
    }


MODELS = _models()


@pytest.mark.parametrize("name", MODELS)
def test_explainer_against_the_functions(name):
    """The function given the explainer: the explainer's bits; given the model:
    the same values to rounding (tables against quadrature); any split of the
    rows and any n_jobs: the same bits; a row sums to the raw prediction."""
    model, X = MODELS[name]
    explainer = TreeExplainer(model, n_jobs=2)
    n_outputs = explainer.ensemble.n_outputs
    got = explainer.shap_values(X)
    assert got.shape == ((len(X), X.shape[1]) if n_outputs == 1 else
                         (len(X), X.shape[1], n_outputs))
    phi = shap_values(explainer, X)
    np.testing.assert_array_equal(got, phi[:, :-1] if n_outputs == 1 else
                                  phi[:, :, :-1].transpose(0, 2, 1))
    function = shap_values(model, X)
    scale = np.max(np.abs(function))
    np.testing.assert_allclose(phi, function, rtol=0, atol=1e-12 * scale)
    # a row's values do not depend on its call: one row at a time, halves, 1 thread
    np.testing.assert_array_equal(
        np.concatenate([explainer.shap_values(X[:137]), explainer.shap_values(X[137:])]), got)
    for i in (0, 5, len(X) - 1):
        np.testing.assert_array_equal(explainer.shap_values(X[i]), got[i])
    for rows in (slice(3, 11), slice(10, 42), slice(40, 73), slice(100, 229)):  # few-row calls
        np.testing.assert_array_equal(explainer.shap_values(X[rows]), got[rows])
    np.testing.assert_array_equal(TreeExplainer(model, n_jobs=1).shap_values(X), got)
    # additivity: expected value + values = the raw prediction
    raw = sklearn_r2shap.predict_raw(model, X)
    total = got.sum(axis=1) + explainer.expected_value
    np.testing.assert_allclose(total, raw[:, 0] if n_outputs == 1 else raw,
                               atol=1e-9 * max(1.0, np.max(np.abs(raw))))
    np.testing.assert_array_equal(np.atleast_1d(explainer.expected_value),
                                  expected_value(model))


@pytest.mark.parametrize("name", ["forest", "xgboost", "lightgbm-multiclass", "catboost"])
def test_interaction_values_against_the_function(name):
    model, X = MODELS[name]
    X = X[:60]
    explainer = TreeExplainer(model)
    got = explainer.shap_interaction_values(X)
    function = shap_interaction_values(model, X)
    n_outputs = explainer.ensemble.n_outputs
    want = (function[:, :-1, :-1] if n_outputs == 1 else
            function[:, :, :-1, :-1].transpose(0, 2, 3, 1))
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.max(np.abs(want)))
    np.testing.assert_array_equal(
        _layout(shap_interaction_values(explainer, X), n_outputs), got)
    np.testing.assert_array_equal(
        np.concatenate([explainer.shap_interaction_values(X[:7]),
                        explainer.shap_interaction_values(X[7:])]), got)
    np.testing.assert_array_equal(explainer.shap_interaction_values(X[3]), got[3])
    # a matrix's rows sum to the SHAP values
    np.testing.assert_allclose(got.sum(axis=2), explainer.shap_values(X),
                               atol=1e-10 * np.max(np.abs(got)))


def _layout(phi, n_outputs):
    return phi[:, :-1, :-1] if n_outputs == 1 else phi[:, :, :-1, :-1].transpose(0, 2, 3, 1)


shap = pytest.importorskip("shap")


@pytest.mark.parametrize("name", ["forest", "forest-classifier", "xgboost",
                                  "xgboost-binary", "xgboost-multiclass", "lightgbm"])
def test_shapes_and_expected_value_of_shap(name):
    """shap's TreeExplainer on the same model: the same shapes, the same kind of
    expected value (a float for one output, one per class), the same values."""
    if name.startswith("xgboost"):
        # shap 0.49 cannot parse the vector base_score XGBoost 3.1 writes
        pytest.importorskip("shap", minversion="0.51")
    model, X = MODELS[name]
    X = X[:40]
    ours, theirs = TreeExplainer(model), shap.TreeExplainer(model)
    mine, want = ours.shap_values(X), np.asarray(theirs.shap_values(X, check_additivity=False))
    assert mine.shape == want.shape
    # XGBoost's and LightGBM's own float32 sums inside shap
    np.testing.assert_allclose(mine, want, atol=2e-5 * max(1.0, np.max(np.abs(want))))
    # one output: a float (shap gives a float, or for scikit-learn forests an array of one)
    if np.size(theirs.expected_value) == 1:
        assert isinstance(ours.expected_value, float)
    else:
        assert np.shape(ours.expected_value) == np.shape(theirs.expected_value)
    np.testing.assert_allclose(ours.expected_value, theirs.expected_value, rtol=1e-5, atol=1e-5)
    # one 1-D row: shap drops the row axis (its XGBoost path refuses 1-D rows)
    assert ours.shap_values(X[0]).shape == np.asarray(theirs.shap_values(X[:1]))[0].shape
    if name in ("forest", "xgboost"):
        inter = np.asarray(theirs.shap_interaction_values(X[:5]))
        np.testing.assert_allclose(ours.shap_interaction_values(X[:5]), inter,
                                   atol=2e-5 * max(1.0, np.max(np.abs(inter))))


def test_one_row_as_shap_reads_it():
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    model = GradientBoostingRegressor(n_estimators=20, random_state=0).fit(X, y)
    explainer = TreeExplainer(model)
    rows = explainer.shap_values(X.iloc[:3])
    for row in (X.iloc[1], X.iloc[1].to_numpy(), X.iloc[1].tolist()):
        np.testing.assert_array_equal(explainer.shap_values(row), rows[1])
    assert explainer.shap_interaction_values(X.iloc[1]).shape == (10, 10)
    one = explainer(X.iloc[1])
    assert one.values.shape == (10,)
    np.testing.assert_array_equal(one.values, rows[1])


def test_call_gives_an_explanation_with_names():
    X, y = load_iris(return_X_y=True, as_frame=True)
    model = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    explainer = TreeExplainer(model)
    e = explainer(X.iloc[:10], interactions=True)
    want = explain(model, X.iloc[:10], interactions=True)
    np.testing.assert_allclose(e.values, want.values, atol=1e-13)
    assert e.values.shape == (10, 4, 3) and e.interaction_values.shape == (10, 4, 4, 3)
    assert list(e.feature_names) == list(X.columns)
    renamed = TreeExplainer(model, feature_names=list("abcd"))(X.iloc[:2])
    assert list(renamed.feature_names) == list("abcd")
    assert isinstance(e.to_shap(), shap.Explanation)
    with pytest.raises(ValueError, match="feature_names has 3 names for 4"):
        TreeExplainer(model, feature_names=list("abc"))(X.iloc[:2])


def test_background_data_is_the_interventional_game():
    X, y = load_diabetes(return_X_y=True)
    model = RandomForestRegressor(n_estimators=5, max_depth=5, random_state=0).fit(X, y)
    background = X[::10]
    explainer = TreeExplainer(model, background)
    assert explainer.feature_perturbation == "interventional"
    np.testing.assert_allclose(explainer.shap_values(X[:20]),
                               shap_values(model, X[:20], background=background)[:, :-1],
                               rtol=0, atol=1e-10)
    assert explainer.expected_value == pytest.approx(model.predict(background).mean())
    # the background's summary is kept: the same bits at every call, any split
    np.testing.assert_array_equal(
        np.concatenate([explainer.shap_values(X[:7]), explainer.shap_values(X[7:20])]),
        explainer.shap_values(X[:20]))


def test_groups_and_saabas():
    X, y = load_diabetes(return_X_y=True)
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    groups = {"blood": [4, 5, 6, 7, 8, 9]}
    grouped = TreeExplainer(model, feature_groups=groups)
    np.testing.assert_allclose(grouped.shap_values(X[:5]),
                               shap_values(model, X[:5], feature_groups=groups)[:, :-1], atol=1e-10)
    np.testing.assert_array_equal(  # the grouped game is prepared too
        np.concatenate([grouped.shap_values(X[:2]), grouped.shap_values(X[2:300])]),
        grouped.shap_values(X[:300]))
    np.testing.assert_array_equal(TreeExplainer(model).shap_values(X[:5], approximate=True),
                                  saabas_values(model, X[:5])[:, :-1])


def test_pipeline_is_explained_in_its_last_step_space():
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    pipeline = make_pipeline(StandardScaler(), GradientBoostingRegressor(
        n_estimators=10, random_state=0)).fit(X, y)
    explainer = TreeExplainer(pipeline)
    np.testing.assert_allclose(explainer.shap_values(X.iloc[:5]),
                               shap_values(pipeline, X.iloc[:5])[:, :-1], atol=1e-10)
    assert list(explainer(X.iloc[:2]).feature_names) == list(X.columns)


def test_pickled_explainer_gives_the_same_bits():
    model, X = MODELS["xgboost"]
    explainer = TreeExplainer(model)
    before = explainer.shap_values(X)
    again = pickle.loads(pickle.dumps(explainer))
    np.testing.assert_array_equal(again.shap_values(X), before)
    for i in (0, 17):  # still prepared: a row's values do not depend on its call
        np.testing.assert_array_equal(again.shap_values(X[i]), before[i])
    np.testing.assert_array_equal(again.shap_interaction_values(X[:4]),
                                  explainer.shap_interaction_values(X[:4]))
    assert again.expected_value == explainer.expected_value


@pytest.mark.parametrize("make", [
    lambda: DecisionTreeRegressor(max_depth=3, random_state=0),
    lambda: xgboost.XGBRegressor(n_estimators=5, max_depth=3),
    lambda: lightgbm.LGBMRegressor(n_estimators=5, verbose=-1),
    lambda: make_pipeline(StandardScaler(), DecisionTreeRegressor(max_depth=3)),
], ids=["sklearn", "xgboost", "lightgbm", "pipeline"])
def test_refitted_model_is_refused(make):
    X, y = _regression(200, 4, seed=1)
    X = np.nan_to_num(X)
    model = make().fit(X, y)
    explainer = TreeExplainer(model)
    explainer.shap_values(X[:3])
    copy = pickle.loads(pickle.dumps(explainer))  # the snapshot survives pickling
    copy.shap_values(X[:3])
    model.fit(X, -y)
    for call in (explainer.shap_values, explainer.shap_interaction_values, explainer,
                 lambda rows: shap_values(explainer, rows)):
        with pytest.raises(ValueError, match="fitted again after this TreeExplainer"):
            call(X[:3])
    copy.model.fit(X, -y)
    with pytest.raises(ValueError, match="fitted again"):
        copy.shap_values(X[:3])
    np.testing.assert_allclose(TreeExplainer(model).shap_values(X[:3]),
                               shap_values(model, X[:3])[:, :-1], atol=1e-10)


def test_bad_arguments_are_named():
    model, X = MODELS["tree"]
    for output in ("probability", "log_loss", "predict"):
        with pytest.raises(ValueError, match=f"model_output='{output}' is not supported"):
            TreeExplainer(model, model_output=output)
    with pytest.raises(ValueError, match="feature_perturbation must be one of"):
        TreeExplainer(model, feature_perturbation="correlation_dependent")
    with pytest.raises(ValueError, match="needs background rows"):
        TreeExplainer(model, feature_perturbation="interventional")
    with pytest.raises(ValueError, match="uses no data"):
        TreeExplainer(model, X[:10], feature_perturbation="tree_path_dependent")
    explainer = TreeExplainer(model)
    with pytest.raises(ValueError, match="y is used by shap"):
        explainer.shap_values(X[:2], y=np.zeros(2))
    with pytest.raises(ValueError, match="tree_limit is not supported"):
        explainer.shap_values(X[:2], tree_limit=3)
    with pytest.raises(ValueError, match="path-dependent game"):
        TreeExplainer(model, X[:10]).shap_interaction_values(X[:2])
    with pytest.raises(ValueError, match="Saabas"):
        TreeExplainer(model, X[:10]).shap_values(X[:2], approximate=True)
    with pytest.raises(TypeError, match="already a TreeExplainer"):
        TreeExplainer(explainer)
    with pytest.raises(ValueError, match="X has 3 features"):
        explainer.shap_values(X[:2, :3])
    with pytest.raises(sklearn_r2shap.UnsupportedModelError, match="not a supported scikit-learn model"):
        TreeExplainer(StandardScaler().fit(X))
    assert "TreeExplainer(DecisionTreeRegressor, tree_path_dependent" in repr(explainer)


def test_tables_are_kept_between_calls():
    """The second call reuses the first call's tables (the same array objects)."""
    model, X = MODELS["xgboost"]
    explainer = TreeExplainer(model)
    explainer.shap_values(X[:1])
    games = [v for k, v in explainer.ensemble._cache.items() if k[0] == "semivalue game"]
    assert len(games) == 1
    _, first = games[0]._kept["tables"]
    explainer.shap_values(X[:500])
    explainer.shap_values(X[:3])
    _, later = games[0]._kept["tables"]
    assert later[0] is first[0] and first[0].size > 0


def test_every_function_takes_the_explainer():
    """Functions of the scores and the cost estimate read the explainer's
    ensemble (no second reading of the model) and give the model's numbers."""
    X, y = load_diabetes(return_X_y=True)
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
    explainer = TreeExplainer(model)
    ours = sklearn_r2shap.r2_decomposition(explainer, X, y)
    want = sklearn_r2shap.r2_decomposition(model, X, y)
    np.testing.assert_allclose(ours.shares, want.shares, rtol=0, atol=1e-12)
    assert ours.score == pytest.approx(want.score, abs=1e-12)
    np.testing.assert_array_equal(expected_value(explainer), expected_value(model))
    np.testing.assert_array_equal(sklearn_r2shap.predict_raw(explainer, X[:5]),
                                  sklearn_r2shap.predict_raw(model, X[:5]))
    assert sklearn_r2shap.estimate_cost(explainer, X).exact_seconds > 0


def _ensembles_alive():
    return sum(isinstance(o, sklearn_r2shap.TreeEnsemble) for o in gc.get_objects())


@pytest.mark.parametrize("call", [
    lambda model, X: shap_values(model, X),
    lambda model, X: shap_values(model, X, feature_groups={"first": [0, 1]}),
    lambda model, X: shap_interaction_values(model, X),
    lambda model, X: sklearn_r2shap.r2_decomposition(model, X, X[:, 0]),
    lambda model, X: explain(model, X),
], ids=["shap_values", "feature_groups", "interactions", "r2_decomposition", "explain"])
def test_a_model_read_for_one_call_is_freed_with_it(call):
    """Without a garbage collection: a call from the model leaves no ensemble
    behind (its plans refer to it from its cache, a cycle that the call
    breaks), so that a loop of one-row calls reuses its memory; an ensemble or
    explainer given by the caller keeps its plans."""
    model, X = MODELS["forest"]
    gc.collect()
    before = _ensembles_alive()
    gc.disable()
    try:
        result = call(model, X[:3])
        assert _ensembles_alive() - before <= (1 if isinstance(result, sklearn_r2shap.Explanation)
                                               else 0)
        ensemble = sklearn_r2shap.to_ensemble(model)
        shap_values(ensemble, X[:3])
        explainer = TreeExplainer(model)
        explainer.shap_values(X[:3])
        assert any(k[0] == "semivalue game" for k in ensemble._cache)
        assert any(k[0] == "semivalue game" for k in explainer.ensemble._cache)
    finally:
        gc.enable()
