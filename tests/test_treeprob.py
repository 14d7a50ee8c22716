"""TreeProb (probabilistic_values) against subset enumeration (tests/reference.py),
and where its roots-of-unity encoding stops being accurate."""
from math import comb

import numpy as np
import pytest

import reference
from sklearn_r2shap import UnsupportedModelError, beta_shapley_values, shap_values, to_ensemble
from sklearn_r2shap._kernels import _treeprob
from sklearn_r2shap._model._ensemble import TreeArrays, TreeEnsemble
from sklearn_r2shap.attributions import probabilistic_values
from test_kernels import ENSEMBLES, deep_spine_tree, random_ensemble, relative_error


def weight_vector(weight, n):
    """A reference weight function w(n, s) as the vector w(0..n-1)."""
    return np.array([weight(n, s) for s in range(n)])


def arbitrary_weight(seed):
    """Non-negative weights that are no semivalue (no measure behind them)."""
    table = np.random.default_rng(seed).random(64)
    return lambda n, s: table[s]


WEIGHTS = {
    "shapley": reference.shapley_weight,
    "banzhaf": reference.banzhaf_weight(0.5),
    "banzhaf-0.2": reference.banzhaf_weight(0.2),
    "beta-16-1": reference.beta_weight(16, 1),
    "beta-1-4": reference.beta_weight(1, 4),
    "arbitrary": arbitrary_weight(0),
}


def check_against_enumeration(ens, X, weight, tol=1e-9):
    got = probabilistic_values(ens, X, weight_vector(weight, ens.n_features))
    if ens.n_outputs == 1:
        got = got[:, None, :]
    for i, x in enumerate(X):
        want = reference.semivalue(ens, x, weight)
        assert relative_error(got[i, :, :-1], want) < tol
        np.testing.assert_allclose(got[i, :, -1], reference.value_function(ens, x, ()), atol=1e-12)


@pytest.mark.parametrize("name", ENSEMBLES)
@pytest.mark.parametrize("weight", WEIGHTS)
def test_matches_enumeration_on_random_ensembles(name, weight):
    ens, X = random_ensemble(**ENSEMBLES[name])
    check_against_enumeration(ens, X[:4], WEIGHTS[weight])


@pytest.mark.parametrize("weight", ["shapley", "banzhaf-0.2", "beta-16-1", "arbitrary"])
def test_matches_enumeration_on_sklearn_trees(weight):
    from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 6))
    y = X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + X[:, 3]
    regressor = DecisionTreeRegressor(max_depth=8, random_state=0).fit(X, y)
    classifier = DecisionTreeClassifier(max_depth=6, random_state=0).fit(X, np.digitize(y, [-1, 1]))
    for model in (regressor, classifier):
        ens = to_ensemble(model)
        check_against_enumeration(ens, X[:3], WEIGHTS[weight])
    # and through the public model path
    phi = probabilistic_values(regressor, X[:20], weight_vector(reference.shapley_weight, 6))
    np.testing.assert_allclose(phi, shap_values(regressor, X[:20]), rtol=0, atol=1e-10)


def test_full_cover_edges_and_repeated_features():
    # The root sends all its cover left (R = 1, so the factor 1 + y vanishes
    # at the root of unity -1) and feature 0 splits again below.
    tree = TreeArrays(
        children_left=np.array([1, 3, -1, 5, -1, -1, -1]),
        children_right=np.array([2, 4, -1, 6, -1, -1, -1]),
        default_left=np.zeros(7, bool), feature=np.array([0, 1, 0, 0, 0, 0, 0]),
        threshold=np.array([1.0, 0.0, 0, -1.0, 0, 0, 0]), decision_type=np.zeros(7, np.uint8),
        cover=np.array([10.0, 10.0, 0.0, 6.0, 4.0, 2.0, 4.0]),
        value=np.array([0, 0, 7.0, 0, -3.0, 5.0, 1.0])[:, None],
    )
    for n_features in (2, 3, 4):  # M = 2, 3, 3: an even and an odd number of roots
        ens = TreeEnsemble.from_trees([tree], base_value=[0.0], n_features=n_features)
        X = np.zeros((6, n_features))
        X[:, :2] = [[0.0, -1.0], [0.0, 1.0], [-2.0, -1.0], [2.0, -1.0], [2.0, 1.0], [-2.0, 1.0]]
        for weight in (reference.shapley_weight, reference.banzhaf_weight(0.3), arbitrary_weight(1)):
            got = probabilistic_values(ens, X, weight_vector(weight, n_features))
            assert np.all(np.isfinite(got))
            for i, x in enumerate(X):
                np.testing.assert_allclose(got[i, :-1], reference.semivalue(ens, x, weight)[0],
                                           rtol=0, atol=1e-12)


