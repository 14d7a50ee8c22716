"""Interaction shares of R^2 / D^2 (``r2_interactions``) against brute-force enumeration.

The reference enumerates every feature subset (p <= 5) with the plain-Python
path-dependent value function of tests/reference.py, builds the same per-row
games as tests/test_r2_decomposition.py (each tree against the residuals of
the trees before, or the symmetric game of a forest), and takes their SHAP
interaction values (Lundberg et al. 2020, eq. (8)) by the definition:

    Phi_jk = sum_{S in N \\ {j, k}} |S|! (p - |S| - 2)! / (2 (p - 1)!) *
             [v(S + j + k) - v(S + j) - v(S + k) + v(S)],   j != k,
    Phi_jj = phi_j - sum_{k != j} Phi_jk,

scaled by -w_i / Q0 as the shares are.
"""
import math

import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingRegressor, HistGradientBoostingClassifier
from sklearn.tree import DecisionTreeRegressor

import reference
from test_groups import _players, reference_group_r2
from test_r2_decomposition import CASES, _shapley, _subset_tables, reference_decomposition
from sklearn_r2shap import (
    R2Interactions, UnsupportedModelError, r2_decomposition, r2_interactions, to_ensemble,
)

ATOL = 1e-10


def _interaction_index(game, p):
    """Off-diagonal SHAP interaction values of a game over the 2^p bit masks."""
    out = np.zeros((p, p))
    for j in range(p):
        for k in range(j + 1, p):
            for mask in range(1 << p):
                if mask >> j & 1 or mask >> k & 1:
                    continue
                s = bin(mask).count("1")
                w = math.factorial(s) * math.factorial(p - 2 - s) / (2 * math.factorial(p - 1))
                out[j, k] += w * (game[mask | 1 << j | 1 << k] - game[mask | 1 << j]
                                  - game[mask | 1 << k] + game[mask])
            out[k, j] = out[j, k]
    return out


def reference_interactions(ens, X, y, sample_weight=None):
    """Brute-force per-row matrices (n, p, p): interaction values off the
    diagonal, main effects on it, of the games of reference_decomposition."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, p = X.shape
    w = np.ones(n) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    q0 = np.sum(w * (y - np.sum(w * y) / np.sum(w)) ** 2)
    base = float(ens.base_value[0])
    full = (1 << p) - 1
    local = np.zeros((n, p, p))
    for i in range(n):
        if w[i] == 0:
            continue
        table = _subset_tables(ens, reference.prepare(ens, X[i]))
        if ens.averaging:
            empty = table[:, 0]
            centred = table - empty[:, None]
            mu = base + empty.sum()
            f_tilde = centred[:, full].sum()
            games = [(y[i] - mu - (f_tilde - centred[k, full]) / 2.0 - centred[k]) ** 2
                     for k in range(len(table))]
        else:
            residual = y[i] - base - np.concatenate([[0.0], np.cumsum(table[:-1, full])])
            games = [(residual[k] - table[k]) ** 2 for k in range(len(table))]
        for game in games:
            pairs = _interaction_index(game, p)
            local[i] += pairs + np.diag(_shapley(game, p) - pairs.sum(axis=1))
        local[i] *= -w[i] / q0
    return local


_cache = {}


def case(name):
    if name not in _cache:
        model, X, y, w = CASES[name]()
        result = r2_interactions(model, X, y, sample_weight=w, return_local=True, n_jobs=2)
        _cache[name] = (model, X, y, w, result,
                        reference_interactions(to_ensemble(model), X, y, w))
    return _cache[name]


@pytest.mark.parametrize("name", CASES)
def test_matches_brute_force(name):
    """Every row's matrix, the shares and the identities, on sklearn, XGBoost,
    LightGBM and CatBoost models (NaN routing, weights, base scores, early
    stopping, held-out rows, forests' symmetric game)."""
    model, X, y, w, result, local = case(name)
    off_diagonal = ~np.eye(local.shape[1], dtype=bool)
    assert np.abs(local[:, off_diagonal]).max() > 1e-3  # the case has interactions
    np.testing.assert_allclose(result.local, local, rtol=0, atol=ATOL)
    np.testing.assert_allclose(result.shares, local.sum(axis=0), rtol=0, atol=ATOL)
    np.testing.assert_allclose(result.shares, result.shares.T, rtol=0, atol=1e-14)
    # the rows sum to the features' shares, as r2_decomposition reports them
    plain = r2_decomposition(model, X, y, sample_weight=w)
    np.testing.assert_allclose(result.shares.sum(axis=1), plain.shares, rtol=0, atol=1e-12)
    np.testing.assert_allclose(result.decomposition.shares, plain.shares, rtol=0, atol=1e-12)
    assert result.score == plain.score
    np.testing.assert_allclose(result.shares.sum() + result.unattributed, result.score,
                               rtol=0, atol=1e-12)
    counted = np.ones(len(y), bool) if w is None else np.asarray(w) > 0
    n = counted.sum()
    want = np.sqrt(n * local[counted].var(axis=0, ddof=1))
    np.testing.assert_allclose(result.std_errors, want, rtol=1e-9, atol=1e-14)


def union_rule_case():
    """An XGBoost model (10 features, depth 6) whose trees' pairs of leaves have
    fewer distinct features on their paths (G_t) than their depth allows."""
    import xgboost

    rng = np.random.default_rng(5)
    X = rng.uniform(-1, 1, size=(400, 10))
    y = X @ rng.normal(size=10) + X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=400)
    model = xgboost.XGBRegressor(n_estimators=2, max_depth=6, learning_rate=0.5,
                                 random_state=0).fit(X, y)
    return model, X, y


