"""Row-partitioned computation on Spark DataFrames (optional dependency).

The second distributed engine beside :mod:`.dask`, with the same contract:
every local explanation is row-local, so a Spark DataFrame is explained
partition by partition, each partition on its executor with the in-memory
block functions, and only fixed-size sums of rows ever come back to the
driver.

- **The model travels once.** It is converted to its :class:`TreeEnsemble`
  (or a prepared game) on the driver, pickled there (so that a model that
  cannot be pickled is named at once) and sent with one
  ``SparkContext.broadcast``; an executor's Python worker unpickles it once
  and keeps it for its tasks.
- **Columnar, through Arrow.** :func:`map_checked_rows` is one
  ``DataFrame.mapInArrow``: each Arrow record batch of a partition is
  checked (:func:`check_batch`: nulls named by column, then the package's
  row checks), explained by the block function and returned as a record
  batch of the columns the user keeps beside the values (an array column,
  or one double column per feature). The result is a lazy Spark DataFrame
  with the partitions of the input.
- **Sums only to the driver.** :func:`reduce_statistics` applies a
  statistics function to every batch of every partition, merges a
  partition's dicts on its executor and returns one pickled dict per
  partition; the driver merges them (:func:`~.._numerics.merge_statistics`)
  in partition order, in groups of ``split_every`` as the dask engine does.
  With ``positions=True`` the function also gets the rows' global indices
  (one more Spark job counts the rows of each partition first), so that a
  :class:`~.._numerics.DyadicSum` is bit-identical to the in-memory one.

The columns are named by :class:`SparkRows` (a Spark DataFrame with the
feature columns, the columns to keep, the output column and the layout);
a Spark DataFrame given as is takes the model's feature names as its
feature columns. Column types are checked on the driver from the schema
(:func:`resolve`), before any Spark job.

pyspark is imported only when a Spark DataFrame is given:
:func:`is_spark_dataframe` recognises one without importing it (a Spark
DataFrame exists only once ``pyspark.sql`` has been imported).

This module knows no algorithm: public functions hand it a block function
of the games layer or a statistics function. Adding an algorithm never
touches it.

Layer: execution. Imports the ground floor and ``_model``; never a game, a
public module or an estimator.
"""
import contextlib
import pickle
import sys
import uuid
from dataclasses import dataclass, replace
from typing import Any, Optional, Sequence

import numpy as np

from .._errors import import_optional
from .._model import TreeEnsemble
from .._numerics import merge_statistics
from .._validation import check_rows, resolve_n_jobs

__all__ = ["SparkRows", "is_spark_dataframe", "as_rows", "resolve", "broadcast", "check_batch",
           "map_checked_rows", "result_schema", "check_input_types", "labels_of",
           "reduce_statistics", "partition_lengths", "count_rows", "argument_column", "LAYOUTS",
           "EXPECTED_VALUE", "beside_features", "collect_values"]

#: the layouts of per-row values: one array column, or one double column per entry
LAYOUTS = ("array", "columns")

#: the label of the expected-value column (``layout="columns"``)
EXPECTED_VALUE = "expected_value"

# Spark SQL types that hold numbers exactly as float64 (their numpy dtype on
# the driver's empty stand-in, which the package's row checks read)
_NUMPY_DTYPE = {"DoubleType": np.float64, "FloatType": np.float32, "LongType": np.int64,
                "IntegerType": np.int32, "ShortType": np.int16, "ByteType": np.int8,
                "BooleanType": np.bool_}


