"""TreeGrad gradients, TreeGrad-Ranker scores, insertion/deletion curves and
the TreeGradRanker estimator, against subset enumeration (tests/reference.py)
and plain-Python versions of the paper's algorithms."""
import numpy as np
import pytest
from sklearn.datasets import load_diabetes, make_classification
from sklearn.ensemble import (
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    RandomForestClassifier,
)
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

import reference
from sklearn_r2shap import (
    TreeGradRanker,
    UnsupportedModelError,
    banzhaf_values,
    beta_shapley_values,
    shap_values,
    to_ensemble,
)
from sklearn_r2shap._model._ensemble import DECISION_LEQ, TreeArrays, TreeEnsemble
from sklearn_r2shap.metrics import InsertionDeletion, insertion_deletion
from sklearn_r2shap.ranking import multilinear_gradient, treegrad_scores

# --------------------------------------------------------------------------
# Brute force: the game on all 2^p coalitions, its multilinear extension, and
# the ranker written from Algorithms 2 and 10.


def memberships(p):
    masks = np.arange(1 << p)
    return masks, ((masks[:, None] >> np.arange(p)) & 1).astype(bool)


def game_table(ens, x, output=0, sign=1.0):
    """v_x(S) of every coalition S (bit j of the index: feature j in S)."""
    _, member = memberships(ens.n_features)
    return sign * np.array([reference.value_function(ens, x, set(np.flatnonzero(m)))[output]
                            for m in member])


def mle(table, z):
    """(grad F(z), F(z)) of the multilinear extension, by its definition."""
    p = len(z)
    masks, member = memberships(p)
    factors = np.where(member, z, 1.0 - z)
    value = np.prod(factors, axis=1) @ table
    grad = np.empty(p)
    for i in range(p):
        without = ~member[:, i]
        weight = np.prod(np.delete(factors, i, axis=1)[without], axis=1)
        grad[i] = weight @ (table[masks[without] | (1 << i)] - table[masks[without]])
    return grad, value


def python_ranker(table, p, n_iter, step_size, adam):
    """Algorithm 2 (gradient ascent) or Algorithm 10 (Adam), verbatim."""
    z, zeta = np.full(p, 0.5), np.zeros(p)
    m, v = np.zeros(p), np.zeros(p)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for t in range(1, n_iter + 1):
        g = 0.5 * (mle(table, z)[0] + mle(table, 1.0 - z)[0])
        zeta = (t - 1) / t * zeta + g / t
        if adam:
            m = beta1 * m + (1 - beta1) * g
            v = beta2 * v + (1 - beta2) * g * g
            z = z + step_size * (m / (1 - beta1**t)) / np.sqrt(v / (1 - beta2**t) + eps)
        else:
            z = z + step_size * g
        z = np.clip(z, 0.0, 1.0)
    return zeta


def test_brute_force_helpers_agree_with_the_model():
    # F(1) = v(N) = f(x), F(0) = v(empty), and grad F(1/2) = Banzhaf value.
    X, y = deep_data(3)
    tree = DecisionTreeRegressor(max_depth=8, random_state=0).fit(X, y)
    ens = to_ensemble(tree)
    table = game_table(ens, X[0])
    assert mle(table, np.ones(3))[1] == pytest.approx(tree.predict(X[:1])[0])
    assert mle(table, np.zeros(3))[1] == pytest.approx(y.mean())
    np.testing.assert_allclose(mle(table, np.full(3, 0.5))[0],
                               reference.semivalue(ens, X[0], reference.banzhaf_weight(0.5))[0])


# --------------------------------------------------------------------------
# Models


def deep_data(p, n=300, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, p))
    y = np.sin(6 * X[:, 0]) + X[:, 1] * X[:, -1] + 0.3 * rng.normal(size=n)
    return X, y


def probe_rows(X, seed=1):
    """Training rows, fresh random rows, and one row with a NaN."""
    rng = np.random.default_rng(seed)
    rows = np.vstack([X[:3], rng.uniform(size=(3, X.shape[1]))])
    rows[-1, 0] = np.nan
    return rows


def probe_points(p, seed=2):
    """Interior points and points with coordinates exactly 0 and 1."""
    rng = np.random.default_rng(seed)
    mixed = rng.uniform(size=p)
    mixed[0], mixed[-1] = 0.0, 1.0
    vertex = (np.arange(p) % 2).astype(float)
    return [rng.uniform(size=p), np.full(p, 0.5), mixed, vertex, np.zeros(p), np.ones(p),
            1.0 - vertex]


@pytest.fixture(scope="module")
def deep_tree():
    X, y = deep_data(3)
    tree = DecisionTreeRegressor(max_depth=12, min_samples_leaf=2, random_state=0).fit(X, y)
    ens = to_ensemble(tree)
    assert np.any(ens.prev_same >= 0)  # features repeat on paths
    return tree, X


