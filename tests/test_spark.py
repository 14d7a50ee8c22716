"""Spark DataFrames on a real local Spark (``local[2]``, one session per test
process): per-row values bit-identical to the in-memory call for uneven and
empty partitions, array and per-feature layouts, kept columns, errors that
name the column (nulls, wrong types) and the model that cannot be pickled,
the engine's reduce of mergeable sums equal to the in-memory sums, the sums
over rows of the public functions (R^2 shares, their interactions, the
interaction summary) equal to the in-memory results, and the Transformer in
a ``pyspark.ml.Pipeline``.

Skipped, with the reason, where pyspark is not installed or no Java can start
a session; CI installs pyspark (the ``test`` extra) on an image with Java 17.
"""
import dataclasses
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (the test extra)")
pd = pytest.importorskip("pandas")
pytest.importorskip("pyarrow")

from pyspark.sql import SparkSession  # noqa: E402
from spark_java import no_java  # noqa: E402  (tests/ is on sys.path under pytest)
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql import types as T  # noqa: E402
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor  # noqa: E402

import sklearn_r2shap as sr  # noqa: E402
from sklearn_r2shap._execution import spark as _spark  # noqa: E402
from sklearn_r2shap._numerics import DyadicSum, Moments  # noqa: E402
from sklearn_r2shap._validation import check_rows  # noqa: E402
from sklearn_r2shap.spark import ShapTransformer, SparkRows  # noqa: E402

N_FEATURES = 4
FEATURES = [f"x{j}" for j in range(N_FEATURES)]
# partition sizes: one partition, uneven with empty ones, two
PARTITIONINGS = [(150,), (41, 0, 70, 1, 0, 38), (75, 75)]
N_ROWS = 150
DOC = pathlib.Path(__file__).resolve().parents[1] / "doc" / "spark.rst"


@pytest.fixture(scope="session")
def spark():
    reason = no_java()
    if reason is not None:
        pytest.skip(reason)
    try:
        session = (SparkSession.builder.master("local[2]").appName("sklearn-r2shap-tests")
                   .config("spark.ui.enabled", "false")
                   .config("spark.ui.showConsoleProgress", "false")
                   .config("spark.sql.shuffle.partitions", "2")
                   .config("spark.default.parallelism", "2")
                   .config("spark.driver.memory", "512m")
                   .config("spark.sql.execution.arrow.maxRecordsPerBatch", "64")
                   .getOrCreate())
    except Exception as exc:  # no JVM could start
        pytest.skip(f"a local Spark session could not start: {exc}")
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def data(seed=0, n=N_ROWS, n_classes=None):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_FEATURES))
    X[rng.random(X.shape) < 0.05] = np.nan
    filled = np.nan_to_num(X)
    signal = 2 * filled[:, 0] + filled[:, 1] * filled[:, 2]
    y = signal + rng.normal(scale=0.3, size=n)
    if n_classes is not None:
        y = np.digitize(signal, np.quantile(signal, [1 / 3, 2 / 3]))
    frame = pd.DataFrame(X, columns=FEATURES)
    return frame, y


def spark_frame(spark, frame, sizes, extra=None):
    """``frame`` (and an ``id`` column, plus ``extra`` columns) as a Spark
    DataFrame of exactly ``sizes`` rows per partition, rows in order."""
    frame = frame.assign(id=np.arange(len(frame)), **(extra or {}))
    owner = np.repeat(np.arange(len(sizes)), sizes)
    rows = [(int(k), tuple(v.item() if hasattr(v, "item") else v for v in row))
            for k, row in zip(owner, frame.itertuples(index=False))]
    fields = [T.StructField(c, T.LongType() if c == "id" else T.DoubleType(), True)
              for c in frame.columns]
    # one slice shuffled to its partitions: each partition keeps the rows in order
    rdd = spark.sparkContext.parallelize(rows, 1).partitionBy(len(sizes), lambda k: k)
    df = spark.createDataFrame(rdd.values(), T.StructType(fields))
    assert df.rdd.glom().map(len).collect() == list(sizes)
    return df


def collected(df, column="shap_values"):
    """The values of a result, in the ``id`` order."""
    rows = df.toPandas().sort_values("id")[column]
    return np.array([[np.asarray(inner, dtype=np.float64) for inner in v]
                     if np.ndim(v[0]) else np.asarray(v, dtype=np.float64) for v in rows])


@pytest.fixture(scope="module")
def regressor():
    frame, y = data()
    return RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(frame, y), frame


