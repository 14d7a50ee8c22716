"""Piecewise-linear trees (doc/piecewise.rst): the kernels against subset
enumeration of the game, additivity against LightGBM's own predictions,
what LightGBM and shap do on the same models, and the estimator."""
import itertools
import math

import numpy as np
import pytest
from sklearn.exceptions import NotFittedError

import reference

import sklearn_r2shap as sr
from sklearn_r2shap import PiecewiseLinearExplainer
from sklearn_r2shap import piecewise
from sklearn_r2shap.piecewise import (
    piecewise_ensemble,
    piecewise_predict,
    piecewise_shap_values,
)

# ----------------------------------------------------------------------------
# The reference: the game by recursion, Shapley values by enumeration


def leaf_entries(ens, leaf):
    if not ens.has_linear_leaves:
        return []
    return [(int(ens.linear_feature[e]), float(ens.linear_coef[e]), e)
            for e in range(ens.linear_start[leaf], ens.linear_start[leaf + 1])]


def background_statistics(ens, B, weight=None):
    """Covers (weight of the rows reaching each node) and, per linear entry,
    the mean of its feature over the leaf's rows whose linear features are
    all non-NaN (0 when there are none)."""
    weight = np.ones(len(B)) if weight is None else np.asarray(weight, dtype=float)
    cover = np.zeros(ens.n_nodes)
    n_entries = len(ens.linear_coef) if ens.has_linear_leaves else 0
    sums, counts = np.zeros(n_entries), np.zeros(n_entries)
    for x, w in zip(B, weight):
        x = reference.prepare(ens, x)
        for t in range(ens.n_trees):
            nodes = reference.path(ens, t, x)
            cover[nodes] += w
            entries = leaf_entries(ens, nodes[-1])
            if entries and not any(np.isnan(x[f]) for f, _, _ in entries):
                for f, _, e in entries:
                    sums[e] += w * x[f]
                    counts[e] += w
    means = np.where(counts > 0, sums / np.where(counts > 0, counts, 1.0), 0.0)
    return cover, means


def leaf_game(ens, leaf, x, S, means):
    """LightGBM's leaf function at x with the linear features not in S at their means."""
    entries = leaf_entries(ens, leaf)
    if any(np.isnan(x[f]) and f in S for f, _, _ in entries):
        return ens.linear_fallback[leaf].copy()
    value = ens.value[leaf].copy()
    for f, a, e in entries:
        value = value + a * (x[f] if f in S else means[e])
    return value


def value_function(ens, x, S, cover, means):
    x = reference.prepare(ens, x)
    out = ens.base_value.astype(float).copy()
    for t in range(ens.n_trees):
        def rec(k):
            if ens.children_left[k] < 0:
                return leaf_game(ens, k, x, S, means)
            if ens.feature[k] in S:
                return rec(reference.route(ens, k, x))
            a, b = ens.children_left[k], ens.children_right[k]
            if cover[k] > 0:
                return (cover[a] * rec(a) + cover[b] * rec(b)) / cover[k]
            return 0.5 * (rec(a) + rec(b))

        value = rec(ens.tree_start[t])
        if ens.n_values == 1:
            out[ens.tree_output[t]] += value[0]
        else:
            out += value
    return out


def brute_force(ens, x, cover, means):
    """(phi of shape (n_outputs, p), v_x(empty)) by enumerating all subsets."""
    p = ens.n_features
    cache = {}

    def v(S):
        key = frozenset(S)
        if key not in cache:
            cache[key] = value_function(ens, x, key, cover, means)
        return cache[key]

    phi = np.zeros((ens.n_outputs, p))
    for i in range(p):
        others = [j for j in range(p) if j != i]
        for s in range(p):
            weight = math.factorial(s) * math.factorial(p - 1 - s) / math.factorial(p)
            for S in itertools.combinations(others, s):
                phi[:, i] += weight * (v(set(S) | {i}) - v(S))
    return phi, v(())


def check_against_brute_force(model, X, background, weight=None, atol=1e-10, route=None):
    ens = sr.to_ensemble(model)
    values = piecewise._shap_values(model, X, background=background, background_weight=weight,
                                    route=route)
    got = values.reshape(len(X), ens.n_outputs, ens.n_features + 1)
    cover, means = background_statistics(ens, np.asarray(background, dtype=float), weight)
    for i, x in enumerate(np.asarray(X, dtype=float)):
        phi, empty = brute_force(ens, x, cover, means)
        np.testing.assert_allclose(got[i, :, :-1], phi, rtol=0, atol=atol)
        np.testing.assert_allclose(got[i, :, -1], empty, rtol=0, atol=atol)
    # Efficiency, for every row (NaN too): values + expected value = prediction
    np.testing.assert_allclose(got.sum(axis=-1), piecewise_predict(model, X), rtol=0, atol=1e-9)
    return values