def test_rule_of_the_pairs_union_against_enumeration():
    """A tree whose pairs of leaves have fewer distinct features on their paths
    (G_t) than its depth and its features allow takes ceil(G_t / 2) Gauss
    nodes, the R^2 kernel's rule, for the terms and the interactions of one
    pass: both exact against enumeration (10 features)."""
    from sklearn_r2shap._kernels import _qshap

    model, X, y = union_rule_case()
    ens = to_ensemble(model)
    max_union = _qshap._PairTables(ens).max_union
    assert ((max_union + 1) // 2 < _qshap.tree_rule_sizes(ens)).any()  # the case binds
    rows = slice(0, 12)
    local = reference_interactions(ens, X[rows], y[rows])
    result = r2_interactions(model, X[rows], y[rows], return_local=True)
    np.testing.assert_allclose(result.local, local, rtol=0, atol=ATOL)
    plain = r2_decomposition(model, X[rows], y[rows])
    np.testing.assert_allclose(result.decomposition.shares, plain.shares, rtol=0, atol=1e-12)


def test_pair_kernel_copies_at_every_node_count(monkeypatch):
    """The pair loop has copies at a constant 4 and 5 Gauss nodes and one for
    any count: a rule with more nodes than a tree needs is still exact, so
    each tree at 0, 1 or 2 nodes more than its rule gives the enumeration's
    values through every copy."""
    from sklearn_r2shap._kernels import _qshap

    model, X, y = union_rule_case()
    rows = slice(0, 12)
    local = reference_interactions(to_ensemble(model), X[rows], y[rows])
    original = _qshap._tree_rules
    used = set()
    for extra in (0, 1, 2):
        def more_nodes(*args, _extra=extra, **kwargs):
            tree_m, points, weights = original(*args, **kwargs)
            tree_m = np.minimum(tree_m + _extra, len(points))
            used.update(tree_m.tolist())
            return tree_m, points, weights

        monkeypatch.setattr(_qshap, "_tree_rules", more_nodes)
        result = r2_interactions(model, X[rows], y[rows], return_local=True)
        np.testing.assert_allclose(result.local, local, rtol=0, atol=ATOL)
    assert {4, 5} <= used and used - {4, 5}


def test_sibling_leaves_in_one_pass(monkeypatch):
    """Sibling leaves' pairs with a third leaf are summed in one pass (their
    paths differ in their parent's feature only): with the siblings found or
    not, listed or found row by row, every row's matrix is the enumeration's;
    the case has sibling pairs whose differing feature is on the third leaf's
    path and pairs where it is not."""
    from sklearn_r2shap._kernels import _qshap_interactions

    model, X, y = union_rule_case()
    rows = slice(0, 12)
    local = reference_interactions(to_ensemble(model), X[rows], y[rows])
    original = _qshap_interactions.pair_plan
    plans, results = [], []
    for budget, siblings in ((1e12, True), (0.0, True), (1e12, False)):
        def planned(*args, _budget=budget, _siblings=siblings, **kwargs):
            plan = original(*args, max_list_bytes=_budget, **kwargs)
            if not _siblings:
                plan["sibling"] = np.full_like(plan["sibling"], -1)
            plans.append(plan)
            return plan

        monkeypatch.setattr(_qshap_interactions, "pair_plan", planned)
        results.append(r2_interactions(model, X[rows], y[rows], return_local=True).local)
        np.testing.assert_allclose(results[-1], local, rtol=0, atol=ATOL)
    np.testing.assert_array_equal(results[1], results[0])
    plan = plans[0]
    structure = plan["structure"]
    start, dim = structure["leaf_feature_start"], structure["leaf_dim"]
    feature = structure["leaf_feature"]
    shared = set()
    for t in range(len(structure["tree_leaf_start"]) - 1):
        first, stop = structure["tree_leaf_start"][t:t + 2]
        for l2 in range(first, stop):
            slot = plan["sibling"][l2]
            if slot < 0:
                continue
            differing = feature[start[l2] + slot]
            for l1 in range(first, l2):
                shared.add(differing in feature[start[l1]:start[l1] + dim[l1]])
    assert shared == {True, False}


def test_pure_interaction_holds_the_score():
    """y = x0 x1 + noise on symmetric features: the pair (x0, x1) holds almost all
    of R^2 and neither x0 nor x1 has a main effect of note."""
    import xgboost

    rng = np.random.default_rng(3)
    X = rng.uniform(-1, 1, size=(1500, 4))
    y = X[:, 0] * X[:, 1] + 0.05 * rng.normal(size=1500)
    model = xgboost.XGBRegressor(n_estimators=60, max_depth=4, learning_rate=0.3,
                                 random_state=0).fit(X, y)
    result = r2_interactions(model, X, y)
    pairs = result.pair_shares()
    assert result.score > 0.9
    assert pairs[0, 1] > 0.85 * result.score
    assert np.abs(result.main_effects[:2]).max() < 0.08 * result.score
    pairs[0, 1] = pairs[1, 0] = 0.0
    assert np.abs(pairs).max() < 0.01 * result.score
    top = result.top_pairs(1)
    assert (top.feature_1[0], top.feature_2[0]) == ("x0", "x1")
    # a pair's standard error is twice its cell's
    assert top.std_error[0] == 2.0 * result.std_errors[0, 1]


def test_bit_identical_for_threads_and_blocks(monkeypatch):
    from sklearn_r2shap._games import r2 as r2_games

    model, X, y, w, _, _ = case("xgboost-nan")
    want = r2_interactions(model, X, y, sample_weight=w, n_jobs=1)
    for n_jobs in (2, 3):
        got = r2_interactions(model, X, y, sample_weight=w, n_jobs=n_jobs)
        np.testing.assert_array_equal(got.shares, want.shares)
        np.testing.assert_array_equal(got.std_errors, want.std_errors)
    # blocks of one row's matrices: the same values, also in blocks, and what
    # the kernel reads besides the rows computed once per call
    from sklearn_r2shap._kernels import _qshap_interactions

    plans = []
    original = _qshap_interactions.pair_plan
    monkeypatch.setattr(_qshap_interactions, "pair_plan",
                        lambda *args, **kwargs: plans.append(1) or original(*args, **kwargs))
    monkeypatch.setattr(r2_games._PairBlockWork, "block_bytes", 8 * 25)
    got = r2_interactions(model, X, y, sample_weight=w, n_jobs=2)
    assert len(plans) == 1
    np.testing.assert_allclose(got.shares, want.shares, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got.std_errors, want.std_errors, rtol=1e-12)


def test_groups_against_enumeration():
    """Groups as players: the main effects (diagonal) and pairs of groups add up
    to the groups' shares, brute-forced by test_groups.reference_group_r2; the
    interaction of two groups is checked against enumeration over the groups."""
    from test_groups import _data

    X, y = _data(n=60)
    groups = {"a": [0, 3], "b": [1, 4, 5]}
    players = _players(groups, X.shape[1])
    model = GradientBoostingRegressor(n_estimators=4, max_depth=3, random_state=0).fit(X, y)
    result = r2_interactions(model, X, y, feature_groups=groups, return_local=True)
    assert list(result.feature_names) == ["a", "b", "x2"]
    assert result.shares.shape == (3, 3) and result.local.shape == (60, 3, 3)
    np.testing.assert_allclose(result.shares.sum(axis=1),
                               reference_group_r2(to_ensemble(model), X, y, players), atol=1e-10)
    # the interaction of the groups by enumeration (3 players)
    ens = to_ensemble(model)
    masks = [{j for g in range(3) if m >> g & 1 for j in players[g]} for m in range(8)]
    q0 = np.sum((y - y.mean()) ** 2)
    want = np.zeros((3, 3))
    for i in range(len(y)):
        x = reference.prepare(ens, X[i])
        table = np.array([[reference.tree_value(ens, t, x, S)[0] for S in masks]
                          for t in range(ens.n_trees)])
        prediction = float(ens.base_value[0])
        for k in range(ens.n_trees):
            want -= _interaction_index((y[i] - prediction - table[k]) ** 2, 3) / q0
            prediction += table[k, 7]
    off = ~np.eye(3, dtype=bool)
    assert np.abs(want[off]).max() > 1e-3
    np.testing.assert_allclose(result.shares[off], want[off], atol=1e-10)


def test_classifier_d2_and_subsample():
    """D^2 of a boosted classifier: the same identities; max_samples estimates
    from the rows r2_decomposition draws with the same seed."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    labels = (X[:, 0] * X[:, 1] + 0.3 * rng.normal(size=300) > 0).astype(int)
    model = HistGradientBoostingClassifier(max_iter=15, random_state=0).fit(X, labels)
    result = r2_interactions(model, X, labels)
    plain = r2_decomposition(model, X, labels)
    assert result.score_name == "d2_log_loss"
    np.testing.assert_allclose(result.shares.sum(axis=1), plain.shares, atol=1e-12)
    assert result.top_pairs(1).feature_1[0] == "x0"
    sub = r2_interactions(model, X, labels, max_samples=100, random_state=4)
    sub_plain = r2_decomposition(model, X, labels, max_samples=100, random_state=4)
    assert sub.decomposition.n_rows_sampled == 100
    np.testing.assert_allclose(sub.shares.sum(axis=1), sub_plain.shares, atol=1e-12)
    np.testing.assert_allclose(np.diag(sub.std_errors) > 0, True)


def test_result_api_and_errors():
    model, X, y, w, result, _ = case("decision-tree-weighted")
    assert isinstance(result, R2Interactions)
    pairs = result.pair_shares()
    assert np.all(np.diag(pairs) == 0) and np.array_equal(pairs, pairs.T)
    np.testing.assert_allclose(result.main_effects.sum() + pairs.sum() / 2,
                               result.shares.sum(), atol=1e-14)
    top = result.top_pairs(3)
    assert list(top.columns) == ["feature_1", "feature_2", "share", "std_error", "fraction"]
    assert len(top) == 3 and np.all(np.diff(np.abs(top.share)) <= 0)
    text = str(result)
    assert "x0 (main)" in text and "x0 x x1" in text and "unattributed" in text
    assert repr(result).startswith("R2Interactions: 5 features")
    pytest.importorskip("matplotlib").use("Agg")
    ax = result.plot()
    assert ax.get_title().startswith("R$^2$")
    # refused: a multi-output regressor
    Y = np.column_stack([y, -y])
    multi = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, Y)
    with pytest.raises(UnsupportedModelError, match="one output"):
        r2_interactions(multi, X, Y)


def test_pair_lists_and_row_by_row_give_the_same_bits(monkeypatch):
    """Trees whose lists of shared features do not fit the budget find them row by
    row: every budget gives the same values, bit for bit."""
    from sklearn_r2shap._kernels import _qshap_interactions

    model, X, y, w, _, local = case("lightgbm-nan")  # before the plan is patched
    original = _qshap_interactions.pair_plan
    results = []
    listed = []
    for budget in (0.0, 5000.0, 1e12):  # no tree, some of the 8 trees, every tree listed
        calls = []

        def budgeted(*args, _budget=budget, **kwargs):
            calls.append(_budget)
            plan = original(*args, max_list_bytes=_budget, **kwargs)
            listed.append(int(np.sum(plan["lists"]["first"] >= 0)))
            return plan

        monkeypatch.setattr(_qshap_interactions, "pair_plan", budgeted)
        results.append(r2_interactions(model, X, y, sample_weight=w, return_local=True).local)
        assert calls == [budget]
    assert listed[0] == 0 and 0 < listed[1] < listed[2] == 8
    for got in results[1:]:
        np.testing.assert_array_equal(got, results[0])
    np.testing.assert_allclose(results[0], local, rtol=0, atol=ATOL)