@pytest.mark.parametrize("sizes", PARTITIONINGS, ids=lambda s: "-".join(map(str, s)))
def test_shap_values_bit_identical_to_in_memory(spark, regressor, sizes):
    model, frame = regressor
    df = spark_frame(spark, frame, sizes)
    result = sr.shap_values(model, df)
    assert result.columns == FEATURES + ["id", "shap_values"]
    assert result.rdd.getNumPartitions() == len(sizes)
    expected = sr.shap_values(model, frame)
    got = collected(result)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("library", ["xgboost", "lightgbm"])
def test_boosting_libraries_bit_identical(spark, library):
    frame, y = data(1)
    if library == "xgboost":
        xgboost = pytest.importorskip("xgboost")
        model = xgboost.XGBRegressor(n_estimators=10, max_depth=3, n_jobs=1).fit(frame, y)
    else:
        lightgbm = pytest.importorskip("lightgbm")
        model = lightgbm.LGBMRegressor(n_estimators=10, num_leaves=7, verbose=-1,
                                       n_jobs=1).fit(frame, y)
    df = spark_frame(spark, frame, PARTITIONINGS[1])
    np.testing.assert_array_equal(collected(sr.shap_values(model, df)),
                                  sr.shap_values(model, frame))


def test_array_and_columns_layouts_and_kept_columns(spark):
    frame, y = data(2, n_classes=3)
    model = RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0).fit(frame, y)
    df = spark_frame(spark, frame, (60, 0, 90), extra={"label": y.astype(float)})
    expected = sr.shap_values(model, frame)  # (rows, 3 outputs, features + 1)
    arrays = sr.shap_values(model, SparkRows(df, keep_cols=["id"], output_col="phi"))
    assert arrays.columns == ["id", "phi"]
    assert arrays.schema["phi"].dataType.simpleString() == "array<array<double>>"
    np.testing.assert_array_equal(collected(arrays, "phi"), expected)
    columns = sr.shap_values(model, SparkRows(df, keep_cols=["id", "label"],
                                                       layout="columns"))
    names = [f"shap_values_{k}_{name}" for k in range(3) for name in FEATURES + ["expected_value"]]
    assert columns.columns == ["id", "label"] + names
    got = columns.toPandas().sort_values("id")
    np.testing.assert_array_equal(got[names].to_numpy().reshape(expected.shape), expected)
    np.testing.assert_array_equal(got["label"].to_numpy(), y)


def test_feature_groups_and_other_values(spark, regressor):
    model, frame = regressor
    df = spark_frame(spark, frame, (100, 50))
    groups = {"pair": ["x1", "x2"]}
    got = sr.shap_values(model, SparkRows(df, keep_cols=["id"], layout="columns"),
                         feature_groups=groups)
    expected = sr.shap_values(model, frame, feature_groups=groups)
    assert got.columns == ["id", "shap_values_pair", "shap_values_x0", "shap_values_x3",
                           "shap_values_expected_value"]
    np.testing.assert_array_equal(got.toPandas().sort_values("id").iloc[:, 1:].to_numpy(),
                                  expected)
    raw = sr.predict_raw(model, SparkRows(df, keep_cols=["id"]))
    assert raw.columns[0] == "id"
    np.testing.assert_array_equal(collected(raw, raw.columns[-1]), sr.predict_raw(model, frame))


def test_columns_named_by_input_cols(spark):
    frame, y = data(3)
    model = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(
        frame.to_numpy(), y)  # no feature names
    df = spark_frame(spark, frame, (150,))
    with pytest.raises(ValueError, match="Name the feature columns"):
        sr.shap_values(model, df)
    got = sr.shap_values(model, SparkRows(df, input_cols=FEATURES))
    np.testing.assert_array_equal(collected(got), sr.shap_values(model, frame.to_numpy()))
    with pytest.raises(ValueError, match="no column 'nope'"):
        sr.shap_values(model, SparkRows(df, input_cols=FEATURES[:3] + ["nope"]))


def test_wrong_types_and_nulls_name_the_column(spark, regressor):
    model, frame = regressor
    df = spark_frame(spark, frame, (100, 50))
    strings = df.withColumn("x2", F.col("x2").cast("string"))
    # at once, from the schema: the column and the type found
    with pytest.raises(TypeError, match=r"'x2' is of type string"):
        sr.shap_values(model, strings)
    with_null = df.withColumn("x1", F.when(F.col("id") == 120, F.lit(None))
                              .otherwise(F.col("x1")))
    result = sr.shap_values(model, with_null)  # lazy: found on the executor
    with pytest.raises(Exception, match=r"Feature column 'x1' holds null in 1 of"):
        result.collect()
    with pytest.raises(ValueError, match="already a column"):
        sr.shap_values(model, SparkRows(df, output_col="x0", layout="array"))