@pytest.fixture(params=["tables", "quadrature"])
def route(request):
    """Both evaluation routes (pattern tables, per-row quadrature) give the values."""
    return request.param


# ----------------------------------------------------------------------------
# Hand-built trees of the paper's three types

P = 4


def type1_tree(rng):
    """Type 1: every leaf uses all features; NaN of feature 2 goes left."""
    return dict(children_left=[1, 3, -1, -1, -1], children_right=[2, 4, -1, -1, -1],
                feature=[2, 0, 0, 0, 0], threshold=[0.1, -0.4, 0, 0, 0],
                default_left=[True, False, False, False, False],
                value=[0, 0, 0.5, -0.5, 1.5], coef=rng.normal(size=(5, P)),
                fallback=[0, 0, 2.0, -2.0, 0.25])


def type2_tree():
    """Type 2: leaves use features on their path only; feature 1 repeats."""
    coef = np.zeros((7, P))
    coef[3, [1, 0]] = [1.2, -0.4]
    coef[4, [1, 0, 3]] = [0.3, 0.9, -0.7]
    coef[5, [1, 3]] = [0.5, 1.1]
    coef[6, 1] = -0.8
    return dict(children_left=[1, 3, 5, -1, -1, -1, -1], children_right=[2, 4, 6, -1, -1, -1, -1],
                feature=[1, 0, 1, 0, 0, 0, 0], threshold=[0.0, -0.3, 0.8, 0, 0, 0, 0],
                value=[0, 0, 0, 1.0, -1.0, 2.0, 0.5], coef=coef,
                default_left=[False, True, True, False, False, False, False])


def type3_tree():
    """Type 3: coefficients tied to the nodes (feature 3 twice on the left path)."""
    return dict(children_left=[1, 3, -1, 5, -1, -1, -1], children_right=[2, 4, -1, 6, -1, -1, -1],
                feature=[3, 3, 0, 0, 0, 0, 0], threshold=[0.2, -0.5, 0, 0.3, 0, 0, 0],
                value=[0, 0, 3.0, 0, 1.0, -2.0, 2.0], node_coef=[0.5, 1.5, 0, -1.0, 0, 0, 0])


def categorical_tree():
    """A categorical split on feature 2 (codes 0..5), linear in 0 below it."""
    coef = np.zeros((3, P))
    coef[1, 0] = 2.0
    coef[2, [0, 3]] = [-1.0, 0.5]
    return dict(children_left=[1, -1, -1], children_right=[2, -1, -1], feature=[2, 0, 0],
                threshold=[0, 0, 0], categories={0: [0, 2, 5]}, value=[0, 0.3, -0.3], coef=coef)


def single_leaf():
    return dict(children_left=[-1], children_right=[-1], feature=[0], threshold=[0.0],
                value=[0.3], coef=[[0.1, 0, -0.2, 0.4]])


def hand_data(rng, n, nan_fraction):
    X = rng.normal(size=(n, P)).round(2)
    X[:, 2] = rng.integers(0, 6, size=n)
    X[rng.random(size=X.shape) < nan_fraction] = np.nan
    return X


HAND = {
    "type1": lambda rng: [type1_tree(rng)],
    "type2": lambda rng: [type2_tree()],
    "type3": lambda rng: [type3_tree()],
    "categorical": lambda rng: [categorical_tree()],
    "single-leaf": lambda rng: [single_leaf()],
    "all": lambda rng: [type1_tree(rng), type2_tree(), type3_tree(), categorical_tree(),
                        single_leaf()],
}


@pytest.mark.parametrize("name", HAND)
def test_hand_built_trees_match_brute_force(name, route):
    rng = np.random.default_rng(0)
    ens = piecewise_ensemble(HAND[name](rng), n_features=P, base_value=0.25)
    background = hand_data(rng, 300, 0.1)
    X = hand_data(rng, 12, 0.2)
    X[0] = np.nan
    X[1] = [0.05, 0.8, 2.0, -0.6]  # on thresholds' sides chosen by hand
    check_against_brute_force(ens, X, background, route=route)