@dataclass(frozen=True)
class SparkRows:
    """The rows of a Spark DataFrame, with the columns named.

    Parameters
    ----------
    frame : pyspark.sql.DataFrame
        The rows.
    input_cols : sequence of str, optional
        The feature columns, in the model's feature order (numeric columns:
        double, float, long, integer, short, byte or boolean). Default: the
        model's feature names; for a model without them, every column of
        ``frame`` when it has as many columns as the model has features.
    keep_cols : sequence of str, optional
        The columns of ``frame`` returned beside the values (default: all,
        as a Spark ML transformer keeps them; ``[]``: none).
    output_col : str, optional
        The name of the values' column, or the prefix of their columns
        (default: named after the function, e.g. ``"shap_values"``).
    layout : {"array", "columns"}, default="array"
        ``"array"``: one array column (an array of arrays for a model of
        several outputs); ``"columns"``: one double column per feature and
        the expected value, named ``<output_col>_<feature>`` (with several
        outputs, ``<output_col>_<output>_<feature>``).
    """

    frame: Any
    input_cols: Optional[Sequence[str]] = None
    keep_cols: Optional[Sequence[str]] = None
    output_col: Optional[str] = None
    layout: str = "array"
    # set by :func:`resolve`: the feature columns checked for the ensemble
    resolved: bool = False

    def __array__(self, *args, **kwargs):
        # reached only by a function that needs the rows in memory
        raise TypeError(
            "this function does not take a Spark DataFrame yet: the per-row explanations "
            "do (shap_values, beta_shapley_values, banzhaf_values, saabas_values, "
            "predict_raw, shap_interaction_values, explain) and the sums over rows "
            "(r2_decomposition, r2_interactions, shap_interaction_summary, with y and "
            "sample_weight named as columns); otherwise collect a sample to the driver "
            "(df.sample(...).toPandas()) or use a dask DataFrame")


def is_spark_dataframe(X):
    """Whether ``X`` is a Spark DataFrame (classic or Spark Connect) or
    :class:`SparkRows`, without importing pyspark."""
    if isinstance(X, SparkRows):
        return True
    sql = sys.modules.get("pyspark.sql")
    return sql is not None and isinstance(X, sql.DataFrame)


def as_rows(X):
    """``X`` as :class:`SparkRows` (a Spark DataFrame with the default columns)."""
    return X if isinstance(X, SparkRows) else SparkRows(X)


def _import_pyspark():
    import_optional("pyarrow", "A Spark DataFrame")
    return import_optional("pyspark.sql", "A Spark DataFrame")


def _type_name(data_type):
    return data_type.simpleString() if hasattr(data_type, "simpleString") else str(data_type)


def resolve(ensemble, X):
    """``X`` (a Spark DataFrame or :class:`SparkRows`) as :class:`SparkRows`
    with every column named and checked on the driver: the feature columns
    exist, are numeric and match the model's width and feature names (the
    package's row checks on an empty stand-in); the kept columns exist; the
    layout is known. No Spark job runs."""
    rows = as_rows(X)
    if rows.resolved:
        return rows
    _import_pyspark()
    frame = rows.frame
    if not is_spark_dataframe(frame) or isinstance(frame, SparkRows):
        raise TypeError(f"SparkRows needs a Spark DataFrame, got {type(frame).__name__}.")
    if rows.layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {rows.layout!r}.")
    columns = list(frame.columns)
    input_cols = rows.input_cols
    if input_cols is None:
        expected = ensemble.feature_names
        if expected is not None and all(str(name) in columns for name in expected):
            input_cols = [str(name) for name in expected]
        elif len(columns) == ensemble.n_features:
            input_cols = columns
        else:
            raise ValueError(
                f"Name the feature columns of the Spark DataFrame: the model "
                f"({ensemble.model_type}) expects {ensemble.n_features} features"
                + ("" if expected is None else
                   f" named {[str(n) for n in expected][:10]}, which are not all among")
                + f" its {len(columns)} columns {columns[:10]}; pass "
                "sklearn_r2shap.spark.SparkRows(df, input_cols=[...]).")
    input_cols = [str(name) for name in input_cols]
    if isinstance(rows.input_cols, str):
        raise TypeError("input_cols must be a list of column names, got a string.")
    missing = [name for name in input_cols if name not in columns]
    if missing:
        raise ValueError(f"The Spark DataFrame has no column {missing[0]!r} (input_cols); "
                         f"its columns are {columns[:20]}.")
    dtypes = check_input_types(frame.schema, input_cols)
    pa = import_optional("pyarrow", "A Spark DataFrame")
    # width and feature names, by the package's row checks on an empty stand-in
    check_rows(ensemble, pa.table({name: np.empty(0, dtype=dtypes[name])
                                   for name in dict.fromkeys(input_cols)})
               if len(set(input_cols)) == len(input_cols) else
               np.empty((0, len(input_cols))))
    keep_cols = columns if rows.keep_cols is None else [str(c) for c in rows.keep_cols]
    if isinstance(rows.keep_cols, str):
        raise TypeError("keep_cols must be a list of column names, got a string.")
    missing = [name for name in keep_cols if name not in columns]
    if missing:
        raise ValueError(f"The Spark DataFrame has no column {missing[0]!r} (keep_cols); "
                         f"its columns are {columns[:20]}.")
    return replace(rows, input_cols=tuple(input_cols), keep_cols=tuple(keep_cols),
                   resolved=True)


