"""dask collections: the local explanations computed block by block on a
distributed LocalCluster (2 worker processes) equal the in-memory calls, for
every model library, with uneven and empty partitions; the model is one key
of the task graph; the one-pass statistics merge equals numpy on the
concatenated data."""
import pickle
import subprocess
import sys

import numpy as np
import pytest

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
pd = pytest.importorskip("pandas")

import sklearn_r2shap as sr  # noqa: E402
from sklearn_r2shap._execution import dask as _dask  # noqa: E402
from sklearn_r2shap import PiecewiseLinearExplainer  # noqa: E402

TOL = 1e-10
# uneven row blocks, two of them empty
ROW_CHUNKS = (37, 0, 101, 1, 0, 61)
N_ROWS = sum(ROW_CHUNKS)
N_FEATURES = 5


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                       dashboard_address=":0", silence_logs=40)
    with distributed.Client(cluster) as c:
        # the workers import this worktree's package, not another copy
        assert set(c.run(lambda: sr.__file__).values()) == {sr.__file__}
        yield c
    cluster.close()


def data(seed=0, n_classes=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N_ROWS, N_FEATURES))
    X[rng.random(X.shape) < 0.05] = np.nan
    signal = np.nan_to_num(X[:, 0]) * 2 + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2])
    y = signal + rng.normal(scale=0.3, size=N_ROWS)
    if n_classes is not None:
        y = np.digitize(signal, np.quantile(signal, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return X, y


def as_dask_array(X):
    return da.from_array(X, chunks=(ROW_CHUNKS, (2, N_FEATURES - 2)))


def _drop_rows_of_empty_blocks(part, partition_info=None):
    empty = [k for k, n in enumerate(ROW_CHUNKS) if n == 0]
    return part.iloc[:0] if partition_info["number"] in empty else part


def as_dask_frame(frame):
    """A dask DataFrame with the row blocks ROW_CHUNKS (empty ones included).

    Its empty partitions are blocks of one row emptied (``frame_rows`` gives
    the rows that remain), the last partition takes the rest. Built
    with from_pandas: dask 2026.8 loses partitions of from_delayed frames
    converted to arrays (even by its own ``to_dask_array``).
    """
    sizes = np.maximum(ROW_CHUNKS, 1)
    divisions = list(np.cumsum((0,) + tuple(sizes))[:-1]) + [len(frame) - 1]
    ddf = dd.from_pandas(frame, npartitions=1, sort=True).repartition(divisions=divisions)
    return ddf.map_partitions(_drop_rows_of_empty_blocks, meta=frame.iloc[:0])


def frame_rows(frame):
    """The rows of ``frame`` that as_dask_frame keeps."""
    sizes = np.maximum(ROW_CHUNKS, 1)
    starts = np.cumsum((0,) + tuple(sizes))[:-1]
    keep = np.ones(len(frame), dtype=bool)
    keep[[s for s, n in zip(starts, ROW_CHUNKS) if n == 0]] = False
    return frame[keep]


FUNCTIONS = [
    ("shap", sr.shap_values, {}),
    ("saabas", sr.saabas_values, {}),
    ("banzhaf", sr.banzhaf_values, {"q": 0.3}),
    ("beta", sr.beta_shapley_values, {"alpha": 4, "beta": 1}),
    ("predict_raw", sr.predict_raw, {}),
]


def check_all_functions(model, X, X_dask):
    """Every function on X_dask (one compute) against the in-memory call on X."""
    lazy = {name: f(model, X_dask, **kw) for name, f, kw in FUNCTIONS}
    for name, out in lazy.items():
        assert isinstance(out, da.Array), name
        assert all(len(c) == 1 for c in out.chunks[1:]), f"{name}: chunks along rows only"
        assert out.npartitions == len(ROW_CHUNKS), name
    computed = dask.compute(lazy)[0]
    for name, f, kw in FUNCTIONS:
        expected = f(model, X, **kw)
        got = computed[name]
        assert got.shape == expected.shape, name
        np.testing.assert_allclose(got, expected, rtol=0, atol=TOL, err_msg=name)


def sklearn_models():
    from sklearn.ensemble import (GradientBoostingClassifier, HistGradientBoostingRegressor,
                                  RandomForestRegressor)

    X, y = data()
    Xc, yc = data(1, n_classes=3)
    filled = np.nan_to_num(X)
    return [
        (RandomForestRegressor(n_estimators=4, max_depth=5, random_state=0).fit(filled, y),
         filled),
        (HistGradientBoostingRegressor(max_iter=10, max_depth=4, random_state=0).fit(X, y), X),
        (GradientBoostingClassifier(n_estimators=5, max_depth=3, random_state=0)
         .fit(np.nan_to_num(Xc), yc), np.nan_to_num(Xc)),
    ]


def test_sklearn_models_equal_in_memory(client):
    for model, X in sklearn_models():
        check_all_functions(model, X, as_dask_array(X))


def test_explain_computes_the_values_with_their_rows(client):
    """explain of a dask array or DataFrame: values (and interaction values)
    computed on the workers, then held with the rows, equal to explain in
    memory; a DataFrame's index labels the rows."""
    X, y = data()
    from sklearn.ensemble import HistGradientBoostingRegressor
    model = HistGradientBoostingRegressor(max_iter=10, max_depth=3, random_state=0).fit(X, y)
    want = sr.explain(model, X, interactions=True)
    got = sr.explain(model, as_dask_array(X), interactions=True)
    for name in ("values", "base_values", "data", "interaction_values"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=0, atol=TOL)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(N_FEATURES)],
                         index=np.arange(N_ROWS) + 1000)
    got = sr.explain(model, dd.from_pandas(frame, npartitions=3))
    np.testing.assert_allclose(got.values, want.values, rtol=0, atol=TOL)
    np.testing.assert_array_equal(got.row_index, frame.index)