def test_type3_is_type2_with_summed_node_coefficients():
    tree = type3_tree()
    node_coef = np.asarray(tree.pop("node_coef"))
    coef = np.zeros((7, P))
    # leaf 2 lies below node 0 (feature 3); leaves 4, 5, 6 below nodes 0 and 1
    # (feature 3, coefficients 0.5 + 1.5), and 5, 6 also below node 3 (feature 0)
    coef[2, 3] = node_coef[0]
    coef[[4, 5, 6], 3] = node_coef[0] + node_coef[1]
    coef[[5, 6], 0] = node_coef[3]
    as_type2 = piecewise_ensemble([dict(tree, coef=coef)], n_features=P)
    as_type3 = piecewise_ensemble([type3_tree()], n_features=P)
    np.testing.assert_array_equal(as_type3.linear_start, as_type2.linear_start)
    np.testing.assert_array_equal(as_type3.linear_coef, as_type2.linear_coef)


def test_two_outputs_and_zero_cover_nodes(route):
    rng = np.random.default_rng(1)
    trees = [dict(type2_tree(), output=0), dict(type3_tree(), output=1),
             dict(type1_tree(rng), output=1)]
    ens = piecewise_ensemble(trees, n_features=P, base_value=[0.1, -0.2])
    background = hand_data(rng, 40, 0.0)
    background[:, 1] = np.abs(background[:, 1]) + 1.0  # nothing reaches x1 <= 0.8 below x1 > 0
    background[:, 3] = np.abs(background[:, 3]) + 0.5  # nor x3 <= 0.2
    X = hand_data(rng, 8, 0.15)
    got = check_against_brute_force(ens, X, background, route=route)
    assert got.shape == (8, 2, P + 1)


def test_background_weight_is_duplication():
    rng = np.random.default_rng(2)
    ens = piecewise_ensemble([type1_tree(rng), type2_tree()], n_features=P)
    background = hand_data(rng, 30, 0.1)
    counts = rng.integers(0, 4, size=30)
    X = hand_data(rng, 5, 0.1)
    weighted = check_against_brute_force(ens, X, background, weight=counts.astype(float))
    repeated = piecewise_shap_values(ens, X, background=np.repeat(background, counts, axis=0))
    np.testing.assert_allclose(weighted, repeated, rtol=0, atol=1e-12)


def test_deep_tree_quadrature_is_exact():
    # a depth-12 type-2 caterpillar on 6 features (repeated on the path, and
    # nodes no background row reaches), against enumeration
    rng = np.random.default_rng(3)
    depth, p = 12, 6
    left, right, feature, threshold, value = [], [], [], [], []
    coef = []
    for level in range(depth):
        k = len(left)
        left += [k + 1, -1]
        right += [k + 2, -1]
        feature += [int(rng.integers(p)), 0]
        threshold += [float(rng.normal(scale=0.5)), 0.0]
        value += [0.0, float(rng.normal())]
        coef += [np.zeros(p), np.zeros(p)]
        path = sorted(set(feature[0:k + 1:2]))
        coef[-1][path] = rng.normal(size=len(path))
    left.append(-1)
    right.append(-1)
    feature.append(0)
    threshold.append(0.0)
    value.append(1.0)
    coef.append(np.zeros(p))
    coef[-1][sorted(set(feature[0:-1:2]))] = 1.0
    ens = piecewise_ensemble([dict(children_left=left, children_right=right, feature=feature,
                                   threshold=threshold, value=value, coef=np.array(coef))],
                             n_features=p)
    background = rng.normal(size=(400, p))
    X = rng.normal(size=(4, p))
    check_against_brute_force(ens, X, background)


# ----------------------------------------------------------------------------
# LightGBM linear_tree models

try:
    import lightgbm as lgb
except ImportError:  # the hand-built trees above are tested without it
    lgb = None
needs_lightgbm = pytest.mark.skipif(lgb is None, reason="LightGBM is not installed")

LP = 5  # features: 0-3 numeric (NaN in 0 and 3), 4 categorical
SMALL = dict(linear_tree=True, n_estimators=6, num_leaves=6, min_child_samples=10,
             min_data_per_group=5, cat_smooth=1.0, n_jobs=1, verbose=-1, random_state=0)