def test_number_of_roots_is_min_of_depth_and_features():
    ens, _ = random_ensemble(seed=4, p=2, max_depth=7)
    assert np.all(_treeprob.tree_depths(ens) <= 7)
    assert _treeprob.tree_depths(ens).max() == ens.max_depth
    # Lemma 3: summing out the null players keeps a probabilistic value one
    q = _treeprob.reduce_weights(weight_vector(reference.shapley_weight, 9), 4)
    np.testing.assert_allclose(q, weight_vector(reference.shapley_weight, 4), rtol=1e-14)


def spine_ensemble(depth, n_features, seed):
    """A caterpillar of the given depth on 11 features, in a model with
    ``n_features`` features (the others null players), and rows to explain."""
    rng = np.random.default_rng(seed)
    ens = TreeEnsemble.from_trees([deep_spine_tree(rng, depth, 11)], base_value=[0.0],
                                  n_features=n_features)
    X = np.zeros((2, n_features))
    X[:, :11] = rng.normal(size=(2, 11)) * 2
    return ens, X


def treeprob_kernel(ens, X, weights):
    """The roots-of-unity kernel alone, on every tree (no quadrature route)."""
    out = np.zeros((X.shape[0], ens.n_outputs, ens.n_features))
    _treeprob.treeprob(ens, np.ascontiguousarray(X, dtype=np.float64), weights, out, 1)
    return out[:, 0, :]


def errors_against_enumeration(ens, X, weight=reference.shapley_weight):
    """Largest relative error of TreeProb's kernel, of probabilistic_values and
    of the quadrature kernel (Shapley only). Null players do not change a
    semivalue once its weights are summed over them (Lemma 3), so enumerating
    the 11 features the tree splits on with the reduced weights is the
    brute-force truth."""
    n = ens.n_features
    w = weight_vector(weight, n)
    reduced = _treeprob.reduce_weights(w, 11)
    kernel = treeprob_kernel(ens, X, w)
    public = probabilistic_values(ens, X, w)[:, :-1]
    quadrature = beta_shapley_values(ens, X, alpha=1, beta=1)[:, :-1]
    errors = np.zeros(3)
    for i, x in enumerate(X):
        want = reference.semivalue(ens, x, lambda _, s: reduced[s], features=range(11))[0]
        errors = np.maximum(errors, [relative_error(kernel[i], want),
                                     relative_error(public[i], want),
                                     relative_error(quadrature[i], want)])
    return errors


# Measured (12 rows over 6 seeds, relative error of the TreeProb kernel's
# Shapley values on caterpillar trees, M = depth roots of unity): depth 20:
# 0.7-7e-12, 30: 3-5e-9, 50: 3-4e-3, 60: 0.1-0.7; the quadrature kernel:
# < 2e-14 at every depth. The upper bounds below leave a factor >= 10 of
# margin; how large the kernel's error grows beyond them is not asserted (a
# rounding error has no lower bound to derive). What the deep cases test is
# the route: probabilistic_values sends trees deeper than 24 roots to the
# quadrature kernel with an exact rule for the weights, so it stays accurate
# where the kernel alone would miss by 1e-3 to 1.
@pytest.mark.parametrize("depth, treeprob_below", [(20, 1e-10), (30, 1e-7), (50, None),
                                                   (60, None)])
