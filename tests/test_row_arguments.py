"""One checker of row weights and one of y, used by every function and
estimator, in memory and partition by partition for dask (issue 42, item 4)."""
import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.tree import DecisionTreeRegressor

import sklearn_r2shap as sr
from sklearn_r2shap._validation import check_row_weights, check_y

N_ROWS = 80


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, 4))
    y = X[:, 0] + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=N_ROWS)
    model = GradientBoostingRegressor(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    return model, X, y


def _weight_calls(model, X, y):
    """Every public entry point that takes weights of X's rows (or of the
    background's), as ``weight -> result``."""
    coef = np.zeros((3, X.shape[1]))
    coef[1, 1] = 2.0  # one linear leaf
    piecewise = sr.piecewise_ensemble(
        [dict(children_left=[1, -1, -1], children_right=[2, -1, -1], feature=[0, 0, 0],
              threshold=[0.0, 0, 0], value=[0, 1.0, 2.0], coef=coef)], n_features=X.shape[1])
    return {
        "r2_decomposition": lambda w: sr.r2_decomposition(model, X, y, sample_weight=w),
        "r2_interactions": lambda w: sr.r2_interactions(model, X, y, sample_weight=w),
        "shap_interaction_summary": lambda w: sr.shap_interaction_summary(
            model, X, sample_weight=w),
        "shapflex_decomposition": lambda w: sr.shapflex_decomposition(
            model, X, y, sample_weight=w),
        "TreeGradRanker.fit": lambda w: sr.TreeGradRanker(
            DecisionTreeRegressor(max_depth=3, random_state=0), n_iter=2).fit(
                X, y, sample_weight=w),
        "piecewise_shap_values": lambda w: sr.piecewise_shap_values(
            piecewise, X[:3], background=X, background_weight=w),
    }


BAD_WEIGHTS = [
    (lambda n: np.ones(n - 1), r"must have shape \(80,\), got \(79,\)"),
    (lambda n: np.ones((n, 2)), r"must have shape \(80,\), got \(80, 2\)"),
    (lambda n: np.r_[-1.0, np.ones(n - 1)], "must be finite and non-negative"),
    (lambda n: np.r_[np.inf, np.ones(n - 1)], "must be finite and non-negative"),
    (lambda n: np.zeros(n), "is zero for every row: no row counts"),
]


@pytest.mark.parametrize("bad, message", BAD_WEIGHTS)
def test_every_entry_point_checks_weights_alike(fitted, bad, message):
    model, X, y = fitted
    for name, call in _weight_calls(model, X, y).items():
        weight_name = "background_weight" if name.startswith("piecewise") else "sample_weight"
        with pytest.raises(ValueError, match=f"{weight_name} {message}"):
            call(bad(N_ROWS))


def test_the_weight_checker():
    pd = pytest.importorskip("pandas")
    weight = check_row_weights(pd.Series(np.arange(1, 4), dtype="int64"), 3)
    assert weight.dtype == np.float64 and weight.flags.c_contiguous
    np.testing.assert_array_equal(weight, [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match=r"sample_weight must have shape \(3,\), got \(\)"):
        check_row_weights(2.0, 3)
    # one dask partition: a single column made 1-D, zeros allowed, other rows refused
    np.testing.assert_array_equal(
        check_row_weights(np.zeros((3, 1)), 3, partition_of="X"), np.zeros(3))
    with pytest.raises(ValueError, match=r"w has 2 rows in a partition where X has 3: give w "
                                         r"the same row blocks \(partitions\) as X"):
        check_row_weights(np.ones(2), 3, "w", partition_of="X")
    with pytest.raises(ValueError, match="w must be finite and non-negative"):
        check_row_weights(-np.ones(3), 3, "w", partition_of="X")


def test_the_y_checker():
    np.testing.assert_array_equal(check_y([[1], [2]], 2), [1, 2])
    with pytest.raises(ValueError, match=r"y must be 1-dimensional class labels, got shape "
                                         r"\(2, 2\)"):
        check_y(np.ones((2, 2)), 2, "class labels")
    with pytest.raises(ValueError, match="X has 3 rows but y has 2"):
        check_y([1, 2], 3)
    with pytest.raises(ValueError, match="y has 2 rows in a partition where X has 3"):
        check_y([1, 2], 3, partition_of="X")


def test_ranker_weights_are_the_model_weights(fitted):
    """The checked weights (float64) reach the model's fit and weigh the rows."""
    _, X, y = fitted
    weight = np.arange(N_ROWS) % 3
    ranker = sr.TreeGradRanker(DecisionTreeRegressor(max_depth=3, random_state=0),
                               n_iter=2).fit(X, y, sample_weight=list(weight))
    same = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y, sample_weight=weight)
    np.testing.assert_array_equal(ranker.estimator_.predict(X), same.predict(X))
    np.testing.assert_allclose(ranker.feature_importances_,
                               np.average(np.abs(ranker.row_scores_), axis=0, weights=weight))


def test_dask_weights_are_aligned_and_checked_by_partition(fitted, monkeypatch):
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    from sklearn_r2shap._execution import dask as _dask

    model, X, y = fitted
    weight = 1.0 + np.arange(N_ROWS) % 4
    X_dask = da.from_array(X, chunks=((30, 50), 4))
    expected = sr.shap_interaction_summary(model, X, sample_weight=weight)
    for given in (weight, da.from_array(weight, chunks=40), pd.Series(weight)):
        got = sr.shap_interaction_summary(model, X_dask, sample_weight=given)
        np.testing.assert_array_equal(got.mean_abs, expected.mean_abs)
    with pytest.raises(ValueError, match="sample_weight must be finite and non-negative"):
        sr.shap_interaction_summary(model, X_dask, sample_weight=da.from_array(-weight,
                                                                               chunks=40))
    # a dask DataFrame X: its partition lengths are computed once per call
    frame = dd.from_pandas(pd.DataFrame(X), npartitions=3)
    counted = []
    original = _dask.partition_lengths

    def counting(collection):
        counted.append(1)
        return original(collection)

    monkeypatch.setattr(_dask, "partition_lengths", counting)
    result = sr.r2_decomposition(model, frame, y, sample_weight=weight)
    assert len(counted) == 1
    np.testing.assert_allclose(
        result.shares, sr.r2_decomposition(model, X, y, sample_weight=weight).shares,
        rtol=0, atol=1e-12)
