"""Row-partitioned computation on dask collections (optional dependency).

Every local explanation is row-local: a row's values depend only on that
row and on the model. A dask array or dask DataFrame of rows is therefore
explained block by block (one task per block or partition, the same
computation as the in-memory call), and the result is a lazy dask array
with the same row partitioning.

The model travels once: it is converted to its :class:`TreeEnsemble` on the
client and put in the task graph as **one key** that every block's task
depends on, so each worker receives it once (and keeps it in memory while
its tasks run) instead of once per task.

:func:`reduce_statistics` is the building block of one-pass reductions over
partitions (sums, counts and means / squared deviations merged exactly with
Chan et al.'s pairwise update), tree-reduced with ``dask.delayed``.

dask is imported only when a dask collection is passed:
:func:`is_dask_collection` recognises one without importing it.

This module knows no algorithm: public functions hand it a block function
of the games layer (:func:`map_checked_rows` checks each partition's rows
with :func:`~.._validation.check_rows` on the worker and calls it) or a
statistics function (:func:`reduce_statistics`). Adding an algorithm never
touches it.

Layer: execution. Imports the ground floor and ``_model``; never a game, a
public module or an estimator.
"""
import numpy as np

from .._errors import import_optional
from .._model import TreeEnsemble
from .._numerics import Extremes, Moments, merge_statistics
from .._validation import check_rows, resolve_n_jobs
from .._validation import column_names as frame_column_names

__all__ = ["is_dask_collection", "map_rows", "map_checked_rows", "Moments", "Extremes",
           "merge_statistics", "reduce_statistics", "aligned_column", "partition_lengths",
           "check_rows_lazily", "shipped_once", "block_threads", "compute"]


def is_dask_collection(X):
    """Whether ``X`` is a dask collection (array, DataFrame, Series, ...),
    without importing dask."""
    return type(X).__module__.split(".")[0] in ("dask", "dask_expr") or (
        not isinstance(X, type) and hasattr(X, "__dask_graph__"))


def _import_dask():
    import_optional("dask.array", "A dask collection")
    return import_optional("dask", "A dask collection")


def _is_dataframe_like(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "map_partitions")


def shipped_once(payload):
    """``payload`` as a single key of the task graph (a ``dask.delayed`` object).

    The name is a deterministic token of the payload, so explaining
    several collections with the same model reuses the key.
    """
    dask = _import_dask()
    tokenize = import_optional("dask.base", "A dask collection").tokenize
    name = f"sklearn-r2shap-{type(payload).__name__}-{tokenize(payload)}"
    return dask.delayed(payload, name=name, traverse=False)


def block_threads(n_jobs):
    # dask runs one task per worker thread: one OpenMP thread per task unless
    # the caller asked for more
    return 1 if n_jobs is None else n_jobs


def _apply(block, function, payload, n_jobs, kwargs):
    return function(payload, block, n_jobs=n_jobs, **kwargs)


def map_rows(function, payload, X, *, trailing_shape, n_jobs=None, check=None, name=None,
             **kwargs):
    """Apply ``function(payload, block, n_jobs=..., **kwargs)`` to every row block of ``X``.

    Parameters
    ----------
    function : callable
        Returns a float64 array of shape ``(n_block_rows,) + trailing_shape``
        for an in-memory block (ndarray or pandas DataFrame) of rows.
    payload : object
        The model (a TreeEnsemble or a prepared game), shipped as one key of
        the graph.
    X : dask Array or dask DataFrame of shape (n_rows, n_features)
    trailing_shape : tuple of int
        The output's shape past the row axis.
    n_jobs : int, default=None
        OpenMP threads per task; None is 1 (dask's workers run the tasks in
        parallel).
    check : callable, optional
        Called on an empty in-memory stand-in of ``X`` (zero rows, same
        columns and dtypes) to raise input errors at once, not at compute
        time.
    name : str, optional
        The name of the graph's layer (default: the block function's name).
    **kwargs
        Passed to ``function``.

    Returns
    -------
    dask Array of shape ``(n_rows,) + trailing_shape``
        Lazy, one block per row block of ``X`` (chunks along rows only);
        row counts are unknown (NaN) for a DataFrame, as in
        ``DataFrame.to_dask_array()``.
    """
    _import_dask()
    trailing_shape = tuple(int(n) for n in trailing_shape)
    n_jobs = block_threads(n_jobs)
    shipped = shipped_once(payload)
    meta = np.empty((0,) + trailing_shape, dtype=np.float64)
    if _is_dataframe_like(X):
        if check is not None:
            check(X._meta)
        # (not map_partitions with an array meta: it loses partitions of
        # DataFrames built by from_delayed in dask 2026.8)
        dask = _import_dask()
        apply = dask.delayed(_apply, pure=True)
        blocks = [dask.array.from_delayed(apply(part, function, shipped, n_jobs, kwargs),
                                          shape=(np.nan,) + trailing_shape, meta=meta)
                  for part in X.to_delayed(optimize_graph=False)]
        return dask.array.concatenate(blocks, axis=0)
    if not hasattr(X, "chunks") or not hasattr(X, "map_blocks"):
        raise TypeError(
            f"Expected a dask Array or dask DataFrame of rows, got {type(X).__name__}; "
            "call .to_dask_array() or .to_frame() first."
        )
    if X.ndim != 2:
        raise ValueError(
            f"Expected a 2D dask array of rows, got {X.ndim} dimension(s); reshape it to "
            "(n_rows, n_features)."
        )
    if check is not None:
        check(np.empty((0, X.shape[1]), dtype=X.dtype))
    if len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # a task needs whole rows
    chunks = (X.chunks[0],) + tuple((n,) for n in trailing_shape)
    extra = len(trailing_shape) - 1  # output axes beyond X's two
    return X.map_blocks(
        _apply, function, shipped, n_jobs, kwargs, dtype=np.float64, chunks=chunks, meta=meta,
        token=name or getattr(kwargs.get("block_function"), "__name__",
                              function.__name__).strip("_"),
        drop_axis=[1] if extra < 0 else None,
        new_axis=list(range(2, 2 + extra)) if extra > 0 else None,
    )


