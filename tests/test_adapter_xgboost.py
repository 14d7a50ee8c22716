"""XGBoost adapter: predictions, SHAP and Saabas against XGBoost itself and
against subset enumeration (tests/reference.py)."""
import json

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")
pd = pytest.importorskip("pandas")

import reference  # noqa: E402
from sklearn_r2shap import (  # noqa: E402
    UnsupportedModelError,
    banzhaf_values,
    beta_shapley_values,
    predict_raw,
    saabas_values,
    shap_interaction_values,
    shap_values,
    to_ensemble,
)
from sklearn_r2shap._model import _xgboost  # noqa: E402

N_ROWS, N_FEATURES = 300, 4


def make_data(seed=0, nan_fraction=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, N_FEATURES))
    y = X[:, 0] + X[:, 1] ** 2 - X[:, 2] * X[:, 3] + 0.3 * rng.normal(size=N_ROWS)
    X[rng.random(X.shape) < nan_fraction] = np.nan
    X[:5, :] = np.nan  # rows routed only by default directions
    X[5, 1:] = np.nan
    return X, y


def make_categorical(seed=0):
    """A category column (8 levels, NaN in 10% of rows) and a numeric column."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(0, 8, N_ROWS)
    x = rng.normal(size=N_ROWS)
    y = np.array([3.0, -1, 2, 0, 5, -4, 1, 1])[codes] + x
    codes = codes.astype(np.float64)
    codes[rng.random(N_ROWS) < 0.1] = np.nan
    codes[:3] = np.nan
    frame = pd.DataFrame({"c": pd.Categorical.from_codes(
        np.where(np.isnan(codes), -1, codes).astype(int), categories=list("abcdefgh")), "x": x})
    return frame, np.column_stack([codes, x]), y


class Case:
    """A fitted model, the rows we explain, and how XGBoost predicts them."""

    def __init__(self, model, X, X_library=None, iteration_range=(0, 0)):
        self.model = model
        self.X = X
        self.X_library = X if X_library is None else X_library
        self.booster = model if isinstance(model, xgb.Booster) else model.get_booster()
        self.iteration_range = iteration_range

    def dmatrix(self, rows=slice(None)):
        data = self.X_library[rows]
        if isinstance(data, pd.DataFrame):
            return xgb.DMatrix(data, enable_categorical=True)
        types = self.booster.feature_types
        return xgb.DMatrix(data, feature_types=types, enable_categorical=types is not None)

    def library(self, rows=slice(None), **kwargs):
        out = self.booster.predict(self.dmatrix(rows), iteration_range=self.iteration_range,
                                   strict_shape=True, **kwargs)
        return np.asarray(out, dtype=np.float64)

    def margin(self, rows=slice(None)):
        return self.library(rows, output_margin=True)


def _fit_case(name):
    X, y = make_data()
    small = dict(n_estimators=12, max_depth=3, learning_rate=0.3)
    if name == "regressor":
        return Case(xgb.XGBRegressor(**small).fit(X, y), X)
    if name == "binary":
        return Case(xgb.XGBClassifier(**small).fit(X, y > 1), X)
    if name == "multiclass":
        return Case(xgb.XGBClassifier(**small).fit(X, np.digitize(y, [0, 1, 2])), X)
    if name == "rf_regressor":
        return Case(xgb.XGBRFRegressor(n_estimators=6, max_depth=3).fit(X, y), X)
    if name == "rf_classifier":
        return Case(xgb.XGBRFClassifier(n_estimators=6, max_depth=3).fit(X, y > 1), X)
    if name == "boosted_forest_multiclass":
        params = dict(max_depth=2, num_parallel_tree=2, num_class=3, objective="multi:softprob")
        labels = np.digitize(y, [0, 1])
        return Case(xgb.train(params, xgb.DMatrix(X, label=labels), 3), X)
    if name == "dart":
        model = xgb.XGBRegressor(booster="dart", rate_drop=0.4, skip_drop=0.0, **small)
        return Case(model.fit(X, y), X)
    if name == "poisson_booster":
        counts = np.random.default_rng(1).poisson(np.exp(np.clip(y, -2, 2) / 2))
        params = dict(objective="count:poisson", max_depth=3)
        return Case(xgb.train(params, xgb.DMatrix(X, label=counts), 8), X)
    if name == "multi_target":
        return Case(xgb.XGBRegressor(**small).fit(X, np.column_stack([y, 3 * np.sin(y) + 5])), X)
    if name.startswith("vector_leaf"):
        # one tree per round whose leaves hold a vector, one value per target
        vector = dict(multi_strategy="multi_output_tree", tree_method="hist", **small)
        targets = np.column_stack([y, 3 * np.sin(y) + 5, X[:, 2]])
        targets[np.isnan(targets)] = 0.0
        if name == "vector_leaf":
            return Case(xgb.XGBRegressor(**vector).fit(X, targets), X)
        if name == "vector_leaf_parallel":
            model = xgb.XGBRegressor(num_parallel_tree=2, subsample=0.8, **vector)
            return Case(model.fit(X, targets), X)
        if name == "vector_leaf_multilabel":
            labels = targets > np.median(targets, axis=0)
            return Case(xgb.XGBClassifier(**vector).fit(X, labels), X)
    if name == "ranker":
        qid = np.repeat(np.arange(10), N_ROWS // 10)
        model = xgb.XGBRanker(n_estimators=6, max_depth=3)
        return Case(model.fit(X, np.digitize(y, [0, 1, 2]), qid=qid), X)
    if name == "pruned_booster":
        d = xgb.DMatrix(X, label=y)
        booster = xgb.train(dict(max_depth=4), d, 3)
        prune = dict(process_type="update", updater="prune", gamma=30.0, max_depth=4)
        with pytest.warns(UserWarning):
            return Case(xgb.train(prune, d, 3, xgb_model=booster), X)
    frame, codes, yc = make_categorical()
    if name in ("categorical", "categorical_onehot"):
        model = xgb.XGBRegressor(
            enable_categorical=True, tree_method="hist", n_estimators=8, max_depth=3,
            max_cat_to_onehot=1 if name == "categorical" else 16,
        )
        return Case(model.fit(frame, yc), codes, frame)
    if name == "categorical_codes":
        d = xgb.DMatrix(codes, label=yc, feature_types=["c", "q"], enable_categorical=True)
        return Case(xgb.train(dict(max_depth=3, max_cat_to_onehot=1), d, 6), codes)
    raise KeyError(name)


ALL_CASES = [
    "regressor", "binary", "multiclass", "rf_regressor", "rf_classifier",
    "boosted_forest_multiclass", "dart", "poisson_booster", "multi_target", "ranker",
    "pruned_booster", "vector_leaf", "vector_leaf_parallel", "vector_leaf_multilabel",
    "categorical", "categorical_onehot", "categorical_codes",
]
_CACHE = {}


def skip_unless_vector_leaf_covers(xgb):
    """XGBoost before 3.2 saves vector-leaf trees without hessian sums (refused by
    name: test_adapter_xgboost.py::test_vector_leaf_without_covers_is_refused)."""
    if tuple(int(v) for v in xgb.__version__.split(".")[:2]) < (3, 2):
        pytest.skip(f"XGBoost {xgb.__version__} saves no hessian sums for vector leaves")


def get_case(name):
    if name.startswith("vector_leaf"):
        skip_unless_vector_leaf_covers(xgb)
    if name not in _CACHE:
        _CACHE[name] = _fit_case(name)
    return _CACHE[name]


@pytest.fixture(params=ALL_CASES)
def case(request):
    return get_case(request.param)


def close(actual, expected, rel):
    """XGBoost computes in float32: compare relative to the output's scale."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(actual, expected.reshape(np.shape(actual)), rtol=0,
                               atol=rel * scale)


