"""ShapleyR2RFECV's rankings inside the folds: ``ranking_test_size``, the held-out
shares of one inner split of the training rows. References: a plain loop of fits
and r2_decomposition of the inner model on the inner held-out rows, and
scikit-learn's ShuffleSplit / StratifiedShuffleSplit seeded by draws from
``random_state``."""
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor
from sklearn.model_selection import KFold, ShuffleSplit, StratifiedShuffleSplit
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_r2shap import ShapleyR2RFECV, r2_decomposition


def _split_rows_not_weights(estimator):
    """Checks that an inner split of the rows cannot pass."""
    return {
        "check_sample_weight_equivalence_on_dense_data": (
            "the inner split is drawn over rows: a row repeated k times can fall on both "
            "sides of it, a row of weight k on one side only, so the ranking model sees "
            "other rows (the check makes only the outer cv keep repeated rows together)."
        ),
        "check_sample_weight_equivalence_on_sparse_data": "as on dense data.",
        "check_fit2d_1feature": (
            "10 rows: a fold's inner held-out part (3-4 rows) can have a constant y, on "
            "which R^2 is not defined; refused by an error that names ranking_test_size (tested "
            "below), not by the number of features."
        ),
    }


@parametrize_with_checks([
    ShapleyR2RFECV(DecisionTreeRegressor(max_depth=3, random_state=0), cv=3, ranking_test_size=0.5,
                   random_state=0, n_jobs=1),
    ShapleyR2RFECV(DecisionTreeClassifier(max_depth=3, random_state=0), cv=3, step=0.5,
                   ranking_test_size=0.4, random_state=0, n_jobs=1)],
    expected_failed_checks=_split_rows_not_weights)
def test_sklearn_compatible_with_held_out_ranking(estimator, check):
    check(estimator)


def _data(seed, n=200, signal=(1.0, 0.6, 0.3), n_noise=4):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(signal) + n_noise))
    y = X[:, :len(signal)] @ np.asarray(signal) + 0.5 * rng.normal(size=n)
    return X, y


def _seeds(random_state, count):
    """The inner splits' seeds: draws from random_state, one per elimination."""
    rng = np.random.RandomState(random_state)
    return [int(rng.randint(np.iinfo(np.int32).max)) for _ in range(count)]


def _held_out_elimination(model, X, y, fraction, seed, stop=1, held_out=None):
    """One elimination as a plain loop, ranked by held-out shares: one inner split
    of (X, y) (ShuffleSplit, ``fraction`` held out, the same at every step); each
    step fits the model on the inner training rows, decomposes its R^2 on the inner
    held-out rows (r2_decomposition), drops every feature with a negative share (at
    least one, never below ``stop``), else the lowest. Each count is scored on
    ``held_out`` by the model fitted on all of (X, y). Returns ({count: (support,
    score)}, the last shares and their features)."""
    inner_train, inner_test = next(ShuffleSplit(1, test_size=fraction,
                                                random_state=seed).split(X))
    remaining, visited, shares = list(range(X.shape[1])), {}, None
    while True:
        support = np.zeros(X.shape[1], dtype=bool)
        support[remaining] = True
        if held_out is not None:
            full = clone(model).fit(X[:, remaining], y)
            visited[len(remaining)] = (support, full.score(held_out[0][:, remaining],
                                                            held_out[1]))
            if len(remaining) <= stop:
                return visited, None, remaining
        inner = clone(model).fit(X[inner_train][:, remaining], y[inner_train])
        shares = r2_decomposition(inner, X[inner_test][:, remaining], y[inner_test]).shares
        if len(remaining) <= stop:
            return visited, shares, remaining
        order = np.argsort(-shares, kind="mergesort")
        n_remove = min(max(int(np.sum(shares < 0)), 1), len(remaining) - stop)
        remaining = sorted(remaining[i] for i in order[:len(remaining) - n_remove])