@pytest.fixture(scope="module")
def binary_booster():
    X, y = make_classification(n_samples=300, n_features=4, n_informative=3, n_redundant=0,
                               random_state=0)
    return GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0).fit(X, y), X


@pytest.fixture(scope="module")
def multiclass_forest():
    X, y = make_classification(n_samples=300, n_features=3, n_informative=3, n_redundant=0,
                               n_classes=3, n_clusters_per_class=1, random_state=0)
    return RandomForestClassifier(n_estimators=4, max_depth=6, random_state=0).fit(X, y), X


# --------------------------------------------------------------------------
# (a) multilinear_gradient against the definition


def check_gradient(model, rows, output=0, sign=1.0, kernel_output=None):
    ens = to_ensemble(model)
    p = ens.n_features
    for x in rows:
        table = game_table(ens, x, output, sign)
        scale = np.max(np.abs(table)) + 1.0
        for z in probe_points(p):
            grad, value = multilinear_gradient(model, x[None, :], z, class_index=kernel_output)
            expected_grad, expected_value = mle(table, z)
            np.testing.assert_allclose(grad[0], expected_grad, rtol=1e-9, atol=1e-11 * scale)
            assert value[0] == pytest.approx(expected_value, rel=1e-9, abs=1e-11 * scale)


@pytest.mark.parametrize("p", [2, 3])
def test_gradient_deep_sklearn_tree_with_repeated_features(p):
    X, y = deep_data(p, seed=p)
    tree = DecisionTreeRegressor(max_depth=10, random_state=0).fit(X, y)
    check_gradient(tree, probe_rows(X))


def test_gradient_at_points_per_row_and_vertices(deep_tree):
    tree, X = deep_tree
    ens = to_ensemble(tree)
    rows = probe_rows(X)
    rng = np.random.default_rng(5)
    Z = rng.uniform(size=rows.shape)
    Z[rng.uniform(size=Z.shape) < 0.3] = 1.0
    Z[rng.uniform(size=Z.shape) < 0.3] = 0.0
    grad, value = multilinear_gradient(tree, rows, Z)
    for i, x in enumerate(rows):
        expected_grad, expected_value = mle(game_table(ens, x), Z[i])
        np.testing.assert_allclose(grad[i], expected_grad, rtol=1e-9, atol=1e-12)
        assert value[i] == pytest.approx(expected_value, rel=1e-9)
    # At the vertex 1, F is the prediction.
    np.testing.assert_allclose(multilinear_gradient(tree, rows, np.ones(3))[1],
                               tree.predict(rows), rtol=1e-12)


def test_gradient_where_the_row_fails_a_split():
    # A stump on feature 0: a row on the right has gamma = 0 on the left leaf.
    tree = TreeEnsemble.from_trees([TreeArrays(
        children_left=np.array([1, -1, -1]), children_right=np.array([2, -1, -1]),
        default_left=np.array([True, False, False]), feature=np.array([0, 0, 0]),
        threshold=np.array([0.5, 0.0, 0.0]), decision_type=np.full(3, DECISION_LEQ, np.uint8),
        cover=np.array([4.0, 1.0, 3.0]), value=np.array([[0.0], [10.0], [2.0]]),
    )], base_value=[1.0], n_features=2)
    grad, value = multilinear_gradient(tree, np.array([[0.9, 0.0]]), np.array([1.0, 0.3]))
    # F(z) = 1 + (1 - z0) * (10/4 + 3*2/4) + z0 * 2: dF/dz0 = 2 - 4, F(1, .) = 3
    np.testing.assert_allclose(grad, [[-2.0, 0.0]])
    np.testing.assert_allclose(value, [3.0])


def test_gradient_xgboost():
    xgboost = pytest.importorskip("xgboost")
    X, y = deep_data(4, seed=3)
    model = xgboost.XGBRegressor(n_estimators=8, max_depth=4, learning_rate=0.5,
                                 base_score=0.3, n_jobs=1).fit(X, y)
    check_gradient(model, probe_rows(X)[:4])


def test_gradient_lightgbm():
    lightgbm = pytest.importorskip("lightgbm")
    X, y = deep_data(4, seed=4)
    model = lightgbm.LGBMRegressor(n_estimators=8, num_leaves=12, min_child_samples=5,
                                   verbose=-1, n_jobs=1).fit(X, y)
    check_gradient(model, probe_rows(X)[:4])


def test_gradient_of_each_class(multiclass_forest, binary_booster):
    forest, X = multiclass_forest
    rows = probe_rows(X)[:3]
    for c in range(3):
        check_gradient(forest, rows, output=c, kernel_output=c)
    booster, Xb = binary_booster
    rows = Xb[:2]
    check_gradient(booster, rows, output=0, sign=1.0, kernel_output=1)
    check_gradient(booster, rows, output=0, sign=-1.0, kernel_output=0)  # log-odds of class 0


