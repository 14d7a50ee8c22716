"""Tests on held-out shares (ShapleyR2Importance's test "fpr", "fwe", "fdr") and
ShapleyR2RFECV: statistics against plain-numpy references, calibration over
fixed seeds, scikit-learn compatibility (DESIGN.md, section 7)."""
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.feature_selection import RFECV
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_r2shap import ShapleyR2Importance, ShapleyR2RFECV, r2_decomposition
from sklearn_r2shap._estimators._stats import adjusted_pvalues, choose_n_features, rejected


# --------------------------------------------------------------------------
# plain references
# --------------------------------------------------------------------------
def _holm(p, alpha):
    """Holm's step-down procedure, written as a loop."""
    order = sorted(range(len(p)), key=lambda j: p[j])
    keep = np.zeros(len(p), dtype=bool)
    for k, j in enumerate(order):
        if p[j] > alpha / (len(p) - k):
            break
        keep[j] = True
    return keep


def _benjamini_hochberg(p, alpha):
    """BH's step-up procedure, written as a loop: the largest k with p_(k) <= k alpha / m."""
    order = sorted(range(len(p)), key=lambda j: p[j])
    m, last = len(p), -1
    for k, j in enumerate(order):
        if p[j] <= (k + 1) * alpha / m:
            last = k
    keep = np.zeros(m, dtype=bool)
    keep[[order[k] for k in range(last + 1)]] = True
    return keep


def _z_test(terms):
    """One-sided z-test of each column's mean, with math.erfc for 1 - Phi."""
    n = terms.shape[0]
    mean = terms.sum(axis=0) / n
    sd = np.sqrt(((terms - mean) ** 2).sum(axis=0) / (n - 1))
    z = np.zeros(terms.shape[1])
    p = np.ones(terms.shape[1])
    for j in range(terms.shape[1]):
        if sd[j] > 0:  # a column of zeros (a feature no model uses): z = 0, p = 1
            z[j] = mean[j] / (sd[j] / math.sqrt(n))
            p[j] = 0.5 * math.erfc(z[j] / math.sqrt(2.0))
    return z, p