# ---------------------------------------------------------------- predictions

def test_predict_matches_xgboost(case):
    ours = predict_raw(case.model, case.X)
    expected = case.margin()
    assert ours.shape == (len(case.X), expected.shape[1])
    close(ours, expected, 1e-6)
    # Independent plain-Python routing of the converted ensemble.
    ensemble = to_ensemble(case.model)
    rows = [0, 5, 7, 11, 42]
    close(reference.predict(ensemble, case.X[rows]), ours[rows], 1e-12)


def test_ensemble_metadata():
    regressor = to_ensemble(get_case("regressor").model)
    assert regressor.objective == "squared_error"
    assert regressor.model_type == "XGBRegressor"
    assert regressor.x_float32 and not regressor.averaging
    assert regressor.info["n_trees"] == regressor.n_trees == 12
    assert regressor.info["allow_nan"] is True
    assert regressor.feature_names is None

    binary = to_ensemble(get_case("binary").model)
    assert binary.objective == "binary:logistic" and binary.n_outputs == 1
    np.testing.assert_array_equal(binary.info["classes"], [False, True])

    multiclass = to_ensemble(get_case("multiclass").model)
    assert multiclass.objective == "multi:softprob"
    assert multiclass.n_outputs == 4 and multiclass.n_values == 1
    np.testing.assert_array_equal(multiclass.tree_output, np.tile(np.arange(4), 12))

    forest = to_ensemble(get_case("rf_regressor").model)
    assert forest.averaging and forest.n_trees == 6

    boosted_forest = to_ensemble(get_case("boosted_forest_multiclass").model)
    assert not boosted_forest.averaging and boosted_forest.n_trees == 18
    np.testing.assert_array_equal(boosted_forest.tree_output[:6], [0, 0, 1, 1, 2, 2])

    categorical = to_ensemble(get_case("categorical").model)
    assert list(categorical.feature_names) == ["c", "x"]
    assert categorical.info["feature_types"] == ["c", "float"]
    assert categorical.info["category_levels"] == {0: list("abcdefgh")}
    assert "category_levels" not in to_ensemble(get_case("categorical_codes").model).info
    assert to_ensemble(get_case("poisson_booster").model).objective == "count:poisson"

    # Pruning leaves deleted slots in XGBoost's arrays; the adapter drops them.
    pruned = get_case("pruned_booster").booster
    params = [t["tree_param"] for t in json.loads(bytes(pruned.save_raw("json")))[
        "learner"]["gradient_booster"]["model"]["trees"]]
    assert sum(int(p["num_deleted"]) for p in params) > 0
    assert to_ensemble(pruned).n_nodes == sum(
        int(p["num_nodes"]) - int(p["num_deleted"]) for p in params)