def test_model_that_cannot_be_pickled_is_named(spark, regressor):
    model, frame = regressor
    ensemble = sr.to_ensemble(model)
    unpicklable = dataclasses.replace(ensemble, info={**ensemble.info, "hook": lambda x: x})
    df = spark_frame(spark, frame, (150,))
    with pytest.raises(TypeError, match=r"The model \(RandomForestRegressor\) cannot be "
                                        r"pickled.*lambda"):
        sr.shap_values(unpicklable, df)


def test_engine_reduce_equals_in_memory_sums(spark, regressor):
    model, frame = regressor
    ensemble = sr.to_ensemble(model)
    X = frame.to_numpy()
    y = np.arange(N_ROWS, dtype=np.float64) ** 0.5
    sizes = PARTITIONINGS[1]
    df = spark_frame(spark, frame, sizes, extra={"y": y}).cache()

    def statistics(start, stop, block, target):
        assert block.shape == (stop - start, N_FEATURES)
        return {"rows": stop - start, "x": DyadicSum.of(start, np.nan_to_num(block)),
                "y": Moments.of(target), "sum": target.sum()}

    got = _spark.reduce_statistics(statistics, df, ensemble=ensemble, columns=["y"],
                                   positions=True, split_every=2)
    assert got["rows"] == N_ROWS
    # bit-identical: the dyadic sum does not depend on partitions or batches
    # (of the checked rows: a scikit-learn forest compares float32 values)
    checked = np.nan_to_num(check_rows(ensemble, X))
    np.testing.assert_array_equal(got["x"].total(), DyadicSum.of(0, checked).total())
    whole = Moments.of(y)
    np.testing.assert_allclose(got["y"].mean, whole.mean, rtol=1e-12)
    np.testing.assert_allclose(got["y"].m2, whole.m2, rtol=1e-12)
    np.testing.assert_allclose(got["sum"], y.sum(), rtol=1e-12)
    # without positions: the batches' blocks only, and nothing for no row
    counts = _spark.reduce_statistics(lambda block: {"rows": len(block)}, df,
                                      ensemble=ensemble)
    assert counts == {"rows": N_ROWS}
    assert _spark.reduce_statistics(lambda block: {"rows": len(block)}, df.limit(0),
                                    ensemble=ensemble) is None
    df.unpersist()


def test_transformer_in_a_pipeline(spark, regressor):
    from pyspark.ml import Pipeline
    from pyspark.ml.feature import SQLTransformer

    model, frame = regressor
    df = spark_frame(spark, frame, (70, 80))
    stage = ShapTransformer(model=model, inputCols=FEATURES, outputCol="phi")
    square = SQLTransformer(statement="SELECT *, id * id AS id2 FROM __THIS__")
    fitted = Pipeline(stages=[square, stage]).fit(df)
    result = fitted.transform(df)
    assert result.schema == stage.transformSchema(square.transform(df).schema)
    np.testing.assert_array_equal(collected(result, "phi"), sr.shap_values(model, frame))
    stage.setLayout("columns").setOutputCol("s")
    assert stage.transform(df).columns[-1] == "s_expected_value"
    with pytest.raises(TypeError, match="'x0' is of type string"):
        stage.transformSchema(df.withColumn("x0", F.col("x0").cast("string")).schema)


def test_transformer_reads_an_xgboost_spark_model(spark):
    xgboost = pytest.importorskip("xgboost")
    xgboost_spark = pytest.importorskip("xgboost.spark")
    frame, y = data(4)
    fitted = xgboost.XGBRegressor(n_estimators=8, max_depth=3, n_jobs=1).fit(frame, y)
    spark_model = xgboost_spark.SparkXGBRegressorModel(fitted)
    spark_model._set(features_cols=FEATURES)
    df = spark_frame(spark, frame, (150,))
    result = ShapTransformer(model=spark_model).transform(df)
    np.testing.assert_array_equal(collected(result), sr.shap_values(fitted, frame))


def test_doc_page_example_runs(spark):
    """The page's example (a python code block, not a doctest: it needs a
    Spark session) runs as written, with this test run's session."""
    text = DOC.read_text()
    blocks = re.findall(r"\.\. code-block:: python\n\n((?:    .*\n|\n)+)", text)
    assert blocks, "doc/spark.rst has no python code block"
    code = "\n".join(re.sub(r"(?m)^    ", "", block) for block in blocks if "spark" in block)
    code = code.replace(".getOrCreate()", ".getOrCreate()  # this test run's session")
    namespace = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    assert namespace["spark"] is spark  # getOrCreate returned this run's session