def test_held_out_ranking_is_a_plain_loop_of_inner_splits():
    X, y = _data(3)
    model = DecisionTreeRegressor(max_depth=4, min_samples_leaf=5, random_state=0)
    cv = KFold(3, shuffle=True, random_state=0)
    ours = ShapleyR2RFECV(model, cv=cv, ranking_test_size=0.4, random_state=7, n_jobs=1).fit(X, y)
    results = ours.cv_results_
    seeds = _seeds(7, 4)  # the three folds' eliminations, then the one on all rows
    for k, (train, test) in enumerate(cv.split(X, y)):
        visited, _, _ = _held_out_elimination(model, X[train], y[train], 0.4, seeds[k],
                                              held_out=(X[test], y[test]))
        for c, count in enumerate(results["n_features"]):
            if count in visited:
                want_support, want_score = visited[count]
                np.testing.assert_array_equal(results[f"split{k}_support"][c], want_support)
                np.testing.assert_allclose(results[f"split{k}_test_score"][c], want_score,
                                           rtol=0, atol=1e-12)
    # the elimination on all rows, down to the chosen count: the same features, and
    # their shares are those of the inner model on the inner held-out rows
    _, shares, kept = _held_out_elimination(model, X, y, 0.4, seeds[3],
                                            stop=ours.n_features_)
    np.testing.assert_array_equal(np.flatnonzero(ours.support_), kept)
    np.testing.assert_allclose(ours.feature_importances_, shares, rtol=1e-10, atol=1e-14)
    # the refitted model is fitted on all rows
    full = clone(model).fit(X[:, ours.support_], y)
    np.testing.assert_array_equal(ours.estimator_.predict(X[:, ours.support_]),
                                  full.predict(X[:, ours.support_]))


def test_held_out_shares_of_noise_are_centred_at_or_below_zero():
    # pure noise, nothing eliminated: in-sample shares split the in-sample R^2 (> 0),
    # held-out shares the held-out R^2 (<= 0 on average)
    model = DecisionTreeRegressor(max_depth=3, random_state=0)
    in_sample, held_out = [], []
    for seed in range(8):
        rng = np.random.default_rng(seed)
        X, y = rng.normal(size=(150, 4)), rng.normal(size=150)
        for test_size, out in ((None, in_sample), (0.5, held_out)):
            selector = ShapleyR2RFECV(model, cv=2, ranking_test_size=test_size, random_state=seed,
                                      min_features_to_select=4, n_jobs=1).fit(X, y)
            out.append(selector.feature_importances_)
    assert np.all(np.asarray(in_sample).sum(axis=1) > 0)
    assert np.mean(held_out) < 0


def test_classifier_inner_split_is_stratified():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(160, 5))
    y = (X[:, 0] + 0.5 * rng.normal(size=160) > 1.0).astype(int)  # unbalanced classes
    model = GradientBoostingClassifier(n_estimators=10, max_depth=2, random_state=0)
    ours = ShapleyR2RFECV(model, cv=2, ranking_test_size=0.3, random_state=1, n_jobs=1,
                          min_features_to_select=5).fit(X, y)
    splitter = ours._final_ranking_cv
    assert isinstance(splitter, StratifiedShuffleSplit)
    assert splitter.random_state == _seeds(1, 3)[2]
    inner_train, inner_test = next(splitter.split(X, y))
    inner = clone(model).fit(X[inner_train], y[inner_train])
    want = r2_decomposition(inner, X[inner_test], y[inner_test])
    assert ours.score_name_ == want.score_name
    np.testing.assert_allclose(ours.feature_importances_, want.shares, rtol=1e-10, atol=1e-14)