def test_thresholds_are_float32_and_strict():
    """A row exactly at a threshold goes right (x < t); a float64 row just
    below it rounds to the threshold in float32 and goes right too."""
    case = get_case("regressor")
    ensemble = to_ensemble(case.model)
    root = ensemble.tree_start[0]
    t = ensemble.threshold[root]
    assert np.float64(np.float32(t)) == t
    x = np.zeros((3, N_FEATURES))
    below32 = np.nextafter(np.float32(t), np.float32(-np.inf))
    x[:, ensemble.feature[root]] = [t, np.nextafter(t, -np.inf), below32]
    ours = [reference.route(ensemble, root, reference.prepare(ensemble, row)) for row in x]
    right, left = ensemble.children_right[root], ensemble.children_left[root]
    assert ours == [right, right, left]
    # XGBoost agrees: rows 0 and 1 share the first tree's leaf, row 2 does not.
    leaves = case.booster.predict(xgb.DMatrix(x), pred_leaf=True).reshape(3, -1)[:, 0]
    assert leaves[0] == leaves[1] != leaves[2]
    expected = case.booster.predict(xgb.DMatrix(x), output_margin=True)
    close(predict_raw(case.model, x), expected, 1e-6)


# ------------------------------------------------------- XGBoost's own SHAP

@pytest.mark.parametrize("name", ["regressor", "binary", "multiclass", "dart", "rf_classifier",
                                  "multi_target", "categorical", "categorical_codes"])
def test_shap_matches_pred_contribs(name):
    case = get_case(name)
    ours = shap_values(case.model, case.X)
    expected = case.library(pred_contribs=True)  # (n, K, p + 1)
    n_rows, n_outputs, width = expected.shape
    assert ours.shape == ((n_rows, width) if n_outputs == 1 else (n_rows, n_outputs, width))
    close(ours, expected, 1e-5)
    # Additivity against XGBoost's own margin.
    close(ours.sum(axis=-1), case.margin(), 1e-6)


@pytest.mark.parametrize("name", ["regressor", "binary", "multiclass", "categorical"])
def test_saabas_matches_approx_contribs(name):
    case = get_case(name)
    ours = saabas_values(case.model, case.X)
    expected = case.library(pred_contribs=True, approx_contribs=True)
    close(ours, expected, 1e-5)


# ---------------------------------------------------------------- brute force