def test_corrections_match_loops():
    rng = np.random.default_rng(0)
    for _ in range(200):
        m = int(rng.integers(1, 12))
        p = rng.uniform(size=m) ** 3
        if rng.uniform() < 0.5:  # ties
            p[rng.integers(m, size=m // 2)] = p[0]
        alpha = float(rng.uniform(0.01, 0.3))
        np.testing.assert_array_equal(rejected(p, "fwe", alpha), _holm(p, alpha))
        np.testing.assert_array_equal(rejected(p, "fdr", alpha), _benjamini_hochberg(p, alpha))
        np.testing.assert_array_equal(rejected(p, "fpr", alpha), p <= alpha)
    # adjusted p-values: monotone in p, and equal p-values get equal adjusted ones
    p = np.array([0.01, 0.04, 0.04, 0.03, 0.5])
    for method in ("fwe", "fdr"):
        adjusted = adjusted_pvalues(p, method)
        assert adjusted[1] == adjusted[2]
        assert np.all(np.diff(adjusted[np.argsort(p, kind="mergesort")]) >= 0)
    # Holm: 0.01 <= 0.13/5, 0.03 <= 0.13/4, the tied pair <= 0.13/3; at 0.09, 0.03 > 0.09/4
    np.testing.assert_array_equal(rejected(p, "fwe", 0.13), [True, True, True, True, False])
    np.testing.assert_array_equal(rejected(p, "fwe", 0.09), [True, False, False, False, False])


def _data(seed, n=160, signal=(1.0, 0.5), n_noise=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, len(signal) + n_noise))
    y = X[:, :len(signal)] @ np.asarray(signal) + rng.normal(size=n)
    return X, y


def _cross_fitted_terms(model, X, y, cv, sample_weight=None):
    """L_ij per fold from each fold model's held-out local terms, pooled over rows."""
    terms, present = np.zeros(X.shape), np.zeros(len(X), dtype=bool)
    for train, test in cv.split(X, y):
        weight = None if sample_weight is None else sample_weight[train]
        fitted = clone(model).fit(X[train], y[train], sample_weight=weight)
        fold = r2_decomposition(fitted, X[test], y[test], return_local=True,
                                sample_weight=None if sample_weight is None
                                else sample_weight[test])
        keep = np.ones(len(test), dtype=bool) if sample_weight is None else sample_weight[test] > 0
        # scaled so that the fold's share is the mean over its rows (of positive weight)
        terms[test[keep]] = keep.sum() * fold.local[keep]
        present[test[keep]] = True
    return terms[present]


@pytest.mark.parametrize("weighted", [False, True])
def test_pvalues_match_a_numpy_reimplementation(weighted):
    X, y = _data(0, n=150, signal=(1.0, 0.3, 0.1), n_noise=2)
    weight = None
    if weighted:
        weight = np.random.default_rng(1).uniform(0.5, 2.0, size=len(y))
        weight[::17] = 0.0
    model = GradientBoostingRegressor(n_estimators=8, max_depth=2, random_state=0)
    cv = KFold(4, shuffle=True, random_state=0)
    terms = _cross_fitted_terms(model, X, y, cv, weight)
    z, p = _z_test(terms)
    for test in ("fpr", "fwe", "fdr"):
        selector = ShapleyR2Importance(model, test=test, alpha=0.1, cv=cv,
                                       n_jobs=1).fit(X, y, sample_weight=weight)
        np.testing.assert_allclose(selector.scores_, z, rtol=0, atol=1e-12)
        np.testing.assert_allclose(selector.pvalues_, p, rtol=0, atol=1e-12)
        reference = {"fpr": p <= 0.1, "fwe": _holm(p, 0.1),
                     "fdr": _benjamini_hochberg(p, 0.1)}[test]
        np.testing.assert_array_equal(selector.get_support(), reference)
        # no share cutoff beside the test (threshold=None with a test)
        assert selector.threshold_ == -np.inf
    # the pooled decomposition: shares are the mean of the terms, standard errors sd / sqrt(n)
    result = selector.decomposition_
    np.testing.assert_allclose(result.shares, terms.mean(axis=0), atol=1e-14)
    np.testing.assert_allclose(result.std_errors, terms.std(axis=0, ddof=1) / np.sqrt(len(terms)),
                               atol=1e-14)
    np.testing.assert_allclose(result.local.sum(axis=0), result.shares, atol=1e-14)
    np.testing.assert_allclose(selector.feature_importances_, result.shares)
    assert np.isclose(result.shares.sum() + result.unattributed, result.score)
    assert result.to_frame().shape == (X.shape[1], 3)
    assert selector.get_support()[0]  # the strong feature


def test_prefit_tests_the_given_held_out_rows():
    X, y = _data(1, n=300)
    model = GradientBoostingRegressor(n_estimators=8, max_depth=2, random_state=0)
    model.fit(X[:150], y[:150])
    selector = ShapleyR2Importance(model, prefit=True, test="fdr").fit(X[150:], y[150:])
    local = r2_decomposition(model, X[150:], y[150:], return_local=True).local
    z, p = _z_test(150 * local)
    np.testing.assert_allclose(selector.scores_, z, atol=1e-12)
    np.testing.assert_allclose(selector.pvalues_, p, atol=1e-12)
    assert selector.estimator_ is model and not hasattr(selector, "cv_shares_")


def test_folds_and_errors():
    X, y = _data(2, n=100)
    selector = ShapleyR2Importance(DecisionTreeRegressor(max_depth=2, random_state=0),
                                   test="fwe", cv=5, n_jobs=1).fit(X, y)
    assert selector.cv_shares_.shape == (5, X.shape[1])
    # a feature no fold model splits on: nothing to test, p = 1
    unused = np.all(selector.cv_shares_ == 0, axis=0)
    assert np.all(selector.pvalues_[unused] == 1.0) and np.all(selector.scores_[unused] == 0)
    with pytest.raises(ValueError, match=r"'alpha' parameter .* range \(0.0, 1.0\]"):
        ShapleyR2Importance(test="fdr", cv=5, alpha=0.0).fit(X, y)
    with pytest.raises(ValueError, match="max_samples"):
        ShapleyR2Importance(test="fdr", cv=5, max_samples=50).fit(X, y)
    with pytest.raises(ValueError, match="shapFlex"):
        ShapleyR2Importance(LinearRegression(), test="fdr", cv=3).fit(X, y)
    # cv=None never cross-fits: a model to fit has no held-out shares to test
    with pytest.raises(ValueError, match="test='fwe' tests held-out shares: pass cv"):
        ShapleyR2Importance(test="fwe").fit(X, y)


def test_test_and_threshold_are_separate():
    """threshold is the share cutoff only, test the test only: threshold_ is the cutoff
    applied, and a given threshold applies beside the test."""
    X, y = _data(2, n=150)
    model = DecisionTreeRegressor(max_depth=3, random_state=0)
    tested = ShapleyR2Importance(model, test="fpr", alpha=0.5, cv=3, n_jobs=1).fit(X, y)
    cutoff = float(np.sort(tested.feature_importances_)[-1])  # the largest share
    both = ShapleyR2Importance(model, test="fpr", alpha=0.5, cv=3, threshold=cutoff,
                               n_jobs=1).fit(X, y)
    assert both.threshold_ == cutoff
    np.testing.assert_array_equal(both.pvalues_, tested.pvalues_)
    np.testing.assert_array_equal(
        both.get_support(), tested.get_support() & (tested.feature_importances_ >= cutoff))
    assert tested.get_support().sum() > both.get_support().sum()
    # a share cutoff alone: no tests, no p-values
    plain = ShapleyR2Importance(model, threshold="median", cv=3, n_jobs=1).fit(X, y)
    assert plain.threshold_ == np.median(plain.feature_importances_)
    assert not hasattr(plain, "pvalues_")
    # a test's name as threshold: the error says where it goes
    for name in ("fpr", "fwe", "fdr"):
        with pytest.raises(ValueError, match=f"the test of the held-out shares is test='{name}'"):
            ShapleyR2Importance(model, threshold=name, cv=3).fit(X, y)


@pytest.mark.parametrize("params, name", [
    ({"test": "FDR"}, "test"), ({"test": "holm"}, "test"), ({"test": 0.05}, "test"),
    ({"alpha": 1.5}, "alpha"), ({"method": "tree"}, "method"),
    ({"algorithm": "fast"}, "algorithm"), ({"prefit": "yes"}, "prefit"),
    ({"cv": "five"}, "cv"), ({"n_permutations": 0}, "n_permutations"),
    ({"max_samples": 1}, "max_samples"), ({"exact_budget": -1}, "exact_budget"),
    ({"shap_values": "tree"}, "shap_values"), ({"verbose": "loud"}, "verbose"),
])
def test_unknown_parameter_values_name_the_parameter(params, name):
    X, y = _data(2, n=60)
    with pytest.raises(ValueError, match=f"The '{name}' parameter of ShapleyR2Importance "
                                         "must be"):
        ShapleyR2Importance(DecisionTreeRegressor(max_depth=2), **params).fit(X, y)


def test_equal_shares_are_kept_or_dropped_together():
    # two identical columns: equal shares, equal terms, equal p-values and decisions
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 1))
    X = np.hstack([x, x, rng.normal(size=(200, 2))])
    y = x[:, 0] + rng.normal(size=200)
    from sklearn.ensemble import RandomForestRegressor

    model = RandomForestRegressor(n_estimators=10, max_depth=3, max_features=1.0, random_state=0)
    for alpha in (0.05, 0.5):
        selector = ShapleyR2Importance(model, test="fdr", alpha=alpha, cv=3,
                                       n_jobs=1).fit(X, y)
        support = selector.get_support()
        assert support[0] == support[1]