def _checked_block(payload, block, *, n_jobs, block_function, **kwargs):
    ensemble = payload if isinstance(payload, TreeEnsemble) else payload.ensemble
    return block_function(payload, check_rows(ensemble, block),
                          n_threads=resolve_n_jobs(n_jobs), **kwargs)


def map_checked_rows(function, ensemble, X, *, trailing_shape, n_jobs=None, game=None,
                     name=None, checked=False, **kwargs):
    """``function(game, rows, n_threads=..., **kwargs)`` on every row block of ``X``.

    The block function of the games layer receives the partition's rows
    checked on the worker (:func:`~.._validation.check_rows` for
    ``ensemble``) and ``game`` (default: ``ensemble``; else an object with
    the ensemble as ``game.ensemble``), shipped once; ``X``'s width, names
    and dtypes are checked at once on an empty stand-in, unless ``checked``
    says the caller did (:func:`check_rows_lazily`). See :func:`map_rows`
    for the result.
    """
    return map_rows(_checked_block, ensemble if game is None else game, X,
                    trailing_shape=trailing_shape, n_jobs=n_jobs, name=name,
                    check=None if checked else (lambda empty: check_rows(ensemble, empty)),
                    block_function=function, **kwargs)


def check_rows_lazily(ensemble, X):
    """check_rows on an empty stand-in of a dask collection (width, names, dtypes)."""
    if _is_dataframe_like(X):
        check_rows(ensemble, X._meta)
    elif getattr(X, "ndim", None) != 2:
        raise ValueError("Expected a 2D dask array of rows, got "
                         f"{getattr(X, 'ndim', '?')} dimension(s).")
    else:
        check_rows(ensemble, np.empty((0, X.shape[1]), dtype=X.dtype))


def column_names(X):
    """The column names of a dask DataFrame (None for a dask array)."""
    return frame_column_names(X._meta) if _is_dataframe_like(X) else None


def whole_rows(X):
    """A dask array rechunked so that a block holds whole rows (a DataFrame as is)."""
    if hasattr(X, "chunks") and not _is_dataframe_like(X) and len(X.chunks[1]) > 1:
        return X.rechunk({1: -1})
    return X


# ----------------------------------------------------------------------------
# One-pass statistics over partitions, tree-reduced


def _merge_group(group):
    merged = group[0]
    for other in group[1:]:
        merged = merge_statistics(merged, other)
    return merged


def _row_blocks(collection):
    """One ``dask.delayed`` per row block of a dask array, DataFrame or Series."""
    if hasattr(collection, "map_partitions"):
        return list(collection.to_delayed())
    if not hasattr(collection, "chunks"):
        raise TypeError(f"expected a dask collection, got {type(collection).__name__}.")
    if collection.ndim > 1 and any(len(c) > 1 for c in collection.chunks[1:]):
        collection = collection.rechunk({axis: -1 for axis in range(1, collection.ndim)})
    return list(collection.to_delayed().reshape(-1))