def test_pyspark_not_imported_for_in_memory_inputs():
    code = ("import sys, numpy as np; from sklearn.tree import DecisionTreeRegressor; "
            "import sklearn_r2shap as sr; X = np.random.default_rng(0).normal(size=(20, 3)); "
            "sr.shap_values(DecisionTreeRegressor(max_depth=2).fit(X, X[:, 0]), X); "
            "assert 'pyspark' not in sys.modules, 'pyspark imported'")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=pathlib.Path(sr.__file__).parents[1])


def test_interaction_values_equal_in_memory(spark, regressor):
    model, frame = regressor
    df = spark_frame(spark, frame, (150,))
    got = sr.shap_interaction_values(model, SparkRows(df, keep_cols=["id"]))
    np.testing.assert_array_equal(collected(got, "shap_interaction_values"),
                                  sr.shap_interaction_values(model, frame))


def assert_close_results(got, expected, names):
    for name in names:
        np.testing.assert_allclose(np.asarray(getattr(got, name)),
                                   np.asarray(getattr(expected, name)), rtol=1e-12, atol=1e-15,
                                   err_msg=name)


@pytest.mark.parametrize("sizes", PARTITIONINGS[1:], ids=lambda s: "-".join(map(str, s)))
def test_sums_over_rows_equal_in_memory(spark, regressor, sizes):
    """r2_decomposition (all rows, weighted, a random subset), r2_interactions and
    shap_interaction_summary of a Spark DataFrame, y and the weights named as
    its columns, against the in-memory calls (partitions of uneven and zero
    size; batches of 64 rows)."""
    model, frame = regressor
    y = data()[1]
    weight = np.random.default_rng(3).exponential(size=N_ROWS)
    weight[::9] = 0.0
    df = spark_frame(spark, frame, sizes, extra={"label": y, "w": weight}).cache()
    names = ("shares", "std_errors", "score", "unattributed")
    got = sr.r2_decomposition(model, df, "label", sample_weight="w")
    expected = sr.r2_decomposition(model, frame, y, sample_weight=weight)
    assert_close_results(got, expected, names)
    assert list(got.feature_names) == FEATURES and got.n_rows == N_ROWS
    got = sr.r2_decomposition(model, df, "label", max_samples=60, random_state=4)
    expected = sr.r2_decomposition(model, frame, y, max_samples=60, random_state=4)
    assert_close_results(got, expected, names)
    assert got.n_rows_sampled == 60
    got = sr.r2_interactions(model, df, "label", sample_weight="w")
    expected = sr.r2_interactions(model, frame, y, sample_weight=weight)
    assert_close_results(got, expected, names)
    got = sr.shap_interaction_summary(model, df, sample_weight="w")
    expected = sr.shap_interaction_summary(model, frame, sample_weight=weight)
    assert_close_results(got, expected, ("mean_abs", "mean", "mean_square"))
    df.unpersist()


def test_classifier_shares_and_argument_errors(spark):
    """D^2 shares of a classifier with labels in a numeric column; y and
    sample_weight that are not numeric columns of the DataFrame, null labels
    and per-row terms are refused, naming what is wrong."""
    frame, labels = data(5, n_classes=3)
    model = RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0).fit(frame,
                                                                                  labels)
    df = spark_frame(spark, frame, (60, 0, 90), extra={"label": labels.astype(float)})
    got = sr.r2_decomposition(model, df, "label")
    expected = sr.r2_decomposition(model, frame, labels)
    assert got.score_name == expected.score_name
    assert_close_results(got, expected, ("shares", "std_errors", "score"))
    with pytest.raises(TypeError, match="name of one of its columns"):
        sr.r2_decomposition(model, df, labels)
    with pytest.raises(ValueError, match="no such column"):
        sr.r2_decomposition(model, df, "target")
    with pytest.raises(TypeError, match="'id'.*sample_weight|sample_weight.*'id'|numeric"):
        sr.r2_decomposition(model, df.withColumn("id", F.col("id").cast("string")), "label",
                            sample_weight="id")
    with pytest.raises(Exception, match="'label' holds null"):
        sr.r2_decomposition(model, df.withColumn(
            "label", F.when(F.col("id") == 7, F.lit(None)).otherwise(F.col("label"))), "label")
    with pytest.raises(ValueError, match="return_local=True is not supported for a Spark"):
        sr.r2_decomposition(model, df, "label", return_local=True)