def test_classifier_tests_on_d2():
    X, y = load_breast_cancer(return_X_y=True)
    X = X[:, :6]
    selector = ShapleyR2Importance(DecisionTreeClassifier(max_depth=3, random_state=0),
                                   test="fdr", cv=3, n_jobs=1).fit(X, y)
    assert selector.score_name_ == "d2_brier"
    assert selector.decomposition_.score_name == "d2_brier"
    assert selector.get_support().any() and np.all(np.isfinite(selector.scores_))


# --------------------------------------------------------------------------
# calibration over fixed seeds
# --------------------------------------------------------------------------
def test_pvalues_uniform_at_the_boundary_of_h0():
    """A model whose feature's held-out share is exactly 0 in expectation: a stump
    predicting +-2a where the truth is +-a (it helps as much as it hurts:
    E[m^2] = 2 E[y m]). Its p-values on fresh rows are uniform."""
    a = 0.5
    X_train = np.repeat([[-1.0], [1.0]], 50, axis=0)
    stump = DecisionTreeRegressor(max_depth=1).fit(X_train, 2 * a * np.sign(X_train[:, 0]))
    pvalues = []
    for seed in range(300):
        rng = np.random.default_rng(seed)
        X = rng.normal(size=(200, 1))
        y = a * np.sign(X[:, 0]) + rng.normal(size=200)
        selector = ShapleyR2Importance(stump, prefit=True, test="fpr", n_jobs=1).fit(X, y)
        pvalues.append(selector.pvalues_[0])
    assert stats.kstest(pvalues, "uniform").pvalue > 0.001