def reduce_statistics(function, *collections, split_every=8, **kwargs):
    """One pass over row-aligned partitions, merged by a tree reduction.

    ``function(*blocks, **kwargs)`` receives the in-memory blocks of the
    same rows of every collection (ndarray, pandas DataFrame or Series) and
    returns a dict of statistics: numbers or arrays that add up (sums,
    counts) and :class:`Moments` (means and squared deviations). The dicts of
    all partitions are merged by :func:`merge_statistics` in groups of
    ``split_every`` (a tree of depth ``log_split_every(n_partitions)``), so
    the client receives one small dict.

    Parameters
    ----------
    function : callable
    *collections : dask Array, DataFrame or Series, or list
        The same number of row blocks each, holding the same rows (dask
        arrays: the same row chunks; a 1D array is rechunked to the first
        collection's row chunks when these are known). A list holds one
        in-memory value per partition (e.g. the partition's first row
        index), passed as is.
    split_every : int, default=8
        Partitions (or partial results) merged per task.
    **kwargs
        Passed to ``function``; a ``dask.delayed`` value (e.g. a model from
        :func:`shipped_once`) is one key shared by all partitions.

    Returns
    -------
    dask.delayed.Delayed
        The merged dict; ``.compute()`` it (or ``dask.compute`` it with
        others).

    Examples
    --------
    >>> import dask.array as da
    >>> from sklearn_r2shap._execution.dask import Moments, reduce_statistics
    >>> y = np.arange(10.0)
    >>> def statistics(block):
    ...     return {"rows": len(block), "sum": block.sum(), "y": Moments.of(block)}
    >>> total = reduce_statistics(statistics, da.from_array(y, chunks=((3, 0, 7),))).compute()
    >>> total["rows"], float(total["sum"]), float(total["y"].mean)
    (10, 45.0, 4.5)
    >>> bool(np.isclose(total["y"].variance(ddof=1), y.var(ddof=1)))
    True
    """
    dask = _import_dask()
    if not collections:
        raise ValueError("reduce_statistics needs at least one collection.")
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every}.")
    first = collections[0]
    aligned = []
    for collection in collections:
        if isinstance(collection, list):
            aligned.append(collection)
            continue
        if (hasattr(collection, "chunks") and hasattr(first, "chunks")
                and collection is not first and collection.chunks[0] != first.chunks[0]
                and not any(np.isnan(first.chunks[0]))):
            collection = collection.rechunk({0: first.chunks[0]})
        aligned.append(_row_blocks(collection))
    counts = {len(blocks) for blocks in aligned}
    if len(counts) != 1:
        raise ValueError(
            f"the collections have different numbers of partitions ({sorted(counts)}); "
            "they must hold the same rows in the same blocks."
        )
    apply = dask.delayed(function, pure=True)
    level = [apply(*blocks, **kwargs) for blocks in zip(*aligned)]
    if not level:
        raise ValueError("the collections have no partition.")
    merge = dask.delayed(_merge_group, pure=True)
    while len(level) > 1:
        level = [merge(level[i:i + split_every]) for i in range(0, len(level), split_every)]
    return level[0]


def column(values):
    """An in-memory block of y or sample_weight (ndarray, pandas Series / frame) as an array."""
    return np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values)


def compute(*collections):
    """Dask collections (and any other objects, as they are) computed in one pass."""
    return _import_dask().compute(*collections)


def partition_lengths(X):
    """The row counts of X's partitions (computed on the workers when unknown)."""
    if hasattr(X, "chunks") and not any(np.isnan(X.chunks[0])):
        return [int(n) for n in X.chunks[0]]
    dask = _import_dask()
    count = dask.delayed(len, pure=True)
    return list(dask.compute(*[count(part) for part in _row_blocks(X)]))


def n_blocks(collection):
    return collection.npartitions if hasattr(collection, "npartitions") else (
        collection.numblocks[0])


def aligned_column(values, X, what, lengths_of_X):
    """y or sample_weight as row blocks matching X's: a dask collection (rechunked
    when both row chunkings are known) or a list of in-memory blocks."""
    count = n_blocks(X)
    if is_dask_collection(values):
        if hasattr(values, "chunks") and not hasattr(values, "map_partitions"):
            if values.ndim == 2 and values.shape[1] == 1:
                values = values[:, 0]
            if values.ndim != 1:
                raise ValueError(f"{what} must be 1-dimensional, got shape {values.shape}.")
            x_chunks = X.chunks[0] if hasattr(X, "chunks") else (np.nan,)
            known = not (any(np.isnan(x_chunks)) or any(np.isnan(values.chunks[0])))
            if known and values.shape[0] != sum(x_chunks):
                raise ValueError(f"X has {int(sum(x_chunks))} rows but {what} has "
                                 f"{values.shape[0]}.")
            if known and values.chunks[0] != x_chunks:
                values = values.rechunk({0: x_chunks})
        if n_blocks(values) != count:
            raise ValueError(
                f"{what} has {n_blocks(values)} partitions and X has {count}: give {what} "
                "the same row blocks (partitions) as X, e.g. a column of the same dask "
                "DataFrame, or a dask array with X's row chunks.")
        return values
    values = column(values)
    lengths = lengths_of_X()
    if values.ndim == 0 or len(values) != sum(lengths):
        raise ValueError(f"X has {int(sum(lengths))} rows but {what} has "
                         f"{values.size if values.ndim == 0 else len(values)}.")
    return np.split(values, np.cumsum(lengths)[:-1])