def test_gradient_default_output_is_the_predicted_class(multiclass_forest, binary_booster):
    for model, X in (multiclass_forest, binary_booster):
        rows = X[:40]
        predicted = np.searchsorted(model.classes_, model.predict(rows))
        z = np.random.default_rng(0).uniform(size=X.shape[1])
        default = multilinear_gradient(model, rows, z)
        explicit = multilinear_gradient(model, rows, z, class_index=predicted)
        np.testing.assert_array_equal(default[0], explicit[0])
        np.testing.assert_array_equal(default[1], explicit[1])
        assert len(np.unique(predicted)) > 1  # both routes were exercised
    # F(1) is the explained output itself
    booster, X = binary_booster
    margin = booster.decision_function(X[:40])
    np.testing.assert_allclose(multilinear_gradient(booster, X[:40], np.ones(4))[1],
                               np.abs(margin), rtol=1e-9)
    forest, X = multiclass_forest
    proba = forest.predict_proba(X[:40])
    np.testing.assert_allclose(multilinear_gradient(forest, X[:40], np.ones(3))[1],
                               proba.max(axis=1), rtol=1e-9)


# --------------------------------------------------------------------------
# (b) ranker scores against Algorithms 2 and 10 in Python


@pytest.mark.parametrize("optimizer", ["gd", "adam"])
@pytest.mark.parametrize("n_iter, step_size", [(100, 5.0), (13, 0.3)])
def test_ranker_matches_python_algorithms(deep_tree, optimizer, n_iter, step_size):
    tree, X = deep_tree
    ens = to_ensemble(tree)
    rows = probe_rows(X)
    zeta = treegrad_scores(tree, rows, n_iter=n_iter, step_size=step_size, optimizer=optimizer)
    for i, x in enumerate(rows):
        expected = python_ranker(game_table(ens, x), 3, n_iter, step_size, optimizer == "adam")
        np.testing.assert_allclose(zeta[i], expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("optimizer", ["gd", "adam"])
def test_ranker_matches_python_algorithms_on_boosted_classes(binary_booster, optimizer):
    booster, X = binary_booster
    ens = to_ensemble(booster)
    rows = X[:3]
    for output, sign in ((1, 1.0), (0, -1.0)):
        zeta = treegrad_scores(booster, rows, optimizer=optimizer, class_index=output)
        for i, x in enumerate(rows):
            expected = python_ranker(game_table(ens, x, 0, sign), 4, 100, 5.0,
                                     optimizer == "adam")
            np.testing.assert_allclose(zeta[i], expected, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("optimizer", ["gd", "adam"])
def test_ranker_matches_python_algorithms_per_class(multiclass_forest, optimizer):
    # a forest's leaves hold all three class probabilities (one value per
    # class), a multiclass booster has one tree per class: each class's game
    forest, X = multiclass_forest
    booster = GradientBoostingClassifier(n_estimators=4, max_depth=3, random_state=0).fit(
        X, forest.predict(X))
    rows = X[:2]
    for model in (forest, booster):
        ens = to_ensemble(model)
        for output in range(3):
            zeta = treegrad_scores(model, rows, optimizer=optimizer, class_index=output)
            for i, x in enumerate(rows):
                expected = python_ranker(game_table(ens, x, output), 3, 100, 5.0,
                                         optimizer == "adam")
                np.testing.assert_allclose(zeta[i], expected, rtol=1e-9, atol=1e-12)


def test_ranker_on_xgboost_five_features():
    xgboost = pytest.importorskip("xgboost")
    X, y = deep_data(5, seed=7)
    model = xgboost.XGBRegressor(n_estimators=5, max_depth=4, n_jobs=1).fit(X, y)
    ens = to_ensemble(model)
    rows = X[:2]
    zeta = treegrad_scores(model, rows, optimizer="gd")
    for i, x in enumerate(rows):
        np.testing.assert_allclose(zeta[i], python_ranker(game_table(ens, x), 5, 100, 5.0, False),
                                   rtol=1e-9, atol=1e-12)


def test_one_step_is_the_banzhaf_value(deep_tree):
    tree, X = deep_tree
    for optimizer in ("gd", "adam"):
        np.testing.assert_allclose(treegrad_scores(tree, X[:20], n_iter=1, optimizer=optimizer),
                                   banzhaf_values(tree, X[:20])[:, :-1], rtol=1e-9, atol=1e-12)


def test_monotonicity_axiom(deep_tree):
    # A feature whose every marginal contribution is >= 0 gets a score >= 0.
    tree, X = deep_tree
    ens = to_ensemble(tree)
    rows = X[:15]
    zeta = treegrad_scores(tree, rows, optimizer="gd")
    masks, member = memberships(3)
    checked = 0
    for i, x in enumerate(rows):
        table = game_table(ens, x)
        for j in range(3):
            without = masks[~member[:, j]]
            delta = table[without | (1 << j)] - table[without]
            if np.all(delta >= 0):
                assert zeta[i, j] >= -1e-12
                checked += 1
            if np.all(delta <= 0):
                assert zeta[i, j] <= 1e-12
                checked += 1
    assert checked > 0


# --------------------------------------------------------------------------
# (c) dummy and equal treatment on constructed trees


def symmetric_tree():
    """Root on x0, both children on x1, (right, right) on x2; covers halve at
    every split and leaf values are symmetric in (x0 side, x1 side), so
    swapping features 0 and 1 gives the same tree. Feature 3 is never split."""
    #          0:x0
    #    1:x1        4:x1
    #   2    3     5    6:x2
    #                  7   8
    left = np.array([1, 2, -1, -1, 5, -1, 7, -1, -1])
    right = np.array([4, 3, -1, -1, 6, -1, 8, -1, -1])
    feature = np.array([0, 1, 0, 0, 1, 0, 2, 0, 0])
    cover = np.array([8.0, 4, 2, 2, 4, 2, 2, 1, 1])
    value = np.array([0, 0, 1.0, 3.0, 0, 3.0, 0, 5.0, 9.0])[:, None]
    return TreeArrays(children_left=left, children_right=right,
                      default_left=np.ones(9, dtype=bool), feature=feature,
                      threshold=np.full(9, 0.5), decision_type=np.full(9, DECISION_LEQ, np.uint8),
                      cover=cover, value=value)


def stump(feature, low, high):
    return TreeArrays(children_left=np.array([1, -1, -1]), children_right=np.array([2, -1, -1]),
                      default_left=np.array([True, False, False]),
                      feature=np.array([feature, 0, 0]), threshold=np.array([0.5, 0.0, 0.0]),
                      decision_type=np.full(3, DECISION_LEQ, np.uint8),
                      cover=np.array([4.0, 1.0, 3.0]), value=np.array([[0.0], [low], [high]]))


@pytest.mark.parametrize("optimizer", ["gd", "adam"])
def test_dummy_and_equal_treatment_axioms(optimizer):
    ens = TreeEnsemble.from_trees([symmetric_tree()], base_value=[0.5], n_features=4)
    rows = np.array([[0.2, 0.3, 0.9, 0.1], [0.8, 0.7, 0.9, 0.6], [0.8, 0.9, 0.1, 0.2],
                     [0.1, 0.4, 0.2, 0.9]])
    zeta = treegrad_scores(ens, rows, optimizer=optimizer)
    # the game is symmetric in features 0 and 1 on these rows (same side of 0.5)
    for x in rows:
        table = game_table(ens, x)
        assert table[0b0001] == table[0b0010] and table[0b0101] == table[0b0110]
    np.testing.assert_allclose(zeta[:, 0], zeta[:, 1], rtol=1e-12)
    assert np.all(zeta[:, 3] == 0.0)  # never split on
    assert np.all(np.abs(zeta[:, :3]).max(axis=1) > 0)
    # on a row with x0, x1 on different sides they are not interchangeable
    other = treegrad_scores(ens, np.array([[0.2, 0.9, 0.9, 0.1]]), optimizer=optimizer)
    assert not np.isclose(other[0, 0], other[0, 1])


@pytest.mark.parametrize("optimizer", ["gd", "adam"])
def test_dummy_axiom_with_a_constant_contribution(optimizer):
    # A stump on x3 added to the symmetric tree: feature 3 always adds the
    # same v({3} + S) - v(S) = leaf(x) - mean, which must be its score.
    ens = TreeEnsemble.from_trees([symmetric_tree(), stump(3, -2.0, 6.0)], base_value=[0.0],
                                  n_features=4)
    rows = np.array([[0.2, 0.3, 0.9, 0.1], [0.8, 0.7, 0.9, 0.6]])
    zeta = treegrad_scores(ens, rows, optimizer=optimizer)
    mean = (1 * -2.0 + 3 * 6.0) / 4
    np.testing.assert_allclose(zeta[:, 3], [-2.0 - mean, 6.0 - mean], rtol=1e-12)


# --------------------------------------------------------------------------
# (d) the same numbers for any number of threads


def test_identical_results_for_any_n_jobs(deep_tree, multiclass_forest):
    tree, X = deep_tree
    forest, Xf = multiclass_forest
    for model, rows in ((tree, X), (forest, Xf)):
        one = treegrad_scores(model, rows, n_jobs=1)
        np.testing.assert_array_equal(one, treegrad_scores(model, rows, n_jobs=2))
        np.testing.assert_array_equal(one, treegrad_scores(model, rows, n_jobs=-1))
        z = np.full(rows.shape[1], 0.3)
        a, b = multilinear_gradient(model, rows, z, n_jobs=1), multilinear_gradient(
            model, rows, z, n_jobs=2)
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])
        ranks = np.argsort(-one, axis=1, kind="stable")
        c = insertion_deletion(model, rows, ranks, n_jobs=1)
        d = insertion_deletion(model, rows, ranks, n_jobs=2)
        np.testing.assert_array_equal(c.insertion, d.insertion)
        np.testing.assert_array_equal(c.deletion, d.deletion)
    ranker = TreeGradRanker(DecisionTreeRegressor(max_depth=5, random_state=0), n_jobs=1)
    Xd, yd = deep_data(4)
    np.testing.assert_array_equal(ranker.fit(Xd, yd).row_scores_,
                                  ranker.set_params(n_jobs=2).fit(Xd, yd).row_scores_)