def check_input_types(schema, input_cols):
    """``{column: numpy dtype}`` of the feature columns of a Spark schema;
    a column that is not numeric is named with the type found."""
    types = dict((field.name, field.dataType) for field in schema.fields)
    dtypes = {}
    for name in input_cols:
        if name not in types:
            raise ValueError(f"The Spark DataFrame has no column {name!r} (input_cols); its "
                             f"columns are {list(types)[:20]}.")
        found = type(types[name]).__name__
        if found not in _NUMPY_DTYPE:
            raise TypeError(
                f"Feature column {name!r} is of type {_type_name(types[name])}; the feature "
                "columns must be numeric (double, float, long, integer, short, byte or "
                f"boolean): cast it (F.col({name!r}).cast('double')) or encode it first "
                "(e.g. pyspark.ml.feature.StringIndexer for categories).")
        dtypes[name] = _NUMPY_DTYPE[found]
    return dtypes


def argument_column(rows, values, what):
    """The column of a Spark DataFrame that holds a per-row argument (``what``:
    "y", "sample_weight"): given by its name, checked to exist and to be
    numeric (no Spark job)."""
    if not isinstance(values, str):
        raise TypeError(
            f"{what} of a Spark DataFrame is the name of one of its columns (e.g. "
            f"{what}='label'), got {type(values).__name__}: the values must sit beside X's "
            "rows, in the same DataFrame.")
    frame = rows.frame
    types = {field.name: field.dataType for field in frame.schema.fields}
    if values not in types:
        raise ValueError(f"{what}={values!r}: the Spark DataFrame has no such column; its "
                         f"columns are {list(frame.columns)[:20]}.")
    if type(types[values]).__name__ not in _NUMPY_DTYPE:
        raise TypeError(f"Column {values!r} ({what}) is of type {_type_name(types[values])}; "
                        f"it must be numeric: cast it (F.col({values!r}).cast('double')).")
    return values


@contextlib.contextmanager
def cancelled_on_interrupt(frame, description):
    """Run the Spark actions inside as one job group that Ctrl-C (or any other
    error) cancels, its running tasks interrupted.

    pyspark's own SIGINT handler cancels the jobs but lets their running
    tasks finish (a Python task is not interrupted), so that a job would
    run on after the KeyboardInterrupt; the group is cancelled with
    ``interruptOnCancel=True``, which stops them. The caller's job group is
    restored afterwards.
    """
    context = _spark_context(frame)
    previous = [context.getLocalProperty(key) for key in _JOB_PROPERTIES]
    group = f"sklearn_r2shap-{uuid.uuid4().hex}"
    context.setJobGroup(group, f"sklearn_r2shap: {description}", interruptOnCancel=True)
    try:
        yield
    except BaseException:
        context.cancelJobGroup(group)
        raise
    finally:
        for key, value in zip(_JOB_PROPERTIES, previous):
            context.setLocalProperty(key, value)


# the local properties a job group sets
_JOB_PROPERTIES = ("spark.jobGroup.id", "spark.job.description", "spark.job.interruptOnCancel")


def count_rows(rows):
    """The number of rows (one Spark job)."""
    with cancelled_on_interrupt(rows.frame, "counting the rows"):
        return int(rows.frame.count())


# ----------------------------------------------------------------------------
# The model, broadcast once


def broadcast(spark_context, payload, what):
    """``payload`` sent to the executors once (``SparkContext.broadcast``).

    It is pickled here first, so that a payload that cannot be pickled is
    named (``what``: e.g. the model's type) with the reason, not reported
    from inside Spark's serializer.
    """
    try:
        pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise TypeError(
            f"{what} cannot be pickled, which Spark needs to broadcast it to the executors "
            f"({type(exc).__name__}: {exc}). Define the model's classes in an importable "
            "module (not in __main__, a notebook cell or a function) and keep no open "
            "files, locks or connections on it.") from exc
    return spark_context.broadcast(payload)