@pytest.mark.parametrize("name", ["small_regressor", "multiclass", "categorical_codes", "dart",
                                  "vector_leaf", "vector_leaf_multilabel"])
def test_shap_vs_subset_enumeration(name):
    if name == "small_regressor":
        X, y = make_data(seed=3)
        model = xgb.XGBRegressor(n_estimators=4, max_depth=4, learning_rate=0.5).fit(X, y)
        case = Case(model, X)
    else:
        case = get_case(name)
    ensemble = to_ensemble(case.model)
    rows = [0, 5, 8, 13]  # 0 and 5: (nearly) all-NaN rows
    phi = shap_values(case.model, case.X[rows]).reshape(len(rows), ensemble.n_outputs, -1)
    for r, row in enumerate(rows):
        x = case.X[row]
        brute = reference.semivalue(ensemble, x)
        scale = np.max(np.abs(brute))
        assert scale > 0
        np.testing.assert_allclose(phi[r, :, :-1], brute, rtol=0, atol=1e-10 * scale)
        np.testing.assert_allclose(phi[r, :, -1], reference.value_function(ensemble, x, []),
                                   rtol=0, atol=1e-12 * max(1.0, scale))
    # Additivity: each row sums to the raw prediction.
    np.testing.assert_allclose(phi.sum(axis=-1), predict_raw(ensemble, case.X[rows]),
                               rtol=0, atol=1e-12 * max(1.0, np.max(np.abs(phi))))


# ---------------------------------------------------------------- base score

@pytest.mark.parametrize("text, expected", [
    ("0.5", [0.5]), ("5E-1", [0.5]), ("[5E-1]", [0.5]), ("[-2.5E-1,1E0,3E0]", [-0.25, 1.0, 3.0]),
])
def test_parse_base_score_formats(text, expected):
    np.testing.assert_array_equal(_xgboost._parse_base_score(text), expected)


@pytest.mark.parametrize("objective, base_score, link", [
    ("reg:squarederror", 100.0, lambda b: b),  # far from mean(y) ~ 1
    ("reg:squarederror", None, None),  # intercept estimated by XGBoost
    ("binary:logistic", 0.2, lambda p: np.log(p / (1 - p))),
    ("binary:logistic", None, None),
    ("binary:logitraw", 0.2, lambda b: b),
    ("reg:gamma", 3.0, np.log),
    ("multi:softprob", 0.3, lambda b: b),
    ("multi:softprob", None, None),
])
def test_base_score_in_margin_space(objective, base_score, link):
    X, y = make_data(seed=5)
    if objective.startswith("binary"):
        y = (y > 1).astype(float)
    elif objective == "reg:gamma":
        y = np.exp(y / 4)
    elif objective.startswith("multi"):
        y = np.digitize(y, [0, 1])
    params = dict(objective=objective, max_depth=2)
    if objective.startswith("multi"):
        params["num_class"] = 3
    if base_score is not None:
        params["base_score"] = base_score
    booster = xgb.train(params, xgb.DMatrix(X, label=y), 4)
    ensemble = to_ensemble(booster)
    # XGBoost's own margin with and without its base (base_margin=0): their
    # difference is the base in margin space. A new DMatrix each time:
    # XGBoost caches predictions per DMatrix.
    with_base = booster.predict(xgb.DMatrix(X[:3]), output_margin=True, strict_shape=True)
    without_base = booster.predict(xgb.DMatrix(X[:3], base_margin=np.zeros(with_base.shape)),
                                   output_margin=True, strict_shape=True)
    close(np.broadcast_to(ensemble.base_value, with_base.shape), with_base - without_base, 1e-6)
    if link is not None:
        np.testing.assert_allclose(ensemble.base_value, link(base_score), rtol=1e-6)
    close(predict_raw(booster, X), booster.predict(xgb.DMatrix(X), output_margin=True,
                                                   strict_shape=True), 1e-6)
    contribs = booster.predict(xgb.DMatrix(X[:20]), pred_contribs=True, strict_shape=True)
    close(shap_values(booster, X[:20]), contribs, 1e-5)


# ------------------------------------------------------------- early stopping

