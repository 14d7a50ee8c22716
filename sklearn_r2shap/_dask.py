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
"""
import numpy as np

from ._numerics import Extremes, Moments, merge_statistics

__all__ = ["is_dask_collection", "map_rows", "Moments", "Extremes", "merge_statistics",
           "reduce_statistics"]


def is_dask_collection(X):
    """Whether ``X`` is a dask collection (array, DataFrame, Series, ...),
    without importing dask."""
    return type(X).__module__.split(".")[0] in ("dask", "dask_expr") or (
        not isinstance(X, type) and hasattr(X, "__dask_graph__"))


def _import_dask():
    try:
        import dask
        import dask.array
    except ImportError as exc:
        raise ImportError(
            "A dask collection was passed, but dask is not installed (or incompletely): "
            "install the optional dependency with `pip install sklearn-r2shap[dask]` "
            "(dask[array,dataframe] and distributed)."
        ) from exc
    return dask


def _is_dataframe_like(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "map_partitions")


def shipped_once(payload):
    """``payload`` as a single key of the task graph (a ``dask.delayed`` object).

    The name is a deterministic token of the payload, so explaining
    several collections with the same model reuses the key.
    """
    dask = _import_dask()
    from dask.base import tokenize

    name = f"sklearn-r2shap-{type(payload).__name__}-{tokenize(payload)}"
    return dask.delayed(payload, name=name, traverse=False)


def _block_threads(n_jobs):
    # dask runs one task per worker thread: one OpenMP thread per task unless
    # the caller asked for more
    return 1 if n_jobs is None else n_jobs


def _apply(block, function, payload, n_jobs, kwargs):
    return function(payload, block, n_jobs=n_jobs, **kwargs)


def map_rows(function, payload, X, *, trailing_shape, n_jobs=None, check=None, **kwargs):
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
    n_jobs = _block_threads(n_jobs)
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
        token=function.__name__.strip("_"),
        drop_axis=[1] if extra < 0 else None,
        new_axis=list(range(2, 2 + extra)) if extra > 0 else None,
    )


# ----------------------------------------------------------------------------
# The public functions' dask route


def _ensemble_output_shape(ensemble, width):
    return (width,) if ensemble.n_outputs == 1 else (ensemble.n_outputs, width)


def explain(function, model, X, *, n_jobs=None, **kwargs):
    """``function(model, X, n_jobs=..., **kwargs)`` of explain.py on a dask collection.

    The model is converted (and refused, e.g. with linear leaves) on the
    client; the returned array has shape ``(n_rows, n_features + 1)`` or
    ``(n_rows, n_outputs, n_features + 1)``.
    """
    from ._validation import check_rows

    ensemble = _checked_ensemble(model)
    shape = _ensemble_output_shape(ensemble, ensemble.n_features + 1)
    return map_rows(function, ensemble, X, trailing_shape=shape, n_jobs=n_jobs,
                    check=lambda empty: check_rows(ensemble, empty), **kwargs)


def predict(function, model, X, *, n_jobs=None):
    """Raw predictions, shape (n_rows, n_outputs), of a dask collection."""
    from ._validation import check_rows

    ensemble = _checked_ensemble(model)
    return map_rows(function, ensemble, X, trailing_shape=(ensemble.n_outputs,),
                    n_jobs=n_jobs, check=lambda empty: check_rows(ensemble, empty))


def _checked_ensemble(model):
    """The model's TreeEnsemble, refused as the in-memory functions refuse it."""
    from ._model import to_ensemble
    from .explain import _prepare

    ensemble = to_ensemble(model)
    _prepare(ensemble, np.empty((0, ensemble.n_features)))
    return ensemble


def piecewise_shap_values(game, X, *, n_jobs):
    from ._validation import resolve_n_jobs
    from .piecewise import _game_values

    return _game_values(game, X, resolve_n_jobs(n_jobs))


def piecewise_values(game, X, *, n_jobs=None):
    """SHAP values of a piecewise-linear game (covers and leaf means built on
    the client from in-memory background rows) on a dask collection."""
    from ._validation import check_rows

    ensemble = game.ensemble
    shape = _ensemble_output_shape(ensemble, ensemble.n_features + 1)
    return map_rows(piecewise_shap_values, game, X, trailing_shape=shape, n_jobs=n_jobs,
                    check=lambda empty: check_rows(ensemble, empty))


def _leaf_statistics_block(block, weight=None, *, payload):
    from ._kernels import _piecewise
    from ._validation import check_rows

    ensemble, start, feature = payload
    B = check_rows(ensemble, block)
    if weight is None:
        weight = np.ones(B.shape[0])
    else:
        weight = np.ascontiguousarray(np.asarray(weight, dtype=np.float64).reshape(-1))
        if weight.shape != (B.shape[0],):
            raise ValueError(f"background_weight has {weight.shape[0]} rows in a partition "
                             f"where background has {B.shape[0]}.")
        if not np.all(np.isfinite(weight)) or np.any(weight < 0):
            raise ValueError("background_weight must be finite and non-negative.")
    cover, complete, entry_sum = _piecewise.leaf_statistics(ensemble, B, weight, start,
                                                            feature, 1)
    return {"rows": B.shape[0], "weight": float(weight.sum()), "cover": cover,
            "complete": complete, "entry_sum": entry_sum}


