"""Kernels on hand-built ensembles against subset enumeration (tests/reference.py)."""

import numpy as np
import pytest

import reference
from sklearn_r2shap import (
    banzhaf_values,
    beta_shapley_values,
    expected_value,
    predict_raw,
    saabas_values,
    shap_values,
)
from sklearn_r2shap.attributions import semivalues
from sklearn_r2shap._model._ensemble import (
    DECISION_CATEGORICAL,
    DECISION_LEQ,
    DECISION_LT,
    TreeArrays,
    TreeEnsemble,
)



def random_tree(rng, data, n_features, max_depth, n_values=1, categorical=(), output=0):
    """A random tree whose covers are the counts of ``data`` reaching each node."""
    nodes = []

    def grow(rows, depth):
        k = len(nodes)
        nodes.append(None)
        if depth == max_depth or len(rows) < 2 or rng.random() < 0.15:
            nodes[k] = dict(leaf=True, cover=float(len(rows)), value=rng.normal(size=n_values))
            return k
        j = int(rng.integers(n_features))
        col = data[rows, j]
        if j in categorical:
            cats = np.unique(rng.integers(0, 6, size=3))
            go_left = np.isin(col, cats)
            node = dict(decision=DECISION_CATEGORICAL, threshold=0.0, cats=cats)
        else:
            thr = float(rng.choice(col)) if len(col) else 0.0
            decision = DECISION_LEQ if rng.random() < 0.5 else DECISION_LT
            go_left = col <= thr if decision == DECISION_LEQ else col < thr
            node = dict(decision=decision, threshold=thr, cats=None)
        default_left = bool(rng.random() < 0.5)
        go_left = np.where(np.isnan(col), default_left, go_left)
        node.update(leaf=False, feature=j, default_left=default_left, cover=float(len(rows)))
        nodes[k] = node
        node["left"] = grow(rows[go_left], depth + 1)
        node["right"] = grow(rows[~go_left], depth + 1)
        return k

    grow(np.arange(len(data)), 0)
    n = len(nodes)
    leaf = np.array([nd["leaf"] for nd in nodes])
    return TreeArrays(
        children_left=np.array([-1 if nd["leaf"] else nd["left"] for nd in nodes]),
        children_right=np.array([-1 if nd["leaf"] else nd["right"] for nd in nodes]),
        default_left=np.array([False if nd["leaf"] else nd["default_left"] for nd in nodes]),
        feature=np.array([0 if nd["leaf"] else nd["feature"] for nd in nodes]),
        threshold=np.array([0.0 if nd["leaf"] else nd["threshold"] for nd in nodes]),
        decision_type=np.array([0 if nd["leaf"] else nd["decision"] for nd in nodes], dtype=np.uint8),
        cover=np.array([nd["cover"] for nd in nodes]),
        value=np.array([nd["value"] if nd["leaf"] else np.zeros(n_values) for nd in nodes]).reshape(n, n_values)
        * leaf[:, None],
        categories={k: nd["cats"] for k, nd in enumerate(nodes) if not nd["leaf"] and nd["cats"] is not None},
        output=output,
    )


def random_data(rng, n, p, categorical=(), nan_fraction=0.1):
    X = rng.normal(size=(n, p)).round(1)
    for j in categorical:
        X[:, j] = rng.integers(0, 7, size=n)
    X[rng.random(size=X.shape) < nan_fraction] = np.nan
    return X


def random_ensemble(seed, p=5, n_trees=3, max_depth=5, n_outputs=1, vector_leaves=False,
                    categorical=(), averaging=False):
    rng = np.random.default_rng(seed)
    data = random_data(rng, 200, p, categorical)
    n_values = n_outputs if vector_leaves else 1
    trees = [
        random_tree(rng, data, p, max_depth, n_values, categorical,
                    output=0 if vector_leaves else t % n_outputs)
        for t in range(n_trees)
    ]
    ens = TreeEnsemble.from_trees(trees, base_value=rng.normal(size=n_outputs), n_features=p,
                                  averaging=averaging, model_type="random")
    return ens, random_data(rng, 8, p, categorical, nan_fraction=0.2)


@pytest.fixture(params=["tables", "quadrature", "mixed"])
def route(request):
    """Each semivalue route: pattern tables, quadrature, and both within a tree
    (the leaves of up to the median d tabulated)."""
    return request.param


