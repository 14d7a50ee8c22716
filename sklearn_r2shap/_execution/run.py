"""The two entry points of a public function's work over rows: local blocks, dask or Spark partitions.

:func:`map_rows` (per-row values) takes the prepared call
(:class:`~sklearn_r2shap._prepare.Call`: the ensemble, the checked rows, the
thread count, ``verbose``, the engine -- used through its attributes, so
this layer imports nothing above it) and a block function of the games
layer, and runs it either on fixed blocks of rows in memory (:func:`.local.map_blocks`: blocks sized by
the cost per row, progress, Ctrl-C between blocks), on the partitions of a
dask collection (:func:`.dask.map_checked_rows`) or on those of a Spark
DataFrame (:func:`.spark.map_checked_rows`: a Spark DataFrame of the kept
columns and the values), as ``call.engine`` says.

:func:`reduce_rows` (sums over rows) runs a *part function* of the games
layer on parts of the rows -- every row in memory as one part, or each
partition of a dask collection, or each Arrow batch of a Spark DataFrame --
and merges the parts' statistics in row order
(:func:`~.._numerics.merge_statistics`); only fixed-size sums leave a
partition. A part function is ``function(payload, rows, start, subset,
arguments, *, n_threads, progress=None, **in_memory)``: ``rows`` the part's
rows checked for the ensemble (:class:`.local.CheckedRows` or a CSR matrix),
``start`` the global index of its first row, ``subset`` the indices into
the part of the rows of a random subset (``max_samples``) or None for all,
``arguments`` the per-row arguments cut to the part's rows (``y``,
``sample_weight``; None where not given), ``progress`` a
:class:`.local.Progress` (in memory only) and ``in_memory`` what only an
in-memory call can take (e.g. an array of per-row terms to fill).
:func:`reduce_arguments` is the same over the per-row arguments alone (a
first pass over y and the weights, before the model's work). The part
function does its own blocks (:func:`.local.reduce_blocks`), so that a
part in memory is cut exactly as every row in memory is.

Layer: execution. Imports the ground floor and its own layer.
"""
from dataclasses import replace

import numpy as np

from . import dask as _dask
from . import local as _local
from . import spark as _spark

__all__ = ["map_rows", "reduce_rows", "reduce_arguments", "collect_rows", "progress_of",
           "estimate_seconds", "engine_of"]


def engine_of(X):
    """Where rows X are explained: "spark" (a Spark DataFrame or SparkRows),
    "dask" (a dask collection) or "local" (in memory), asked without
    importing either library."""
    if _spark.is_spark_dataframe(X):
        return "spark"
    return "dask" if _dask.is_dask_collection(X) else "local"


def estimate_seconds(call, seconds_per_row):
    """The seconds the call's rows take on its threads, ``seconds_per_row`` on
    one thread: the estimate that ``verbose="auto"`` compares with
    :data:`.local.AUTO_PROGRESS_SECONDS`."""
    return seconds_per_row * call.n_rows / max(1, min(call.n_threads, call.n_rows))


def progress_of(call, desc, seconds_per_row):
    """A :class:`.local.Progress` for the call's rows (:func:`estimate_seconds`)."""
    return _local.Progress(call.n_rows, call.verbose, desc,
                           estimate_seconds(call, seconds_per_row))


def _layer_name(desc):
    """A dask layer named after what it computes, e.g. "shap_values"."""
    return "_".join(desc.lower().replace("(", " ").replace(")", " ").replace(",", " ")
                    .replace("^", "").split()) or None


class _Planned:
    """A block function whose game is planned for the rows of its block (a dask
    partition, whose row count is known only there)."""

    def __init__(self, function, plan):
        self.function, self.plan = function, plan
        self.__name__ = getattr(function, "__name__", "values")

    def __call__(self, ensemble, rows, **kwargs):
        return self.function(self.plan(ensemble, n_rows=rows.shape[0]), rows, **kwargs)