def _payload_name(payload):
    ensemble = payload if isinstance(payload, TreeEnsemble) else getattr(payload, "ensemble",
                                                                          None)
    model_type = getattr(ensemble, "model_type", "") or type(payload).__name__
    return f"The model ({model_type})"


def _spark_context(frame):
    session = frame.sparkSession
    context = getattr(session, "sparkContext", None)
    if context is None:
        raise TypeError(
            "A Spark Connect session has no SparkContext to broadcast the model with; use a "
            "classic Spark session (SparkSession.builder without .remote()).")
    return context


# ----------------------------------------------------------------------------
# Checks of a batch, on the executor


def check_batch(ensemble, batch, input_cols):
    """The feature columns of an Arrow record batch as checked float64 rows.

    Spark's null is not a number: a null in a feature column is refused,
    naming the column and the number of rows (NaN, Spark's ``float('nan')``,
    is a missing value where the model accepts one). Then the package's row
    checks (:func:`~.._validation.check_rows`: infinity, NaN the model
    refuses, float32 rounding, the model's missing value, categories).
    """
    out = np.empty((batch.num_rows, len(input_cols)), dtype=np.float64)
    for j, name in enumerate(input_cols):
        column = batch.column(name)
        if column.null_count:
            raise ValueError(
                f"Feature column {name!r} holds null in {column.null_count} of the "
                f"{batch.num_rows} rows of a batch (found null, expected a number): fill "
                "them (DataFrame.fillna) or, where the model handles missing values, "
                f"replace them by NaN (F.coalesce(F.col({name!r}), F.lit(float('nan')))).")
        out[:, j] = column.to_numpy(zero_copy_only=False)
    return check_rows(ensemble, out)


def _batches(frame, function, schema):
    return frame.mapInArrow(function, schema)


# ----------------------------------------------------------------------------
# Per-row values: one mapInArrow


def labels_of(trailing_shape, names):
    """Column labels of per-row values of ``trailing_shape``: the last axis
    labelled by ``names`` (and :data:`EXPECTED_VALUE` when it has one more
    entry), the axes before it by their index."""
    last = trailing_shape[-1] if trailing_shape else 1
    if names is not None and last == len(names) + 1:
        tail = [str(name) for name in names] + [EXPECTED_VALUE]
    elif names is not None and last == len(names):
        tail = [str(name) for name in names]
    else:
        tail = [str(k) for k in range(last)]
    labels = tail
    for size in reversed(trailing_shape[:-1]):
        labels = [f"{k}_{label}" for k in range(size) for label in labels]
    return labels


def result_schema(frame_schema, keep_cols, trailing_shape, output_col, layout, names=None):
    """The Spark schema of the result: the kept columns, then the values."""
    types = import_optional("pyspark.sql.types", "A Spark DataFrame")
    by_name = {field.name: field for field in frame_schema.fields}
    fields = [by_name[name] for name in keep_cols]
    if layout == "columns":
        labels = labels_of(tuple(trailing_shape), names)
        value_fields = [types.StructField(f"{output_col}_{label}", types.DoubleType(), True)
                        for label in labels]
    else:
        data_type = types.DoubleType()
        for _ in trailing_shape or (1,):
            data_type = types.ArrayType(data_type, False)
        value_fields = [types.StructField(output_col, data_type, True)]
    taken = set(keep_cols)
    for field in value_fields:
        if field.name in taken:
            raise ValueError(
                f"The output column {field.name!r} is already a column of the DataFrame; "
                "choose another output_col or leave that column out of keep_cols.")
        taken.add(field.name)
    return types.StructType(fields + value_fields)


def _value_arrays(pa, values, trailing_shape, layout):
    """Arrow arrays of per-row values (rows first): list arrays nested once per
    trailing axis, or one float64 array per entry."""
    n_rows = values.shape[0]
    if layout == "columns":
        flat = values.reshape(n_rows, -1)
        return [pa.array(flat[:, j]) for j in range(flat.shape[1])]
    array = pa.array(np.ascontiguousarray(values, dtype=np.float64).reshape(-1))
    count = n_rows
    sizes = [count]
    for size in trailing_shape[:-1]:
        count *= size
        sizes.append(count)
    for outer, size in zip(reversed(sizes), reversed(trailing_shape or (1,))):
        offsets = pa.array(np.arange(0, outer * size + 1, size, dtype=np.int32))
        array = pa.ListArray.from_arrays(offsets, array)
    return [array]


