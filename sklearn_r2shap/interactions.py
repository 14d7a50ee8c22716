"""SHAP interaction values of tree models (the path-dependent game).

The exact Shapley interaction values of TreeSHAP's game (documentation page
"Local attributions", section "Interaction values"), laid out as XGBoost's
``pred_interactions``. The game (the plan of the call, the block function)
is :mod:`._games.interactions`; this module prepares the call and hands the
game to the executor, as :func:`~sklearn_r2shap.shap_values` does.

Layer: public functions. Imports ``_prepare``, ``_games``, ``_execution``;
never an estimator.
"""

from dataclasses import dataclass
import functools
import numbers

import numpy as np

from ._errors import import_optional
from ._numerics import DyadicSum
from ._execution import local as _local
from ._execution.cost import semivalue_seconds
from ._execution.run import estimate_seconds, map_rows, reduce_rows
from ._games.interactions import InteractionGame, game_values, interaction_sums
from ._prepare import prepare, row_argument
from ._validation import check_row_weights
from .plotting import plot_heatmap

__all__ = ["shap_interaction_values", "shap_interaction_summary", "InteractionSummary"]

def shap_interaction_values(model, X, *, n_jobs=None, verbose="auto"):
    """Exact SHAP interaction values of the path-dependent game of every row.

    For a row x, v = v_x the path-dependent game (TreeSHAP's) and M features,
    the pairwise values are (Lundberg et al. 2020, eq. 8)

    ``Phi_ij = sum over S in N \\ {i, j} of |S|! (M - |S| - 2)! / (2 (M - 1)!)
    * [v(S + i + j) - v(S + i) - v(S + j) + v(S)]``

    for ``i != j`` (so ``Phi_ij = Phi_ji``, and the pair's total interaction
    is ``Phi_ij + Phi_ji``), and the main effects ``Phi_ii = phi_i - sum_{j != i}
    Phi_ij`` with ``phi`` the SHAP values: row ``j`` of a matrix sums to
    :func:`shap_values`' ``j``-th value, the whole matrix to the raw prediction.
    Exact at any depth: per tree, Gauss-Legendre quadrature of the second
    derivatives of the game's multilinear extension.

    Parameters
    ----------
    model, X, n_jobs, verbose
        The model, the rows to explain, threads and progress, as in
        :func:`shap_values` (the values do not depend on ``n_jobs``, bit for bit).

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1, n_features + 1) or (n_rows, n_outputs, n_features + 1, n_features + 1)
        As XGBoost's ``pred_interactions``: ``[i, j]`` the values above, the
        last row and column 0 but for the corner, the expected value
        ``v_x(empty)``. Models with several outputs (multiclass) have the
        output axis after the rows, as in :func:`shap_values`. Values are in
        the model's raw (margin) space. The result takes
        ``8 * n_outputs * (n_features + 1)**2`` bytes per row (3.5 kB for 20
        features, 82 kB for 100, 8 MB for 1,000); a dask collection gives a
        lazy dask array whose blocks are the row blocks of ``X``, a dask
        array's rows rechunked so that a block's output stays under 64 MB.

    See Also
    --------
    shap_values : the SHAP values, the row sums of these matrices.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from sklearn_r2shap import shap_interaction_values, shap_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = GradientBoostingRegressor(n_estimators=20, max_depth=3).fit(X, y)
    >>> phi = shap_interaction_values(model, X[:5])
    >>> phi.shape
    (5, 11, 11)
    >>> bool(np.allclose(phi, phi.transpose(0, 2, 1)))
    True
    >>> bool(np.allclose(phi.sum(axis=2), shap_values(model, X[:5])))
    True
    >>> bool(np.allclose(phi.sum(axis=(1, 2)), model.predict(X[:5])))
    True
    """
    return interaction_values(model, X, n_jobs=n_jobs, verbose=verbose)


def interaction_values(model, X, *, n_jobs=None, verbose="auto", route=None):
    """:func:`shap_interaction_values`, with the ``route`` of the game
    (:data:`._games.interactions.ROUTES`; None chooses by cost)."""
    return _interaction_values(prepare(model, X, n_jobs=n_jobs, verbose=verbose), route=route)