@pytest.mark.parametrize("estimator", [xgb.XGBRegressor, xgb.XGBClassifier])
def test_early_stopping_uses_best_iteration(estimator):
    X, y = make_data(seed=7)
    if estimator is xgb.XGBClassifier:
        y = np.digitize(y, [0, 1.5])
    model = estimator(n_estimators=200, max_depth=4, learning_rate=0.8, early_stopping_rounds=2)
    model.fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
    n_rounds = model.get_booster().num_boosted_rounds()
    assert model.best_iteration + 1 < n_rounds
    ensemble = to_ensemble(model)
    n_classes = 3 if estimator is xgb.XGBClassifier else 1
    assert ensemble.n_trees == (model.best_iteration + 1) * n_classes
    assert ensemble.info["n_trees_total"] == n_rounds * n_classes
    assert ensemble.info["best_iteration"] == model.best_iteration
    ours = predict_raw(model, X)
    close(ours, np.reshape(model.predict(X, output_margin=True), ours.shape), 1e-6)
    if estimator is xgb.XGBClassifier:
        np.testing.assert_array_equal(ours.argmax(axis=1), model.predict(X))
    # The full booster predicts differently, so the check above is not vacuous.
    full = model.get_booster().predict(xgb.DMatrix(X), output_margin=True)
    assert np.max(np.abs(full.reshape(ours.shape) - ours)) > 1e-3
    # SHAP with the same trees as XGBoost's pred_contribs for best_iteration.
    contribs = model.get_booster().predict(
        xgb.DMatrix(X[:20]), pred_contribs=True, iteration_range=(0, model.best_iteration + 1))
    close(shap_values(model, X[:20]), contribs, 1e-5)


def test_booster_with_best_iteration_uses_all_trees():
    """``Booster.predict`` ignores ``best_iteration`` (iteration_range=(0, 0))."""
    X, y = make_data(seed=7)
    booster = xgb.train(dict(max_depth=4, eta=0.8), xgb.DMatrix(X[:200], label=y[:200]), 200,
                        evals=[(xgb.DMatrix(X[200:], label=y[200:]), "valid")],
                        early_stopping_rounds=2, verbose_eval=False)
    assert booster.best_iteration + 1 < booster.num_boosted_rounds()
    ensemble = to_ensemble(booster)
    assert ensemble.n_trees == booster.num_boosted_rounds()
    close(predict_raw(booster, X), booster.predict(xgb.DMatrix(X), output_margin=True), 1e-6)
    sliced = booster[: booster.best_iteration + 1]
    assert to_ensemble(sliced).n_trees == booster.best_iteration + 1
    close(predict_raw(sliced, X), sliced.predict(xgb.DMatrix(X), output_margin=True), 1e-6)


# ---------------------------------------------------------------- categorical

def test_categorical_splits_send_listed_categories_right():
    """XGBoost lists at a node the categories that go to its right child; the
    adapter swaps children so that the kernels' set goes left."""
    case = get_case("categorical")
    raw = json.loads(bytes(case.booster.save_raw("json")))
    tree = raw["learner"]["gradient_booster"]["model"]["trees"][0]
    assert tree["split_type"][0] == 1  # the root splits on the category
    listed = tree["categories"][: tree["categories_sizes"][0]]
    ensemble = to_ensemble(case.model)
    root = ensemble.tree_start[0]
    x = np.array([[listed[0], 0.0], [np.nan, 0.0]])
    leaves = case.booster.predict(
        xgb.DMatrix(pd.DataFrame({"c": pd.Categorical.from_codes([listed[0], -1],
                                                                   categories=list("abcdefgh")),
                                  "x": [0.0, 0.0]}), enable_categorical=True),
        pred_leaf=True, strict_shape=True)
    right_subtree = tree["right_children"][0]
    assert reference.route(ensemble, root, x[0]) == ensemble.children_left[root]
    # XGBoost's node ids: the listed category reaches the right subtree of the root.
    node = int(leaves[0].ravel()[0])
    parents = tree["parents"]
    while parents[node] != 0:
        node = parents[node]
    assert node == right_subtree
    # NaN follows the default direction, swapped consistently.
    expected_default = (ensemble.children_left[root] if not tree["default_left"][0]
                        else ensemble.children_right[root])
    assert ensemble.default_child[root] == expected_default