@pytest.fixture(scope="module")
def null_simulation():
    """150 seeds: y = x0 + noise, x1..x4 independent of everything; cross-fitted tests."""
    model = GradientBoostingRegressor(n_estimators=10, max_depth=2, learning_rate=0.3,
                                      random_state=0)
    pvalues = []
    for seed in range(150):
        X, y = _data(seed, n=100, signal=(1.0,), n_noise=4)
        selector = ShapleyR2Importance(model, test="fdr", alpha=0.1,
                                       cv=KFold(5, shuffle=True, random_state=seed),
                                       n_jobs=1).fit(X, y)
        pvalues.append(selector.pvalues_)
    return np.array(pvalues)


def test_null_pvalues_are_not_anticonservative(null_simulation):
    """A noise feature's held-out share has expectation < 0 (it only adds variance), so
    its p-values are uniform or larger: P(p <= t) <= t, tested by a one-sided KS test
    (they are far from uniform: conservative, as the boundary test above is not)."""
    for j in range(1, 5):
        p = null_simulation[:, j]
        assert stats.kstest(p, "uniform", alternative="greater").pvalue > 0.001
    # the signal feature (R^2 about 0.5 on 100 rows) is found in nearly every seed
    assert np.mean(null_simulation[:, 0] <= 0.05) >= 0.9


@pytest.mark.parametrize("method", ["fpr", "fwe", "fdr"])
def test_error_rates_within_binomial_noise(null_simulation, method):
    alpha, n_seeds = 0.1, len(null_simulation)
    chosen = np.array([rejected(p, method, alpha) for p in null_simulation])
    false = chosen[:, 1:]
    if method == "fpr":  # each noise feature: rejected with probability <= alpha
        rate, n = false.mean(), false.size
    elif method == "fwe":  # any noise feature rejected
        rate, n = false.any(axis=1).mean(), n_seeds
    else:  # the false discovery proportion
        rate = np.mean(false.sum(axis=1) / np.maximum(chosen.sum(axis=1), 1))
        n = n_seeds
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / n)