def lightgbm_data(n, seed, nan=True):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, LP))
    X[:, 4] = rng.integers(0, 6, size=n)
    y = (X[:, 0] * X[:, 1] + np.where(X[:, 2] > 0, 2 * X[:, 3], -X[:, 3]) + (X[:, 4] % 2)
         + 0.1 * rng.normal(size=n))
    if nan:
        X[rng.random(n) < 0.1, 0] = np.nan
        X[rng.random(n) < 0.05, 3] = np.nan
    return X, y


X_TRAIN, Y_TRAIN = lightgbm_data(400, 0)
Y_BINARY = (Y_TRAIN > np.median(Y_TRAIN)).astype(int)


def explain_rows():
    X, _ = lightgbm_data(10, 1, nan=False)
    X[0, 0] = np.nan
    X[1, 3] = np.nan
    X[2, 1] = np.nan  # a split feature that the training data never had missing
    X[3, 4] = np.nan
    return X


_MODELS = {}


def lightgbm_model(kind):
    if kind not in _MODELS:
        if kind == "regressor":
            model = lgb.LGBMRegressor(**SMALL).fit(X_TRAIN, Y_TRAIN, categorical_feature=[4])
        elif kind == "binary":
            model = lgb.LGBMClassifier(**SMALL).fit(X_TRAIN, Y_BINARY, categorical_feature=[4])
        elif kind == "multiclass":
            y = np.digitize(Y_TRAIN, np.quantile(Y_TRAIN, [0.33, 0.66]))
            model = lgb.LGBMClassifier(**dict(SMALL, n_estimators=3)).fit(X_TRAIN, y)
        _MODELS[kind] = model
    return _MODELS[kind]


@needs_lightgbm
@pytest.mark.parametrize("kind", ["regressor", "binary", "multiclass"])
def test_lightgbm_matches_brute_force(kind, route):
    model = lightgbm_model(kind)
    ens = sr.to_ensemble(model)
    assert ens.has_linear_leaves and len(ens.linear_coef) > 0
    if kind != "multiclass":
        assert ens.info["categorical_features"] == [4]
    X = explain_rows()
    rows = X if kind != "multiclass" else X[:4]
    check_against_brute_force(model, rows, X_TRAIN, route=route)


@needs_lightgbm
@pytest.mark.parametrize("kind", ["regressor", "binary", "multiclass"])
def test_values_add_up_to_lightgbm_raw_prediction(kind, route):
    model = lightgbm_model(kind)
    X, _ = lightgbm_data(300, 5, nan=False)
    phi = piecewise._shap_values(model, X, background=X_TRAIN, route=route)
    raw = model.booster_.predict(X, raw_score=True)
    np.testing.assert_allclose(phi.sum(axis=-1), raw, rtol=0, atol=1e-9)
    # also the rows with NaN: a leaf then predicts its fallback, in the game too
    Xn = explain_rows()
    phi = piecewise._shap_values(model, Xn, background=X_TRAIN, route=route)
    np.testing.assert_allclose(phi.sum(axis=-1), model.booster_.predict(Xn, raw_score=True),
                               rtol=0, atol=1e-9)


@needs_lightgbm
def test_training_covers_are_lightgbm_counts_and_expected_value_is_mean_prediction():
    X, y = lightgbm_data(400, 6, nan=False)
    model = lgb.LGBMRegressor(**SMALL).fit(X, y)
    explainer = PiecewiseLinearExplainer(model, prefit=True).fit(X)
    np.testing.assert_array_equal(explainer.covers_, sr.to_ensemble(model).cover)
    # no NaN: each leaf's c_l is its mean prediction on its rows
    assert explainer.expected_value_ == pytest.approx(model.predict(X).mean(), abs=1e-10)


@needs_lightgbm
def test_constant_leaves_equal_shap_values(route):
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(7)
    X = rng.normal(size=(300, 6))
    y = X[:, 0] + X[:, 1] ** 2 + X[:, 2] * X[:, 3]
    tree = DecisionTreeRegressor(max_depth=6, random_state=0).fit(X, y)
    got = piecewise._shap_values(tree, X[:40], background=X, route=route)
    np.testing.assert_allclose(got, sr.shap_values(tree, X[:40]), rtol=0, atol=1e-10)
    # vector leaves (a forest classifier without bootstrap: counts are covers)
    from sklearn.ensemble import RandomForestClassifier

    forest = RandomForestClassifier(n_estimators=3, max_depth=4, bootstrap=False,
                                    random_state=0).fit(X, (y > np.median(y)) + (y > 2))
    np.testing.assert_allclose(piecewise._shap_values(forest, X[:20], background=X, route=route),
                               sr.shap_values(forest, X[:20]), rtol=0, atol=1e-10)
    # LightGBM without linear leaves: its counts are the training data's
    model = lgb.LGBMRegressor(n_estimators=5, num_leaves=8, n_jobs=1, verbose=-1).fit(X, y)
    np.testing.assert_allclose(piecewise._shap_values(model, X[:40], background=X, route=route),
                               sr.shap_values(model, X[:40]), rtol=0, atol=1e-10)