# --------------------------------------------------------------------------
# (e) insertion / deletion curves against v_x(S)


def brute_force_curves(ens, x, ranking, output=0, sign=1.0):
    p = len(ranking)
    table = game_table(ens, x, output, sign)
    full = (1 << p) - 1
    inserted = [sum(1 << int(j) for j in ranking[:k]) for k in range(p + 1)]
    return table[inserted], table[[full ^ s for s in inserted]]


def test_insertion_deletion_against_brute_force(deep_tree, binary_booster, multiclass_forest):
    rng = np.random.default_rng(0)
    for model, X in (deep_tree, binary_booster, multiclass_forest):
        ens = to_ensemble(model)
        rows = X[:6]
        p = X.shape[1]
        rankings = np.array([rng.permutation(p) for _ in rows])
        result = insertion_deletion(model, rows, rankings)
        predicted = np.searchsorted(model.classes_, model.predict(rows)) if hasattr(
            model, "classes_") else np.zeros(len(rows), int)
        for i, x in enumerate(rows):
            if isinstance(model, GradientBoostingClassifier):
                output, sign = 0, (1.0 if predicted[i] == 1 else -1.0)
            else:
                output, sign = predicted[i], 1.0
            ins, dele = brute_force_curves(ens, x, rankings[i], output, sign)
            np.testing.assert_allclose(result.insertion[i], ins, rtol=1e-9, atol=1e-12)
            np.testing.assert_allclose(result.deletion[i], dele, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(result.insertion_auc, result.insertion.mean(axis=1))
        np.testing.assert_allclose(result.deletion_auc, result.deletion.mean(axis=1))
        assert result.mean() == pytest.approx({"insertion_auc": result.insertion.mean(),
                                               "deletion_auc": result.deletion.mean()})


def test_insertion_deletion_blocks_are_bounded_by_their_memory(deep_tree, monkeypatch):
    """The curves' blocks hold at most BLOCK_BYTES of vertices (the executor
    sizes them by curves_bytes_per_row), with the same curves as one block."""
    from sklearn_r2shap import metrics
    from sklearn_r2shap._execution import local as _local
    from sklearn_r2shap._games.treegrad import curves_block, curves_bytes_per_row

    model, X = deep_tree
    rows = X[:30]
    rankings = np.argsort(-treegrad_scores(model, rows), axis=1, kind="stable")
    whole = insertion_deletion(model, rows, rankings, n_jobs=1)
    sizes = []

    def counted(ensemble, block, **kwargs):
        sizes.append(len(block))
        return curves_block(ensemble, block, **kwargs)

    monkeypatch.setattr(metrics, "curves_block", counted)
    monkeypatch.setattr(_local, "BLOCK_BYTES", 7 * curves_bytes_per_row(X.shape[1]))
    blocks = insertion_deletion(model, rows, rankings, n_jobs=1)
    assert sizes == [7, 7, 7, 7, 2]
    np.testing.assert_array_equal(blocks.insertion, whole.insertion)
    np.testing.assert_array_equal(blocks.deletion, whole.deletion)


def test_insertion_deletion_one_ranking_and_explicit_class(binary_booster):
    booster, X = binary_booster
    ens = to_ensemble(booster)
    ranking = np.array([2, 0, 3, 1])
    result = insertion_deletion(booster, X[:3], ranking, class_index=0)
    assert isinstance(result, InsertionDeletion)
    np.testing.assert_array_equal(result.rankings, np.tile(ranking, (3, 1)))
    for i, x in enumerate(X[:3]):
        ins, dele = brute_force_curves(ens, x, ranking, 0, -1.0)
        np.testing.assert_allclose(result.insertion[i], ins, rtol=1e-9)
        np.testing.assert_allclose(result.deletion[i], dele, rtol=1e-9)
    np.testing.assert_allclose(result.deletion[:, 0], -booster.decision_function(X[:3]))


@pytest.mark.parametrize("rankings, match", [
    (np.array([[0, 0, 1, 2]]), "permutation"),
    (np.array([[0, 1, 2]]), "shape"),
    (np.array([[0.0, 1, 2, 3]]), "integer"),
    (np.array([[0, 1, 2, 4]]), "permutation"),
])
def test_insertion_deletion_rejects_bad_rankings(binary_booster, rankings, match):
    booster, X = binary_booster
    with pytest.raises(ValueError, match=match):
        insertion_deletion(booster, X[:1], rankings)


def test_insertion_deletion_plot(deep_tree):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    tree, X = deep_tree
    result = insertion_deletion(tree, X[:10], np.argsort(-treegrad_scores(tree, X[:10]), axis=1))
    axes = result.plot(label="TreeGrad")
    assert len(axes) == 2
    np.testing.assert_allclose(axes[0].lines[0].get_ydata(), result.insertion.mean(axis=0))
    np.testing.assert_allclose(axes[1].lines[0].get_ydata(), result.deletion.mean(axis=0))
    assert "TreeGrad" in axes[0].get_legend().get_texts()[0].get_text()


# --------------------------------------------------------------------------
# (f) the estimator


# The default model (DecisionTreeRegressor) passes every check, sample-weight
# equivalence included (its covers are weighted counts and the importances are
# weighted means): no expected failures.
@parametrize_with_checks([TreeGradRanker()])
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def diabetes():
    return load_diabetes(return_X_y=True, as_frame=True)


def test_fit_scores_importances_and_selection(diabetes):
    X, y = diabetes
    ranker = TreeGradRanker(DecisionTreeRegressor(max_depth=4, random_state=0)).fit(X, y)
    expected = treegrad_scores(ranker.estimator_, X)
    np.testing.assert_array_equal(ranker.row_scores_, expected)
    np.testing.assert_array_equal(ranker.row_scores(X), expected)
    np.testing.assert_allclose(ranker.feature_importances_, np.abs(expected).mean(axis=0))
    np.testing.assert_allclose(ranker.mean_scores_, expected.mean(axis=0))
    assert ranker.threshold_ == pytest.approx(ranker.feature_importances_.mean())
    np.testing.assert_array_equal(ranker.get_support(),
                                  ranker.feature_importances_ >= ranker.threshold_)
    assert list(ranker.feature_names_in_) == list(X.columns)
    # features the tree never splits on are never important
    unused = np.setdiff1d(np.arange(X.shape[1]), ranker.estimator_.tree_.feature)
    assert len(unused) and np.all(ranker.feature_importances_[unused] == 0)


def test_sample_weight_weights_the_rows(diabetes):
    X, y = diabetes
    weight = np.random.default_rng(0).uniform(0.1, 2.0, size=len(y))
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y, sample_weight=weight)
    ranker = TreeGradRanker(model, prefit=True).fit(X, sample_weight=weight)
    scores = treegrad_scores(model, X)
    np.testing.assert_allclose(ranker.feature_importances_,
                               np.abs(scores).T @ weight / weight.sum())
    np.testing.assert_allclose(ranker.mean_scores_, scores.T @ weight / weight.sum())
    fitted = TreeGradRanker(DecisionTreeRegressor(max_depth=4, random_state=0)).fit(
        X, y, sample_weight=weight)
    np.testing.assert_allclose(fitted.estimator_.predict(X), model.predict(X))