# --------------------------------------------------------------------------
# ShapleyR2RFECV
# --------------------------------------------------------------------------
@parametrize_with_checks([ShapleyR2RFECV(DecisionTreeRegressor(max_depth=3, random_state=0),
                                         cv=3, n_jobs=1),
                          ShapleyR2RFECV(DecisionTreeClassifier(max_depth=3, random_state=0),
                                         cv=3, step=0.5, n_jobs=1)])
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_same_features_as_sklearn_rfecv():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 8))
    y = 3 * X[:, 0] + 2 * X[:, 1] + 1.5 * X[:, 2] + 0.3 * rng.normal(size=300)
    model = GradientBoostingRegressor(n_estimators=30, max_depth=2, random_state=0)
    cv = KFold(5, shuffle=True, random_state=0)
    ours = ShapleyR2RFECV(model, cv=cv, selection_rule="best", n_jobs=1).fit(X, y)
    theirs = RFECV(model, cv=cv).fit(X, y)
    np.testing.assert_array_equal(ours.support_, theirs.support_)
    np.testing.assert_array_equal(np.flatnonzero(ours.support_), [0, 1, 2])
    np.testing.assert_array_equal(ours.cv_results_["n_features"], theirs.cv_results_["n_features"])
    keys = {"n_features", "mean_test_score", "std_test_score",
            *(f"split{k}_test_score" for k in range(5))}
    assert keys <= set(ours.cv_results_)
    # the held-out R^2 of the decomposition is the model's r2_score: RFECV's default score
    np.testing.assert_allclose(ours.cv_results_["split0_test_score"][-1],
                               theirs.cv_results_["split0_test_score"][-1], atol=1e-12)
    assert ours.n_features_ == 3 and ours.estimator_.n_features_in_ == 3
    assert ours.ranking_[ours.support_].max() == 1 and ours.ranking_.max() > 1
    assert ours.feature_importances_.shape == (3,)


def _fold_elimination(model, X, y, train, test, step, stop=1):
    """One fold's RFE as a plain loop: fit on the remaining features of the training
    rows, rank by their in-sample shares (r2_decomposition), drop every feature with
    a negative share (at least ``step``, never below ``stop``), else the ``step``
    lowest (the later column first among equal shares); score each count by the
    held-out R^2. Returns {count: (support mask, score)}."""
    remaining, visited = list(range(X.shape[1])), {}
    while True:
        fitted = clone(model).fit(X[train][:, remaining], y[train])
        support = np.zeros(X.shape[1], dtype=bool)
        support[remaining] = True
        visited[len(remaining)] = (support, fitted.score(X[test][:, remaining], y[test]))
        if len(remaining) <= stop:
            return visited
        shares = r2_decomposition(fitted, X[train][:, remaining], y[train]).shares
        order = np.argsort(-shares, kind="mergesort")
        n_remove = min(max(int(np.sum(shares < 0)), step), len(remaining) - stop)
        remaining = sorted(remaining[i] for i in order[:len(remaining) - n_remove])


@pytest.mark.parametrize("step", [1, 2])
def test_cv_results_have_rfecv_keys_and_each_folds_elimination(step):
    X, y = _data(3, n=200, signal=(1.0, 0.6, 0.3), n_noise=4)
    model = DecisionTreeRegressor(max_depth=4, min_samples_leaf=5, random_state=0)
    cv = KFold(3, shuffle=True, random_state=0)
    ours = ShapleyR2RFECV(model, cv=cv, step=step, n_jobs=1).fit(X, y)
    theirs = RFECV(model, cv=cv, step=step).fit(X, y)
    results = ours.cv_results_
    # scikit-learn's keys (split{k}_ranking / _support since 1.7), of the same shapes
    assert set(theirs.cv_results_) <= set(results)
    counts = results["n_features"]
    for key, value in theirs.cv_results_.items():
        assert np.shape(results[key])[1:] == np.shape(value)[1:], key
        assert len(results[key]) == len(counts), key
    np.testing.assert_allclose(results["mean_test_score"],
                               np.mean([results[f"split{k}_test_score"] for k in range(3)],
                                       axis=0), rtol=0, atol=1e-12)
    # RFE's ranking convention, checked on scikit-learn's own cv_results_: 1 for the
    # features at a count, 1 + the counts above it at which a feature was gone
    for k in range(3):
        support = theirs.cv_results_[f"split{k}_support"]
        np.testing.assert_array_equal(theirs.cv_results_[f"split{k}_ranking"],
                                      1 + np.cumsum(~support[::-1], axis=0)[::-1])
    for k, (train, test) in enumerate(cv.split(X, y)):
        support, ranking = results[f"split{k}_support"], results[f"split{k}_ranking"]
        assert support.shape == ranking.shape == (len(counts), X.shape[1])
        assert support.dtype == bool and np.issubdtype(ranking.dtype, np.integer)
        np.testing.assert_array_equal(support.sum(axis=1), counts)
        assert np.all(support[:-1] <= support[1:])  # nested
        np.testing.assert_array_equal(ranking == 1, support)
        np.testing.assert_array_equal(ranking, 1 + np.cumsum(~support[::-1], axis=0)[::-1])
        assert np.all(ranking[-1] == 1) and ranking[0].max() == len(counts)
        # the fold's own elimination, as a plain loop: the same subsets and scores at
        # every count it visited
        visited = _fold_elimination(model, X, y, train, test, step)
        for c, count in enumerate(counts):
            if count in visited:
                want_support, want_score = visited[count]
                np.testing.assert_array_equal(support[c], want_support)
                np.testing.assert_allclose(results[f"split{k}_test_score"][c], want_score,
                                           rtol=0, atol=1e-12)