def test_xgboost_equal_in_memory_and_xgboost_dask(client):
    xgb = pytest.importorskip("xgboost")
    X, y = data(2)
    model = xgb.XGBRegressor(n_estimators=12, max_depth=4, random_state=0, n_jobs=1).fit(X, y)
    X_dask = as_dask_array(X)
    check_all_functions(model, X, X_dask)
    # and the library's own distributed contributions of the same rows
    import xgboost.dask as dxgb

    # (xgboost.dask returns misshapen blocks for empty partitions: none here)
    X_even = da.from_array(X, chunks=(70, -1))
    theirs = dxgb.predict(client, model.get_booster(), X_even, pred_contribs=True)
    ours = sr.shap_values(model, X_even)
    theirs, ours = dask.compute(theirs, ours)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-4)  # xgboost sums in float32

    Xc, yc = data(3, n_classes=3)
    classifier = xgb.XGBClassifier(n_estimators=4, max_depth=3, random_state=0,
                                   n_jobs=1).fit(Xc, yc)
    check_all_functions(classifier, Xc, as_dask_array(Xc))


def test_lightgbm_dataframe_with_categories_equal_in_memory(client):
    lgb = pytest.importorskip("lightgbm")
    X, y = data(4)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(N_FEATURES)])
    levels = ["a", "b", "c", "d"]
    frame["f4"] = pd.Categorical(np.array(levels)[np.arange(N_ROWS) % 4], categories=levels)
    y = y + (frame["f4"] == "c") * 3.0
    model = lgb.LGBMRegressor(n_estimators=10, num_leaves=8, min_child_samples=5, n_jobs=1,
                              verbose=-1).fit(frame, y)
    assert model.booster_.dump_model()["pandas_categorical"]
    check_all_functions(model, frame_rows(frame), as_dask_frame(frame))
    # and a dask array of the codes
    check_all_functions(model, X, as_dask_array(X))


def test_catboost_equal_in_memory(client):
    catboost = pytest.importorskip("catboost")
    X, y = data(5)
    model = catboost.CatBoostRegressor(iterations=8, depth=4, verbose=0, thread_count=1,
                                       allow_writing_files=False, random_seed=0).fit(X, y)
    check_all_functions(model, X, as_dask_array(X))


def test_xgboost_categorical_dataframe(client):
    xgb = pytest.importorskip("xgboost")
    X, y = data(6)
    frame = pd.DataFrame(X[:, :3], columns=["a", "b", "c"])
    frame["k"] = pd.Categorical(np.array(["u", "v", "w"])[np.arange(N_ROWS) % 3])
    y = y + (frame["k"] == "v") * 2.0
    model = xgb.XGBRegressor(n_estimators=6, max_depth=3, enable_categorical=True,
                             tree_method="hist", n_jobs=1).fit(frame, y)
    check_all_functions(model, frame_rows(frame), as_dask_frame(frame))