@pytest.mark.parametrize("sizes", PARTITIONINGS, ids=lambda s: "-".join(map(str, s)))
def test_explain_collects_the_values_with_their_rows(spark, regressor, sizes):
    """explain of a Spark DataFrame: the values computed on the executors and
    collected with the feature columns they explain, bit-identical to
    explain of the same rows in memory (values, base values, data with its
    NaN), for uneven and empty partitions."""
    model, frame = regressor
    df = spark_frame(spark, frame, sizes)
    got, want = sr.explain(model, df), sr.explain(model, frame)
    for name in ("values", "base_values", "data"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name))
    assert list(got.feature_names) == FEATURES


def test_explain_of_a_classifier_and_what_it_refuses(spark):
    """Several outputs (a value per class) collected as in memory; the
    interaction values (a second kind of values) and an empty DataFrame are
    refused, naming what to do instead."""
    frame, y = data(2, n_classes=3)
    model = RandomForestClassifier(n_estimators=4, max_depth=3, random_state=0).fit(frame, y)
    df = spark_frame(spark, frame, (60, 0, 90))
    got, want = sr.explain(model, SparkRows(df, keep_cols=["id"])), sr.explain(model, frame)
    np.testing.assert_array_equal(got.values, want.values)
    np.testing.assert_array_equal(got.base_values, want.base_values)
    assert got.values.shape == (N_ROWS, N_FEATURES, 3) and list(got.output_names) == [0, 1, 2]
    with pytest.raises(ValueError, match="shap_interaction_values\\(model, df\\)"):
        sr.explain(model, df, interactions=True)
    with pytest.raises(ValueError, match="no rows to explain"):
        sr.explain(model, df.limit(0))


def test_functions_that_need_rows_in_memory_say_so(spark, regressor):
    """shapflex_decomposition and the selectors hold their rows in memory: a
    Spark DataFrame is refused with what to do instead."""
    model, frame = regressor
    df = spark_frame(spark, frame, (150,), extra={"label": data()[1]})
    with pytest.raises(ValueError, match="shapflex_decomposition needs X in memory"):
        sr.shapflex_decomposition(model, df, "label")
    with pytest.raises(TypeError, match="not a Spark DataFrame"):
        sr.ShapleyR2Importance(model, prefit=True).fit(df, "label")


def test_ctrl_c_cancels_our_jobs_and_leaves_none_running(spark, regressor):
    """Ctrl-C during a sum over rows: KeyboardInterrupt at once, no job left
    running (pyspark's own handler lets running Python tasks finish; ours
    cancels the call's job group with its tasks interrupted), the caller's
    job group restored, and the session runs the next job."""
    import os
    import signal
    import threading
    import time

    if tuple(int(part) for part in pyspark.__version__.split(".")[:2]) < (4, 2):
        pytest.skip("pyspark < 4.2: its own SIGINT handler calls the JVM from inside a py4j "
                    "read (a reentrant call) and breaks the session's connection")
    model, frame = regressor
    df = spark.range(50_000_000, numPartitions=4).select(
        *[F.rand(seed=j).alias(name) for j, name in enumerate(FEATURES)]).withColumn(
        "label", F.col("x0"))
    tracker = spark.sparkContext.statusTracker()
    sent = {}

    def interrupt_once_python_tasks_run():
        # the call's first job counts the rows (in the JVM, which cancels at
        # once); its second runs Python tasks (the first pass, mapInArrow)
        seen, deadline = set(), time.monotonic() + 60
        while len(seen) < 2 and time.monotonic() < deadline:
            seen.update(tracker.getActiveJobsIds())
            time.sleep(0.02)
        time.sleep(1.0)
        sent["at"] = time.monotonic()
        os.kill(os.getpid(), signal.SIGINT)

    spark.sparkContext.setJobGroup("the-callers-group", "a caller's job group")
    try:
        threading.Thread(target=interrupt_once_python_tasks_run, daemon=True).start()
        with pytest.raises(KeyboardInterrupt):
            sr.r2_decomposition(model, df, "label")
        raised = time.monotonic() - sent["at"]
        while tracker.getActiveJobsIds() and time.monotonic() - sent["at"] < 30:
            time.sleep(0.05)
        stopped = time.monotonic() - sent["at"]
        assert raised < 2 and stopped < 3, (raised, stopped)
        assert spark.sparkContext.getLocalProperty("spark.jobGroup.id") == "the-callers-group"
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
        spark.sparkContext.setLocalProperty("spark.job.description", None)
    assert spark.range(10).count() == 10
