"""The local executor: a block function over fixed blocks of rows, merged in block order.

Every computation of the package that runs over rows goes through here
(or through :mod:`._execution.dask` for a dask collection): a public
function hands :func:`map_blocks` (per-row arrays, concatenated) or
:func:`reduce_blocks` (mergeable statistics: sums and
:class:`~.._numerics.Moments`, merged by :func:`~.._numerics.merge_statistics`)
a *block function* of the games layer, the rows and a block size. The block
size is fixed by the data and the model (the game's cost per row and its
memory per row), never by the number of threads, and blocks are merged in
their order, so that results are bit-identical for any ``n_jobs``; threads
work inside a block (the kernels' OpenMP ``prange`` over rows).

Progress: :class:`Progress` shows a tqdm bar (or lines on stderr) with the
time left; ``verbose="auto"`` (the default of the public functions) shows it
only when the cost estimate exceeds :data:`AUTO_PROGRESS_SECONDS`. Ctrl-C:
the kernels return early on SIGINT and :func:`map_blocks` /
:func:`reduce_blocks` stop between blocks, closing the bar.

Layer: execution. Imports the ground floor only (tqdm, optional, by
``_errors.import_optional``); never a game, a public module or an estimator
(they hand their functions down).
"""
import numbers
import sys
import time

import numpy as np

from .._errors import import_optional
from .._numerics import merge_statistics
from .._validation import _is_sparse, check_rows
from .cost import format_seconds

__all__ = ["Progress", "map_blocks", "reduce_blocks", "block_rows_for", "prepare_rows",
           "iter_row_blocks", "AUTO_PROGRESS_SECONDS", "check_verbose"]

#: ``verbose="auto"`` shows progress when the work is estimated to take longer
AUTO_PROGRESS_SECONDS = 10.0

#: single-thread seconds of work per block of rows (the block size comes from the
#: model's cost per row, not from the thread count)
BLOCK_SECONDS = 4.0


def check_verbose(verbose):
    """``verbose``: "auto", or an int / bool (0, False or None: silent)."""
    if isinstance(verbose, str) and verbose == "auto":
        return verbose
    if verbose is None:
        return 0
    if not isinstance(verbose, (numbers.Integral, np.bool_)):
        raise ValueError(f"verbose must be 'auto' or an integer, got {verbose!r}.")
    return int(verbose)


def shows_progress(verbose, estimate):
    """Whether progress is shown: ``verbose`` >= 1, or "auto" and a long estimate."""
    if isinstance(verbose, str):
        return estimate is not None and estimate > AUTO_PROGRESS_SECONDS
    return bool(verbose)


#: bytes a block's per-row arrays (outputs and temporaries) may hold
BLOCK_BYTES = 1 << 26