def _interaction_values(call, *, route=None):
    """The interaction values of a prepared call (``route``: one of
    :data:`._games.interactions.ROUTES`, or None to choose by cost)."""
    ensemble = call.ensemble
    width = ensemble.n_features + 1
    shape = call.trailing_shape(width, width)
    # one plan for every row in memory; a dask partition plans its own rows
    return map_rows(call, game_values, trailing_shape=shape, desc="SHAP interaction values",
                    seconds_per_row=semivalue_seconds(ensemble, ensemble.n_path_features),
                    bytes_per_row=8 * int(np.prod(shape)),
                    plan=functools.partial(InteractionGame, route=route))


@dataclass(repr=False)
class InteractionSummary:
    """Means over rows of SHAP interaction values (:func:`shap_interaction_summary`).

    Attributes
    ----------
    mean_abs, mean, mean_square : ndarray of shape (n_features + 1, n_features + 1) or (n_outputs, n_features + 1, n_features + 1)
        The (weighted) means over rows of ``|Phi_jk|``, ``Phi_jk`` and
        ``Phi_jk^2``, laid out as :func:`shap_interaction_values`' matrices
        (the last row and column: the expected value's). A pair's total
        interaction in a row is ``Phi_jk + Phi_kj = 2 Phi_jk``.
    n_rows : int
        Rows summarised.
    total_weight : float
        The sum of ``sample_weight`` (``n_rows`` without it).
    feature_names : ndarray of str
        The features' names (X's columns, else the model's, else ``x0``, ...).
    """

    mean_abs: np.ndarray
    mean: np.ndarray
    mean_square: np.ndarray
    n_rows: int
    total_weight: float
    feature_names: np.ndarray

    def top_pairs(self, n=10, by="mean_abs", class_index=0):
        """The ``n`` pairs of distinct features of largest ``by`` (one of
        "mean_abs", "mean_square", "mean": largest absolute mean), as a
        pandas DataFrame with columns ``feature_1``, ``feature_2``,
        ``mean_abs``, ``mean``, ``mean_square`` (the cells ``[j, k]``);
        ``class_index``: the model output (class) of a multi-output model."""
        if by not in ("mean_abs", "mean", "mean_square"):
            raise ValueError(f"by must be 'mean_abs', 'mean' or 'mean_square', got {by!r}.")
        pd = import_optional("pandas", "InteractionSummary.top_pairs()")
        cells = {key: self._output(getattr(self, key), class_index)[:-1, :-1]
                 for key in ("mean_abs", "mean", "mean_square")}
        j, k = np.triu_indices(len(self.feature_names), 1)
        key = np.abs(cells[by][j, k])
        order = np.argsort(-key, kind="mergesort")[:n]
        names = np.asarray(self.feature_names)
        return pd.DataFrame({"feature_1": names[j[order]], "feature_2": names[k[order]],
                             **{c: cells[c][j[order], k[order]] for c in cells}})

    def plot(self, ax=None, max_features=20, by="mean_abs", class_index=0):
        """Heatmap of ``by`` over the features of the largest row sums
        (matplotlib); the diagonal holds the main effects; ``class_index``:
        the model output (class) of a multi-output model."""
        matrix = self._output(getattr(self, by), class_index)[:-1, :-1]
        return plot_heatmap(matrix, self.feature_names, ax=ax, max_features=max_features,
                            label=f"{by} of SHAP interaction values",
                            title=f"SHAP interaction values over {self.n_rows} rows")

    def _output(self, values, class_index):
        n_outputs = 1 if values.ndim == 2 else len(values)
        if not (isinstance(class_index, numbers.Integral) and 0 <= class_index < n_outputs):
            raise ValueError(f"class_index must be an integer in [0, {n_outputs}) (the model's "
                             f"outputs), got {class_index!r}.")
        return values if values.ndim == 2 else values[class_index]

    def __repr__(self):
        pairs = self.mean_abs if self.mean_abs.ndim == 2 else self.mean_abs[0]
        j, k = np.unravel_index(np.argmax(np.abs(np.triu(pairs[:-1, :-1], 1))),
                                pairs[:-1, :-1].shape)
        top = (f"; largest mean |Phi_jk| of a pair: {pairs[j, k]:.4g} "
               f"({self.feature_names[j]}, {self.feature_names[k]})") if len(pairs) > 2 else ""
        return (f"InteractionSummary: {self.n_rows} rows, {len(self.feature_names)} "
                f"features{top}")