def leaf_statistics(ensemble, background, background_weight, start, feature):
    """Covers, complete-row weights and linear-feature sums of a dask
    background (piecewise-linear game), summed over its partitions in one
    pass; computed at once."""
    from ._validation import check_rows

    _check_rows_lazily(ensemble, background, check_rows)
    collections = (background,) if background_weight is None else (
        background, background_weight)
    if background_weight is not None and not is_dask_collection(background_weight):
        raise TypeError("with a dask background, background_weight must be a dask "
                        "collection of the same row blocks (or None).")
    payload = shipped_once((ensemble, start, feature))
    total = reduce_statistics(_leaf_statistics_block, *collections, payload=payload).compute()
    if total["rows"] == 0:
        raise ValueError("background must contain at least one row.")
    if not total["weight"] > 0:
        raise ValueError("background_weight must not be all zero.")
    return total["cover"], total["complete"], total["entry_sum"]


def _check_rows_lazily(ensemble, X, check_rows):
    """check_rows on an empty stand-in of a dask collection (width, names, dtypes)."""
    if _is_dataframe_like(X):
        check_rows(ensemble, X._meta)
    elif getattr(X, "ndim", None) != 2:
        raise ValueError("Expected a 2D dask array of rows, got "
                         f"{getattr(X, 'ndim', '?')} dimension(s).")
    else:
        check_rows(ensemble, np.empty((0, X.shape[1]), dtype=X.dtype))


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
    >>> from sklearn_r2shap._dask import Moments, reduce_statistics
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


# ----------------------------------------------------------------------------
# The R^2 / D^2 decomposition: per-partition statistics, tree-reduced


def _column(values):
    """An in-memory block of y or sample_weight (ndarray, pandas Series / frame) as an array."""
    return np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values)


def _is_regression(loss):
    from ._scores import SquaredError

    return isinstance(loss, SquaredError) and loss.classes is None


def _block_target(loss, ensemble, y, n_rows, scale):
    """The target columns of a block, as the in-memory call computes them for all rows."""
    from ._scores import _regression_target

    if _is_regression(loss):
        return (_regression_target(y, n_rows) / scale)[:, None]
    return loss.target(y, n_rows, ensemble)


def _block_weight(weight, n_rows, what):
    from ._validation import check_row_weights

    if weight is None:
        return np.ones(n_rows)
    weight = np.asarray(_column(weight), dtype=np.float64).reshape(-1)
    if weight.shape != (n_rows,):
        raise ValueError(f"sample_weight has {weight.shape[0]} rows in a partition where "
                         f"{what} has {n_rows}: give sample_weight the same row blocks "
                         "(partitions) as X.")
    # a partition may have only zero weights; all rows' weights are checked at the end
    return check_row_weights(weight, n_rows, some_positive=False)


def _target_statistics(y, index, weight=None, *, payload):
    """First pass, over y (and the weights) only: what L0 and the rescaling need."""
    loss, ensemble, n_blocks = payload
    y = _column(y)
    n_rows = len(y)
    target = _block_target(loss, ensemble, y, n_rows, 1.0)
    weight = _block_weight(weight, n_rows, "y")
    lengths = np.zeros(n_blocks, dtype=np.int64)
    lengths[index] = n_rows
    return {"lengths": lengths,
            "largest_target": Extremes.of(np.abs(target)),
            "largest_weight": Extremes.of(weight),
            # a target constant over the rows that count makes the score undefined
            "counted_target": Extremes.of(target[weight > 0]),
            "target": Moments.of(target, weight)}


def _r2_block(X, y, where, weight=None, *, payload):
    """Second pass: one partition's statistics of the decomposition (``_BlockWork``)."""
    plan, scale, weight_scale, null_mean = payload
    first, rows = where
    y = _column(y)
    n_rows = X.shape[0]
    if len(y) != n_rows:
        raise ValueError(f"y has {len(y)} rows in a partition where X has {n_rows}: give y "
                         "(and sample_weight) the same row blocks (partitions) as X, e.g. a "
                         "column of the same dask DataFrame, or y.rechunk(X.chunks[0]).")
    target = _block_target(plan.loss, plan.ensemble, y, n_rows, scale)
    weight = _block_weight(weight, n_rows, "X") / weight_scale
    return plan.statistics(X, target, weight, first=first, rows=rows, null_mean=null_mean)


def _n_blocks(collection):
    return collection.npartitions if hasattr(collection, "npartitions") else (
        collection.numblocks[0])