def test_rank_sorts_scores_with_ties_by_index(diabetes):
    X, y = diabetes
    ranker = TreeGradRanker(DecisionTreeRegressor(max_depth=2, random_state=0)).fit(X, y)
    scores = ranker.row_scores(X.iloc[:30])
    order = ranker.rank(X.iloc[:30])
    assert order.shape == scores.shape
    for s, o in zip(scores, order):
        assert sorted(o) == list(range(X.shape[1]))
        ranked = s[o]
        assert np.all(np.diff(ranked) <= 0)
        for a, b in zip(o[:-1], o[1:]):  # equal scores: lower index first
            if s[a] == s[b]:
                assert a < b
    assert np.sum(scores == 0) > 30  # a depth-2 tree leaves ties to break


def test_values_select_the_same_output(binary_booster, multiclass_forest):
    booster, X = binary_booster
    ranker = TreeGradRanker(booster, prefit=True, class_index=0).fit(X)
    np.testing.assert_allclose(ranker.values(X[:5]), -shap_values(booster, X[:5])[:, :-1])
    np.testing.assert_allclose(ranker.values(X[:5], "beta", alpha=16, beta=1),
                               -beta_shapley_values(booster, X[:5], alpha=16)[:, :-1])
    forest, Xf = multiclass_forest
    ranker = TreeGradRanker(forest, prefit=True).fit(Xf)
    predicted = np.searchsorted(forest.classes_, forest.predict(Xf[:8]))
    phi = banzhaf_values(forest, Xf[:8], q=0.3)
    np.testing.assert_allclose(ranker.values(Xf[:8], "weighted_banzhaf", q=0.3),
                               phi[np.arange(8), predicted, :-1])
    np.testing.assert_allclose(ranker.values(Xf[:8], "banzhaf"),
                               banzhaf_values(forest, Xf[:8])[np.arange(8), predicted, :-1])
    with pytest.raises(ValueError, match=r"semivalue must be one of \('shapley', 'banzhaf', "
                       r"'weighted_banzhaf', 'beta'\), got 'owen'"):
        ranker.values(Xf[:8], "owen")
    with pytest.raises(TypeError, match="kind"):  # the old name is gone, no alias
        ranker.values(Xf[:8], kind="banzhaf")