def routed(route):
    """shap_values, banzhaf_values and beta_shapley_values through ``route``
    (their internal function, ``attributions.semivalues``)."""
    def shapley(model, X, **kwargs):
        return semivalues(model, X, route=route, **kwargs)

    def banzhaf(model, X, q=0.5, **kwargs):
        return semivalues(model, X, semivalue="weighted_banzhaf", q=q, route=route, **kwargs)

    def beta(model, X, alpha=1, beta=1, **kwargs):
        return semivalues(model, X, semivalue="beta", alpha=alpha, beta=beta, route=route,
                          **kwargs)

    return {"shapley": shapley, "banzhaf": banzhaf, "beta": beta}


def relative_error(a, b):
    return np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300)


ENSEMBLES = {
    "single-output": dict(seed=0),
    "categorical": dict(seed=1, categorical=(1, 3)),
    "multiclass-boosting": dict(seed=2, n_trees=4, n_outputs=3),
    "vector-leaves": dict(seed=3, n_outputs=2, vector_leaves=True, averaging=True),
    "repeated-features": dict(seed=4, p=2, max_depth=7),
}


@pytest.mark.parametrize("name", ENSEMBLES)
def test_predict_matches_reference(name):
    ens, X = random_ensemble(**ENSEMBLES[name])
    assert ens.n_path_features >= 2
    np.testing.assert_allclose(predict_raw(ens, X), reference.predict(ens, X), rtol=0, atol=1e-12)


@pytest.mark.parametrize("name", ENSEMBLES)
@pytest.mark.parametrize(
    "method, kwargs, weight",
    [
        ("shapley", {}, reference.shapley_weight),
        ("banzhaf", {"q": 0.5}, reference.banzhaf_weight(0.5)),
        ("banzhaf", {"q": 0.2}, reference.banzhaf_weight(0.2)),
        ("banzhaf", {"q": 0.8}, reference.banzhaf_weight(0.8)),
        ("beta", {"alpha": 16, "beta": 1}, reference.beta_weight(16, 1)),
        ("beta", {"alpha": 4, "beta": 1}, reference.beta_weight(4, 1)),
        ("beta", {"alpha": 1, "beta": 4}, reference.beta_weight(1, 4)),
        ("beta", {"alpha": 1, "beta": 16}, reference.beta_weight(1, 16)),
    ],
)
def test_semivalues_match_enumeration(name, method, kwargs, weight, route):
    ens, X = random_ensemble(**ENSEMBLES[name])
    fn = routed(route)[method]
    got = fn(ens, X, **kwargs)
    if ens.n_outputs == 1:
        got = got[:, None, :]
    for i, x in enumerate(X[:4]):
        want = reference.semivalue(ens, x, weight)
        assert relative_error(got[i, :, :-1], want) < 1e-12
        np.testing.assert_allclose(got[i, :, -1], reference.value_function(ens, x, ()), atol=1e-12)


@pytest.mark.parametrize("name", ENSEMBLES)
def test_shapley_is_efficient_and_beta_1_1_is_shapley(name, route):
    ens, X = random_ensemble(**ENSEMBLES[name])
    phi = routed(route)["shapley"](ens, X)
    total = phi.sum(axis=-1)
    np.testing.assert_allclose(total.reshape(len(X), -1), predict_raw(ens, X), atol=1e-12)
    # Beta(1, 1) with more quadrature nodes than needed changes nothing.
    np.testing.assert_allclose(routed(route)["beta"](ens, X, alpha=1, beta=1), phi, atol=1e-13)


def test_saabas_matches_path_walk():
    ens, X = random_ensemble(seed=5, n_outputs=2, vector_leaves=True)
    got = saabas_values(ens, X)

    def mean(k):
        return reference.tree_value(ens, 0, np.zeros(ens.n_features), set()) if False else _mean(k)

    def _mean(k):  # cover-weighted mean of the subtree, by recursion
        if ens.children_left[k] < 0:
            return ens.value[k]
        a, b = ens.children_left[k], ens.children_right[k]
        return (ens.cover[a] * _mean(a) + ens.cover[b] * _mean(b)) / ens.cover[k]

    for i, x in enumerate(X):
        want = np.zeros((ens.n_outputs, ens.n_features))
        for t in range(ens.n_trees):
            k = ens.tree_start[t]
            while ens.children_left[k] >= 0:
                child = reference.route(ens, k, x)
                want[:, ens.feature[k]] += _mean(child) - _mean(k)
                k = child
        np.testing.assert_allclose(got[i, :, :-1], want, atol=1e-12)
    np.testing.assert_allclose(got.sum(axis=-1), predict_raw(ens, X), atol=1e-12)