def _aligned_column(values, X, what, lengths_of_X):
    """y or sample_weight as row blocks matching X's: a dask collection (rechunked
    when both row chunkings are known) or a list of in-memory blocks."""
    n_blocks = _n_blocks(X)
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
        if _n_blocks(values) != n_blocks:
            raise ValueError(
                f"{what} has {_n_blocks(values)} partitions and X has {n_blocks}: give {what} "
                "the same row blocks (partitions) as X, e.g. a column of the same dask "
                "DataFrame, or a dask array with X's row chunks.")
        return values
    values = _column(values)
    lengths = lengths_of_X()
    if values.ndim == 0 or len(values) != sum(lengths):
        raise ValueError(f"X has {int(sum(lengths))} rows but {what} has "
                         f"{values.size if values.ndim == 0 else len(values)}.")
    return np.split(values, np.cumsum(lengths)[:-1])


def r2_decomposition(ensemble, loss, X, y, *, sample_weight, return_local, n_jobs, algorithm,
                     exact_budget, n_permutations, max_samples, random_state):
    """``importance.r2_decomposition`` of a dask collection: two passes, tree-reduced.

    Pass 1 reads y and the weights only (row counts per partition, the
    largest |y| and weight -- the power-of-two rescalings -- and the
    weighted mean of the target, L0's best constant). Pass 2 maps the
    in-memory per-block statistics over the partitions of (X, y, weights),
    with the model shipped once, and merges them by a tree reduction; the
    client finalizes as the in-memory call does.
    """
    dask = _import_dask()
    from ._scores import check_n_rows, target_scale, undefined_score_error, weight_scale
    from ._validation import check_rows, column_names
    from .importance import _BlockWork

    if return_local:
        raise ValueError(
            "return_local=True is not supported for a dask X: the per-row terms need L0, "
            "known only after a pass over every row. Compute the R2_j on dask, and the "
            "per-row terms of the rows you need in memory (X.compute() of a sample).")
    if y is None:
        raise ValueError("r2_decomposition requires y, but y is None.")
    # refuse what the in-memory call refuses, before any pass
    _BlockWork.of(ensemble, loss, 1.0)
    _check_rows_lazily(ensemble, X, check_rows)
    names = column_names(X._meta) if _is_dataframe_like(X) else None
    if names is None:
        names = ensemble.feature_names
    if hasattr(X, "chunks") and not _is_dataframe_like(X) and len(X.chunks[1]) > 1:
        X = X.rechunk({1: -1})  # a task needs whole rows

    lengths_of_X = []

    def lengths():  # partition lengths of X (computed once, only when needed)
        if not lengths_of_X:
            if hasattr(X, "chunks") and not any(np.isnan(X.chunks[0])):
                lengths_of_X.extend(int(n) for n in X.chunks[0])
            else:
                count = dask.delayed(len, pure=True)
                lengths_of_X.extend(dask.compute(*[count(part) for part in _row_blocks(X)]))
        return lengths_of_X

    y = _aligned_column(y, X, "y", lengths)
    columns = [y, list(range(_n_blocks(X)))]
    if sample_weight is not None:
        columns.append(_aligned_column(sample_weight, X, "sample_weight", lengths))
    first = reduce_statistics(_target_statistics, *columns,
                              payload=(loss, ensemble, _n_blocks(X))).compute()
    n_rows = int(first["lengths"].sum())
    check_n_rows(n_rows)
    scale_w = 1.0
    if sample_weight is not None:
        if not first["largest_weight"].high > 0:
            raise ValueError("sample_weight is zero for every row: no row counts.")
        scale_w = weight_scale(first["largest_weight"].high)
    counted = first["counted_target"]
    if np.all(counted.low == counted.high):
        raise undefined_score_error(loss)
    scale = target_scale(float(np.max(first["largest_target"].high))) if _is_regression(
        loss) else 1.0
    null_mean = first["target"].mean / scale

    plan = _BlockWork.of(ensemble, loss, scale)
    rows = plan.choose(n_rows, n_jobs, _block_threads(n_jobs), algorithm, exact_budget,
                       n_permutations, max_samples, random_state)
    starts = np.concatenate(([0], np.cumsum(first["lengths"])[:-1]))
    where = []
    for start, n in zip(starts.tolist(), first["lengths"].tolist()):
        mine = None if rows is None else (
            rows[(rows >= start) & (rows < start + n)] - start)
        where.append((start, mine))
    blocks = [X, y, where] + columns[2:]
    merged = reduce_statistics(
        _r2_block, *blocks,
        payload=shipped_once((plan, scale, scale_w, null_mean))).compute()
    total = merged["null"]
    if not total > 0:
        raise undefined_score_error(loss)
    n_used = n_rows if rows is None else len(rows)
    return plan.finalize(merged, total, n_rows=n_rows, n_used=n_used, names=names)