def test_categorical_out_of_range_codes_match_xgboost():
    """Unseen, negative, fractional and huge codes route as in XGBoost."""
    case = get_case("categorical_codes")
    x = np.array([[c, 0.3] for c in (0, 3, 7, 8, 20, 2.5, 2.9, -1, -0.5, 1e7, 3e7, np.nan)])
    expected = case.booster.predict(
        xgb.DMatrix(x, feature_types=["c", "q"], enable_categorical=True), output_margin=True)
    close(predict_raw(case.model, x), expected, 1e-6)


# ---------------------------------------------------------------- unsupported

def test_gblinear_raises():
    X, y = make_data(nan_fraction=0)
    model = xgb.XGBRegressor(booster="gblinear", n_estimators=3).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="XGBRegressor.*gblinear"):
        to_ensemble(model)


# ------------------------------------------------------ vector-leaf trees

def test_vector_leaf_ensemble():
    """multi_strategy="multi_output_tree": one tree per round, a vector per leaf."""
    case = get_case("vector_leaf")
    ensemble = to_ensemble(case.model)
    assert ensemble.n_outputs == ensemble.n_values == 3
    assert ensemble.n_trees == 12 and not ensemble.averaging
    base = json.loads(case.booster.save_config())["learner"]["learner_model_param"]["base_score"]
    np.testing.assert_array_equal(ensemble.base_value, _xgboost._parse_base_score(base).astype(
        np.float32))
    assert len(set(ensemble.base_value.tolist())) == 3  # one base score per target
    parallel = to_ensemble(get_case("vector_leaf_parallel").model)
    assert parallel.n_trees == 24 and parallel.n_values == 3


def test_vector_leaf_against_xgboost_contributions():
    """XGBoost 3.2 refuses pred_contribs / pred_interactions for vector leaves
    ("not yet implemented": enumeration is then the only reference); XGBoost
    3.3+ computes them, and ours equal them (its float32 sums)."""
    case = get_case("vector_leaf")
    rows = slice(0, 3)
    ours = {"pred_contribs": shap_values(case.model, case.X[rows]),
            "pred_interactions": shap_interaction_values(case.model, case.X[rows])}
    for kind, mine in ours.items():
        try:
            theirs = case.library(rows, **{kind: True})
        except xgb.core.XGBoostError as error:
            assert "multi-target tree" in str(error)
            continue
        assert theirs.shape == mine.shape
        close(mine, theirs, 1e-5)


@pytest.mark.parametrize("name", ["vector_leaf", "vector_leaf_parallel"])
def test_vector_leaf_semivalues_vs_subset_enumeration(name):
    case = get_case(name)
    ensemble = to_ensemble(case.model)
    rows = [0, 5, 8, 13]
    X = case.X[rows]
    games = [
        (shap_values(case.model, X), reference.shapley_weight),
        (banzhaf_values(case.model, X), reference.banzhaf_weight(0.5)),
        (banzhaf_values(case.model, X, q=0.3), reference.banzhaf_weight(0.3)),
        (beta_shapley_values(case.model, X, alpha=16, beta=1), reference.beta_weight(16, 1)),
        (beta_shapley_values(case.model, X, alpha=1, beta=4), reference.beta_weight(1, 4)),
    ]
    for phi, weight in games:
        assert phi.shape == (len(rows), 3, N_FEATURES + 1)
        for r, x in enumerate(X):
            brute = reference.semivalue(ensemble, x, weight)
            scale = max(1.0, np.max(np.abs(brute)))
            np.testing.assert_allclose(phi[r, :, :-1], brute, rtol=0, atol=1e-10 * scale)
            np.testing.assert_allclose(phi[r, :, -1], reference.value_function(ensemble, x, []),
                                       rtol=0, atol=1e-12 * scale)
    # Additivity per output against XGBoost's own margins (float32)
    phi = shap_values(case.model, case.X)
    close(phi.sum(axis=-1), case.margin(), 1e-6)


def test_vector_leaf_dart_is_read_or_refused_by_xgboost():
    """XGBoost 3.2 refuses to train dart with vector leaves; 3.3+ trains it
    (saved as gbtree with weight_drop), and we read it exactly."""
    X, y = make_data(nan_fraction=0)
    model = xgb.XGBRegressor(multi_strategy="multi_output_tree", tree_method="hist",
                             booster="dart", n_estimators=4, max_depth=2, rate_drop=0.5,
                             random_state=0)
    try:
        model.fit(X, np.column_stack([y, -y]))
    except xgb.core.XGBoostError as error:
        assert "dart" in str(error)
        return
    margin = model.get_booster().predict(xgb.DMatrix(X[:20]), output_margin=True)
    close(predict_raw(model, X[:20]), margin, 1e-6)
    close(shap_values(model, X[:20]).sum(axis=-1), margin, 1e-6)