@needs_lightgbm
def test_lightgbm_pred_contrib_refuses_linear_trees():
    # LightGBM has no SHAP for linear trees: pred_contrib raises.
    model = lightgbm_model("regressor")
    with pytest.raises(lgb.basic.LightGBMError, match="linear trees"):
        model.booster_.predict(X_TRAIN[:5], pred_contrib=True)
    with pytest.raises(sr.UnsupportedModelError, match="PiecewiseLinearExplainer"):
        sr.shap_values(model, X_TRAIN[:5])


@needs_lightgbm
def test_shap_tree_explainer_does_not_add_up():
    """shap's TreeExplainer: path-dependent mode calls pred_contrib (raises);
    interventional mode reads the trees without their linear terms, so its
    values miss the prediction by a lot. Ours add up to 1e-9."""
    shap = pytest.importorskip("shap")
    X, y = lightgbm_data(400, 8, nan=False)
    model = lgb.LGBMRegressor(**dict(SMALL, n_estimators=20)).fit(X, y)
    rows = X[:100]
    raw = model.booster_.predict(rows, raw_score=True)
    with pytest.raises(lgb.basic.LightGBMError, match="not implemented for linear trees"):
        shap.TreeExplainer(model).shap_values(rows)
    explainer = shap.TreeExplainer(model, data=X[:100], feature_perturbation="interventional")
    values = explainer.shap_values(rows, check_additivity=False)
    shap_error = np.max(np.abs(values.sum(axis=1) + explainer.expected_value - raw))
    ours = piecewise_shap_values(model, rows, background=X)
    our_error = np.max(np.abs(ours.sum(axis=1) - raw))
    assert our_error < 1e-9
    assert shap_error > 0.05 * np.std(raw)  # measured: ~0.2 of a std ~ 1.6 spread
    assert shap_error > 1e6 * max(our_error, 1e-15)


# ----------------------------------------------------------------------------
# The estimator

from sklearn.base import clone  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402


# Every check passes with the default LightGBM model (covers and means are
# weighted like duplicated rows), so no expected failures are listed.
@needs_lightgbm
@parametrize_with_checks([PiecewiseLinearExplainer()])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def diabetes():
    from sklearn.datasets import load_diabetes

    return load_diabetes(return_X_y=True, as_frame=True)


@needs_lightgbm
def test_fit_explains_the_training_data(diabetes):
    X, y = diabetes
    explainer = PiecewiseLinearExplainer(
        lgb.LGBMRegressor(linear_tree=True, n_estimators=20, num_leaves=6, n_jobs=1,
                          verbose=-1)).fit(X, y)
    phi = explainer.shap_values(X)
    assert phi.shape == (len(X), X.shape[1] + 1)
    np.testing.assert_allclose(phi[:, -1], explainer.expected_value_)
    np.testing.assert_allclose(phi.sum(axis=1), explainer.estimator_.predict(X, raw_score=True),
                               rtol=0, atol=1e-9)
    np.testing.assert_allclose(explainer.feature_importances_, np.abs(phi[:, :-1]).mean(axis=0))
    np.testing.assert_allclose(phi, piecewise_shap_values(explainer.estimator_, X, background=X))
    assert list(explainer.feature_names_in_) == list(X.columns)
    assert explainer.threshold_ == pytest.approx(explainer.feature_importances_.mean())
    support = explainer.get_support()
    np.testing.assert_array_equal(support, explainer.feature_importances_ >= explainer.threshold_)
    assert list(explainer.get_feature_names_out()) == list(X.columns[support])


