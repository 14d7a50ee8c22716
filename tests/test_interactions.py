"""SHAP interaction values against the Shapley interaction index of the
path-dependent game by subset enumeration (brute force, written here on
tests/reference.py's v_x(S)), against XGBoost's ``pred_interactions`` and
shap's TreeExplainer, and their properties (symmetry, row sums, threads,
dask, sparse)."""
import math

import numpy as np
import pytest

import reference
from sklearn_r2shap import (
    UnsupportedModelError,
    interactions,
    predict_raw,
    shap_interaction_values,
    shap_values,
    to_ensemble,
)
from sklearn_r2shap._execution import local as _local
from sklearn_r2shap._games import interactions as interaction_games
from sklearn_r2shap._model._ensemble import TreeArrays, TreeEnsemble
from sklearn_r2shap.interactions import interaction_values
from test_kernels import deep_spine_tree, random_ensemble


@pytest.fixture(params=["tables", "rows"])
def route(request):
    """Both routes of the kernel (pattern tables, per row)."""
    return request.param


def brute_interactions(ens, x):
    """(n_outputs, p + 1, p + 1): DESIGN section 7 by enumerating every subset.

    Phi_ij = sum_{S in N \\ {i, j}} |S|! (p - |S| - 2)! / (2 (p - 1)!) *
    [v(S+i+j) - v(S+i) - v(S+j) + v(S)], Phi_ii = phi_i - sum_{j != i} Phi_ij
    with phi the Shapley values of the same game, v(empty) in the corner.
    """
    p = ens.n_features
    value = np.array([reference.value_function(ens, x, [j for j in range(p) if mask >> j & 1])
                      for mask in range(1 << p)])  # (2^p, n_outputs)
    size = [bin(mask).count("1") for mask in range(1 << p)]
    out = np.zeros((ens.n_outputs, p + 1, p + 1))
    for i in range(p):
        bi = 1 << i
        for j in range(i + 1, p):
            bj = 1 << j
            total = 0.0
            for mask in range(1 << p):
                if mask & (bi | bj):
                    continue
                s = size[mask]
                weight = math.factorial(s) * math.factorial(p - s - 2) / (2 * math.factorial(p - 1))
                total = total + weight * (value[mask | bi | bj] - value[mask | bi]
                                          - value[mask | bj] + value[mask])
            out[:, i, j] = out[:, j, i] = total
    for i in range(p):
        bi = 1 << i
        phi = sum(reference.shapley_weight(p, size[mask]) * (value[mask | bi] - value[mask])
                  for mask in range(1 << p) if not mask & bi)
        out[:, i, i] = phi - (out[:, i, :p].sum(axis=1) - out[:, i, i])
    out[:, p, p] = value[0]
    return out


def check_brute_force(model, X, rel=1e-11, route=None):
    """Our values (on ``route``; None: by cost) of every row of X against brute
    force, and the layout."""
    ens = to_ensemble(model)
    got = interaction_values(model, X, route=route)
    width = ens.n_features + 1
    assert got.shape == ((len(X), width, width) if ens.n_outputs == 1
                         else (len(X), ens.n_outputs, width, width))
    got = got.reshape(len(X), ens.n_outputs, width, width)
    for r in range(len(X)):
        want = brute_interactions(ens, X[r])
        scale = max(1.0, np.max(np.abs(want)))
        np.testing.assert_allclose(got[r], want, rtol=0, atol=rel * scale)
    return got