def test_vector_leaf_without_covers_is_refused():
    """XGBoost before 3.2 writes no sum_hessian for vector-leaf trees."""
    tree = {"tree_param": {"size_leaf_vector": "2"}, "left_children": [1, -1, -1],
            "right_children": [2, -1, -1], "split_conditions": [0.0, 0.0, 0.0],
            "default_left": [1, 0, 0], "split_indices": [0, 0, 0],
            "base_weights": [0.0] * 6}
    with pytest.raises(UnsupportedModelError, match="hessian sums.*xgboost>=3.2"):
        _xgboost._tree_arrays(tree, 1.0, 0, "XGBRegressor", 2)


def test_vector_leaf_of_unexpected_width_raises():
    case = get_case("vector_leaf")
    tree = json.loads(bytes(case.booster.save_raw("json")))["learner"]["gradient_booster"][
        "model"]["trees"][0]
    tree["base_weights"] = tree["base_weights"][:-1]
    with pytest.raises(UnsupportedModelError, match="vector-leaf.*one_output_per_tree"):
        _xgboost._tree_arrays(tree, 1.0, 0, "XGBRegressor", 3)


def test_unknown_objective_link_raises(monkeypatch):
    monkeypatch.setattr(_xgboost, "_IDENTITY_OBJECTIVES", set())
    with pytest.raises(UnsupportedModelError, match="XGBRegressor.*reg:squarederror"):
        to_ensemble(get_case("regressor").model)


def test_non_model_object_raises():
    with pytest.raises(UnsupportedModelError, match="DMatrix is not a supported XGBoost model"):
        to_ensemble(xgb.DMatrix(np.zeros((2, 2))))


def test_integer_category_levels_are_coded_like_xgboost():
    # A pandas category column whose levels are numbers: XGBoost codes a value
    # by its position among the training levels, not by the value itself.
    pd = pytest.importorskip("pandas")
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"c": pd.Categorical(rng.choice([10, 20, 30, 40], size=400)),
                          "x": rng.normal(size=400)})
    y = frame["x"] + 2.0 * (frame["c"].astype(int) == 30)
    model = xgb.XGBRegressor(n_estimators=8, max_depth=3, enable_categorical=True,
                             tree_method="hist").fit(frame, y)
    test = frame.iloc[:20].copy()
    test["c"] = pd.Categorical([40, 30, 10, np.nan] * 5, categories=[10, 30, 40])
    margin = model.get_booster().predict(xgb.DMatrix(test, enable_categorical=True),
                                         output_margin=True)
    np.testing.assert_allclose(predict_raw(model, test)[:, 0], margin, rtol=1e-6, atol=1e-6)
    phi = shap_values(model, test)
    np.testing.assert_allclose(phi.sum(axis=1), margin, rtol=1e-6, atol=1e-6)
    test["c"] = pd.Categorical([50, 30, 10, np.nan] * 5)
    with pytest.raises(xgb.core.XGBoostError, match="not in the training set"):
        model.get_booster().predict(xgb.DMatrix(test, enable_categorical=True))
    with pytest.raises(ValueError, match="did not see in training"):
        shap_values(model, test)


