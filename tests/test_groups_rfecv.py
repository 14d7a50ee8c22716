"""ShapleyR2RFECV(feature_groups=): whole groups eliminated by the exact Shapley shares of
the groups. References: a plain loop of fits and r2_decomposition(feature_groups=) (the
groups' shares, tested against enumeration of group subsets in test_groups.py),
and the selection without groups when every group is a column of its own."""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.model_selection import KFold
from sklearn.tree import DecisionTreeRegressor

from sklearn_r2shap import ShapleyR2RFECV, r2_decomposition

pd = pytest.importorskip("pandas")


def _data(seed, n=300):
    """Columns 0-2 carry the signal, 3-7 are noise."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 8))
    y = X[:, 0] + X[:, 1] * np.abs(X[:, 1]) + 1.5 * np.sin(2 * X[:, 2]) + 0.2 * rng.normal(size=n)
    return X, y


# each relevant column with a noise column; 6 and 7 are groups of their own
PAIRS = {"a": [0, 3], "b": [1, 4], "c": [2, 5]}
PAIR_MEMBERS = [[0, 3], [1, 4], [2, 5], [6], [7]]


def reference_elimination(model, X, y, members, stop):
    """RFE over groups as a plain loop: fit on the remaining groups' columns, take
    the groups' shares from r2_decomposition(feature_groups=), drop every group with a
    negative share (at least one, never below ``stop``), else the lowest (the
    later group first among equal shares). Returns the per-column ranking."""
    remaining = list(range(len(members)))
    removed = []
    while len(remaining) > stop:
        columns = sorted(j for u in remaining for j in members[u])
        fitted = clone(model).fit(X[:, columns], y)
        groups = {f"u{u}": [columns.index(j) for j in members[u]] for u in remaining}
        shares = r2_decomposition(fitted, X[:, columns], y, feature_groups=groups).shares
        order = np.argsort(-shares, kind="mergesort")  # best first
        n_remove = min(max(int(np.sum(shares < 0)), 1), len(remaining) - stop)
        removed.append([remaining[i] for i in order[len(remaining) - n_remove:]])
        remaining = sorted(remaining[i] for i in order[:len(remaining) - n_remove])
    ranking = np.ones(X.shape[1], dtype=int)
    for i, batch in enumerate(removed[::-1]):
        for u in batch:
            ranking[members[u]] = i + 2
    return ranking, remaining


def test_whole_groups_are_kept_and_the_elimination_is_the_reference():
    model = DecisionTreeRegressor(max_depth=4, min_samples_leaf=5, random_state=0)
    names = ["a", "b", "c", "x6", "x7"]
    for seed in range(4):
        X, y = _data(seed)
        selector = ShapleyR2RFECV(model, cv=KFold(3, shuffle=True, random_state=seed),
                                  feature_groups=PAIRS, n_jobs=1).fit(X, y)
        # whole groups: every group all in or all out, its columns share a rank
        for members in PAIR_MEMBERS:
            assert len(set(selector.support_[members])) == 1
            assert len(set(selector.ranking_[members])) == 1
        kept = [u for u, members in enumerate(PAIR_MEMBERS) if selector.support_[members[0]]]
        assert selector.n_feature_groups_ == len(kept)
        assert selector.n_features_ == selector.support_.sum() == sum(
            len(PAIR_MEMBERS[u]) for u in kept)
        assert list(selector.selected_feature_groups_) == [names[u] for u in kept]
        # the three groups with a signal column are kept
        assert {"a", "b", "c"} <= set(selector.selected_feature_groups_)
        # the elimination on all rows: the reference loop's ranking
        ranking, remaining = reference_elimination(model, X, y, PAIR_MEMBERS,
                                                   selector.n_feature_groups_)
        np.testing.assert_array_equal(selector.ranking_, ranking)
        assert remaining == kept
        # the kept groups' shares: r2_decomposition of the refitted model with the groups
        columns = np.flatnonzero(selector.support_)
        groups = {names[u]: [int(np.flatnonzero(columns == j)[0]) for j in PAIR_MEMBERS[u]]
                  for u in kept}
        want = r2_decomposition(selector.estimator_, X[:, columns], y, feature_groups=groups)
        np.testing.assert_allclose(selector.feature_importances_, want.shares, atol=1e-12)
        assert selector.estimator_.n_features_in_ == selector.n_features_
        np.testing.assert_array_equal(selector.transform(X), X[:, columns])
        # every fold's support at each count is a union of that many whole groups
        counts = selector.cv_results_["n_feature_groups"]
        # n_features: the columns of that many best groups of the elimination on all
        # rows (its ranking, then the last step's shares among the kept groups)
        columns_at = selector.cv_results_["n_features"]
        assert columns_at.shape == counts.shape
        by_rank = sorted(range(len(PAIR_MEMBERS)), key=lambda u: ranking[PAIR_MEMBERS[u][0]])
        kept_best_first = [kept[i] for i in np.argsort(-selector.feature_importances_,
                                                         kind="mergesort")]
        order = kept_best_first + [u for u in by_rank if u not in kept]
        np.testing.assert_array_equal(
            columns_at, [sum(len(PAIR_MEMBERS[u]) for u in order[:c]) for c in counts])
        assert columns_at[counts == selector.n_feature_groups_] == selector.n_features_
        for k in range(3):
            support = selector.cv_results_[f"split{k}_support"]
            assert support.shape == (len(counts), 8)
            whole = np.array([[len(set(row[m])) == 1 for m in PAIR_MEMBERS] for row in support])
            assert whole.all()
            np.testing.assert_array_equal(
                [sum(row[m[0]] for m in PAIR_MEMBERS) for row in support], counts)


@pytest.mark.parametrize("params", [{}, {"step": 2}, {"ranking_cv": 3},
                                    {"ranking_test_size": 0.4, "random_state": 0},
                                    {"selection_rule": "best", "min_features_to_select": 2}])
def test_singleton_groups_are_the_selection_without_groups(params):
    model = DecisionTreeRegressor(max_depth=4, random_state=0)
    for seed in range(2):
        X, y = _data(seed, n=180)
        cv = KFold(3, shuffle=True, random_state=seed)
        plain = ShapleyR2RFECV(model, cv=cv, n_jobs=1, **params).fit(X, y)
        singletons = {f"g{j}": [j] for j in range(X.shape[1])}
        grouped = ShapleyR2RFECV(model, cv=cv, n_jobs=1, feature_groups=singletons,
                                 **params).fit(X, y)
        np.testing.assert_array_equal(grouped.support_, plain.support_)
        np.testing.assert_array_equal(grouped.ranking_, plain.ranking_)
        assert grouped.n_features_ == plain.n_features_ == grouped.n_feature_groups_
        np.testing.assert_allclose(grouped.feature_importances_, plain.feature_importances_,
                                   rtol=0, atol=1e-12)
        assert list(grouped.selected_feature_groups_) == [
            f"g{j}" for j in np.flatnonzero(plain.support_)]
        results, want = dict(grouped.cv_results_), dict(plain.cv_results_)
        # the same keys with or without feature groups; singletons: counts of columns
        assert set(results) == set(want)
        np.testing.assert_array_equal(want["n_feature_groups"], want["n_features"])
        assert plain.n_feature_groups_ == plain.n_features_
        for key, value in want.items():
            if key.endswith("_support"):
                np.testing.assert_array_equal(results[key], value, err_msg=key)
            else:
                np.testing.assert_allclose(results[key], value, rtol=0, atol=1e-12,
                                           err_msg=key)


def test_groups_by_name_plot_and_errors():
    X, y = _data(7, n=150)
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(8)])
    model = DecisionTreeRegressor(max_depth=3, random_state=0)
    by_name = ShapleyR2RFECV(model, cv=3, n_jobs=1,
                             feature_groups={"a": ["c0", "c3"], "b": ["c1", "c4"]}).fit(frame, y)
    by_index = ShapleyR2RFECV(model, cv=3, n_jobs=1,
                              feature_groups={"a": [0, 3], "b": [1, 4]}).fit(X, y)
    np.testing.assert_array_equal(by_name.support_, by_index.support_)
    assert set(by_name.selected_feature_groups_) - {"a", "b"} <= {"c2", "c5", "c6", "c7"}
    assert list(by_name.get_feature_names_out()) == list(frame.columns[by_name.support_])
    # refitted without feature groups: the group names go, the count is of features
    by_index.set_params(feature_groups=None).fit(X, y)
    assert not hasattr(by_index, "selected_feature_groups_")
    assert by_index.n_feature_groups_ == by_index.n_features_
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = by_name.plot()
    assert ax.get_xlabel() == "number of feature groups"
    import matplotlib.pyplot as plt

    plt.close("all")
    with pytest.raises(ValueError, match="mapping of group name to input columns"):
        ShapleyR2RFECV(model, cv=3, feature_groups="input").fit(X, y)
    with pytest.raises(ValueError, match="in two groups"):
        ShapleyR2RFECV(model, cv=3, feature_groups={"a": [0, 1], "b": [1]}).fit(X, y)
    with pytest.raises(ValueError, match="must differ"):
        ShapleyR2RFECV(model, cv=3, feature_groups={"c2": ["c0", "c1"]}).fit(frame, y)