def test_piecewise_linear_lightgbm(client):
    lgb = pytest.importorskip("lightgbm")
    X, y = data(7)
    y = y + 3 * np.nan_to_num(X[:, 3])
    model = lgb.LGBMRegressor(linear_tree=True, n_estimators=8, num_leaves=4, n_jobs=1,
                              min_child_samples=10, verbose=-1).fit(X, y)
    X_dask = as_dask_array(X)
    lazy = sr.piecewise_shap_values(model, X_dask, background=X)
    explainer = PiecewiseLinearExplainer(model, prefit=True).fit(X)
    lazy_estimator = explainer.shap_values(X_dask)
    assert isinstance(lazy, da.Array) and isinstance(lazy_estimator, da.Array)
    got, got_estimator = dask.compute(lazy, lazy_estimator)
    expected = sr.piecewise_shap_values(model, X, background=X)
    np.testing.assert_allclose(got, expected, rtol=0, atol=TOL)
    np.testing.assert_allclose(got_estimator, expected, rtol=0, atol=TOL)
    # the values add up to LightGBM's own prediction
    np.testing.assert_allclose(got.sum(axis=1), model.predict(X, raw_score=True), atol=1e-8)
    # a linear-leaf model is refused by shap_values before anything is computed
    with pytest.raises(sr.UnsupportedModelError, match="PiecewiseLinearExplainer"):
        sr.shap_values(model, X_dask)
    # the dask DataFrame route
    frame = pd.DataFrame(X, columns=model.booster_.feature_name())
    got = sr.piecewise_shap_values(model, as_dask_frame(frame), background=X).compute()
    np.testing.assert_allclose(got, expected[frame_rows(frame).index], rtol=0, atol=TOL)


# ----------------------------------------------------------------------------
# The graph: the model is one key


def ensemble_keys(graph):
    from dask._task_spec import DataNode

    return [k for k, v in graph.items()
            if isinstance(v, DataNode) and isinstance(v.value, sr.TreeEnsemble)]


@pytest.mark.parametrize("kind", ["array", "frame"])
def test_model_is_one_key_of_the_graph(kind):
    from dask.core import get_dependencies
    from sklearn.ensemble import RandomForestClassifier

    X, y = data(8, n_classes=3)
    X = np.nan_to_num(X)
    model = RandomForestClassifier(n_estimators=10, max_depth=5, random_state=0).fit(X, y)
    X_dask = as_dask_array(X) if kind == "array" else as_dask_frame(pd.DataFrame(X))
    out = sr.shap_values(model, X_dask)
    (optimized,) = dask.optimize(out)
    graph = dict(optimized.__dask_graph__())
    keys = ensemble_keys(graph)
    assert len(keys) == 1
    # one task per block reads that key; no other task holds a copy of the model
    readers = [k for k in graph if keys[0] in get_dependencies(graph, k)]
    assert len(readers) == len(ROW_CHUNKS)
    ensemble_bytes = sum(a.nbytes for a in vars(graph[keys[0]].value).values()
                         if isinstance(a, np.ndarray))
    for key in readers:
        assert len(pickle.dumps(graph[key])) < ensemble_bytes / 4, key
    # the same model twice: the same key
    assert ensemble_keys(dict(sr.saabas_values(model, X_dask).__dask_graph__())) == keys


def test_input_errors_are_raised_before_computing():
    from sklearn.tree import DecisionTreeRegressor

    X, y = data(9)
    X = np.nan_to_num(X)
    model = DecisionTreeRegressor(max_depth=3).fit(X, y)
    with pytest.raises(ValueError, match="expects 5"):
        sr.shap_values(model, da.from_array(X[:, :4]))
    with pytest.raises(ValueError, match="2D"):
        sr.shap_values(model, da.from_array(X[:, 0]))
    with pytest.raises(ValueError, match="feature names"):
        sr.shap_values(model.fit(pd.DataFrame(X, columns=list("abcde")), y),
                       as_dask_frame(pd.DataFrame(X, columns=list("vwxyz"))))


def test_clear_error_without_dask(monkeypatch):
    from sklearn.tree import DecisionTreeRegressor

    class Lazy:  # any collection of another dask-like library
        def __dask_graph__(self):
            return {}

    X, y = data(10)
    model = DecisionTreeRegressor(max_depth=2).fit(np.nan_to_num(X), y)
    monkeypatch.setitem(sys.modules, "dask", None)
    with pytest.raises(ImportError, match=r"sklearn-r2shap\[dask\]"):
        sr.shap_values(model, Lazy())


