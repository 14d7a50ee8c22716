"""The one preparation step of every public function: :func:`prepare` -> :class:`Call`.

A public function calls :func:`prepare` once, at its top; it unwraps a
Pipeline (``_pipeline``: the last step, X and the background transformed by
the steps before it), resolves ``feature_groups`` into players (``_groups``), reads
the model into a :class:`~sklearn_r2shap.TreeEnsemble`, checks the rows once
(a dense X is checked here and sliced by the executor; a sparse X is checked
one dense block at a time; a dask collection is checked on an empty stand-in
here and partition by partition on its workers; a Spark DataFrame's columns
are named and checked from its schema here, its rows counted, and its
batches checked on the executors), reads the column names,
checks ``n_jobs`` and ``verbose``, and decides local, dask or Spark. The rest of the
call reads the returned :class:`Call` only: it chooses the game, runs it on
the executor (:func:`._execution.run.map_rows`) and builds the result.

The other arguments of one entry per row, ``y`` and ``sample_weight``, are
checked and aligned to the call's rows by :func:`row_argument`: in memory by
the one checker of each (``_validation.check_y``,
``_validation.check_row_weights``), for a dask X as X's row blocks, checked
by the same checkers partition by partition on the workers.

Layer: public functions (the boundary's preparation step). Imports
``_pipeline``, ``_groups``, ``_model``, ``_execution`` and the ground floor;
never a public function module or an estimator.
"""
import math
import weakref
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from . import _groups, _pipeline
from ._execution import dask as _dask
from ._execution import local as _local
from ._execution import spark as _spark
from ._model import TreeEnsemble, explainable_ensemble, is_prepared, prepare_ensemble
from ._validation import (
    check_row_weights,
    check_rows,
    check_y,
    column_names,
    n_rows_features,
    resolve_n_jobs,
)

__all__ = ["Call", "prepare", "row_argument", "split_row_argument"]


@dataclass
class Call:
    """A public function's inputs, prepared once (:func:`prepare`).

    Attributes
    ----------
    model : object
        The model explained: a Pipeline's last step, else the model given.
    X : object
        The rows as the last step sees them (transformed by a Pipeline's
        steps), unchecked: e.g. the data an :class:`Explanation` shows.
    ensemble : TreeEnsemble
        The model read once (with the groups as players when ``feature_groups`` was
        given).
    rows : CheckedRows, scipy.sparse CSR matrix or dask collection
        X for the executor: dense rows checked once
        (:class:`._execution.local.CheckedRows`), a CSR matrix checked one
        dense block at a time, or a dask Array / DataFrame (whole rows per
        block) checked on its workers.
    n_rows, n_features : int
        X's shape (``n_rows`` is NaN-free only in memory; 0 for dask).
    names : ndarray of str or None
        The columns' names: those a Pipeline's steps output, else X's column
        names, else the model's own.
    players : list of str or None
        With ``feature_groups``: the players (the groups, then every column in no
        group); the values of the other columns of the grouped ensemble are
        those of null players and are cut by :meth:`players_only`.
    background : ndarray or None
        The background rows, transformed and checked (in memory).
    engine : {"local", "dask", "spark"}
        Where the rows are explained: in memory, on dask's partitions, or on
        a Spark DataFrame's partitions (``rows`` is then a resolved
        :class:`._execution.spark.SparkRows` and ``n_rows`` its count).
    n_jobs, n_threads : int or None, int
        The caller's ``n_jobs`` and the OpenMP threads it means here (for a
        dask collection: per task, one unless asked).
    verbose : "auto" or int
        Checked (:func:`._execution.local.check_verbose`).
    """

    model: Any
    X: Any
    ensemble: Any
    rows: Any
    n_rows: int
    n_features: int
    names: Optional[np.ndarray]
    players: Optional[list]
    background: Optional[np.ndarray]
    n_jobs: Optional[int]
    n_threads: int
    verbose: Any
    engine: str = "local"
    _lengths: Optional[list] = field(default=None, repr=False, compare=False)

    def partition_lengths(self):
        """The row counts of a dask X's partitions, computed once (on the
        workers when the collection does not know them)."""
        if self._lengths is None:
            self._lengths = _dask.partition_lengths(self.rows)
        return self._lengths

    @property
    def rows_per_plan(self):
        """The rows one plan of a game serves: every row of X in memory or on
        Spark (counted there), any number for a dask X (its partitions are
        planned on the client once, for unknown row counts)."""
        return math.inf if self.engine == "dask" else self.n_rows

    def row_count(self):
        """X's number of rows (a dask X: its partitions counted, once)."""
        return int(sum(self.partition_lengths())) if self.engine == "dask" else self.n_rows

    @property
    def n_players(self):
        """The players of the game: the groups and ungrouped columns, or the features."""
        return self.ensemble.n_features if self.players is None else len(self.players)

    def players_only(self, phi):
        """``phi`` (players' columns, the expected value last) without the null
        players a grouped ensemble has beyond its groups (a Spark DataFrame of
        values is returned as is: the engine cut them on the executors,
        :meth:`player_columns`)."""
        if self.players is None or self.engine == "spark":
            return phi
        return phi[..., np.r_[np.arange(len(self.players)), phi.shape[-1] - 1]]

    def player_columns(self, width):
        """The entries of a last axis of ``width`` that :meth:`players_only`
        keeps (None: all of them)."""
        if self.players is None or width != self.ensemble.n_features + 1:
            return None
        return np.r_[np.arange(len(self.players)), width - 1]

    def trailing_shape(self, *width):
        """The result's shape past the rows: ``width`` per row and output
        (the output axis only for several outputs)."""
        outputs = () if self.ensemble.n_outputs == 1 else (self.ensemble.n_outputs,)
        return outputs + tuple(width)


