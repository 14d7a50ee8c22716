"""R^2 shares of every output of a multi-output regressor (issue 32, part 3).

``r2_decomposition(model, X, Y)`` with Y of shape (n_rows, n_outputs) returns
one R2Decomposition per output. Output k is checked against the brute-force
reference of tests/test_r2_decomposition.py run on output k alone (its trees
or leaf-vector column, its base value, Y[:, k]), never against the package's
own per-output split, and its score against ``r2_score`` of the model's own
predictions of that output.
"""
import numpy as np
import pytest
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor
from sklearn.metrics import r2_score
from sklearn.tree import DecisionTreeRegressor

import reference
from sklearn_r2shap import (ShapleyR2Importance, UndefinedScoreError, UnsupportedModelError,
                            r2_decomposition)
from sklearn_r2shap import to_ensemble
from test_r2_decomposition import reference_decomposition

ATOL = 1e-10


def make_data(seed=0, n=60, p=4, nan_fraction=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)).round(2)
    Y = np.column_stack([
        X[:, 0] + 2.0 * (X[:, 1] > 0) + 0.5 * rng.normal(size=n),
        X[:, 2] * X[:, 3] - X[:, 1] + 0.3 * rng.normal(size=n),
        np.sin(2 * X[:, 3]) + 0.2 * rng.normal(size=n),
    ])
    if nan_fraction:
        X[rng.random(size=X.shape) < nan_fraction] = np.nan
    return X, Y


def _decision_tree():
    X, Y = make_data(0, nan_fraction=0.15)
    return DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, Y), X, Y, None


def _random_forest_weighted():
    X, Y = make_data(1)
    w = np.linspace(0.2, 2.0, len(X))
    model = RandomForestRegressor(n_estimators=4, max_depth=3, random_state=0)
    return model.fit(X, Y, sample_weight=w), X, Y, w


def _extra_trees_heldout():
    X, Y = make_data(2)
    model = ExtraTreesRegressor(n_estimators=3, max_depth=3, random_state=0).fit(X[:40], Y[:40])
    return model, X[40:], Y[40:], None


def _xgboost(covers=False, **params):
    xgb = pytest.importorskip("xgboost")
    if covers and tuple(int(v) for v in xgb.__version__.split(".")[:2]) < (3, 2):
        pytest.skip(f"XGBoost {xgb.__version__} saves no hessian sums for vector leaves "
                    "(refused by name: test_adapter_xgboost.py)")
    X, Y = make_data(3, nan_fraction=0.1)
    model = xgb.XGBRegressor(n_estimators=4, max_depth=3, learning_rate=0.5, tree_method="hist",
                             **params)
    return model.fit(X, Y), X, Y, None


def _catboost(grow_policy):
    catboost = pytest.importorskip("catboost")
    X, Y = make_data(4, nan_fraction=0.1)
    model = catboost.CatBoostRegressor(
        loss_function="MultiRMSE", iterations=4, depth=3, learning_rate=0.5,
        grow_policy=grow_policy, verbose=0, allow_writing_files=False, thread_count=1,
        random_seed=0)
    return model.fit(X, Y), X, Y, None


CASES = {
    "decision-tree-nan": _decision_tree,
    "random-forest-weighted": _random_forest_weighted,
    "extra-trees-heldout": _extra_trees_heldout,
    "xgboost-vector-leaf": lambda: _xgboost(multi_strategy="multi_output_tree", covers=True),
    "xgboost-one-output-per-tree": lambda: _xgboost(multi_strategy="one_output_per_tree"),
    "catboost-multirmse-symmetric": lambda: _catboost("SymmetricTree"),
    "catboost-multirmse-depthwise": lambda: _catboost("Depthwise"),
}
FORESTS = {"random-forest-weighted", "extra-trees-heldout"}
# XGBoost predicts in float32: its own R^2 agrees to float32 precision only.
FLOAT32_PREDICT = {"xgboost-vector-leaf", "xgboost-one-output-per-tree"}

_cache = {}


def case(name):
    if name not in _cache:
        model, X, Y, w = CASES[name]()
        results = r2_decomposition(model, X, Y, sample_weight=w, return_local=True, n_jobs=1)
        _cache[name] = (model, X, Y, w, results)
    return _cache[name]


def _prediction(model, X):
    prediction = np.asarray(model.predict(X), dtype=np.float64)
    return prediction.reshape(len(X), -1)


@pytest.mark.parametrize("name", CASES)
def test_each_output_matches_brute_force(name):
    model, X, Y, w, results = case(name)
    ensemble = to_ensemble(model)
    assert ensemble.n_outputs == Y.shape[1] == 3
    assert isinstance(results, list) and len(results) == 3
    for k, result in enumerate(results):
        local = reference_decomposition(ensemble, X, Y[:, k], w, output=k)
        assert np.abs(local.sum(axis=0)).max() > 1e-3  # not trivially zero
        np.testing.assert_allclose(result.shares, local.sum(axis=0), rtol=0, atol=ATOL)
        np.testing.assert_allclose(result.local, local, rtol=0, atol=ATOL)
        assert result.output == k
        assert result.mode == ("symmetric" if name in FORESTS else "sequential")
        assert result.score_name == "r2" and result.n_rows == len(X)