def test_dask_is_not_imported_for_in_memory_inputs():
    code = ("import sys, numpy as np\n"
            "from sklearn.tree import DecisionTreeRegressor\n"
            "import sklearn_r2shap as sr\n"
            "X = np.random.default_rng(0).normal(size=(50, 3))\n"
            "m = DecisionTreeRegressor(max_depth=2).fit(X, X[:, 0])\n"
            "sr.shap_values(m, X); sr.predict_raw(m, X)\n"
            "assert 'dask' not in sys.modules, 'dask imported'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# ----------------------------------------------------------------------------
# One-pass statistics, tree-reduced


def r2_like_statistics(X, y, w):
    """What an R^2 reduction needs from a partition: sums, counts, moments."""
    positive = w > 0
    return {
        "n_rows": len(y),
        "term_sums": X.sum(axis=0),
        "terms": _dask.Moments.of(X[positive]),
        "y": _dask.Moments.of(y, w),
        "weighted_square_sum": float(np.sum(w * y ** 2)),
    }


@pytest.mark.parametrize("split_every", [2, 3, 8])
def test_reduce_statistics_equals_numpy(client, split_every):
    rng = np.random.default_rng(11)
    X = rng.normal(loc=1e3, scale=2.0, size=(N_ROWS, 3))  # far from 0: cancellation shows
    y = rng.normal(loc=-50.0, size=N_ROWS)
    w = rng.exponential(size=N_ROWS)
    w[rng.random(N_ROWS) < 0.2] = 0.0
    chunks = (ROW_CHUNKS,)
    result = _dask.reduce_statistics(
        r2_like_statistics, da.from_array(X, chunks=(ROW_CHUNKS, (1, 2))),
        da.from_array(y, chunks=(50,)),  # rechunked to X's row blocks
        da.from_array(w, chunks=chunks), split_every=split_every).compute()
    positive = w > 0
    assert result["n_rows"] == N_ROWS
    np.testing.assert_allclose(result["term_sums"], X.sum(axis=0), rtol=1e-12)
    terms = result["terms"]
    assert terms.weight == positive.sum()
    np.testing.assert_allclose(terms.mean, X[positive].mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(terms.variance(ddof=1), X[positive].var(axis=0, ddof=1),
                               rtol=1e-10)
    moments = result["y"]
    mean = np.average(y, weights=w)
    np.testing.assert_allclose(moments.weight, w.sum(), rtol=1e-13)
    np.testing.assert_allclose(moments.mean, mean, rtol=1e-13)
    np.testing.assert_allclose(moments.m2, np.sum(w * (y - mean) ** 2), rtol=1e-10)
    np.testing.assert_allclose(result["weighted_square_sum"], np.sum(w * y ** 2), rtol=1e-12)


def test_moments_merge_is_exact_and_empty_is_identity():
    rng = np.random.default_rng(12)
    values = rng.normal(loc=1e6, size=(40, 2))
    weight = rng.random(40)
    parts = [slice(0, 0), slice(0, 1), slice(1, 17), slice(17, 17), slice(17, 40)]
    merged = _dask.Moments.of(values[:0], weight[:0])
    for part in parts:
        merged = merged.merge(_dask.Moments.of(values[part], weight[part]))
    whole = _dask.Moments.of(values, weight)
    np.testing.assert_allclose(merged.mean, whole.mean, rtol=1e-14)
    np.testing.assert_allclose(merged.m2, whole.m2, rtol=1e-9)
    np.testing.assert_allclose(
        merged.m2, np.sum(weight[:, None] * (values - np.average(values, axis=0,
                                                                 weights=weight)) ** 2,
                          axis=0), rtol=1e-9)
    empty = _dask.Moments.of(np.zeros((0, 2)))
    assert empty.merge(whole) is whole and whole.merge(empty) is whole
    assert np.all(np.isnan(empty.variance(ddof=1)))
    with pytest.raises(ValueError, match="different keys"):
        _dask.merge_statistics({"a": 1}, {"b": 1})


def test_piecewise_dask_background(client):
    """Covers and leaf means summed over the partitions of a dask background
    (weighted, empty partitions included) give the in-memory game; in-memory
    weights of a dask background are split at its partitions, as
    sample_weight of a dask X is."""
    lgb = pytest.importorskip("lightgbm")
    X, y = data(13)
    y = y + 2 * np.nan_to_num(X[:, 4])
    weight = np.random.default_rng(13).exponential(size=N_ROWS)
    model = lgb.LGBMRegressor(linear_tree=True, n_estimators=6, num_leaves=4, n_jobs=1,
                              min_child_samples=10, verbose=-1).fit(X, y, sample_weight=weight)
    expected = sr.piecewise_shap_values(model, X[:50], background=X, background_weight=weight)
    got = sr.piecewise_shap_values(
        model, X[:50], background=as_dask_array(X),
        background_weight=da.from_array(weight, chunks=(ROW_CHUNKS,)))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    frame = pd.DataFrame(X, columns=model.booster_.feature_name())
    kept = frame_rows(frame)
    got = sr.piecewise_shap_values(model, da.from_array(X[:50], chunks=20),
                                   background=as_dask_frame(frame))
    expected = sr.piecewise_shap_values(model, X[:50], background=kept)
    np.testing.assert_allclose(got.compute(), expected, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="all zero"):
        sr.piecewise_shap_values(model, X[:5], background=as_dask_array(X),
                                 background_weight=da.zeros(N_ROWS, chunks=(ROW_CHUNKS,)))
    got = sr.piecewise_shap_values(model, X[:50], background=as_dask_array(X),
                                   background_weight=weight)
    np.testing.assert_allclose(got, sr.piecewise_shap_values(
        model, X[:50], background=X, background_weight=weight), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="background_weight"):
        sr.piecewise_shap_values(model, X[:5], background=as_dask_array(X),
                                 background_weight=weight[:-1])


# ----------------------------------------------------------------------------
# R^2 / D^2 decomposition and ShapleyR2Importance on dask


def check_r2(model, X, y, X_dask, y_dask, weight=None, weight_dask=None, **kwargs):
    """r2_decomposition of the dask collections against the in-memory call."""
    expected = sr.r2_decomposition(model, X, y, sample_weight=weight, **kwargs)
    got = sr.r2_decomposition(model, X_dask, y_dask, sample_weight=weight_dask, **kwargs)
    for name in ("shares", "std_errors", "mc_std_errors"):
        if getattr(expected, name) is None:
            assert getattr(got, name) is None, name
        else:
            np.testing.assert_allclose(getattr(got, name), getattr(expected, name), rtol=0,
                                       atol=TOL, err_msg=name)
    for name in ("score", "unattributed"):
        assert abs(getattr(got, name) - getattr(expected, name)) <= TOL, name
    for name in ("score_name", "algorithm", "mode", "n_rows", "n_rows_sampled", "power"):
        assert getattr(got, name) == getattr(expected, name), name
    assert list(got.feature_names) == list(expected.feature_names)
    return got


def test_r2_interactions_equal_in_memory(client):
    """r2_interactions of a dask array and a dask DataFrame (weights, NaN rows, empty
    partitions) against the in-memory call; return_local is refused."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = data(21)
    weight = np.random.default_rng(21).exponential(size=N_ROWS)
    weight[::5] = 0.0
    model = HistGradientBoostingRegressor(max_iter=8, max_depth=3, random_state=0).fit(X, y)
    expected = sr.r2_interactions(model, X, y, sample_weight=weight)
    frame = pd.DataFrame(X, columns=[f"c{j}" for j in range(N_FEATURES)])
    named = HistGradientBoostingRegressor(max_iter=8, max_depth=3, random_state=0).fit(frame, y)
    full = dd.from_pandas(frame.assign(y=y, w=weight), npartitions=3)
    calls = [(model, as_dask_array(X), da.from_array(y, chunks=(ROW_CHUNKS,)),
              da.from_array(weight, chunks=(ROW_CHUNKS,))),
             (named, full[list(frame.columns)], full["y"], full["w"])]
    for fitted, X_dask, y_dask, w_dask in calls:
        got = sr.r2_interactions(fitted, X_dask, y_dask, sample_weight=w_dask)
        np.testing.assert_allclose(got.shares, expected.shares, rtol=0, atol=TOL)
        np.testing.assert_allclose(got.std_errors, expected.std_errors, rtol=0, atol=TOL)
        assert abs(got.score - expected.score) <= TOL
    assert list(got.feature_names) == list(frame.columns)
    with pytest.raises(ValueError, match="return_local"):
        sr.r2_interactions(model, as_dask_array(X), y, return_local=True)


def test_r2_sklearn_regressors_and_classifiers(client):
    from sklearn.ensemble import (GradientBoostingClassifier, HistGradientBoostingClassifier,
                                  HistGradientBoostingRegressor, RandomForestClassifier,
                                  RandomForestRegressor)
    from sklearn.metrics import d2_brier_score, d2_log_loss_score, r2_score

    X, y = data(20)
    filled = np.nan_to_num(X)
    weight = np.random.default_rng(20).exponential(size=N_ROWS)
    weight[::7] = 0.0
    w_dask = da.from_array(weight, chunks=(ROW_CHUNKS,))
    # a forest (symmetric game), y and weights as numpy arrays split to X's blocks
    forest = RandomForestRegressor(n_estimators=3, max_depth=4, random_state=0).fit(filled, y)
    got = check_r2(forest, filled, y, as_dask_array(filled), y, weight, weight)
    assert got.mode == "symmetric"
    assert abs(got.score - r2_score(y, forest.predict(filled), sample_weight=weight)) < 1e-10
    # boosting with NaN; y a dask array of other chunks (rechunked to X's)
    hgb = HistGradientBoostingRegressor(max_iter=8, max_depth=3, random_state=0).fit(X, y)
    check_r2(hgb, X, y, as_dask_array(X), da.from_array(y, chunks=50), weight, w_dask)
    # Brier D^2 of a forest classifier, 3 classes
    Xc, yc = data(21, n_classes=3)
    Xc = np.nan_to_num(Xc)
    Xc_dask, yc_dask = as_dask_array(Xc), da.from_array(yc, chunks=(ROW_CHUNKS,))
    rfc = RandomForestClassifier(n_estimators=3, max_depth=4, random_state=0).fit(Xc, yc)
    got = check_r2(rfc, Xc, yc, Xc_dask, yc_dask)
    assert got.score_name == "d2_brier"
    assert abs(got.score - d2_brier_score(yc, rfc.predict_proba(Xc))) < 1e-10
    # log-loss D^2, binary and multiclass
    yb = (yc == 2).astype(int)
    gbc = GradientBoostingClassifier(n_estimators=4, max_depth=2, random_state=0).fit(Xc, yb)
    got = check_r2(gbc, Xc, yb, Xc_dask, da.from_array(yb, chunks=(ROW_CHUNKS,)))
    assert abs(got.score - d2_log_loss_score(yb, gbc.predict_proba(Xc))) < 1e-10
    hgc = HistGradientBoostingClassifier(max_iter=4, max_depth=2, random_state=0).fit(Xc, yc)
    got = check_r2(hgc, Xc, yc, Xc_dask, yc_dask, weight, w_dask)
    assert abs(got.score - d2_log_loss_score(yc, hgc.predict_proba(Xc), sample_weight=weight)) < 1e-10
    # Poisson D^2
    counts = np.random.default_rng(22).poisson(np.exp(0.5 * filled[:, 0]))
    poisson = HistGradientBoostingRegressor(loss="poisson", max_iter=6, max_depth=3,
                                            random_state=0).fit(filled, counts)
    got = check_r2(poisson, filled, counts, as_dask_array(filled),
                   da.from_array(counts, chunks=(ROW_CHUNKS,)))
    assert got.score_name == "d2_tweedie"


def test_r2_sampled_and_max_samples(client):
    """The sampled algorithm seeds each row by its global index, max_samples draws
    global rows: both equal the in-memory call with the same random_state."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    X, y = data(23)
    model = HistGradientBoostingRegressor(max_iter=6, max_depth=4, random_state=0).fit(X, y)
    X_dask = as_dask_array(X)
    got = check_r2(model, X, y, X_dask, y, algorithm="sampled", n_permutations=3,
                   random_state=5)
    assert got.algorithm == "sampled" and np.all(got.mc_std_errors > 0)
    got = check_r2(model, X, y, X_dask, y, max_samples=90, random_state=7)
    assert got.n_rows_sampled == 90
    check_r2(model, X, y, X_dask, y, max_samples=0.5, algorithm="sampled", random_state=3,
             n_jobs=-1)


def test_r2_xgboost_lightgbm_catboost(client):
    xgb = pytest.importorskip("xgboost")
    lgb = pytest.importorskip("lightgbm")
    catboost = pytest.importorskip("catboost")
    X, y = data(24)
    weight = np.random.default_rng(24).uniform(0.5, 3.0, size=N_ROWS)
    w_dask = da.from_array(weight, chunks=(ROW_CHUNKS,))
    X_dask, y_dask = as_dask_array(X), da.from_array(y, chunks=(ROW_CHUNKS,))
    model = xgb.XGBRegressor(n_estimators=8, max_depth=3, random_state=0, n_jobs=1).fit(X, y)
    check_r2(model, X, y, X_dask, y_dask, weight, w_dask)
    Xc, yc = data(25, n_classes=3)
    classifier = xgb.XGBClassifier(n_estimators=3, max_depth=2, random_state=0,
                                   n_jobs=1).fit(Xc, yc)
    check_r2(classifier, Xc, yc, as_dask_array(Xc), da.from_array(yc, chunks=(ROW_CHUNKS,)))
    # LightGBM on a dask DataFrame (unknown partition lengths), y a column of it
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(N_FEATURES)])
    positive = np.exp(np.nan_to_num(X[:, 0]) * 0.5)
    tweedie = lgb.LGBMRegressor(objective="tweedie", tweedie_variance_power=1.4,
                                n_estimators=6, num_leaves=6, min_child_samples=5, n_jobs=1,
                                verbose=-1).fit(frame, positive)
    ddf = as_dask_frame(frame.assign(target=positive, w=weight))
    kept = frame_rows(frame.assign(target=positive, w=weight))
    got = check_r2(tweedie, kept[frame.columns], kept["target"], ddf[list(frame.columns)],
                   ddf["target"], kept["w"], ddf["w"])
    assert got.score_name == "d2_tweedie" and got.power == 1.4
    assert list(got.feature_names) == list(frame.columns)
    # y as numpy with a dask DataFrame X: split to the partitions' lengths
    check_r2(tweedie, kept[frame.columns], kept["target"].to_numpy(), ddf[list(frame.columns)],
             kept["target"].to_numpy())
    cat = catboost.CatBoostClassifier(iterations=5, depth=3, verbose=0, thread_count=1,
                                      allow_writing_files=False, random_seed=0)
    yb = (y > np.median(y)).astype(int)
    cat.fit(X, yb)
    check_r2(cat, X, yb, X_dask, da.from_array(yb, chunks=(ROW_CHUNKS,)), weight, w_dask)