def map_rows(call, function, *, trailing_shape, desc, seconds_per_row, game=None, plan=None,
             bytes_per_row=0, max_block_rows=1 << 30, row_arguments=None, **kwargs):
    """``function(game, rows, n_threads=..., **kwargs)`` over the call's rows.

    Parameters
    ----------
    call : Call
        The prepared call (``ensemble``, ``rows``, ``n_rows``, ``n_jobs``,
        ``n_threads``, ``verbose``, ``engine``, ``players``).
    function : callable
        A block function of the games layer; returns one array row (or a
        tuple of arrays) per row.
    trailing_shape : tuple of int
        The result's shape past the row axis (for a dask collection's lazy
        array).
    desc : str
        What is computed: the progress bar's label and the dask layer's name.
    seconds_per_row : float or callable
        One thread's seconds per row (``_execution.cost``; a callable: of the
        planned game), the rows per
        block (about :data:`.local.BLOCK_SECONDS` of work, never a function
        of the thread count, so results are bit-identical for any
        ``n_jobs``) and the progress estimate.
    game : object, optional
        What the block function computes on (default: the ensemble).
    plan : callable, optional
        ``plan(ensemble, n_rows=...)``, the game planned for a number of rows
        (importable, e.g. a ``functools.partial`` of a game's constructor):
        called once for every row in memory or on Spark (whose rows were
        counted; the game is broadcast), and on each dask partition for its
        own rows.
    bytes_per_row : int, default=0
        The memory of a row's outputs and temporaries: blocks hold at most
        :data:`.local.BLOCK_BYTES` of them (:func:`.local.block_rows_for`); a
        dask array is rechunked to blocks of no more rows.
    max_block_rows : int
        A bound on the rows per block of another kind (e.g. tables rebuilt
        per block).
    row_arguments : dict of arrays, optional
        Per-row arguments, cut to each block's rows (in memory only).

    Returns
    -------
    ndarray, dask Array or Spark DataFrame
        In memory: the values of every row; dask: a lazy array of the same
        row blocks; Spark: a lazy DataFrame of the kept columns and the
        values (cut to the players of a grouped ensemble on the executors).
    """
    if plan is not None and call.engine != "dask":
        game = plan(call.ensemble, n_rows=call.n_rows)
    if callable(seconds_per_row):
        seconds_per_row = seconds_per_row(game) if call.engine != "dask" else 0.0
    if call.engine == "spark":
        if row_arguments and any(v is not None for v in row_arguments.values()):
            raise TypeError(
                f"{desc} of a Spark DataFrame takes no per-row arguments; collect X (or "
                "a sample of it) first.")
        # the columns were checked from the schema by the preparation
        width = trailing_shape[-1] if trailing_shape else None
        players = call.player_columns(width)
        if players is not None:
            trailing_shape = tuple(trailing_shape[:-1]) + (len(players),)
        return _spark.map_checked_rows(function, call.ensemble, call.rows,
                                       trailing_shape=trailing_shape, n_jobs=call.n_jobs,
                                       game=game, name=_layer_name(desc), players=players,
                                       names=call.players if call.players is not None
                                       else call.names, **kwargs)
    if call.engine == "dask":
        if row_arguments and any(v is not None for v in row_arguments.values()):
            raise TypeError(
                f"{desc} of a dask collection takes no per-row arguments; compute X (or "
                "a sample of it) first.")
        rows = call.rows
        bound = _local.block_rows_for(0.0, bytes_per_row, maximum=max_block_rows)
        if hasattr(rows, "rechunk") and bound < (1 << 30):  # blocks bounded in memory
            known = all(np.isfinite(c) for c in rows.chunks[0])
            if known and len(rows.chunks[0]) and max(rows.chunks[0]) > bound:
                rows = rows.rechunk({0: bound})
        if plan is not None:
            function = _Planned(function, plan)
        # the collection was checked on an empty stand-in by the preparation
        return _dask.map_checked_rows(function, call.ensemble, rows,
                                      trailing_shape=trailing_shape, n_jobs=call.n_jobs,
                                      game=game, name=_layer_name(desc), checked=True,
                                      **kwargs)
    block_rows = _local.block_rows_for(seconds_per_row, bytes_per_row, maximum=max_block_rows)
    return _local.map_blocks(function, call.ensemble, call.rows, block_rows=block_rows,
                             progress=progress_of(call, desc, seconds_per_row), game=game,
                             row_arguments=row_arguments, n_threads=call.n_threads, **kwargs)