def test_classifier_output_selection(binary_booster, multiclass_forest):
    forest, X = multiclass_forest
    predicted = np.searchsorted(forest.classes_, forest.predict(X))
    default = TreeGradRanker(forest, prefit=True).fit(X)
    np.testing.assert_array_equal(default.row_scores_, treegrad_scores(forest, X, class_index=predicted))
    probability = TreeGradRanker(forest, prefit=True, model_output="probability").fit(X)
    np.testing.assert_array_equal(probability.row_scores_, default.row_scores_)
    second = TreeGradRanker(forest, prefit=True, class_index=2).fit(X)
    np.testing.assert_array_equal(second.row_scores_, treegrad_scores(forest, X, class_index=2))
    assert not np.allclose(second.row_scores_, default.row_scores_)
    # the explained output of class 2 is its probability
    curves = insertion_deletion(forest, X[:5], second.rank(X[:5]), class_index=2)
    np.testing.assert_allclose(curves.insertion[:, -1], forest.predict_proba(X[:5])[:, 2])

    booster, Xb = binary_booster
    margin_one = TreeGradRanker(booster, prefit=True, class_index=1).fit(Xb)
    margin_zero = TreeGradRanker(booster, prefit=True, class_index=0).fit(Xb)
    np.testing.assert_array_equal(margin_zero.row_scores_, -margin_one.row_scores_)
    default = TreeGradRanker(booster, prefit=True).fit(Xb)
    class_one = booster.predict(Xb) == 1
    assert 0 < class_one.sum() < len(Xb)
    np.testing.assert_array_equal(default.row_scores_[class_one], margin_one.row_scores_[class_one])
    np.testing.assert_array_equal(default.row_scores_[~class_one],
                                  margin_zero.row_scores_[~class_one])
    with pytest.raises(UnsupportedModelError, match="probabilit"):
        TreeGradRanker(booster, prefit=True, model_output="probability").fit(Xb)
    raw = TreeGradRanker(booster, prefit=True, model_output="raw").fit(Xb)
    np.testing.assert_array_equal(raw.row_scores_, default.row_scores_)


