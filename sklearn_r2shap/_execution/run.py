"""One entry point for a public function's per-row work: local blocks, dask or Spark partitions.

:func:`map_rows` takes the prepared call (:class:`~sklearn_r2shap._prepare.Call`:
the ensemble, the checked rows, the thread count, ``verbose``, whether X is a
dask collection -- used through its attributes, so this layer imports nothing
above it) and a block function of the games layer, and runs it either on
fixed blocks of rows in memory (:func:`.local.map_blocks`: blocks sized by
the cost per row, progress, Ctrl-C between blocks), on the partitions of a
dask collection (:func:`.dask.map_checked_rows`) or on those of a Spark
DataFrame (:func:`.spark.map_checked_rows`: a Spark DataFrame of the kept
columns and the values), as ``call.engine`` says.

Layer: execution. Imports the ground floor and its own layer.
"""
from . import dask as _dask
from . import local as _local
from . import spark as _spark

__all__ = ["map_rows", "progress_of"]


def progress_of(call, desc, seconds_per_row):
    """A :class:`.local.Progress` for the call's rows; ``seconds_per_row`` on one
    thread gives the estimate that ``verbose="auto"`` compares with
    :data:`.local.AUTO_PROGRESS_SECONDS`."""
    estimate = seconds_per_row * call.n_rows / max(1, min(call.n_threads, call.n_rows))
    return _local.Progress(call.n_rows, call.verbose, desc, estimate)


def _layer_name(desc):
    """A dask layer named after what it computes, e.g. "shap_values"."""
    return "_".join(desc.lower().replace("(", " ").replace(")", " ").replace(",", " ")
                    .replace("^", "").split()) or None


def map_rows(call, function, *, trailing_shape, desc, seconds_per_row, game=None,
             max_block_rows=1 << 30, row_arguments=None, **kwargs):
    """``function(game, rows, n_threads=..., **kwargs)`` over the call's rows.

    Parameters
    ----------
    call : Call
        The prepared call (``ensemble``, ``rows``, ``n_rows``, ``n_jobs``,
        ``n_threads``, ``verbose``, ``dask``, ``engine``, ``players``).
    function : callable
        A block function of the games layer; returns one array row (or a
        tuple of arrays) per row.
    trailing_shape : tuple of int
        The result's shape past the row axis (for a dask collection's lazy
        array).
    desc : str
        What is computed: the progress bar's label and the dask layer's name.
    seconds_per_row : float
        One thread's seconds per row (``_execution.cost``): the rows per
        block (about :data:`.local.BLOCK_SECONDS` of work, never a function
        of the thread count, so results are bit-identical for any
        ``n_jobs``) and the progress estimate.
    game : object, optional
        What the block function computes on (default: the ensemble).
    max_block_rows : int
        A memory bound on the rows per block (e.g. large per-row outputs).
    row_arguments : dict of arrays, optional
        Per-row arguments, cut to each block's rows (in memory only).

    Returns
    -------
    ndarray, dask Array or Spark DataFrame
        In memory: the values of every row; dask: a lazy array of the same
        row blocks; Spark: a lazy DataFrame of the kept columns and the
        values (cut to the players of a grouped ensemble on the executors).
    """
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
    if call.dask:
        if row_arguments and any(v is not None for v in row_arguments.values()):
            raise TypeError(
                f"{desc} of a dask collection takes no per-row arguments; compute X (or "
                "a sample of it) first.")
        # the collection was checked on an empty stand-in by the preparation
        return _dask.map_checked_rows(function, call.ensemble, call.rows,
                                      trailing_shape=trailing_shape, n_jobs=call.n_jobs,
                                      game=game, name=_layer_name(desc), checked=True,
                                      **kwargs)
    block_rows = _local.block_rows_for(seconds_per_row, maximum=max_block_rows)
    return _local.map_blocks(function, call.ensemble, call.rows, block_rows=block_rows,
                             progress=progress_of(call, desc, seconds_per_row), game=game,
                             row_arguments=row_arguments, n_threads=call.n_threads, **kwargs)