def _check_background(ensemble, background):
    if _dask.is_dask_collection(background):
        raise TypeError(
            "background must be in memory (an array, DataFrame or sparse matrix); "
            "it is summarised once per tree, so pass background.compute() (a sample "
            "of a few hundred to a few thousand rows is typical)."
        )
    background = check_rows(ensemble, background)
    if background.shape[0] == 0:
        raise ValueError("background has no rows; the interventional game needs at least one.")
    return background


def prepare(model, X, *, feature_groups=None, background=None, n_jobs=None, verbose=0,
            ensemble_of=explainable_ensemble, check_background=True, in_memory=None):
    """Prepare a public function's call: see the module docstring.

    Parameters
    ----------
    model : fitted tree model, TreeEnsemble, Pipeline ending in one, or TreeExplainer
    X : array-like, DataFrame, sparse matrix, dask collection, Spark DataFrame or SparkRows
    feature_groups : mapping or "input", optional
        Feature groups as players (``_groups.players``).
    background : array-like, DataFrame or sparse matrix, optional
        Background rows (transformed as X; checked unless
        ``check_background=False``, e.g. a piecewise game's dask background).
    n_jobs : int or None
    verbose : "auto" or int
    ensemble_of : callable
        Reads the last step into an ensemble (default: refusing linear
        leaves; ``to_ensemble`` for the piecewise-linear game).
    in_memory : str, optional
        For the functions that need X in memory: the message of the
        ValueError a dask X raises.

    Returns
    -------
    Call
    """
    verbose = _local.check_verbose(verbose)
    model = _pipeline.explained_model(model)  # a prepared explainer: its ensemble
    is_dask = _dask.is_dask_collection(X)
    is_spark = _spark.is_spark_dataframe(X)
    if (is_dask or is_spark) and in_memory is not None:
        raise ValueError(in_memory)
    if is_spark:
        if _pipeline.has_transformers(model):
            raise ValueError(
                "A Pipeline with transforming steps cannot explain a Spark DataFrame: "
                "transform the DataFrame with Spark first (e.g. pyspark.ml stages), then "
                "explain the Pipeline's last step on the transformed columns.")
        if background is not None and _spark.is_spark_dataframe(background):
            raise TypeError(
                "background must be in memory (an array, DataFrame or sparse matrix); "
                "collect a sample of it first (e.g. df.sample(...).toPandas()).")
        X = _spark.as_rows(X)
        input_names = None  # the feature columns, once the model is read
    else:
        input_names = _dask.column_names(X) if is_dask else column_names(X)
    # feature_groups="input" of unnamed columns: x0, x1, ... of the input's width
    n_inputs = (n_rows_features(X)[1] if isinstance(feature_groups, str) and input_names is None
                and not is_dask and not is_spark else None)
    if background is not None and _pipeline.has_transformers(model):
        background = _pipeline.transform(model, background)
    last, X, names = _pipeline.unwrap(model, X)  # names: None unless a Pipeline
    ensemble = ensemble_of(last)
    read_here = [] if isinstance(last, TreeEnsemble) else [ensemble]
    if is_spark:  # the feature columns named and checked (no Spark job)
        X = _spark.resolve(ensemble, X)
        input_names = np.asarray(X.input_cols, dtype=object)
    if names is None:
        names = input_names
    if names is None:
        names = ensemble.feature_names
    players = None
    if feature_groups is not None:
        player, players = _groups.players(model, feature_groups, ensemble.n_features, names,
                                          input_names, n_inputs)
        # kept with the ensemble (a prepared explainer's groups: its own plans)
        grouped = ensemble.cached(("players", player.tobytes()),
                                  lambda: ensemble.with_players(player))
        ensemble = prepare_ensemble(grouped) if is_prepared(ensemble) else grouped
        read_here += [ensemble] if read_here else []
    if is_spark:
        rows = X
        n_rows, n_features = _spark.count_rows(rows), ensemble.n_features
        n_threads = resolve_n_jobs(_spark.block_threads(n_jobs))
    elif is_dask:
        _dask._import_dask()  # says how to install it
        _dask.check_rows_lazily(ensemble, X)
        rows, n_rows, n_features = _dask.whole_rows(X), 0, ensemble.n_features
        n_threads = resolve_n_jobs(_dask.block_threads(n_jobs))
    else:
        n_rows, n_features = n_rows_features(X)
        rows = _local.prepare_rows(ensemble, X)
        n_threads = resolve_n_jobs(n_jobs)
    if background is not None and check_background:
        background = _check_background(ensemble, background)
    call = Call(model=last, X=X, ensemble=ensemble, rows=rows, n_rows=n_rows,
                n_features=n_features, names=names, players=players, background=background,
                n_jobs=n_jobs, n_threads=n_threads, verbose=verbose,
                engine="spark" if is_spark else "dask" if is_dask else "local")
    _free_with(call, read_here)
    return call