def collect_rows(call, computations, X):
    """Per-row results of a prepared call on the driver, with the rows they explain.

    For a result object that holds its rows (an Explanation): the values are
    computed where the rows are (on the executors or dask's workers, as
    :func:`map_rows` does) and then brought to the driver with the rows.

    Parameters
    ----------
    call : Call
    computations : list of callables
        ``computation(call)``: a per-row result of :func:`map_rows` (an
        ndarray in memory, a lazy dask array, a Spark DataFrame).
    X : object
        The rows as given (before a Pipeline's steps).

    Returns
    -------
    results : list of ndarray
    X, X_last : object
        ``X`` and ``call.X`` in memory (dask: computed in the same pass as
        the results; Spark: the feature columns collected beside the values,
        a float64 array).
    """
    if call.engine == "spark":
        if len(computations) > 1:
            raise ValueError(
                "A Spark DataFrame's values are collected with its rows in one pass, one "
                "kind of values at a time: for the interaction values, use "
                "shap_interaction_values(model, df) (a lazy Spark DataFrame) or "
                "shap_interaction_summary(model, df) (their means over rows).")
        rows = _spark.beside_features(call.rows)
        values, data = _spark.collect_values(computations[0](replace(call, rows=rows)), rows)
        return [values], data, data
    results = [computation(call) for computation in computations]
    if call.engine == "dask":
        *results, X, X_last = _dask.compute(*results, X, call.X)
    return results, X, call.X if call.engine == "local" else X_last


# ----------------------------------------------------------------------------
# Sums over rows


def _where(subset, start, n_rows):
    """The indices into a part of rows ``[start, start + n_rows)`` of the sorted
    global ``subset`` (None: every row)."""
    if subset is None:
        return None
    low, high = np.searchsorted(subset, [start, start + n_rows])
    return subset[low:high] - start


class _Part:
    """What every partition of a distributed reduction needs, shipped once:
    the ensemble the rows are checked for, the part function, its payload,
    the per-row arguments (their names: those given, in order, and those not)
    and the random subset."""

    def __init__(self, ensemble, function, payload, arguments, subset, n_threads):
        self.ensemble = ensemble
        self.function = function
        self.payload = payload
        self.given = _named(arguments)
        self.absent = [name for name in arguments if name not in self.given]
        self.subset = subset
        self.n_threads = n_threads

    def __call__(self, rows, start, values):
        if not isinstance(rows, _local.CheckedRows):  # a dask partition
            rows = _local.prepare_rows(self.ensemble, rows)
        return self.function(self.payload, rows, start,
                             _where(self.subset, start, rows.shape[0]),
                             _cut(self.given, self.absent, values), n_threads=self.n_threads)


def _cut(given, absent, values):
    """The per-row arguments of a part: the given ones' values as arrays, None
    for the others."""
    return {name: _dask.column(value) for name, value in zip(given, values)} | dict.fromkeys(
        absent)


def _dask_part(X, start, *values, payload):
    """One dask partition's statistics (a statistics function of
    :func:`.dask.reduce_statistics`)."""
    return payload(X, start, values)


def _spark_part(part, start, stop, block, *values):
    """One Arrow batch's statistics (a function of :func:`.spark.reduce_statistics`):
    rows ``[start, stop)``."""
    return part(_local.CheckedRows(block), start, values)


#: the public arguments behind the part functions' in-memory keywords (errors)
_PUBLIC_NAMES = {"local": "return_local=True"}


def _named(arguments):
    return [name for name, value in arguments.items() if value is not None]