def test_multiclass_boosting_explains_margins():
    X, y = make_classification(n_samples=200, n_features=4, n_informative=3, n_redundant=0,
                               n_classes=3, random_state=1)
    booster = GradientBoostingClassifier(n_estimators=5, max_depth=2, random_state=0).fit(X, y)
    ranker = TreeGradRanker(booster, prefit=True, class_index=1).fit(X)
    ens = to_ensemble(booster)
    table = game_table(ens, X[0], output=1)
    np.testing.assert_allclose(ranker.row_scores_[0], python_ranker(table, 4, 100, 5.0, True),
                               rtol=1e-9, atol=1e-12)
    assert table[-1] == pytest.approx(booster.decision_function(X[:1])[0, 1])


def test_prefit_frozen_and_unfitted(diabetes):
    from sklearn.frozen import FrozenEstimator

    X, y = diabetes
    model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X[:300], y[:300])
    expected = treegrad_scores(model, X[300:])
    for ranker in (TreeGradRanker(model, prefit=True), TreeGradRanker(FrozenEstimator(model))):
        ranker.fit(X[300:])  # no y needed
        assert ranker.estimator_ is model
        np.testing.assert_array_equal(ranker.row_scores_, expected)
    with pytest.raises(Exception, match="not fitted"):
        TreeGradRanker(DecisionTreeRegressor(), prefit=True).fit(X, y)
    with pytest.raises(ValueError, match="requires y"):
        TreeGradRanker().fit(X)