@pytest.mark.parametrize("name", CASES)
def test_each_output_adds_up_to_its_r2(name):
    """shares + unattributed == r2_score of that output (the model's own predict)."""
    model, X, Y, w, results = case(name)
    prediction = _prediction(model, X)
    ensemble = to_ensemble(model)
    exact = reference.predict(ensemble, X)  # float64 plain-Python routing
    tol = 1e-5 if name in FLOAT32_PREDICT else ATOL
    for k, result in enumerate(results):
        r2 = r2_score(Y[:, k], prediction[:, k], sample_weight=w)
        assert abs(result.score - r2) < tol
        assert abs(result.score - r2_score(Y[:, k], exact[:, k], sample_weight=w)) < ATOL
        assert abs(result.shares.sum() + result.unattributed - result.score) < 1e-12
        if name not in FORESTS:
            # in sample, boosting and single trees lose (almost) nothing
            assert abs(result.unattributed) < 0.05
    assert len({round(r.score, 6) for r in results}) == 3  # three different outputs


def test_outputs_differ_and_name_the_output():
    _, _, _, _, results = case("decision-tree-nan")
    assert not np.allclose(results[0].shares, results[1].shares)
    assert "output 1" in repr(results[1])
    assert results[0].model_name == "DecisionTreeRegressor"


def test_results_do_not_depend_on_n_jobs():
    model, X, Y, w, _ = case("random-forest-weighted")
    one = r2_decomposition(model, X, Y, sample_weight=w, n_jobs=1)
    two = r2_decomposition(model, X, Y, sample_weight=w, n_jobs=2)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a.shares, b.shares)
        np.testing.assert_array_equal(a.std_errors, b.std_errors)


def test_dataframe_target_and_same_rows_for_every_output():
    pd = pytest.importorskip("pandas")
    model, X, Y, _, results = case("decision-tree-nan")
    frame = pd.DataFrame(Y, columns=["a", "b", "c"])
    for a, b in zip(r2_decomposition(model, X, frame), results):
        np.testing.assert_array_equal(a.shares, b.shares)
    sampled = r2_decomposition(model, X, Y, max_samples=30)  # random_state=None
    assert [r.n_rows_sampled for r in sampled] == [30, 30, 30]
    # one draw for all outputs: as a seeded call of each output alone
    seeded = r2_decomposition(model, X, Y, max_samples=30, random_state=5)
    ensemble = to_ensemble(model)
    for k, result in enumerate(seeded):
        alone = r2_decomposition(ensemble.single_output(k), X, Y[:, k], max_samples=30,
                                 random_state=5)
        np.testing.assert_array_equal(result.shares, alone.shares)


def test_single_output_ensemble_predicts_its_column():
    for name in ("xgboost-one-output-per-tree", "catboost-multirmse-symmetric",
                 "random-forest-weighted"):
        model, X, _, _, _ = case(name)
        ensemble = to_ensemble(model)
        exact = reference.predict(ensemble, X[:10])
        for k in range(3):
            single = ensemble.single_output(k)
            assert single.n_outputs == single.n_values == 1
            np.testing.assert_allclose(reference.predict(single, X[:10])[:, 0], exact[:, k],
                                       rtol=0, atol=1e-12)


def test_groups_per_output():
    model, X, Y, _, results = case("decision-tree-nan")
    grouped = r2_decomposition(model, X, Y, feature_groups={"g": [0, 1]})
    for a, b in zip(grouped, results):
        assert list(a.feature_names) == ["g", "x2", "x3"]
        assert abs(a.shares.sum() - b.shares.sum()) < 1e-10  # the total is the same
        assert a.output == b.output


def test_dask_equals_in_memory():
    da = pytest.importorskip("dask.array")
    model, X, Y, w, results = case("random-forest-weighted")
    got = r2_decomposition(model, da.from_array(X, chunks=25), da.from_array(Y, chunks=(25, 3)),
                           sample_weight=w)
    for a, b in zip(got, results):
        np.testing.assert_allclose(a.shares, b.shares, rtol=0, atol=1e-12)
        assert a.output == b.output


@pytest.mark.parametrize("bad", ["1d", "columns"])
def test_target_of_wrong_shape_raises(bad):
    model, X, Y, _, _ = case("decision-tree-nan")
    y = Y[:, 0] if bad == "1d" else Y[:, :2]
    with pytest.raises(ValueError, match=r"3 outputs: y must have shape \(n_rows, 3\)"):
        r2_decomposition(model, X, y)


def test_constant_output_names_it():
    model, X, Y, _, _ = case("decision-tree-nan")
    Y = Y.copy()
    Y[:, 2] = 1.0
    with pytest.raises(UndefinedScoreError, match="Output 2 of Y: y is constant"):
        r2_decomposition(model, X, Y)


def test_estimators_refuse_with_the_alternative():
    model, X, Y, _, _ = case("decision-tree-nan")
    selector = ShapleyR2Importance(DecisionTreeRegressor(max_depth=3), method="qshap")
    with pytest.raises(UnsupportedModelError, match="r2_decomposition.*one per output"):
        selector.fit(np.nan_to_num(X), Y)


def test_multilabel_classifier_is_refused():
    xgb = pytest.importorskip("xgboost")
    X, Y = make_data(5)
    labels = Y > np.median(Y, axis=0)
    for strategy in ("multi_output_tree", "one_output_per_tree"):
        model = xgb.XGBClassifier(n_estimators=2, max_depth=2, tree_method="hist",
                                  multi_strategy=strategy).fit(X, labels)
        # XGBoost before 3.2 saves no hessian sums for vector leaves: refused for that
        with pytest.raises(UnsupportedModelError, match="multi-label classifier|hessian sums"):
            r2_decomposition(model, X, labels)
