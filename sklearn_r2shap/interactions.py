"""SHAP interaction values of tree models (the path-dependent game).

The exact Shapley interaction values of TreeSHAP's game (documentation page
"Local attributions", section "Interaction values"), laid out as XGBoost's
``pred_interactions``. The game (the plan of the call, the block function)
is :mod:`._games.interactions`; this module prepares the call and hands the
game to the executor, as :func:`~sklearn_r2shap.shap_values` does.

Layer: public functions. Imports ``_prepare``, ``_games``, ``_execution``;
never an estimator.
"""

from dataclasses import replace

import numpy as np

from ._execution.cost import semivalue_seconds
from ._execution.run import map_rows
from ._games.interactions import InteractionGame, game_values
from ._prepare import prepare

__all__ = ["shap_interaction_values"]

# Rows per block (and per task of a dask array) are bounded so that a block's
# output stays below this.
_BLOCK_OUTPUT_BYTES = 1 << 26


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
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
        Rows to explain. NaN is allowed where the model accepts it.
    n_jobs : int, default=None
        Threads; None uses all cores. The values do not depend on it (bit
        for bit).
    verbose : "auto" or int, default="auto"
        Progress, as in :func:`shap_values`.

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
    >>> import numpy as np
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
    bound = max(1, _BLOCK_OUTPUT_BYTES // (8 * int(np.prod(shape))))
    rows = call.rows
    if call.dask and hasattr(rows, "rechunk"):  # a dask array: bounded blocks
        known = all(np.isfinite(c) for c in rows.chunks[0])
        if known and len(rows.chunks[0]) and max(rows.chunks[0]) > bound:
            call = replace(call, rows=rows.rechunk({0: bound}))
    # in memory, one plan for every block; a dask partition plans its own rows
    extra = {"route": route} if call.dask else {
        "game": InteractionGame(ensemble, call.n_rows, route=route)}
    return map_rows(call, game_values, trailing_shape=shape, desc="SHAP interaction values",
                    seconds_per_row=semivalue_seconds(ensemble, ensemble.n_path_features),
                    max_block_rows=bound, **extra)