def test_held_out_ranking_is_deterministic_and_the_same_for_any_n_jobs():
    X, y = _data(5, n=300, n_noise=6)
    model = GradientBoostingRegressor(n_estimators=25, max_depth=3, random_state=0)
    fits = [ShapleyR2RFECV(model, cv=3, step=2, ranking_test_size=0.5, random_state=0,
                           n_jobs=n_jobs).fit(X, y) for n_jobs in (1, 2, 2)]
    for other in fits[1:]:
        np.testing.assert_array_equal(other.support_, fits[0].support_)
        np.testing.assert_array_equal(other.ranking_, fits[0].ranking_)
        np.testing.assert_array_equal(other.feature_importances_, fits[0].feature_importances_)
        assert set(other.cv_results_) == set(fits[0].cv_results_)
        for key, value in fits[0].cv_results_.items():
            np.testing.assert_array_equal(other.cv_results_[key], value, err_msg=key)
    # another random_state: other inner rows, other shares
    other = ShapleyR2RFECV(model, cv=3, step=2, ranking_test_size=0.5, random_state=1,
                           n_jobs=1, min_features_to_select=X.shape[1]).fit(X, y)
    same = ShapleyR2RFECV(model, cv=3, step=2, ranking_test_size=0.5, random_state=0,
                          n_jobs=1, min_features_to_select=X.shape[1]).fit(X, y)
    assert not np.array_equal(other.feature_importances_, same.feature_importances_)


@pytest.mark.parametrize("ranking_test_size", [0.0, 1.0, 1.5, -0.3, 0, 1, 3, True, "half",
                                               float("nan")])
def test_bad_ranking_test_size_is_refused(ranking_test_size):
    X, y = _data(0, n=60)
    with pytest.raises(ValueError,
                       match="The 'ranking_test_size' parameter of ShapleyR2RFECV must be"):
        ShapleyR2RFECV(DecisionTreeRegressor(max_depth=2),
                       ranking_test_size=ranking_test_size).fit(X, y)


@pytest.mark.parametrize("ranking_cv", [0.5, 0.0, 1, -2, True, "half", float("nan")])
def test_bad_ranking_cv_is_refused(ranking_cv):
    # a float is a test size: ranking_test_size, not ranking_cv
    X, y = _data(0, n=60)
    with pytest.raises(ValueError, match="The 'ranking_cv' parameter of ShapleyR2RFECV must be"):
        ShapleyR2RFECV(DecisionTreeRegressor(max_depth=2), ranking_cv=ranking_cv).fit(X, y)


def test_ranking_cv_and_ranking_test_size_together_are_refused():
    X, y = _data(0, n=60)
    with pytest.raises(ValueError, match=r"ranking_cv=3 and ranking_test_size=0.5: .* give one"):
        ShapleyR2RFECV(DecisionTreeRegressor(max_depth=2), ranking_cv=3,
                       ranking_test_size=0.5).fit(X, y)


def test_a_shuffle_split_ranking_cv_is_cross_fitted_not_named_a_test_size():
    # a splitter with one split is a ranking_cv (its held-out rows pooled): its errors
    # are its own, not reworded as ranking_test_size's
    X = np.arange(8.0).reshape(-1, 1)
    y = np.array([0.0, 0, 0, 0, 0, 0, 0, 1])
    with pytest.raises(ValueError) as error:
        ShapleyR2RFECV(DecisionTreeRegressor(max_depth=2), cv=2, random_state=0,
                       ranking_cv=ShuffleSplit(n_splits=1, test_size=0.5, random_state=0)
                       ).fit(X, y)
    assert "ranking_test_size" not in str(error.value)


def test_constant_y_on_the_inner_held_out_rows_is_refused_by_name():
    X = np.arange(8.0).reshape(-1, 1)
    y = np.array([0.0, 0, 0, 0, 0, 0, 0, 1])
    with pytest.raises(ValueError, match=r"ranking_test_size=0.5: the inner split of .* y is constant"):
        ShapleyR2RFECV(DecisionTreeRegressor(max_depth=2), cv=2, ranking_test_size=0.5,
                       random_state=0).fit(X, y)