class _ExplainBatches:
    """The function of ``mapInArrow``: every batch of a partition checked and
    explained. A class (pickled by reference with its arguments) rather than a
    closure, so that nothing of the driver's call travels with it."""

    def __init__(self, shipped, function, input_cols, keep_cols, trailing_shape, layout,
                 names, players, n_threads, kwargs):
        self.shipped = shipped
        self.function = function
        self.input_cols = input_cols
        self.keep_cols = keep_cols
        self.trailing_shape = trailing_shape
        self.layout = layout
        self.names = names
        self.players = players
        self.n_threads = n_threads
        self.kwargs = kwargs

    def __call__(self, batches):
        pa = import_optional("pyarrow", "A Spark DataFrame")
        payload = self.shipped.value
        ensemble = payload if isinstance(payload, TreeEnsemble) else payload.ensemble
        for batch in batches:
            rows = check_batch(ensemble, batch, self.input_cols)
            values = self.function(payload, rows, n_threads=self.n_threads, **self.kwargs)
            if self.players is not None:
                values = values[..., self.players]
            values = np.asarray(values, dtype=np.float64).reshape(
                (rows.shape[0],) + self.trailing_shape)
            arrays = ([batch.column(name) for name in self.keep_cols]
                      + _value_arrays(pa, values, self.trailing_shape, self.layout))
            yield pa.RecordBatch.from_arrays(arrays, names=self.names)


def block_threads(n_jobs):
    # Spark runs one task per executor core: one OpenMP thread per task
    # unless the caller asked for more
    return 1 if n_jobs is None else n_jobs


def map_checked_rows(function, ensemble, rows, *, trailing_shape, n_jobs=None, game=None,
                     name=None, names=None, players=None, **kwargs):
    """``function(game, rows, n_threads=..., **kwargs)`` on every Arrow batch of a
    Spark DataFrame's partitions.

    Parameters
    ----------
    function : callable
        A block function of the games layer: float64 values of shape
        ``(n_block_rows,) + trailing shape`` for checked in-memory rows.
    ensemble : TreeEnsemble
        The model the rows are checked for (:func:`check_batch`).
    rows : SparkRows
        Resolved (:func:`resolve`).
    trailing_shape : tuple of int
        The values' shape past the row axis (after ``players``).
    n_jobs : int, optional
        OpenMP threads per task; None is 1 (Spark runs a task per core).
    game : object, optional
        What the block function computes on (default: ``ensemble``), broadcast once.
    name : str, optional
        The default output column (``rows.output_col`` wins).
    names : sequence of str, optional
        The labels of the values' last axis (``layout="columns"``).
    players : ndarray of int, optional
        Entries of the values' last axis to keep (the players of a grouped
        ensemble and the expected value).
    **kwargs
        Passed to ``function``.

    Returns
    -------
    pyspark.sql.DataFrame
        Lazy; the kept columns and the values, one row per input row in the
        same partitions and order.
    """
    _import_pyspark()
    rows = resolve(ensemble, rows)
    trailing_shape = tuple(int(n) for n in trailing_shape)
    output_col = rows.output_col or name or "values"
    schema = result_schema(rows.frame.schema, rows.keep_cols, trailing_shape, output_col,
                           rows.layout, names)
    payload = ensemble if game is None else game
    shipped = broadcast(_spark_context(rows.frame), payload, _payload_name(payload))
    explain = _ExplainBatches(shipped, function, rows.input_cols, rows.keep_cols,
                              trailing_shape, rows.layout, schema.fieldNames(),
                              None if players is None else np.asarray(players),
                              resolve_n_jobs(block_threads(n_jobs)), kwargs)
    return _batches(rows.frame, explain, schema)


#: the values' column of :func:`beside_features` (no user column is named so)
_COLLECTED = "__sklearn_r2shap_values__"