def test_probabilistic_values_accurate_where_treeprob_is_not(depth, treeprob_below):
    ens, X = spine_ensemble(depth, 64, seed=depth)
    assert ens.max_depth == depth and ens.n_path_features == 11
    error_kernel, error_public, error_quadrature = errors_against_enumeration(ens, X)
    assert error_quadrature < 1e-9
    assert error_public < 1e-9
    if treeprob_below is not None:
        assert error_kernel < treeprob_below


@pytest.mark.parametrize("depth", [40, 64])
@pytest.mark.parametrize("weight", ["banzhaf-0.2", "beta-1-4", "arbitrary"])
def test_probabilistic_values_stay_accurate_on_deep_trees(depth, weight):
    # the TreeProb kernel alone, measured: depth 40: 4e-9 (Banzhaf 0.2),
    # 6e-7 (Beta(1, 4)); depth 64: 3e-4, 14; 3-6e-15 for the random weights
    ens, X = spine_ensemble(depth, 64, seed=depth + 1)
    _, error_public, _ = errors_against_enumeration(ens, X, WEIGHTS[weight])
    assert error_public < 1e-12


def test_weights_without_a_stable_rule_raise_on_deep_trees():
    # 40 distinct features on a path and weights concentrated on one size: the
    # exact rule's weights alternate (amplification ~4e5), TreeProb loses ~2^40.
    rng = np.random.default_rng(0)
    ens = TreeEnsemble.from_trees([deep_spine_tree(rng, 40, 40)], base_value=[0.0],
                                  n_features=64)
    spike = np.where(np.arange(64) == 31, 1.0, 0.0)
    with pytest.raises(UnsupportedModelError, match="cannot compute these weights accurately"):
        probabilistic_values(ens, np.zeros((1, 64)), spike)
    # the Shapley weights have a positive rule: computed
    shapley = weight_vector(reference.shapley_weight, 64)
    np.testing.assert_allclose(probabilistic_values(ens, np.zeros((1, 64)), shapley),
                               shap_values(ens, np.zeros((1, 64))), rtol=0, atol=1e-12)


def test_few_features_keep_treeprob_accurate_at_any_depth():
    # M = min(depth, n_features) = 11 roots: no padding blow-up (the setting
    # in which the paper's Figure 2 could not show TreeProb failing).
    ens, X = spine_ensemble(60, 11, seed=3)
    errors = errors_against_enumeration(ens, X)
    assert np.all(errors < 1e-9)


def test_results_do_not_depend_on_n_jobs():
    ens, X = random_ensemble(seed=7, n_trees=5)
    X = np.repeat(X, 20, axis=0)
    w = weight_vector(reference.banzhaf_weight(0.3), ens.n_features)
    np.testing.assert_array_equal(probabilistic_values(ens, X, w, n_jobs=1),
                                  probabilistic_values(ens, X, w, n_jobs=2))


def test_null_players_get_zero():
    ens, X = random_ensemble(seed=6, p=8, max_depth=2, n_trees=1)
    unused = [j for j in range(8) if j not in set(ens.feature[ens.children_left >= 0])]
    assert unused
    phi = probabilistic_values(ens, X, weight_vector(reference.shapley_weight, 8))
    assert np.all(phi[:, unused] == 0.0)


@pytest.mark.parametrize(
    "weights, message",
    [(np.ones(4), "one entry per coalition size"), (np.ones((5, 1)), "one entry"),
     (-np.ones(5), "non-negative"), (np.array([1, 0, np.nan, 0, 0]), "finite")],
)
def test_bad_weights_are_rejected(weights, message):
    ens, X = random_ensemble(seed=9)
    with pytest.raises(ValueError, match=message):
        probabilistic_values(ens, X, weights)