def test_selector_prefit_on_dask(client):
    from sklearn.ensemble import GradientBoostingRegressor

    X, y = data(26)
    X = np.nan_to_num(X)
    frame = pd.DataFrame(X, columns=list("abcde"))
    model = GradientBoostingRegressor(n_estimators=6, max_depth=2, random_state=0).fit(frame, y)
    ddf = as_dask_frame(frame.assign(y=y))
    kept = frame_rows(frame.assign(y=y))
    selector = sr.ShapleyR2Importance(model, prefit=True, max_features=2)
    got = selector.fit(ddf[list("abcde")], ddf["y"])
    expected = sr.ShapleyR2Importance(model, prefit=True, max_features=2).fit(
        kept[list("abcde")], kept["y"])
    np.testing.assert_allclose(got.feature_importances_, expected.feature_importances_,
                               rtol=0, atol=TOL)
    np.testing.assert_allclose(got.std_errors_, expected.std_errors_, rtol=0,
                               atol=TOL)
    assert abs(got.score_ - expected.score_) <= TOL
    assert list(got.feature_names_in_) == list("abcde") and got.n_features_in_ == 5
    assert list(got.get_feature_names_out()) == list(expected.get_feature_names_out())
    # fitting on dask, cross-validation and per-row terms are refused clearly
    with pytest.raises(ValueError, match="prefit=True"):
        sr.ShapleyR2Importance(GradientBoostingRegressor()).fit(ddf[list("abcde")], ddf["y"])
    with pytest.raises(ValueError, match="cv"):
        sr.ShapleyR2Importance(model, prefit=True, cv=3).fit(ddf[list("abcde")], ddf["y"])
    with pytest.raises(ValueError, match="return_local"):
        selector.local_shares(ddf[list("abcde")], ddf["y"])