@needs_lightgbm
def test_binary_classifier_gives_margins():
    model = lgb.LGBMClassifier(**SMALL)
    explainer = PiecewiseLinearExplainer(model).fit(X_TRAIN, Y_BINARY, categorical_feature=[4])
    phi = explainer.shap_values(X_TRAIN[:50])
    np.testing.assert_allclose(phi.sum(axis=1), explainer.estimator_.predict(
        X_TRAIN[:50], raw_score=True), rtol=0, atol=1e-9)
    assert isinstance(explainer.expected_value_, float)


@needs_lightgbm
def test_prefit_frozen_and_ensembles():
    from sklearn.frozen import FrozenEstimator

    model = lightgbm_model("regressor")
    held_out, _ = lightgbm_data(100, 9)
    want = piecewise_shap_values(model, held_out, background=X_TRAIN)
    for explainer in (PiecewiseLinearExplainer(model, prefit=True),
                      PiecewiseLinearExplainer(FrozenEstimator(model))):
        explainer.fit(X_TRAIN)  # no y needed: covers and means from X
        assert explainer.estimator_ is model
        np.testing.assert_allclose(explainer.shap_values(held_out), want)
    ens = piecewise_ensemble([type2_tree(), type3_tree()], n_features=P)
    background = hand_data(np.random.default_rng(0), 200, 0.0)
    explainer = PiecewiseLinearExplainer(ens, prefit=True).fit(background)
    np.testing.assert_allclose(explainer.shap_values(background[:5]),
                               piecewise_shap_values(ens, background[:5], background=background))
    with pytest.raises(ValueError, match="prefit=True"):
        PiecewiseLinearExplainer(ens).fit(background)
    with pytest.raises(ValueError, match="requires y"):
        PiecewiseLinearExplainer().fit(X_TRAIN)
    with pytest.raises(NotFittedError, match="not fitted"):
        PiecewiseLinearExplainer(lgb.LGBMRegressor(), prefit=True).fit(X_TRAIN)


@needs_lightgbm
def test_pipeline_grid_search_and_pandas_output(diabetes):
    from sklearn.linear_model import Ridge

    X, y = diabetes
    base = lgb.LGBMRegressor(linear_tree=True, n_estimators=10, num_leaves=4, n_jobs=1,
                             verbose=-1)
    pipe = make_pipeline(PiecewiseLinearExplainer(base, threshold=-np.inf), Ridge())
    search = GridSearchCV(pipe, {"piecewiselinearexplainer__max_features": [2, 5]},
                          cv=KFold(3, shuffle=True, random_state=0)).fit(X, y)
    assert search.best_params_["piecewiselinearexplainer__max_features"] in (2, 5)
    selector = search.best_estimator_[0]
    assert selector.get_support().sum() == search.best_params_[
        "piecewiselinearexplainer__max_features"]
    out = clone(PiecewiseLinearExplainer(base, max_features=3, threshold=-np.inf)).set_output(
        transform="pandas").fit(X, y).transform(X)
    assert out.shape == (len(X), 3) and set(out.columns) <= set(X.columns)


def test_default_estimator_needs_lightgbm(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "lightgbm", None)
    with pytest.raises(ImportError, match="pip install lightgbm"):
        PiecewiseLinearExplainer().fit(X_TRAIN, Y_TRAIN)


# ----------------------------------------------------------------------------
# Validation


def test_piecewise_ensemble_validation():
    with pytest.raises(ValueError, match="coef must have shape"):
        piecewise_ensemble([dict(type2_tree(), coef=np.zeros((7, 3)))], n_features=P)
    with pytest.raises(ValueError, match="unknown tree keys"):
        piecewise_ensemble([dict(type2_tree(), leaf_coef=1)], n_features=P)
    with pytest.raises(ValueError, match="decision_type"):
        piecewise_ensemble([dict(type2_tree(), decision_type=["=="] * 7)], n_features=P)
    with pytest.raises(ValueError, match="n_features"):
        piecewise_ensemble([type2_tree()], n_features=0)
    ens = piecewise_ensemble([type2_tree()], n_features=P)
    with pytest.raises(ValueError, match="background_weight"):
        piecewise_shap_values(ens, np.zeros((1, P)), background=np.zeros((3, P)),
                              background_weight=[1.0, -1.0, 1.0])
    with pytest.raises(ValueError, match="at least one row"):
        piecewise_shap_values(ens, np.zeros((1, P)), background=np.zeros((0, P)))
    with pytest.raises(ValueError, match="features"):
        piecewise_shap_values(ens, np.zeros((1, P + 1)), background=np.zeros((3, P)))