def beside_features(rows):
    """``rows`` (resolved) whose per-row results keep only the feature columns,
    the values in one array column: what :func:`collect_values` reads."""
    return replace(rows, keep_cols=tuple(dict.fromkeys(rows.input_cols)),
                   output_col=_COLLECTED, layout="array")


def collect_values(frame, rows):
    """The values of a result of :func:`beside_features` rows and the rows they
    explain, on the driver (one Spark job, through Arrow; Ctrl-C cancels it).

    Returns
    -------
    values : ndarray of shape (n_rows,) + the values' trailing shape
    data : ndarray of shape (n_rows, n_features)
        The feature columns as float64, in the model's order (NaN for null).
    """
    with cancelled_on_interrupt(frame, "collecting the values to the driver"):
        table = frame.toArrow()
    n_rows = table.num_rows
    if n_rows == 0:
        raise ValueError("The Spark DataFrame has no rows to explain.")
    column = table.column(_COLLECTED).combine_chunks()
    shape = [n_rows]
    while hasattr(column, "flatten") and hasattr(column, "offsets"):  # a list array
        shape.append(len(column[0]))
        column = column.flatten()
    values = column.to_numpy(zero_copy_only=False).astype(np.float64).reshape(shape)
    data = np.column_stack([table.column(name).to_numpy().astype(np.float64)
                            for name in rows.input_cols])
    return values, data


# ----------------------------------------------------------------------------
# One-pass statistics over partitions, merged on the driver


class _PartitionStatistics:
    """The function of ``mapInArrow`` for :func:`reduce_statistics`: one
    pickled dict of merged statistics per partition (none for an empty one)."""

    def __init__(self, shipped, with_game, function, input_cols, columns, starts, kwargs):
        self.shipped = shipped
        self.with_game = with_game
        self.function = function
        self.input_cols = input_cols
        self.columns = columns
        self.starts = starts
        self.kwargs = kwargs

    def __call__(self, batches):
        pa = import_optional("pyarrow", "A Spark DataFrame")
        context = import_optional("pyspark", "A Spark DataFrame").TaskContext.get()
        partition = context.partitionId()
        payload = None if self.shipped is None else self.shipped.value
        ensemble = payload if isinstance(payload, TreeEnsemble) else getattr(
            payload, "ensemble", None)
        start = None if self.starts is None else self.starts[partition]
        merged = None
        for batch in batches:
            if batch.num_rows == 0:
                continue
            if ensemble is not None:
                block = check_batch(ensemble, batch, self.input_cols)
            else:
                block = None
            extra = [_column_values(batch, name) for name in self.columns]
            head = (payload,) if self.with_game else ()
            if start is not None:
                head += (start, start + batch.num_rows)
                start += batch.num_rows
            arguments = head + (() if block is None else (block,)) + tuple(extra)
            statistics = self.function(*arguments, **self.kwargs)
            merged = statistics if merged is None else merge_statistics(merged, statistics)
        if merged is not None:
            yield pa.RecordBatch.from_arrays(
                [pa.array([partition], type=pa.int32()),
                 pa.array([pickle.dumps(merged, protocol=pickle.HIGHEST_PROTOCOL)],
                          type=pa.binary())],
                names=["partition", "statistics"])


def _column_values(batch, name):
    column = batch.column(name)
    if column.null_count:
        raise ValueError(f"Column {name!r} holds null in {column.null_count} of the "
                         f"{batch.num_rows} rows of a batch (found null, expected a number).")
    return np.asarray(column.to_numpy(zero_copy_only=False), dtype=np.float64)


class _PartitionLength:
    def __call__(self, batches):
        pa = import_optional("pyarrow", "A Spark DataFrame")
        partition = import_optional("pyspark", "A Spark DataFrame").TaskContext.get(
        ).partitionId()
        n_rows = sum(batch.num_rows for batch in batches)
        yield pa.RecordBatch.from_arrays(
            [pa.array([partition], type=pa.int32()), pa.array([n_rows], type=pa.int64())],
            names=["partition", "rows"])


def partition_lengths(frame):
    """The row counts of a Spark DataFrame's partitions, in partition order
    (one Spark job; an empty partition counts 0)."""
    _import_pyspark()
    with cancelled_on_interrupt(frame, "counting the rows of each partition"):
        counts = dict(_batches(frame.select(frame.columns[:1]) if frame.columns else frame,
                               _PartitionLength(), "partition int, rows long").collect())
    return [int(counts.get(k, 0)) for k in range(frame.rdd.getNumPartitions())]