def test_one_se_picks_no_more_features_than_best():
    rng = np.random.default_rng(0)
    for _ in range(500):  # the rule on random curves
        n_steps, n_folds = int(rng.integers(1, 10)), int(rng.integers(2, 6))
        scores = rng.normal(size=(n_steps, n_folds)) + rng.normal(size=(n_steps, 1))
        counts = np.arange(1, n_steps + 1)
        one_se = choose_n_features(counts, scores, "one_se")
        best = choose_n_features(counts, scores, "best")
        assert counts[one_se] <= counts[best]
        mean = scores.mean(axis=1)
        se = scores[best].std(ddof=1) / np.sqrt(n_folds)
        assert mean[one_se] >= mean[best] - se - 1e-12
        assert np.all(mean[:one_se] < mean[best] - se)  # the fewest such features
    model = DecisionTreeRegressor(max_depth=3, random_state=0)
    for seed in range(4):  # and as the estimator applies it
        X, y = _data(seed, n=200, signal=(1.0, 0.5, 0.25), n_noise=4)
        cv = KFold(4, shuffle=True, random_state=seed)
        one_se = ShapleyR2RFECV(model, cv=cv, n_jobs=1).fit(X, y)
        best = ShapleyR2RFECV(model, cv=cv, selection_rule="best", n_jobs=1).fit(X, y)
        for key in ("n_features", "mean_test_score"):
            np.testing.assert_array_equal(one_se.cv_results_[key], best.cv_results_[key])
        assert one_se.n_features_ <= best.n_features_


def test_elimination_scores_are_not_optimistic_on_null_data():
    """y independent of X: the chosen step's cross-validated score against the same
    features refitted on all rows and scored on fresh rows of the same distribution,
    over 40 seeds (a paired one-sided test: not optimistic beyond 3 standard errors)."""
    model = DecisionTreeRegressor(max_depth=3, min_samples_leaf=5, random_state=0)
    differences = []
    for seed in range(40):
        rng = np.random.default_rng(seed)
        X, y = rng.normal(size=(150, 6)), rng.normal(size=150)
        selector = ShapleyR2RFECV(model, cv=KFold(5, shuffle=True, random_state=seed),
                                  n_jobs=1).fit(X, y)
        chosen = selector.cv_results_["n_features"] == selector.n_features_
        cv_score = float(selector.cv_results_["mean_test_score"][chosen][0])
        X_new, y_new = rng.normal(size=(5000, 6)), rng.normal(size=5000)
        fresh = selector.estimator_.score(X_new[:, selector.support_], y_new)
        differences.append(cv_score - fresh)
    differences = np.array(differences)
    se = differences.std(ddof=1) / np.sqrt(len(differences))
    assert differences.mean() <= 3 * se


def test_negative_shares_go_at_once_and_skipped_counts_are_scored():
    # cross-fitted ranking: noise features get negative shares and leave together
    X, y = _data(5, n=200, signal=(1.0, 0.5), n_noise=6)
    cv = KFold(3, shuffle=True, random_state=0)
    selector = ShapleyR2RFECV(DecisionTreeRegressor(max_depth=4, random_state=0), cv=cv,
                              ranking_cv=3, n_jobs=1).fit(X, y)
    counts = selector.cv_results_["n_features"]
    assert len(counts) < X.shape[1]  # some counts were skipped by every fold
    for k in range(3):
        support = selector.cv_results_[f"split{k}_support"]
        np.testing.assert_array_equal(support.sum(axis=1), counts)
        # nested subsets
        assert np.all(support[:-1] <= support[1:])
    assert selector.support_[0]