def block_rows_for(seconds_per_row, bytes_per_row=0, *, minimum=1, maximum=1 << 30,
                   seconds=None):
    """Rows per block: about ``seconds`` (default :data:`BLOCK_SECONDS`) of one
    thread's work, and no more than :data:`BLOCK_BYTES` of per-row arrays of
    ``bytes_per_row``, within ``[minimum, maximum]``. A function of the
    model's cost and memory per row only (as scikit-learn's
    ``get_chunk_n_rows`` sizes chunks by their memory), never of the threads.
    """
    seconds = BLOCK_SECONDS if seconds is None else seconds
    if seconds_per_row <= 0:
        rows = maximum
    else:
        rows = int(seconds / seconds_per_row)
    if bytes_per_row > 0:
        maximum = min(maximum, max(1, BLOCK_BYTES // int(bytes_per_row)))
    return int(max(minimum, min(maximum, max(1, rows))))


class Progress:
    """Rows done, elapsed time and estimated time left (tqdm when installed).

    ``estimate`` (seconds) is shown before the first chunk ends; afterwards
    the time left is extrapolated from the rows done. ``verbose``: 0 / False
    silent, >= 1 shown, "auto" shown when ``estimate`` exceeds
    :data:`AUTO_PROGRESS_SECONDS`.
    """

    def __init__(self, total, verbose, desc, estimate=None, stream=None):
        self.total = total
        self.verbose = shows_progress(verbose, estimate)
        self.desc = desc
        self.done = 0
        self.start = time.monotonic()
        self.stream = sys.stderr if stream is None else stream
        self.bar = None
        self.closed = False
        if not self.verbose:
            return
        try:
            tqdm = import_optional("tqdm.auto", "A progress bar").tqdm
        except ImportError:  # no tqdm: lines on the stream
            if estimate is not None:
                print(f"{desc}: {total} rows, estimated {format_seconds(estimate)}",
                      file=self.stream, flush=True)
        else:
            # no monitor thread (tqdm's TMonitor): nothing of ours outlives the call
            bar = type("_Bar", (tqdm,), {"monitor_interval": 0})
            self.bar = bar(total=total, desc=desc, unit="row", file=self.stream)

    def update(self, rows):
        if not self.verbose:
            return
        self.done += rows
        if self.bar is not None:
            self.bar.update(rows)
            return
        elapsed = time.monotonic() - self.start
        left = elapsed * (self.total - self.done) / self.done if self.done else float("nan")
        print(f"{self.desc}: {self.done}/{self.total} rows, {format_seconds(elapsed)} elapsed, "
              f"about {format_seconds(left)} left", file=self.stream, flush=True)

    def close(self):
        """End the bar (idempotent); the rows done stay in ``done``."""
        self.closed = True
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def _block_rows(n_features):
    """Rows per dense block of a sparse X: about 4 MB of float64."""
    return int(min(16384, max(64, (1 << 19) // max(1, n_features))))


def iter_row_blocks(ensemble, X, block_rows, rows=None):
    """``(start, stop, block)`` over X: ``block`` checked (:func:`check_rows`).

    A dense X is checked once (unless already, :class:`CheckedRows`) and
    sliced; a sparse X is made dense one block at a time (``min(block_rows,
    ...)`` rows), so memory stays bounded in rows. With ``rows`` (indices),
    the blocks are ``X[rows[start:stop]]``.
    """
    sparse = _is_sparse(X)
    if sparse:
        X = X.tocsr()
        block_rows = min(block_rows, _block_rows(X.shape[1]))
    elif isinstance(X, CheckedRows):
        X = X.array
    else:
        X = check_rows(ensemble, X)
    n_rows = X.shape[0] if rows is None else len(rows)
    for start in range(0, n_rows, block_rows):
        stop = min(start + block_rows, n_rows)
        block = X[start:stop] if rows is None else X[rows[start:stop]]
        yield start, stop, (check_rows(ensemble, block) if sparse
                            else np.ascontiguousarray(block))
    if n_rows == 0:
        yield 0, 0, check_rows(ensemble, X[:0]) if sparse else X[:0]


class CheckedRows:
    """Dense rows already checked for an ensemble (:func:`prepare_rows`)."""

    def __init__(self, array):
        self.array = array
        self.shape = array.shape


def prepare_rows(ensemble, X):
    """X checked once at the public boundary: a dense X (array or frame) as the
    kernels' float64 array (:class:`CheckedRows`), which the executors slice
    without checking again; a sparse X as CSR, checked one dense block at a
    time as it is made dense."""
    if _is_sparse(X):
        return X.tocsr()
    return CheckedRows(check_rows(ensemble, X))


def _concatenate(parts):
    if len(parts) == 1:
        return parts[0]
    if isinstance(parts[0], tuple):
        return tuple(np.concatenate(items, axis=0) for items in zip(*parts))
    return np.concatenate(parts, axis=0)


def map_blocks(function, ensemble, X, *, block_rows, progress=None, game=None,
               row_arguments=None, **kwargs):
    """``function(game, rows, **kwargs)`` over fixed blocks of X, concatenated.

    ``game`` is what the block function computes on (default: ``ensemble``;
    e.g. a piecewise-linear game built from background rows). ``rows`` are
    checked for ``ensemble`` (:func:`~.._validation.check_rows`: a dense X
    once, a sparse X one dense block at a time); ``row_arguments`` (a dict of
    arrays with one entry per row of X, or None values) are passed to
    ``function`` cut to the block's rows. Results -- arrays, or tuples of
    arrays -- are concatenated along the rows in block order. ``progress``
    is updated after every block and closed at the end, also when a block
    raises (Ctrl-C: the kernels return early on SIGINT and the
    KeyboardInterrupt leaves between blocks).
    """
    parts = []
    game = ensemble if game is None else game
    row_arguments = row_arguments or {}
    try:
        for start, stop, rows in iter_row_blocks(ensemble, X, max(1, int(block_rows))):
            cut = {name: None if values is None else values[start:stop]
                   for name, values in row_arguments.items()}
            parts.append(function(game, rows, **cut, **kwargs))
            if progress is not None:
                progress.update(stop - start)
    finally:
        if progress is not None:
            progress.close()
    return _concatenate(parts)


def reduce_blocks(function, ensemble, X, *, block_rows, rows=None, progress=None):
    """``function(start, stop, block)`` over fixed blocks of X, merged in block order.

    ``function`` returns a dict of statistics (numbers and arrays that add up,
    :class:`~.._numerics.Moments`); ``rows`` (sorted indices) restricts the
    blocks to ``X[rows]`` (``start``/``stop`` then index ``rows``). Returns
    None when there is no row. ``progress`` is closed at the end, as in
    :func:`map_blocks`.
    """
    merged = None
    try:
        for start, stop, block in iter_row_blocks(ensemble, X, max(1, int(block_rows)), rows):
            if start == stop:
                break
            statistics = function(start, stop, block)
            merged = statistics if merged is None else merge_statistics(merged, statistics)
            if progress is not None:
                progress.update(stop - start)
    finally:
        if progress is not None:
            progress.close()
    return merged