def _free_with(call, ensembles):
    """Empty the caches of ``ensembles`` (read from a model for this call only)
    when ``call`` is freed. Their plans refer to them, so an ensemble and its
    cache are a reference cycle, which Python frees only at its next garbage
    collection: calls of one row each left 100 MB behind (a default random
    forest), and the next calls paid for fresh memory."""
    if ensembles:
        caches = [e.__dict__.setdefault("_cache", {}) for e in ensembles]
        weakref.finalize(call, _clear, caches).atexit = False


def _clear(caches):
    for cache in caches:
        cache.clear()


def row_argument(call, values, name):
    """``y`` or row weights (``name``: "y", "sample_weight") aligned to the
    rows of a prepared call; None stays None.

    In memory, checked here: y by :func:`._validation.check_y` (one value per
    row, 1-D), weights by :func:`._validation.check_row_weights` (float64,
    finite, non-negative, not all zero). For a dask X, X's row blocks
    (:func:`._execution.dask.aligned_column`: a dask collection rechunked to
    X's rows, an in-memory column split at X's partition lengths), checked
    lazily, partition by partition on the workers, by the same checkers
    (``partition_of="X"``) in the functions that read the blocks. For a
    Spark DataFrame, the name of its column (checked to exist and be
    numeric; its values are checked on the executors).
    """
    if values is None:
        return None
    if call.engine == "spark":
        return _spark.argument_column(call.rows, values, name)
    if call.engine == "dask":
        return _dask.aligned_column(values, call.rows, name, call.partition_lengths)
    if name == "y":
        return check_y(values, call.n_rows)
    return check_row_weights(values, call.n_rows, name)


def split_row_argument(name, value, n_rows):
    """``(per-row arguments, fixed arguments)`` of an argument that is one value
    for every row (None, a scalar) or an array of one entry per row (which
    the executor cuts to each block's rows)."""
    if value is None or np.ndim(value) == 0:
        return {}, {name: value}
    value = np.asarray(value)
    if value.shape[:1] != (n_rows,):
        raise ValueError(f"{name} must be one value or have one entry per row ({n_rows}), "
                         f"got shape {value.shape}.")
    return {name: value}, {}