def reduce_rows(call, function, *, payload, arguments=None, subset=None, desc=None,
                estimate=None, in_memory=None):
    """``function`` over the parts of the call's rows, merged in row order.

    Parameters
    ----------
    call : Call
        The prepared call.
    function : callable
        A part function (see the module docstring), importable (a distributed
        engine ships it to its workers with ``payload``, once).
    payload : object
        What the part function computes with (a plan, a game).
    arguments : dict, optional
        Per-row arguments aligned to the call's rows
        (:func:`.._prepare.row_argument`: arrays in memory, X's row blocks
        on dask, column names on Spark); None values are passed as None.
    subset : ndarray of int, optional
        Sorted global indices of the rows to use (``max_samples``); every
        row when None. The part function gets the indices into its part.
    desc : str, optional
        The progress bar's label (in memory; none without it).
    estimate : float, optional
        The seconds the work is estimated to take (``verbose="auto"``).
    in_memory : dict, optional
        Keyword arguments only an in-memory call can take; a distributed
        one refuses any that is not None, naming it.

    Returns
    -------
    dict
        The merged statistics; None when there is no row.
    """
    arguments = dict(arguments or {})
    in_memory = {name: value for name, value in (in_memory or {}).items()
                 if value is not None}
    if call.engine == "local":
        n_used = call.n_rows if subset is None else len(subset)
        progress = (None if desc is None else
                    _local.Progress(n_used, call.verbose, desc, estimate))
        try:
            return function(payload, call.rows, 0, subset, arguments,
                            n_threads=call.n_threads, progress=progress, **in_memory)
        finally:
            if progress is not None:
                progress.close()
    if in_memory:
        name = next(iter(in_memory))
        what = "a Spark DataFrame" if call.engine == "spark" else "a dask X"
        raise ValueError(
            f"{_PUBLIC_NAMES.get(name, name)} is not supported for {what}: the "
            "per-row terms would have to come back to this machine. Compute the sums on "
            f"{call.engine}, and the per-row terms of the rows you need in memory (a sample "
            "of X collected here).")
    names = _named(arguments)
    part = _Part(call.ensemble, function, payload, arguments,
                 None if subset is None else np.asarray(subset, dtype=np.int64),
                 call.n_threads)
    if call.engine == "spark":
        merged = _spark.reduce_statistics(_spark_part, call.rows, ensemble=call.ensemble,
                                          game=part, columns=[arguments[n] for n in names],
                                          positions=True)
        if merged is None:
            raise ValueError("The Spark DataFrame has no row.")
        return merged
    lengths = call.partition_lengths()
    starts = np.concatenate(([0], np.cumsum(lengths)[:-1])).astype(np.int64).tolist()
    return _dask.reduce_statistics(
        _dask_part, call.rows, starts, *[arguments[n] for n in names],
        payload=_dask.shipped_once(part)).compute()


def _dask_arguments(index, *values, payload):
    """One dask partition's statistics of the per-row arguments alone, with the
    partition's row count at its index (``lengths``)."""
    function, function_payload, given, absent, n_parts = payload
    lengths = np.zeros(n_parts, dtype=np.int64)
    lengths[index] = len(values[0])
    return function(function_payload, _cut(given, absent, values)) | {"lengths": lengths}


class _Arguments:
    """The function of a Spark pass over the per-row argument columns."""

    def __init__(self, function, payload, given, absent):
        self.function, self.payload = function, payload
        self.given, self.absent = given, absent

    def __call__(self, *values):
        return self.function(self.payload, _cut(self.given, self.absent, values))


def reduce_arguments(call, function, *, payload, arguments):
    """``function(payload, arguments)`` over the per-row arguments alone
    (``arguments``: as :func:`reduce_rows`, at least one given), merged in
    row order: a first pass over y and the weights. A dask pass also
    counts the rows of X's partitions (kept on the call, for
    :func:`reduce_rows`)."""
    arguments = dict(arguments)
    if call.engine == "local":
        return function(payload, arguments)
    given = _named(arguments)
    absent = [name for name in arguments if name not in given]
    if call.engine == "spark":
        merged = _spark.reduce_statistics(
            _Arguments(function, payload, given, absent), call.rows,
            columns=[arguments[n] for n in given])
        if merged is None:
            raise ValueError("The Spark DataFrame has no row.")
        return merged
    n_parts = _dask.n_blocks(call.rows)
    statistics = _dask.reduce_statistics(
        _dask_arguments, list(range(n_parts)), *[arguments[n] for n in given],
        payload=(function, payload, given, absent, n_parts)).compute()
    if call._lengths is None:
        call._lengths = [int(n) for n in statistics["lengths"]]
    return statistics