@pytest.mark.parametrize("label", [0.0, 1.0])
def test_logistic_base_score_of_a_constant_label_is_clamped_as_xgboost_does(label):
    """A constant 0/1 label stores base_score 0 or 1; XGBoost clamps it to
    [1e-6, 1 - 1e-6] before its float32 logit (margins -13.8155 and 13.7452),
    where an unclamped logit would be infinite."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 3))
    try:
        booster = xgb.train({"objective": "binary:logistic", "max_depth": 2},
                            xgb.DMatrix(X, label=np.full(100, label)), num_boost_round=3)
    except xgb.core.XGBoostError as error:  # XGBoost 3.1 refuses to fit such a model
        assert "base_score must be in (0,1)" in str(error)
        return
    margin = booster.predict(xgb.DMatrix(X[:5]), output_margin=True)
    assert np.all(np.isfinite(margin)) and abs(margin[0]) > 13
    np.testing.assert_allclose(predict_raw(booster, X[:5]).ravel(), margin, rtol=1e-6)
    phi = shap_values(booster, X[:5])
    np.testing.assert_allclose(phi.sum(axis=1), margin, rtol=1e-6)


# --------------------------------------------------------------------------
# The model is read from its binary form (UBJSON), as from the JSON one
# --------------------------------------------------------------------------
def _same_as_json(parsed, binary, where=""):
    """``binary`` (read by _read_ubjson) holds what ``parsed`` (json.loads) holds:
    the same keys and scalars, node arrays with the same numbers (float32 ones,
    arrays or not, as the float64 of the JSON's decimals)."""
    if isinstance(binary, np.ndarray):
        if binary.dtype.kind == "f":
            np.testing.assert_array_equal(_xgboost._printed(binary),
                                          np.asarray(parsed, dtype=np.float64), err_msg=where)
        else:
            np.testing.assert_array_equal(binary, np.asarray(parsed), err_msg=where)
    elif isinstance(binary, dict):
        assert list(binary) == list(parsed), where
        for key in binary:
            _same_as_json(parsed[key], binary[key], f"{where}/{key}")
    elif isinstance(binary, list):
        assert len(binary) == len(parsed), where
        for i, (a, b) in enumerate(zip(parsed, binary)):
            _same_as_json(a, b, f"{where}[{i}]")
    elif isinstance(binary, float):  # a float32 written alone (e.g. a DART weight)
        assert _xgboost._printed([binary])[0] == parsed, where
    else:
        assert type(binary) is type(parsed) and binary == parsed, where


@pytest.mark.parametrize("name", ["regressor", "multiclass", "dart", "rf_regressor",
                                  "pruned_booster", "vector_leaf", "categorical",
                                  "categorical_codes"])
def test_binary_model_reads_as_the_json_model(name):
    booster = get_case(name).booster
    _same_as_json(json.loads(bytes(booster.save_raw("json"))),
                  _xgboost._read_ubjson(booster.save_raw("ubj")))


def test_printed_decimals_are_those_of_xgboost_json():
    """_printed gives the float64 of the decimal XGBoost prints for a float32 (the
    covers were read from the JSON before), for float32 values of every exponent,
    integers below and above 2**24, powers of two and small fractions."""
    booster = get_case("regressor").booster
    model = json.loads(bytes(booster.save_raw("json")))
    trees = model["learner"]["gradient_booster"]["model"]["trees"]
    rng = np.random.default_rng(0)
    kinds = [
        lambda n: rng.integers(1, 0x7F800000, n).astype(np.uint32).view(np.float32),
        lambda n: rng.random(n) * 10.0 ** rng.uniform(-4, 8, n),
        lambda n: np.ldexp(1.0, rng.integers(-120, 120, n)),
        lambda n: rng.integers(0, 2**27, n) + rng.choice([0.0, 0.5, 0.25, 1e-3], n),
    ]
    for round_ in range(40):
        for tree in trees:
            values = np.asarray(kinds[round_ % 4](len(tree["sum_hessian"])), dtype=np.float32)
            tree["sum_hessian"] = values.astype(np.float64).tolist()  # exact
        reloaded = xgb.Booster()
        reloaded.load_model(bytearray(json.dumps(model).encode()))
        printed = json.loads(bytes(reloaded.save_raw("json")))
        binary = _xgboost._read_ubjson(reloaded.save_raw("ubj"))
        for a, b in zip(printed["learner"]["gradient_booster"]["model"]["trees"],
                        binary["learner"]["gradient_booster"]["model"]["trees"]):
            np.testing.assert_array_equal(_xgboost._printed(b["sum_hessian"]),
                                          np.asarray(a["sum_hessian"], dtype=np.float64))


def test_non_ascii_category_strings_are_refused_clearly():
    """XGBoost saves the category strings of a column cut at character counts:
    non-ASCII ones cannot be read back."""
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"c": pd.Categorical(rng.choice(["a", "bé", "ç"], N_ROWS)),
                          "x": rng.normal(size=N_ROWS)})
    model = xgb.XGBRegressor(n_estimators=2, max_depth=2, enable_categorical=True,
                             tree_method="hist").fit(frame, frame["x"])
    with pytest.raises(UnsupportedModelError, match="non-ASCII strings"):
        to_ensemble(model)