def check_properties(model, X, got=None):
    """Symmetry; row sums are the SHAP values; the total is the raw prediction."""
    ens = to_ensemble(model)
    width = ens.n_features + 1
    got = (shap_interaction_values(model, X) if got is None else got).reshape(
        len(X), ens.n_outputs, width, width)
    np.testing.assert_array_equal(got, got.transpose(0, 1, 3, 2))
    phi = shap_values(model, X).reshape(len(X), ens.n_outputs, width)
    scale = max(1.0, np.max(np.abs(phi)))
    np.testing.assert_allclose(got.sum(axis=3), phi, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(got.sum(axis=(2, 3)), predict_raw(model, X), rtol=0,
                               atol=1e-12 * scale)
    assert np.all(got[:, :, -1, :-1] == 0) and np.all(got[:, :, :-1, -1] == 0)


def assert_interacts(got, feature=None):
    """Some pair (with ``feature``, if given) has a non-zero interaction:
    the comparison is not of zeros only."""
    p = got.shape[-1] - 1
    pairs = got[..., :p, :p] * (1 - np.eye(p))
    assert np.any(pairs != 0) if feature is None else np.any(pairs[..., feature, :] != 0)


# ------------------------------------------------------ hand-built ensembles

ENSEMBLES = {
    "single-output": dict(seed=0),
    "categorical": dict(seed=1, categorical=(1, 3)),
    "multiclass-boosting": dict(seed=2, n_trees=4, n_outputs=3),
    "vector-leaves": dict(seed=3, n_outputs=2, vector_leaves=True, averaging=True),
    "repeated-features": dict(seed=4, p=2, max_depth=7),
    "deeper": dict(seed=5, p=6, n_trees=2, max_depth=8),
}


@pytest.mark.parametrize("name", ENSEMBLES)
def test_random_ensembles_match_brute_force(name, route):
    ens, X = random_ensemble(**ENSEMBLES[name])
    got = check_brute_force(ens, X, route=route)
    check_properties(ens, X, got)


@pytest.mark.parametrize("depth", [24, 40])
def test_deep_tree_matches_brute_force(depth, route):
    """A caterpillar whose features repeat: 11 distinct features on the path."""
    rng = np.random.default_rng(depth)
    p = 11
    ens = TreeEnsemble.from_trees([deep_spine_tree(rng, depth, p)], base_value=[0.5],
                                  n_features=p)
    X = rng.normal(size=(2, p)) * 2
    # 2^11 patterns of 66 numbers per leaf: tabulated when forced, up to the table limit
    tabulated = interaction_games._plan(
        ens, interaction_games._semivalues.pattern_structure(ens), 2, route)[1]
    assert bool(tabulated) == (route == "tables" and depth == 24)
    got = check_brute_force(ens, X, rel=1e-10, route=route)
    check_properties(ens, X, got)


def leaf_products(ens, t, x):
    """Tree t's game as a sum over leaves of products (DESIGN section 1), by
    walking every root-to-leaf path: [(rho, {feature: (R, X)})]."""
    x = reference.prepare(ens, x)
    out = []

    def walk(k, factors):
        if ens.children_left[k] < 0:
            out.append((ens.value[k, 0], factors))
            return
        j = ens.feature[k]
        taken = reference.route(ens, k, x)
        for child in (ens.children_left[k], ens.children_right[k]):
            r, f = factors.get(j, (1.0, 1.0))
            grown = dict(factors)
            grown[j] = (r * ens.cover[child] / ens.cover[k], f * (child == taken))
            walk(child, grown)

    walk(ens.tree_start[t], {})
    return out


def product_game_interaction(leaves, i, j, M):
    """Phi_ij of a sum of product games by exact weights and a subset-size
    recursion (no quadrature, no enumeration): for a leaf with features F and
    G = F minus {i, j}, the second difference is rho D_i D_j prod_{k in G}
    (R_k + [k in S] D_k); grouping S by A = S & G (|A| = a) and the b players
    outside F in S, its weighted sum is sum_a e_a sum_b C(M - |G| - 2, b) w(a + b)
    with e_a the coefficient of z^a in prod_{k in G} (R_k + z X_k)."""
    from fractions import Fraction

    def w(s):
        return Fraction(math.factorial(s) * math.factorial(M - s - 2),
                        2 * math.factorial(M - 1))

    total = 0.0
    for rho, factors in leaves:
        if i not in factors or j not in factors:
            continue
        G = [factors[k] for k in factors if k not in (i, j)]
        e = [1.0]
        for r, x in G:
            e = [(e[a] if a < len(e) else 0.0) * r + (e[a - 1] * x if a > 0 else 0.0)
                 for a in range(len(e) + 1)]
        outside = M - len(G) - 2
        weight = [float(sum(math.comb(outside, b) * w(a + b) for b in range(outside + 1)))
                  for a in range(len(G) + 1)]
        (ri, xi), (rj, xj) = factors[i], factors[j]
        total += rho * (xi - ri) * (xj - rj) * float(np.dot(weight, e))
    return total


def test_more_than_64_features_on_a_path(route):
    """A caterpillar with 70 distinct features on its deepest path (beyond the
    64 bits of a row pattern): pairs against the product-game formula."""
    rng = np.random.default_rng(70)
    p = 72
    ens = TreeEnsemble.from_trees([deep_spine_tree(rng, 75, 70)], base_value=[0.0], n_features=p)
    assert ens.n_path_features == 70
    X = rng.normal(size=(2, p))
    got = interaction_values(ens, X, route=route)
    check_properties(ens, X, got)
    assert np.all(got[:, 70:72, :] == 0)  # null players
    for r in range(len(X)):
        leaves = leaf_products(ens, 0, X[r])
        for i, j in [(0, 1), (0, 69), (3, 40), (65, 66), (10, 68)]:
            want = product_game_interaction(leaves, i, j, p)
            assert abs(got[r, i, j] - want) <= 1e-9 * max(1e-3, abs(want)), (i, j)
            assert got[r, i, j] == got[r, j, i]


def test_zero_cover_node(route):
    # a split whose right child no training row reached (cover 0)
    tree = TreeArrays(
        children_left=np.array([1, -1, 3, -1, -1]), children_right=np.array([2, -1, 4, -1, -1]),
        default_left=np.zeros(5, bool), feature=np.array([0, 0, 1, 0, 0]),
        threshold=np.array([0.0, 0, 0.0, 0, 0]), decision_type=np.zeros(5, np.uint8),
        cover=np.array([10.0, 10.0, 0.0, 0.0, 0.0]),
        value=np.array([0, 1.0, 0, 5.0, -3.0])[:, None],
    )
    ens = TreeEnsemble.from_trees([tree], base_value=[0.0], n_features=3)
    X = np.array([[1.0, -1.0, 0], [1.0, 1.0, 0], [-1.0, 1.0, 0]])
    got = check_brute_force(ens, X, rel=1e-13, route=route)
    assert np.all(np.isfinite(got))
    assert np.any(got[:, 0, 0, 1] != 0)
    check_properties(ens, X, got)


def test_routes_agree_and_null_players_get_zero():
    ens, X = random_ensemble(seed=6, p=8, n_trees=5, max_depth=3)
    X = np.repeat(X, 30, axis=0)
    by_route = {}
    for name in ("tables", "rows"):
        by_route[name] = interaction_values(ens, X, route=name)
    np.testing.assert_allclose(by_route["tables"], by_route["rows"], rtol=0, atol=1e-13)
    used = set(ens.feature[ens.children_left >= 0])
    unused = [j for j in range(8) if j not in used]
    assert unused
    assert np.all(by_route["rows"][:, unused, :] == 0)
    assert np.all(by_route["rows"][:, :, unused] == 0)


def test_results_do_not_depend_on_n_jobs(route):
    ens, X = random_ensemble(seed=7, n_trees=5, n_outputs=2)
    X = np.repeat(X, 40, axis=0) + np.repeat(np.arange(40.0), len(X))[:, None] * 0.01
    one = interaction_values(ens, X, n_jobs=1, route=route)
    np.testing.assert_array_equal(one, interaction_values(ens, X, n_jobs=2, route=route))
    np.testing.assert_array_equal(one, interaction_values(ens, X, n_jobs=-1, route=route))


def test_zero_rows_and_inputs():
    ens, X = random_ensemble(seed=8)
    assert shap_interaction_values(ens, X[:0]).shape == (0, 6, 6)
    with pytest.raises(ValueError, match="2D"):
        shap_interaction_values(ens, X[0])
    with pytest.raises(ValueError):
        shap_interaction_values(ens, X[:, :3])


def test_sparse_rows_equal_dense(monkeypatch):
    sparse = pytest.importorskip("scipy.sparse")
    from sklearn_r2shap._execution import local

    ens, X = random_ensemble(seed=9, n_trees=4)
    X = np.nan_to_num(np.repeat(X, 10, axis=0))
    X[np.abs(X) < 0.5] = 0.0
    monkeypatch.setattr(local, "_block_rows", lambda n_features: 7)  # several blocks
    monkeypatch.setattr(interaction_games, "_TABLE_CACHE_ENTRIES", 0)  # tables rebuilt per block
    np.testing.assert_array_equal(shap_interaction_values(ens, sparse.csr_matrix(X)),
                                  shap_interaction_values(ens, X))


def test_linear_leaves_are_refused():
    lgb = pytest.importorskip("lightgbm")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 3))
    model = lgb.LGBMRegressor(n_estimators=3, linear_tree=True, verbose=-1).fit(X, X[:, 0])
    with pytest.raises(UnsupportedModelError, match="linear"):
        shap_interaction_values(model, X[:2])