def _merge_group(group):
    merged = group[0]
    for other in group[1:]:
        merged = merge_statistics(merged, other)
    return merged


def reduce_statistics(function, rows, *, ensemble=None, game=None, columns=(),
                      positions=False, split_every=8, **kwargs):
    """One pass over a Spark DataFrame's partitions; only sums reach the driver.

    On every Arrow batch of every partition, in order,
    ``function(*head, block, *column_values, **kwargs)`` returns a dict of
    statistics (numbers and arrays that add up, :class:`~.._numerics.Moments`,
    :class:`~.._numerics.DyadicSum`), where

    - ``head`` is ``(game,)`` when ``game`` is given (broadcast once), then
      ``(start, stop)``, the batch's global row indices, with ``positions``;
    - ``block`` is the batch's feature columns checked for ``ensemble``
      (:func:`check_batch`; left out without ``ensemble``);
    - ``column_values`` are the float64 values of ``columns`` (e.g. the
      label and the weight; null refused, named).

    A partition's dicts are merged on its executor; the driver receives one
    pickled dict per non-empty partition and merges them
    (:func:`~.._numerics.merge_statistics`) in partition order, in groups of
    ``split_every`` as :func:`.dask.reduce_statistics` does. With
    ``positions``, one more Spark job counts the rows of each partition
    first: the DataFrame must give the same partitions twice (cache it, or
    read it from storage; ``repartition(n)`` without a column deals rows at
    random).

    Parameters
    ----------
    function : callable
    rows : SparkRows or pyspark.sql.DataFrame
    ensemble : TreeEnsemble, optional
        The model the feature columns are checked for (default: ``game.ensemble``
        when ``game`` has one).
    game : object, optional
        Broadcast once and passed first.
    columns : sequence of str
        Further numeric columns passed as float64 arrays.
    positions : bool, default=False
    split_every : int, default=8
    **kwargs
        Passed to ``function``.

    Returns
    -------
    dict or None
        The merged statistics; None when the DataFrame has no row.
    """
    _import_pyspark()
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every}.")
    if ensemble is None and game is not None:
        ensemble = game if isinstance(game, TreeEnsemble) else getattr(game, "ensemble", None)
    columns = [str(c) for c in columns]
    if ensemble is not None:
        rows = resolve(ensemble, rows)
        frame, input_cols = rows.frame, list(rows.input_cols)
    else:
        frame = rows.frame if isinstance(rows, SparkRows) else rows
        input_cols = []
    missing = [name for name in columns if name not in frame.columns]
    if missing:
        raise ValueError(f"The Spark DataFrame has no column {missing[0]!r}; its columns "
                         f"are {list(frame.columns)[:20]}.")
    types = dict((field.name, field.dataType) for field in frame.schema.fields)
    for name in columns:
        if type(types[name]).__name__ not in _NUMPY_DTYPE:
            raise TypeError(f"Column {name!r} is of type {_type_name(types[name])}; it must "
                            f"be numeric: cast it (F.col({name!r}).cast('double')).")
    needed = list(dict.fromkeys(input_cols + columns))
    frame = frame.select(*needed) if needed else frame
    starts = None
    if positions:
        lengths = partition_lengths(frame)
        starts = [int(s) for s in np.concatenate([[0], np.cumsum(lengths)[:-1]])]
    payload = ensemble if game is None else game  # the ensemble checks the rows
    shipped = (None if payload is None else
               broadcast(_spark_context(frame), payload, _payload_name(payload)))
    collect = _PartitionStatistics(shipped, game is not None, function, input_cols, columns,
                                   starts, kwargs)
    with cancelled_on_interrupt(frame, getattr(function, "__name__", "sums over rows")):
        parts = _batches(frame, collect, "partition int, statistics binary").collect()
    level = [pickle.loads(row["statistics"])
             for row in sorted(parts, key=lambda row: row["partition"])]
    if not level:
        return None
    while len(level) > 1:
        level = [_merge_group(level[i:i + split_every])
                 for i in range(0, len(level), split_every)]
    return level[0]