def test_r2_input_errors(client):
    from sklearn.tree import DecisionTreeRegressor

    X, y = data(27)
    X = np.nan_to_num(X)
    model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    X_dask = as_dask_array(X)
    # a dask Series of other partitions than X
    frame = pd.DataFrame(X).assign(y=y)
    ddf = as_dask_frame(frame)
    with pytest.raises(ValueError, match="partitions"):
        sr.r2_decomposition(model, ddf[list(range(N_FEATURES))], dd.from_pandas(
            frame["y"], npartitions=2))
    # the same number of partitions, other rows in them
    shifted = dd.from_pandas(frame_rows(frame)["y"], npartitions=len(ROW_CHUNKS))
    assert shifted.npartitions == len(ROW_CHUNKS)
    with pytest.raises(ValueError, match="rows in a partition"):
        sr.r2_decomposition(model, ddf[list(range(N_FEATURES))], shifted)
    with pytest.raises(ValueError, match="rows but y has"):
        sr.r2_decomposition(model, X_dask, y[:-1])
    with pytest.raises(ValueError, match="rows but y has"):
        sr.r2_decomposition(model, X_dask, da.from_array(y[:-1]))
    with pytest.raises(ValueError, match="return_local"):
        sr.r2_decomposition(model, X_dask, y, return_local=True)
    with pytest.raises(ValueError, match="constant"):
        sr.r2_decomposition(model, X_dask, np.ones(N_ROWS))
    with pytest.raises(ValueError, match="zero for every row"):
        sr.r2_decomposition(model, X_dask, y, sample_weight=np.zeros(N_ROWS))
    with pytest.raises(ValueError, match="NaN"):
        sr.r2_decomposition(model, X_dask, np.where(np.arange(N_ROWS) == 150, np.nan, y))