def deep_spine_tree(rng, depth, n_features):
    """A depth-``depth`` caterpillar: one leaf and one deeper child per level,
    the split features cycling through ``n_features`` (repeated on the path)."""
    left, right, feature, threshold, cover, value = [], [], [], [], [], []
    c = 1.0
    for level in range(depth):
        k = len(left)
        feature.append(level % n_features if level < n_features else int(rng.integers(n_features)))
        threshold.append(float(rng.normal()))
        cover.append(c)
        value.append(0.0)
        left.append(k + 1)  # the leaf
        right.append(k + 2)  # the rest of the spine
        share = rng.uniform(0.2, 0.6)
        left.append(-1)
        right.append(-1)
        feature.append(0)
        threshold.append(0.0)
        cover.append(c * share)
        value.append(float(rng.normal()))
        c *= 1 - share
    left.append(-1)
    right.append(-1)
    feature.append(0)
    threshold.append(0.0)
    cover.append(c)
    value.append(float(rng.normal()))
    n = len(left)
    return TreeArrays(
        children_left=np.array(left), children_right=np.array(right),
        default_left=np.zeros(n, bool), feature=np.array(feature),
        threshold=np.array(threshold), decision_type=np.zeros(n, np.uint8),
        cover=np.array(cover), value=np.array(value)[:, None],
    )


@pytest.mark.parametrize("depth", [40, 50])
def test_deep_tree_is_stable(depth, route):
    rng = np.random.default_rng(depth)
    p = 11
    ens = TreeEnsemble.from_trees([deep_spine_tree(rng, depth, p)], base_value=[0.0], n_features=p)
    assert ens.max_depth == depth and ens.n_path_features == p
    X = rng.normal(size=(2, p)) * 2
    fn = routed(route)
    phi = fn["shapley"](ens, X)
    for i, x in enumerate(X):
        for method, weight, kwargs in [
            (fn["shapley"], reference.shapley_weight, {}),
            (fn["banzhaf"], reference.banzhaf_weight(0.2), {"q": 0.2}),
            (fn["beta"], reference.beta_weight(16, 1), {"alpha": 16, "beta": 1}),
            (fn["beta"], reference.beta_weight(1, 16), {"alpha": 1, "beta": 16}),
        ]:
            want = reference.semivalue(ens, x, weight)[0]
            got = method(ens, x[None, :], **kwargs)[0, :-1]
            assert relative_error(got, want) < 1e-9
    np.testing.assert_allclose(phi.sum(axis=1), predict_raw(ens, X)[:, 0], atol=1e-12)


def test_zero_cover_node_gives_finite_exact_values(route):
    # A split whose right child no training row reached (cover 0).
    tree = TreeArrays(
        children_left=np.array([1, -1, 3, -1, -1]), children_right=np.array([2, -1, 4, -1, -1]),
        default_left=np.zeros(5, bool), feature=np.array([0, 0, 1, 0, 0]),
        threshold=np.array([0.0, 0, 0.0, 0, 0]), decision_type=np.zeros(5, np.uint8),
        cover=np.array([10.0, 10.0, 0.0, 0.0, 0.0]), value=np.array([0, 1.0, 0, 5.0, -3.0])[:, None],
    )
    ens = TreeEnsemble.from_trees([tree], base_value=[0.0], n_features=2)
    X = np.array([[1.0, -1.0], [1.0, 1.0], [-1.0, 1.0]])
    phi = routed(route)["shapley"](ens, X)
    assert np.all(np.isfinite(phi))
    for i, x in enumerate(X):
        np.testing.assert_allclose(phi[i, :-1], reference.semivalue(ens, x)[0], atol=1e-12)
    np.testing.assert_allclose(phi.sum(axis=1), [5.0, -3.0, 1.0])


def test_null_players_get_zero(route):
    ens, X = random_ensemble(seed=6, p=8, max_depth=2, n_trees=1)
    used = set(ens.feature[ens.children_left >= 0])
    unused = [j for j in range(8) if j not in used]
    assert unused
    for fn in (routed(route)["shapley"], routed(route)["banzhaf"], saabas_values):
        assert np.all(fn(ens, X)[:, unused] == 0.0)