def shap_interaction_summary(model, X, *, sample_weight=None, n_jobs=None, verbose="auto"):
    """Means over rows of SHAP interaction values, in (n_features + 1)^2 memory.

    The weighted means over rows of ``|Phi_jk|``, ``Phi_jk`` and ``Phi_jk^2``
    of :func:`shap_interaction_values`, computed block by block (a dask
    collection: partition by partition on its workers) without the
    ``(n_rows, n_features + 1, n_features + 1)`` array: 1,000,000 rows of 100
    features would take 82 GB at once. Sums over rows are pairwise over the
    rows' indices (``DyadicSum``), so the result is bit-identical for any
    ``n_jobs``, block sizes and dask partitions, and equal to reducing the
    full array up to rounding.

    Parameters
    ----------
    model : fitted tree model
        As :func:`shap_interaction_values`.
    X : array-like, DataFrame, sparse matrix, dask Array, dask DataFrame or Spark DataFrame of shape (n_rows, n_features)
        Rows to summarise (a dask collection or a Spark DataFrame: partition
        by partition on its workers; only the sums come back).
    sample_weight : array-like of shape (n_rows,) or str, default=None
        Non-negative row weights (a dask X takes a dask array or Series of
        the same partitions, or an in-memory array; a Spark DataFrame the
        name of its weight column); None weighs rows equally.
    n_jobs : int, default=None
        Threads; None uses all cores. The result does not depend on it.
    verbose : "auto" or int, default="auto"
        Progress, as in :func:`shap_values`.

    Returns
    -------
    InteractionSummary
        ``mean_abs``, ``mean``, ``mean_square`` (each as one matrix of
        :func:`shap_interaction_values`), ``top_pairs()`` and ``plot()``.

    See Also
    --------
    shap_interaction_values : the matrices of every row.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from sklearn_r2shap import shap_interaction_summary, shap_interaction_values
    >>> X, y = load_diabetes(return_X_y=True, as_frame=True)
    >>> model = GradientBoostingRegressor(n_estimators=20, max_depth=3).fit(X, y)
    >>> summary = shap_interaction_summary(model, X)
    >>> summary.mean_abs.shape
    (11, 11)
    >>> full = shap_interaction_values(model, X)
    >>> bool(np.allclose(summary.mean_abs, np.abs(full).mean(axis=0)))
    True
    >>> list(summary.top_pairs(2).columns)
    ['feature_1', 'feature_2', 'mean_abs', 'mean', 'mean_square']
    """
    call = prepare(model, X, n_jobs=n_jobs, verbose=verbose)
    ensemble = call.ensemble
    width = ensemble.n_features + 1
    row_bytes = 8 * ensemble.n_outputs * width * width
    seconds_per_row = semivalue_seconds(ensemble, ensemble.n_path_features)
    # a block's matrices and the two temporaries of their sums (a budget of 16 MB
    # made blocks of 68 rows of 100 features, half as fast: each block pays the
    # kernels' per-call work)
    block_rows = _local.block_rows_for(seconds_per_row, 3 * row_bytes)
    game = InteractionGame(ensemble, call.n_rows)
    sums = reduce_rows(
        call, _part_sums, payload=(game, block_rows),
        arguments={"sample_weight": row_argument(call, sample_weight, "sample_weight")},
        desc="SHAP interaction summary",
        estimate=estimate_seconds(call, seconds_per_row))
    total_weight = float(sums["weight"].total())
    if not total_weight > 0:
        raise ValueError("sample_weight is zero for every row: no row counts.")
    means = {key: sums[key].total() / total_weight for key in ("abs", "sum", "square")}
    names = (np.asarray(call.names, dtype=object) if call.names is not None
             else np.array([f"x{j}" for j in range(ensemble.n_features)], dtype=object))
    return InteractionSummary(means["abs"], means["sum"], means["square"],
                              n_rows=sums["weight"].n_rows, total_weight=total_weight,
                              feature_names=names)


def _part_sums(payload, rows, start, subset, arguments, *, n_threads, progress=None):
    """One part's sums (a part function of :func:`._execution.run.reduce_rows`),
    in blocks of rows."""
    game, block_rows = payload
    weight = arguments["sample_weight"]
    if weight is not None:
        weight = check_row_weights(weight, rows.shape[0], partition_of="X")
    sums = _local.reduce_blocks(
        lambda first, stop, block: interaction_sums(
            game, start + first, block, None if weight is None else weight[first:stop],
            n_threads=n_threads),
        game.ensemble, rows, block_rows=block_rows, progress=progress)
    if sums is None:  # an empty partition
        empty = DyadicSum({})
        return {"weight": empty, "sum": empty, "abs": empty, "square": empty}
    return sums