# ----------------------------------------------------------------------------
# Feature groups on dask: the same relabelled games, block by block


def test_groups_equal_in_memory(client):
    """shap_values, banzhaf_values, probabilistic_values (path-dependent and, for
    shap_values, interventional) and r2_decomposition with feature_groups= on a dask
    array and a dask DataFrame (groups by name, a categorical column in a group)
    against the in-memory calls."""
    from sklearn.ensemble import HistGradientBoostingRegressor

    from sklearn_r2shap.attributions import probabilistic_values

    lgb = pytest.importorskip("lightgbm")
    X, y = data(30)
    groups = {"a": [0, 3], "b": [1, 4]}  # and column 2 alone: 3 players
    weights = np.array([0.5, 0.2, 0.3])
    hgb = HistGradientBoostingRegressor(max_iter=8, max_depth=4, random_state=0).fit(X, y)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(N_FEATURES)])
    levels = ["a", "b", "c", "d"]
    frame["f4"] = pd.Categorical(np.array(levels)[np.arange(N_ROWS) % 4], categories=levels)
    y_frame = y + (frame["f4"] == "c") * 3.0
    lgbm = lgb.LGBMRegressor(n_estimators=10, num_leaves=8, min_child_samples=5, n_jobs=1,
                             verbose=-1).fit(frame, y_frame)
    named = {"a": ["f0", "f3"], "b": ["f1", "f4"]}
    kept = frame_rows(frame)
    cases = [(hgb, X, as_dask_array(X), y, da.from_array(y, chunks=(ROW_CHUNKS,)), groups),
             (lgbm, kept, as_dask_frame(frame), y_frame[kept.index].to_numpy(),
              y_frame[kept.index].to_numpy(), named)]
    for model, X_mem, X_dask, y_mem, y_dask, g in cases:
        functions = [
            ("shap", lambda X_: sr.shap_values(model, X_, feature_groups=g)),
            ("banzhaf", lambda X_: sr.banzhaf_values(model, X_, q=0.3, feature_groups=g)),
            ("probabilistic",
             lambda X_: probabilistic_values(model, X_, weights, feature_groups=g)),
            ("interventional", lambda X_: sr.shap_values(model, X_, feature_groups=g,
                                                         background=X_mem[:40])),
        ]
        lazy = {name: f(X_dask) for name, f in functions}
        for name, out in lazy.items():
            assert isinstance(out, da.Array), name
        computed = dask.compute(lazy)[0]
        for name, f in functions:
            expected = f(X_mem)
            assert expected.shape == (len(X_mem), 4), name
            np.testing.assert_allclose(computed[name], expected, rtol=0, atol=TOL,
                                       err_msg=f"{type(model).__name__} {name}")
        got = check_r2(model, X_mem, y_mem, X_dask, y_dask, feature_groups=g)
        assert list(got.feature_names) == ["a", "b", "x2" if g is groups else "f2"]