def test_classifier_pipeline_grid_search_and_plot():
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    X = X.iloc[:, :8]
    selector = ShapleyR2RFECV(DecisionTreeClassifier(max_depth=3, random_state=0), cv=3,
                              step=0.3, n_jobs=1)
    pipe = make_pipeline(selector, LinearRegression())
    search = GridSearchCV(pipe, {"shapleyr2rfecv__selection_rule": ["one_se", "best"]},
                          cv=2).fit(X, y)
    fitted = search.best_estimator_[0]
    assert fitted.score_name_ == "d2_brier"
    assert set(fitted.get_feature_names_out()) <= set(X.columns)
    # a float step removes that fraction of the remaining features, at least 1:
    # 8 -> 8 - int(2.4) = 6 -> 6 - max(1, int(1.8)) = 5 -> 4 -> 3 -> 2 -> 1
    np.testing.assert_array_equal(fitted.cv_results_["n_features"], [1, 2, 3, 4, 5, 6, 8])
    scored = ShapleyR2RFECV(DecisionTreeClassifier(max_depth=3, random_state=0), cv=3,
                            scoring="roc_auc", n_jobs=1).fit(X, y)
    assert scored.score_name_ == "roc_auc" and scored.cv_results_["mean_test_score"].max() > 0.8
    # the refitted classifier's probabilities, as RFECV passes them through
    np.testing.assert_array_equal(scored.predict_proba(X),
                                  scored.estimator_.predict_proba(scored.transform(X)))
    np.testing.assert_array_equal(scored.predict_log_proba(X),
                                  scored.estimator_.predict_log_proba(scored.transform(X)))
    assert not hasattr(ShapleyR2RFECV(DecisionTreeRegressor()), "predict_proba")
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    ax = scored.plot()
    assert ax.get_xlabel() == "number of features"
    import matplotlib.pyplot as plt

    plt.close("all")


def test_rfecv_refuses_frozen_and_bad_parameters():
    X, y = _data(0, n=60)
    from sklearn.frozen import FrozenEstimator

    model = DecisionTreeRegressor(max_depth=2).fit(X, y)
    with pytest.raises(ValueError, match="FrozenEstimator"):
        ShapleyR2RFECV(FrozenEstimator(model)).fit(X, y)
    for params, match in [({"step": 0}, "step"), ({"step": 1.5}, "step"),
                          ({"selection_rule": "max"}, "selection_rule"),
                          ({"min_features_to_select": 0}, "min_features")]:
        with pytest.raises(ValueError, match=match):
            ShapleyR2RFECV(DecisionTreeRegressor(), **params).fit(X, y)


@pytest.mark.parametrize("kind", ["regressor", "brier", "log_loss"])
def test_default_score_is_the_held_out_decomposition_score(kind):
    from sklearn.ensemble import HistGradientBoostingClassifier

    X, y = load_breast_cancer(return_X_y=True)
    X = X[:200, :5]
    y = y[:200]
    model = {"regressor": DecisionTreeRegressor(max_depth=3, random_state=0),
             "brier": DecisionTreeClassifier(max_depth=3, random_state=0),
             "log_loss": HistGradientBoostingClassifier(max_iter=10, random_state=0)}[kind]
    cv = KFold(3, shuffle=True, random_state=0)
    selector = ShapleyR2RFECV(model, cv=cv, step=5, n_jobs=1).fit(X, y.astype(float)
                                                                  if kind == "regressor" else y)
    for k, (train, test) in enumerate(cv.split(X, y)):
        fitted = clone(model).fit(X[train], y[train])
        held_out = r2_decomposition(fitted, X[test], y[test])
        # the shares plus the unattributed part: the fold's score at all features
        np.testing.assert_allclose(selector.cv_results_[f"split{k}_test_score"][-1],
                                   held_out.shares.sum() + held_out.unattributed,
                                   rtol=0, atol=1e-10)
