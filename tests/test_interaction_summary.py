"""shap_interaction_summary (issue 32, part 2): means over rows of |Phi|, Phi and
Phi^2 without the (n, p + 1, p + 1) array, equal to reducing
shap_interaction_values' full array (itself tested against enumeration in
test_interactions.py), and bit-identical for any n_jobs, block sizes and dask
partitions."""
import numpy as np
import pytest
from sklearn.ensemble import GradientBoostingClassifier, GradientBoostingRegressor

from sklearn_r2shap import InteractionSummary, shap_interaction_summary, shap_interaction_values
from sklearn_r2shap import interactions as interactions_module
from sklearn_r2shap._execution import local
from sklearn_r2shap._numerics import DyadicSum


def _data(n=300, p=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = np.nan_to_num(X[:, 0]) * np.nan_to_num(X[:, 1]) + np.nan_to_num(X[:, 2]) + (
        0.1 * rng.normal(size=n))
    return X, y


def _models():
    X, y = _data()
    yield "sklearn", GradientBoostingRegressor(n_estimators=15, max_depth=3, random_state=0).fit(
        np.nan_to_num(X), y), np.nan_to_num(X)
    classes = np.digitize(y, np.quantile(y, [0.33, 0.66]))
    yield "sklearn-multiclass", GradientBoostingClassifier(
        n_estimators=5, max_depth=3, random_state=0).fit(np.nan_to_num(X), classes), (
        np.nan_to_num(X))
    xgboost = pytest.importorskip("xgboost")
    yield "xgboost", xgboost.XGBRegressor(n_estimators=20, max_depth=4, n_jobs=1).fit(X, y), X
    lightgbm = pytest.importorskip("lightgbm")
    yield "lightgbm", lightgbm.LGBMRegressor(n_estimators=20, num_leaves=12, verbose=-1,
                                             n_jobs=1).fit(X, y), X


MODELS = {name: (model, X) for name, model, X in _models()}


def _reference(model, X, weight=None):
    """Means of the full array, reduced by numpy (the definition)."""
    phi = shap_interaction_values(model, X, n_jobs=1)
    w = np.ones(len(X)) if weight is None else np.asarray(weight, dtype=float)
    shape = (-1,) + (1,) * (phi.ndim - 1)
    total = w.sum()
    return {"mean_abs": (w.reshape(shape) * np.abs(phi)).sum(axis=0) / total,
            "mean": (w.reshape(shape) * phi).sum(axis=0) / total,
            "mean_square": (w.reshape(shape) * phi ** 2).sum(axis=0) / total}


@pytest.mark.parametrize("name", sorted(MODELS))
@pytest.mark.parametrize("weighted", [False, True])
def test_summary_equals_reducing_the_full_array(name, weighted):
    model, X = MODELS[name]
    weight = np.random.default_rng(1).exponential(size=len(X)) if weighted else None
    if weighted:
        weight[::7] = 0.0  # rows of weight 0 count for nothing
    summary = shap_interaction_summary(model, X, sample_weight=weight, n_jobs=2)
    want = _reference(model, X, weight)
    for key, value in want.items():
        got = getattr(summary, key)
        assert got.shape == value.shape
        np.testing.assert_allclose(got, value, rtol=1e-12, atol=1e-12 * np.abs(value).max())
    assert summary.n_rows == len(X)
    assert summary.total_weight == pytest.approx(len(X) if weight is None else weight.sum())
    # mean_abs >= |mean|, mean_square >= mean^2 (Jensen), entry by entry
    assert np.all(summary.mean_abs >= np.abs(summary.mean) - 1e-12)
    assert np.all(summary.mean_square >= summary.mean ** 2 - 1e-12)


def _small_blocks(monkeypatch, rows):
    monkeypatch.setattr(local, "block_rows_for", lambda *args, **kwargs: rows)


@pytest.mark.parametrize("name", ["sklearn", "xgboost"])
def test_bit_identical_for_any_threads_and_blocks(name, monkeypatch):
    model, X = MODELS[name]
    weight = np.random.default_rng(2).random(len(X))
    want = shap_interaction_summary(model, X, sample_weight=weight, n_jobs=1)
    for n_jobs, block in [(2, None), (3, 7), (1, 64), (2, 1)]:
        if block is not None:
            _small_blocks(monkeypatch, block)
        got = shap_interaction_summary(model, X, sample_weight=weight, n_jobs=n_jobs)
        for key in ("mean_abs", "mean", "mean_square"):
            np.testing.assert_array_equal(getattr(got, key), getattr(want, key))
        monkeypatch.undo()


def test_blocks_stay_within_the_memory_bound(monkeypatch):
    """Each block's matrices (and its sums' temporaries) stay under the bound:
    the summary never holds more rows than one block."""
    model, X = MODELS["sklearn"]
    monkeypatch.setattr(local, "BLOCK_BYTES", 3 * 8 * 7 * 7 * 40)
    seen = []
    original = interactions_module.interaction_sums

    def recorded(game, start, block, weight, **kwargs):
        seen.append(len(block))
        return original(game, start, block, weight, **kwargs)

    monkeypatch.setattr(interactions_module, "interaction_sums", recorded)
    summary = shap_interaction_summary(model, X)
    assert max(seen) == 40 and sum(seen) == len(X)
    np.testing.assert_allclose(summary.mean, _reference(model, X)["mean"], rtol=1e-12,
                               atol=1e-14)


def test_dask_equals_in_memory_bit_for_bit():
    da = pytest.importorskip("dask.array")
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    import dask

    model, X = MODELS["xgboost"]
    weight = np.random.default_rng(3).random(len(X))
    want = shap_interaction_summary(model, X, sample_weight=weight, n_jobs=1)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    with dask.config.set(scheduler="synchronous"):
        for chunks in [(300,), (1, 299), (100, 0, 77, 123), (37,) * 8 + (4,)]:
            got = shap_interaction_summary(model, da.from_array(X, chunks=(chunks, -1)),
                                           sample_weight=da.from_array(weight, chunks=(chunks,)),
                                           n_jobs=1)
            for key in ("mean_abs", "mean", "mean_square"):
                np.testing.assert_array_equal(getattr(got, key), getattr(want, key))
        ddf = dd.from_pandas(frame.assign(w=weight), npartitions=5)
        got = shap_interaction_summary(model, ddf[list(frame.columns)], sample_weight=ddf["w"])
    np.testing.assert_array_equal(got.mean_abs, want.mean_abs)
    assert list(got.feature_names) == list(frame.columns)


def test_top_pairs_find_the_interaction():
    pytest.importorskip("pandas")
    rng = np.random.default_rng(4)
    X = rng.normal(size=(2000, 5))
    y = X[:, 0] * X[:, 1] + 0.3 * X[:, 2]
    model = GradientBoostingRegressor(n_estimators=60, max_depth=3, random_state=0).fit(X, y)
    summary = shap_interaction_summary(model, X[:400])
    top = summary.top_pairs(3)
    assert list(top.columns) == ["feature_1", "feature_2", "mean_abs", "mean", "mean_square"]
    assert {top.feature_1[0], top.feature_2[0]} == {"x0", "x1"}
    assert top.mean_abs.is_monotonic_decreasing
    assert "x0" in repr(summary) and "400 rows" in repr(summary)
    with pytest.raises(ValueError, match="by must be"):
        summary.top_pairs(by="largest")


def test_top_pairs_of_a_class():
    pytest.importorskip("pandas")
    model, X = MODELS["sklearn-multiclass"]
    summary = shap_interaction_summary(model, X[:100])
    assert summary.mean_abs.shape[0] == 3
    for k in range(3):
        top = summary.top_pairs(5, class_index=k)
        j = [list(summary.feature_names).index(name) for name in top.feature_1]
        i = [list(summary.feature_names).index(name) for name in top.feature_2]
        np.testing.assert_array_equal(top.mean_abs, summary.mean_abs[k][j, i])
    for bad in (3, -1, 1.0, None):
        with pytest.raises(ValueError, match=r"class_index must be an integer in \[0, 3\)"):
            summary.top_pairs(class_index=bad)


def test_plot_draws_a_heatmap():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    model, X = MODELS["sklearn"]
    ax = shap_interaction_summary(model, X).plot(max_features=4)
    assert len(ax.get_xticklabels()) == 4 and len(ax.images) == 1
    matplotlib.pyplot.close("all")


@pytest.mark.parametrize("weight, message", [
    (np.full(300, -1.0), "non-negative"),
    (np.ones(5), "shape"),
    (np.zeros(300), "zero for every row"),
])
def test_bad_weights_are_refused(weight, message):
    model, X = MODELS["sklearn"]
    with pytest.raises(ValueError, match=message):
        shap_interaction_summary(model, X, sample_weight=weight)


def test_result_type_is_exported():
    model, X = MODELS["sklearn"]
    assert isinstance(shap_interaction_summary(model, X[:5]), InteractionSummary)


@pytest.mark.parametrize("n", [1, 2, 5, 64, 100, 1000])
def test_dyadic_sum_is_the_same_for_any_cut_and_merge_order(n):
    rng = np.random.default_rng(n)
    rows = rng.normal(size=(n, 3)) * 10.0 ** rng.uniform(-8, 8, size=(n, 1))
    want = DyadicSum.of(0, rows).total()
    np.testing.assert_allclose(want, rows.sum(axis=0), rtol=1e-12,
                               atol=1e-15 * np.abs(rows).sum())
    for trial in range(10):
        cuts = sorted(rng.choice(np.arange(1, n), size=min(n - 1, 4), replace=False)) if (
            n > 1) else []
        bounds = [0, *cuts, n]
        parts = [DyadicSum.of(a, rows[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]
        rng.shuffle(parts)
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.merge(part) if rng.random() < 0.5 else part.merge(merged)
        np.testing.assert_array_equal(merged.total(), want)
        assert merged.n_rows == n
    with pytest.raises(ValueError, match="in both sums"):
        DyadicSum.of(0, rows).merge(DyadicSum.of(0, rows[:1]))