def test_pipeline_grid_search_and_pandas_output(diabetes):
    X, y = diabetes
    pipe = make_pipeline(TreeGradRanker(DecisionTreeRegressor(max_depth=3, random_state=0),
                                        n_iter=20), LinearRegression())
    search = GridSearchCV(pipe, {
        "treegradranker__threshold": ["mean", "median", -np.inf],
        "treegradranker__estimator__max_depth": [2, 4],
    }, cv=3).fit(X, y)
    assert set(search.best_params_) == {"treegradranker__threshold",
                                        "treegradranker__estimator__max_depth"}
    best = search.best_estimator_[0]
    assert best.estimator_.max_depth == search.best_params_["treegradranker__estimator__max_depth"]
    ranker = TreeGradRanker(DecisionTreeRegressor(max_depth=3, random_state=0), max_features=3,
                            threshold=-np.inf)
    out = ranker.set_output(transform="pandas").fit(X, y).transform(X)
    top = np.argsort(-ranker.feature_importances_, kind="mergesort")[:3]
    assert list(out.columns) == list(X.columns[np.sort(top)])
    np.testing.assert_array_equal(out.to_numpy(), X.iloc[:, np.sort(top)].to_numpy())


def test_verbose_shows_progress_and_changes_nothing(capsys):
    X, y = deep_data(3, n=1100)
    model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    quiet = TreeGradRanker(model, prefit=True, n_iter=5).fit(X)
    loud = TreeGradRanker(model, prefit=True, n_iter=5, verbose=1).fit(X)
    captured = capsys.readouterr()
    assert "TreeGrad-Ranker" in captured.out + captured.err
    np.testing.assert_array_equal(quiet.row_scores_, loud.row_scores_)


@pytest.mark.parametrize("params, match", [
    (dict(n_iter=0), "n_iter"),
    (dict(n_iter=2.5), "n_iter"),
    (dict(step_size=-1.0), "step_size"),
    (dict(step_size=np.inf), "step_size"),
    (dict(optimizer="sgd"), "optimizer"),
    (dict(model_output="logit"), "model_output"),
    (dict(class_index=-1), "class_index"),
    (dict(class_index=1.5), "class_index"),
    (dict(prefit="yes"), "prefit"),
])
def test_bad_parameters(params, match):
    X, y = deep_data(3, n=50)
    with pytest.raises(ValueError, match=f"The '{match}' parameter of TreeGradRanker must be"):
        TreeGradRanker(**params).fit(X, y)


def test_bad_outputs_for_the_model(diabetes, multiclass_forest):
    X, y = diabetes
    with pytest.raises(ValueError, match="single output"):
        TreeGradRanker(class_index=1).fit(X, y)
    with pytest.raises(UnsupportedModelError, match="probabilit"):
        TreeGradRanker(model_output="probability").fit(X, y)
    forest, Xf = multiclass_forest
    with pytest.raises(ValueError, match="class_index=3 is out of range.*3 classes"):
        TreeGradRanker(forest, prefit=True, class_index=3).fit(Xf)
    booster = GradientBoostingClassifier(n_estimators=3).fit(Xf, Xf[:, 0] > 0)
    with pytest.raises(ValueError, match="2 classes"):
        TreeGradRanker(booster, prefit=True, class_index=2).fit(Xf)
    with pytest.raises(ValueError, match="class_index"):
        treegrad_scores(forest, Xf[:3], class_index=[0, 1])
    with pytest.raises(ValueError, match="class_index"):
        treegrad_scores(forest, Xf[:3], class_index=1.0)
    multi = DecisionTreeRegressor(max_depth=3).fit(Xf, np.c_[Xf[:, 0], Xf[:, 1]])
    with pytest.raises(ValueError, match="outputs"):
        treegrad_scores(multi, Xf[:3])
    np.testing.assert_array_equal(treegrad_scores(multi, Xf[:3], class_index=1).shape, (3, 3))


@pytest.mark.parametrize("z, match", [
    (np.full(3, 1.5), r"\[0, 1\]"),
    (np.array([0.5, np.nan, 0.5]), r"\[0, 1\]"),
    (np.full(4, 0.5), "entries"),
    (np.full((2, 3), 0.5), "shape"),
])
def test_bad_points(deep_tree, z, match):
    tree, X = deep_tree
    with pytest.raises(ValueError, match=match):
        multilinear_gradient(tree, X[:3], z)


def test_pandas_rows_and_classifier_from_labels():
    pd = pytest.importorskip("pandas")
    X, y = make_classification(n_samples=200, n_features=4, n_informative=3, n_redundant=0,
                               random_state=2)
    frame = pd.DataFrame(X, columns=["a", "b", "c", "d"])
    labels = np.array(["no", "yes"])[y]
    ranker = TreeGradRanker(DecisionTreeClassifier(max_depth=4, random_state=0)).fit(frame, labels)
    np.testing.assert_array_equal(ranker.row_scores(frame), treegrad_scores(ranker.estimator_, X))
    with pytest.raises(ValueError, match="feature names"):
        ranker.row_scores(frame.rename(columns={"a": "z"}))
