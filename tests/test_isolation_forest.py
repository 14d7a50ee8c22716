"""IsolationForest: SHAP values of its mean path length, against shap's TreeExplainer,
the model's own score_samples and subset enumeration."""
import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import IsolationForest

import reference
from sklearn_r2shap import (
    UnsupportedModelError,
    expected_value,
    explain,
    predict_raw,
    r2_decomposition,
    saabas_values,
    shap_values,
    to_ensemble,
)
from sklearn_r2shap._model._sklearn import _average_path_length


def _c(n):
    """c(n), written from Liu et al. (2008), eq. 1, independently of the adapter."""
    if n <= 1:
        return 0.0
    if n == 2:
        return 1.0
    harmonic = sum(1.0 / i for i in range(1, int(n)))  # H(n - 1), exactly
    return 2.0 * harmonic - 2.0 * (n - 1.0) / n


def _mean_path_length(model, X):
    """The forest's path-length output from scikit-learn's own score_samples."""
    return -np.log2(-model.score_samples(X)) * _average_path_length([model._max_samples])[0]


def _data(n=300, p=5, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[:10] *= 4  # a few outliers
    return X


SETTINGS = [dict(), dict(max_features=0.6, max_samples=100), dict(max_samples=37),
            dict(max_features=2, max_samples=64, bootstrap=True)]


def test_average_path_length_formula():
    # c(n) uses ln(n - 1) + Euler's constant for H(n - 1), as scikit-learn does; the
    # exact harmonic number differs by ~1 / (2 (n - 1)) (Liu et al. 2008, eq. 1)
    for n in (1, 2, 3, 10, 256):
        approx = _average_path_length([n])[0]
        assert approx == pytest.approx(_c(n), abs=1.0 / max(n - 1, 1) + 1e-12)
    assert _average_path_length([0, 1, 2])[2] == 1.0


@pytest.mark.parametrize("setting", SETTINGS, ids=[str(s) for s in SETTINGS])
def test_predictions_and_additivity(setting):
    X = _data()
    model = IsolationForest(n_estimators=25, random_state=0, **setting).fit(X)
    own = _mean_path_length(model, X)
    np.testing.assert_allclose(predict_raw(model, X)[:, 0], own, rtol=1e-12)
    phi = shap_values(model, X)
    np.testing.assert_allclose(phi.sum(axis=1), own, rtol=1e-12)
    np.testing.assert_allclose(saabas_values(model, X[:20]).sum(axis=1), own[:20], rtol=1e-12)
    # outliers isolate sooner: shorter paths
    assert own[:10].mean() < own[10:].mean()


@pytest.mark.parametrize("setting", SETTINGS, ids=[str(s) for s in SETTINGS])
def test_against_shap(setting):
    shap = pytest.importorskip("shap")
    X = _data(seed=1)
    model = IsolationForest(n_estimators=25, random_state=0, **setting).fit(X)
    explainer = shap.TreeExplainer(model)
    theirs = explainer.shap_values(X[:60])
    phi = shap_values(model, X[:60])
    np.testing.assert_allclose(phi[:, :-1], theirs, atol=1e-10)
    if not setting.get("bootstrap"):
        np.testing.assert_allclose(expected_value(model), explainer.expected_value, rtol=1e-12)
    else:
        # shap's expected value averages leaves by n_node_samples (distinct rows), its
        # TreeSHAP by weighted_n_node_samples (with bootstrap duplicates): its values do
        # not add up to the output; ours, with one cover throughout, do.
        gap = np.abs(theirs.sum(axis=1) + explainer.expected_value
                     - _mean_path_length(model, X[:60])).max()
        assert gap > 1e-6
        np.testing.assert_allclose(phi.sum(axis=1), _mean_path_length(model, X[:60]),
                                   rtol=1e-12)


def test_against_subset_enumeration():
    X = _data(n=200, p=4, seed=2)
    model = IsolationForest(n_estimators=3, max_samples=40, max_features=3,
                            random_state=0).fit(X)
    ensemble = to_ensemble(model)
    phi = shap_values(model, X[:6])
    for i in range(6):
        np.testing.assert_allclose(phi[i, :-1], reference.semivalue(ensemble, X[i])[0],
                                   atol=1e-10)
        np.testing.assert_allclose(phi[i, -1], reference.value_function(ensemble, X[i], ())[0],
                                   atol=1e-12)


def test_leaf_values_are_depth_plus_c():
    X = _data(n=100, p=3, seed=3)
    model = IsolationForest(n_estimators=2, max_samples=50, random_state=0).fit(X)
    tree = model.estimators_[0].tree_
    ensemble = to_ensemble(model)
    # walk the first tree by hand: depth of every node
    depth = {0: 0}
    for node in range(tree.node_count):
        for child in (tree.children_left[node], tree.children_right[node]):
            if child >= 0:
                depth[child] = depth[node] + 1
    for node in range(tree.node_count):
        if tree.children_left[node] < 0:
            want = (depth[node] + _average_path_length([tree.n_node_samples[node]])[0]) / 2
            assert ensemble.value[node, 0] == pytest.approx(want, rel=1e-15)


def test_dataframe_names_and_explain():
    shap = pytest.importorskip("shap")
    X = pd.DataFrame(_data(p=3), columns=["u", "v", "w"])
    model = IsolationForest(n_estimators=10, random_state=0).fit(X)
    e = explain(model, X.iloc[:20])
    assert list(e.feature_names) == ["u", "v", "w"] and e.values.shape == (20, 3)
    theirs = shap.TreeExplainer(model)(X.iloc[:20])
    np.testing.assert_allclose(e.values, theirs.values, atol=1e-10)
    np.testing.assert_allclose(e.base_values, theirs.base_values, rtol=1e-12)


def test_r2_decomposition_refuses_isolation_forest():
    X = _data()
    model = IsolationForest(n_estimators=5, random_state=0).fit(X)
    with pytest.raises(UnsupportedModelError):
        r2_decomposition(model, X, X[:, 0])