def test_results_do_not_depend_on_n_jobs(route):
    ens, X = random_ensemble(seed=7, n_trees=5)
    X = np.repeat(X, 20, axis=0)
    values = routed(route)["shapley"]
    np.testing.assert_array_equal(values(ens, X, n_jobs=1), values(ens, X, n_jobs=2))
    np.testing.assert_array_equal(values(ens, X, n_jobs=1), values(ens, X, n_jobs=-1))


def test_expected_value_is_v_of_empty_set():
    ens, X = random_ensemble(seed=8, n_outputs=3, n_trees=6)
    np.testing.assert_allclose(expected_value(ens), reference.value_function(ens, X[0], ()), atol=1e-12)


@pytest.mark.parametrize(
    "X, message",
    [
        (np.ones((2, 4)), "has 4 features"),
        (np.ones(5), "2D array"),
        (np.array([[1.0, np.inf, 0, 0, 0]]), "infinity"),
        (np.array([["a", "b", "c", "d", "e"]]), "numeric"),
    ],
)
def test_bad_rows_are_rejected(X, message):
    ens, _ = random_ensemble(seed=9)
    with pytest.raises(ValueError, match=message):
        shap_values(ens, X)


@pytest.mark.parametrize("kwargs", [{"alpha": 0}, {"alpha": 1.5}, {"beta": -1}])
def test_bad_beta_parameters(kwargs):
    ens, X = random_ensemble(seed=10)
    with pytest.raises(ValueError, match="integer >= 1"):
        beta_shapley_values(ens, X, **kwargs)


@pytest.mark.parametrize("q", [0.0, 1.0, -0.1, 2])
def test_bad_banzhaf_q(q):
    ens, X = random_ensemble(seed=11)
    with pytest.raises(ValueError, match="open interval"):
        banzhaf_values(ens, X, q=q)


# --------------------------------------------------------------------------
# The semivalue chosen by name: one vocabulary (issue 42, item 3)

SEMIVALUE_ERROR = (r"semivalue must be one of \('shapley', 'banzhaf', 'weighted_banzhaf', "
                   r"'beta'\), got ")


def test_semivalue_names_are_the_named_functions():
    from sklearn_r2shap.interventional import interventional_values

    ens, X = random_ensemble(seed=12)
    rows, background = X[:6], X[6:]
    named = {
        "shapley": ({}, lambda **kw: shap_values(ens, rows, **kw)),
        "banzhaf": ({}, lambda **kw: banzhaf_values(ens, rows, **kw)),
        "weighted_banzhaf": ({"q": 0.3}, lambda **kw: banzhaf_values(ens, rows, q=0.3, **kw)),
        "beta": ({"alpha": 4, "beta": 2},
                 lambda **kw: beta_shapley_values(ens, rows, alpha=4, beta=2, **kw)),
    }
    for semivalue, (parameters, function) in named.items():
        np.testing.assert_array_equal(semivalues(ens, rows, semivalue=semivalue, **parameters),
                                      function())
        np.testing.assert_array_equal(
            interventional_values(ens, rows, background, semivalue=semivalue, **parameters),
            function(background=background))
    # the parameters of another semivalue are not read
    np.testing.assert_array_equal(semivalues(ens, rows, semivalue="banzhaf", q=0.3, alpha=4),
                                  banzhaf_values(ens, rows))


@pytest.mark.parametrize("semivalue", ["owen", "Shapley", None, 1])
def test_unknown_semivalue_is_refused(semivalue):
    from sklearn_r2shap.interventional import interventional_values

    ens, X = random_ensemble(seed=13)
    with pytest.raises(ValueError, match=SEMIVALUE_ERROR):
        semivalues(ens, X, semivalue=semivalue)
    with pytest.raises(ValueError, match=SEMIVALUE_ERROR):
        interventional_values(ens, X, X, semivalue=semivalue)


def test_semivalue_has_no_old_names():
    from sklearn_r2shap.interventional import interventional_values

    ens, X = random_ensemble(seed=14)
    with pytest.raises(TypeError, match="kind"):
        semivalues(ens, X, kind="banzhaf")
    with pytest.raises(TypeError, match="parameters"):
        interventional_values(ens, X, X, parameters=(0.3,))