# ------------------------------------------------------------------ libraries

def _data(seed=0, n=300, p=4, nan=0.1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    y = X[:, 0] + X[:, 1] * X[:, 2] - np.abs(X[:, 3]) + 0.2 * rng.normal(size=n)
    if nan:
        X[rng.random(X.shape) < nan] = np.nan
    return X, y


def _with_category(seed=1, n=300):
    """Column 2 a category code 0..7 (NaN in some rows), the rest numeric."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[:, 2] = rng.integers(0, 8, size=n)
    y = np.array([3.0, -1, 2, 0, 5, -4, 1, 1])[X[:, 2].astype(int)] + X[:, 0] * X[:, 1] + X[:, 3]
    X[rng.random(n) < 0.1, 2] = np.nan
    X[rng.random(n) < 0.1, 0] = np.nan
    return X, y


def _rows(X, k=4):
    """The first rows with a NaN and some without."""
    nan_rows = np.flatnonzero(np.isnan(X).any(axis=1))[: k // 2]
    full = np.flatnonzero(~np.isnan(X).any(axis=1))[: k - len(nan_rows)]
    return X[np.concatenate([nan_rows, full])]


def sklearn_cases():
    from sklearn import ensemble, tree

    X, y = _data()
    Xf = np.nan_to_num(X)
    Xc, yc = _with_category()
    labels = np.digitize(y, [-0.5, 0.5])
    return {
        "decision_tree": (tree.DecisionTreeRegressor(max_depth=5, random_state=0).fit(Xf, y), Xf),
        "forest_multiclass": (ensemble.RandomForestClassifier(
            n_estimators=3, max_depth=4, random_state=0).fit(Xf, labels), Xf),
        "gradient_boosting_weights": (ensemble.GradientBoostingRegressor(
            n_estimators=6, max_depth=3, random_state=0).fit(
                Xf, y, sample_weight=np.linspace(0.2, 3, len(y))), Xf),
        "hgb_nan": (ensemble.HistGradientBoostingRegressor(
            max_iter=6, max_leaf_nodes=8, random_state=0).fit(X, y), X),
        "hgb_categorical": (ensemble.HistGradientBoostingRegressor(
            max_iter=6, max_leaf_nodes=8, categorical_features=[2], random_state=0).fit(Xc, yc),
            Xc),
        "hgb_multiclass": (ensemble.HistGradientBoostingClassifier(
            max_iter=3, max_leaf_nodes=6, random_state=0).fit(X, labels), X),
    }


@pytest.mark.parametrize("name", ["decision_tree", "forest_multiclass", "gradient_boosting_weights",
                                  "hgb_nan", "hgb_categorical", "hgb_multiclass"])
def test_sklearn_matches_brute_force(name):
    model, X = sklearn_cases()[name]
    rows = _rows(X)
    got = check_brute_force(model, rows)
    check_properties(model, X[:50])
    assert_interacts(got, 2 if "categorical" in name else None)


def xgboost_cases():
    xgb = pytest.importorskip("xgboost")
    X, y = _data(2)
    Xc, yc = _with_category(3)
    small = dict(n_estimators=6, max_depth=3, learning_rate=0.3)
    cat = xgb.DMatrix(Xc, label=yc, feature_types=["q", "q", "c", "q"], enable_categorical=True)
    return {
        "regressor_nan": (xgb.XGBRegressor(**small).fit(X, y), X),
        "multiclass": (xgb.XGBClassifier(**small).fit(X, np.digitize(y, [-0.5, 0.5])), X),
        "categorical": (xgb.train(dict(max_depth=3, max_cat_to_onehot=1), cat, 6), Xc),
        "early_stopping": (xgb.XGBRegressor(n_estimators=50, max_depth=2, learning_rate=0.5,
                                            early_stopping_rounds=2).fit(
            X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False), X),
    }


def _xgb_dmatrix(model, X):
    import xgboost as xgb

    booster = model if isinstance(model, xgb.Booster) else model.get_booster()
    types = booster.feature_types
    return booster, xgb.DMatrix(X, feature_types=types, enable_categorical=types is not None)


@pytest.mark.parametrize("name", ["regressor_nan", "multiclass", "categorical", "early_stopping"])
def test_xgboost_matches_brute_force_and_pred_interactions(name):
    model, X = xgboost_cases()[name]
    got = check_brute_force(model, _rows(X))
    check_properties(model, X[:50])
    assert_interacts(got, 2 if "categorical" in name else None)
    # XGBoost's own pred_interactions (float32) on all rows
    booster, dmatrix = _xgb_dmatrix(model, X)
    iteration_range = (0, model.best_iteration + 1) if name == "early_stopping" else (0, 0)
    theirs = booster.predict(dmatrix, pred_interactions=True, strict_shape=True,
                             iteration_range=iteration_range).astype(np.float64)
    ours = shap_interaction_values(model, X)
    if name == "early_stopping":
        assert to_ensemble(model).n_trees == model.best_iteration + 1 < 50
    theirs = theirs.reshape(ours.shape)
    scale = max(1.0, np.max(np.abs(theirs)))
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=2e-5 * scale)


@pytest.mark.parametrize("params", [{}, {"num_parallel_tree": 2, "subsample": 0.8}])
def test_xgboost_vector_leaf_matches_brute_force(params):
    """multi_strategy="multi_output_tree": one tree per round with a vector per
    leaf, against brute force, and against XGBoost's pred_interactions where
    it computes them (3.3+; 3.2 refuses: "not yet implemented")."""
    xgb = pytest.importorskip("xgboost")
    if tuple(int(v) for v in xgb.__version__.split(".")[:2]) < (3, 2):
        pytest.skip(f"XGBoost {xgb.__version__} saves no hessian sums for vector leaves "
                    "(refused by name: test_adapter_xgboost.py)")
    X, y = _data(7)
    targets = np.column_stack([y, np.cos(y), np.nan_to_num(X[:, 1])])
    model = xgb.XGBRegressor(multi_strategy="multi_output_tree", tree_method="hist",
                             n_estimators=5, max_depth=3, learning_rate=0.3, **params)
    model.fit(X, targets)
    assert to_ensemble(model).n_values == 3
    got = check_brute_force(model, _rows(X))
    check_properties(model, X[:50])
    assert_interacts(got)
    booster, dmatrix = _xgb_dmatrix(model, X[:3])
    try:  # XGBoost 3.3+ computes them; 3.2 refuses ("not yet implemented")
        theirs = booster.predict(dmatrix, pred_interactions=True)
    except xgb.core.XGBoostError as error:
        assert "multi-target tree" in str(error)
        return
    ours = shap_interaction_values(model, X[:3])
    assert theirs.shape == ours.shape
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-5 * max(1.0, np.abs(theirs).max()))


def lightgbm_cases():
    lgb = pytest.importorskip("lightgbm")
    Xc, yc = _with_category(4)
    X, y = _data(5)
    small = dict(n_estimators=5, num_leaves=8, min_child_samples=5, verbose=-1)
    return {
        "categorical_nan": (lgb.LGBMRegressor(**small).fit(Xc, yc, categorical_feature=[2]), Xc),
        "multiclass_nan": (lgb.LGBMClassifier(**small).fit(X, np.digitize(y, [-0.5, 0.5])), X),
        "zero_as_missing": (lgb.LGBMRegressor(zero_as_missing=True, **small).fit(
            np.where(np.isnan(X), 0.0, X), y), np.where(np.isnan(X), 0.0, X)),
    }


@pytest.mark.parametrize("name", ["categorical_nan", "multiclass_nan", "zero_as_missing"])
def test_lightgbm_matches_brute_force(name):
    model, X = lightgbm_cases()[name]
    got = check_brute_force(model, _rows(X))
    check_properties(model, X[:50])
    assert_interacts(got, 2 if "categorical" in name else None)


@pytest.mark.parametrize("kind", ["regressor", "multiclass", "depthwise", "multirmse",
                                  "multirmse_depthwise"])
def test_catboost_matches_brute_force(kind):
    catboost = pytest.importorskip("catboost")
    X, y = _data(6, n=240, nan=0.12)
    params = dict(iterations=5, depth=3, learning_rate=0.3, verbose=0, allow_writing_files=False,
                  thread_count=1, random_seed=0)
    if kind == "multiclass":
        model = catboost.CatBoostClassifier(**params).fit(X, np.digitize(y, [-0.5, 0.5]))
    elif kind.startswith("multirmse"):  # vector leaves, one value per target
        grow = "Depthwise" if kind.endswith("depthwise") else "SymmetricTree"
        Y = np.column_stack([y, np.cos(y), np.nan_to_num(X[:, 0])])
        model = catboost.CatBoostRegressor(loss_function="MultiRMSE", grow_policy=grow,
                                           **params).fit(X, Y)
        assert to_ensemble(model).n_values == 3
    else:
        grow = "Depthwise" if kind == "depthwise" else "SymmetricTree"
        model = catboost.CatBoostRegressor(grow_policy=grow, **params).fit(X, y)
    got = check_brute_force(model, _rows(X))
    check_properties(model, X[:50])
    assert_interacts(got)


# ------------------------------------------------------------------------ shap

def test_shap_tree_explainer_agrees_where_it_is_right():
    """shap's own C++ interaction values (scikit-learn, HistGradientBoosting and
    LightGBM with NaN) and CatBoost's (which shap calls). Not on categorical
    splits: shap reads LightGBM's and HistGradientBoosting's category sets as
    numeric thresholds there (its values then differ from brute force, which
    ours match in the tests above)."""
    shap = pytest.importorskip("shap")
    lgb = pytest.importorskip("lightgbm")
    catboost = pytest.importorskip("catboost")
    from sklearn.ensemble import (GradientBoostingRegressor, HistGradientBoostingRegressor,
                                  RandomForestRegressor)

    X, y = _data(7, nan=0)
    Xn, yn = _data(8, nan=0.1)
    cases = [
        (GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0).fit(X, y), X),
        (RandomForestRegressor(n_estimators=4, max_depth=5, random_state=0).fit(X, y), X),
        (HistGradientBoostingRegressor(max_iter=8, max_leaf_nodes=8).fit(Xn, yn), Xn),
        (lgb.LGBMRegressor(n_estimators=8, num_leaves=8, verbose=-1).fit(Xn, yn), Xn),
        (catboost.CatBoostRegressor(iterations=8, depth=3, verbose=0, allow_writing_files=False,
                                    thread_count=1).fit(Xn, yn), Xn),
    ]
    for model, rows in cases:
        rows = rows[:60]
        ours = shap_interaction_values(model, rows)
        theirs = np.asarray(shap.TreeExplainer(model).shap_interaction_values(rows))
        theirs = theirs[:, :-1, :-1] if theirs.shape[1] == rows.shape[1] + 1 else theirs
        scale = max(1.0, np.max(np.abs(theirs)))
        np.testing.assert_allclose(ours[:, :-1, :-1], theirs, rtol=0, atol=1e-10 * scale)


# ------------------------------------------------------------------------ dask

def test_dask_array_and_frame_equal_in_memory():
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    import dask

    ens, X = random_ensemble(seed=10, n_trees=3, n_outputs=3)
    X = np.repeat(X, 9, axis=0)
    expected = shap_interaction_values(ens, X)
    lazy = shap_interaction_values(ens, da.from_array(X, chunks=(20, 3)))
    assert isinstance(lazy, da.Array) and lazy.shape == expected.shape
    assert lazy.numblocks == (4, 1, 1, 1)
    frame = pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])
    lazy_frame = shap_interaction_values(ens, dd.from_pandas(frame, npartitions=3))
    got, got_frame = dask.compute(lazy, lazy_frame, scheduler="synchronous")
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(got_frame, expected)


def test_dask_blocks_keep_the_output_bounded(monkeypatch):
    da = pytest.importorskip("dask.array")

    ens, X = random_ensemble(seed=11, n_trees=2)
    X = np.repeat(X, 10, axis=0)
    width = ens.n_features + 1
    monkeypatch.setattr(_local, "BLOCK_BYTES", 8 * width * width * 7)
    lazy = shap_interaction_values(ens, da.from_array(X, chunks=(50, 5)))
    assert max(lazy.chunks[0]) == 7
    np.testing.assert_array_equal(lazy.compute(scheduler="synchronous"),
                                  shap_interaction_values(ens, X))
