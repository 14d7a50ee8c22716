"""Semivalues of the interventional game, with background data.

For background rows b in B, the interventional game of a row x is
``v_x(S) = mean over b of f(z)`` with ``z_S = x_S`` and ``z_rest = b_rest``
(Janzing et al. 2020; shap's ``feature_perturbation="interventional"``), every
split decided on the hybrid row z (documentation page "Path-dependent and
interventional values"). Its expected value ``v_x(empty)`` is the mean raw
prediction over B.

The kernel (``_kernels/_interventional.pyx``, where the closed form is
derived) summarises the background once per tree: for every leaf, a histogram
of the patterns of path conditions the background rows satisfy, turned into a
table of the leaf's values for each pattern a row can have. A row then reads
one table row per leaf, so the cost grows with rows + background rows, not
their product. Supported semivalues: Shapley, Beta Shapley (alpha, beta) and
weighted Banzhaf (q): every semivalue whose coalition weight is an integral
``int t^s (1 - t)^(n-1-s) dmu(t)``, as the kernel needs.

:func:`shap_values`, :func:`beta_shapley_values` and :func:`banzhaf_values`
of :mod:`~sklearn_r2shap.attributions` call :func:`interventional_values` when
given ``background``.

The game (the background's summary, the block function) lives in
:mod:`._games.interventional`; this module prepares the call
(:func:`._prepare.prepare`), builds the game and hands it to the executor.

Layer: public functions. Imports ``_prepare``, ``_games``, ``_execution``
and the ground floor; never another public module or an estimator.
"""

import hashlib
import math

from ._execution.cost import semivalue_seconds
from ._execution.run import map_rows
from ._games.interventional import InterventionalGame, game_values
from ._games.semivalues import PREPARED_ROWS
from ._model import is_prepared
from ._prepare import prepare
from ._validation import check_semivalue, resolve_n_jobs

__all__ = ["interventional_values"]

def interventional_values(model, X, background, *, semivalue="shapley", q=0.5, alpha=1, beta=1,
                          n_jobs=None, verbose="auto"):
    """Exact semivalues of the interventional game of every row of X.

    ``v_x(S) = mean over background rows b of f(z)``, ``z_S = x_S``,
    ``z_rest = b_rest``, in the model's raw (margin) space. Called by
    :func:`~sklearn_r2shap.shap_values`, :func:`~sklearn_r2shap.beta_shapley_values`
    and :func:`~sklearn_r2shap.banzhaf_values` given ``background``.

    Parameters
    ----------
    model : fitted tree model
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
    background : array-like, DataFrame or sparse matrix of shape (n_background, n_features)
        In memory (a dask collection is refused: compute a sample of it).
    semivalue : {"shapley", "banzhaf", "weighted_banzhaf", "beta"}, default="shapley"
        Shapley values, Banzhaf values, weighted Banzhaf values with
        parameter ``q`` or Beta Shapley values with parameters
        ``(alpha, beta)``.
    q : float in (0, 1), default=0.5
        Only for ``semivalue="weighted_banzhaf"``.
    alpha, beta : int >= 1, default=1
        Only for ``semivalue="beta"``.
    n_jobs : int, default=None
    verbose : "auto" or int, default="auto"
        Progress, as in :func:`~sklearn_r2shap.shap_values`.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        The values, the mean raw prediction over the background last.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from sklearn_r2shap.interventional import interventional_values
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4))
    >>> model = GradientBoostingRegressor(n_estimators=20, random_state=0).fit(X, X[:, 0] * X[:, 1])
    >>> phi = interventional_values(model, X[:5], X[100:])
    >>> bool(np.allclose(phi.sum(axis=1), model.predict(X[:5])))
    True
    >>> bool(np.isclose(phi[0, -1], model.predict(X[100:]).mean()))
    True
    """
    if background is None:
        raise ValueError("background must be given (rows, as X).")
    family, parameters = check_semivalue(semivalue, q=q, alpha=alpha, beta=beta)
    call = prepare(model, X, background=background, n_jobs=n_jobs, verbose=verbose)
    return values_of(call, family, parameters)


def values_of(call, family, parameters, *, desc="Interventional values", route=None):
    """The interventional values of a prepared call (:class:`._prepare.Call` with
    a background) of a checked semivalue ``(family, parameters)``
    (:func:`._validation.check_semivalue`): the game built once for all rows
    (``route`` forces one of :data:`._games.interventional.ROUTES`), run on
    the executor."""
    ensemble = call.ensemble
    # built once here, on n_jobs threads of this machine (None: all its cores),
    # for the rows one plan serves (a dask X: any number, in its partitions)
    n_threads = resolve_n_jobs(call.n_jobs)
    n_rows = call.rows_per_plan
    if is_prepared(ensemble) and math.isfinite(n_rows):
        # an explainer's: the background summarised once, for many rows, and kept
        key = ("interventional game", family, tuple(parameters), route,
               hashlib.blake2b(call.background.tobytes(), digest_size=16).digest(),
               call.background.shape)
        game = ensemble.cached(key, lambda: InterventionalGame(
            ensemble, call.background, family, parameters, PREPARED_ROWS, n_threads, route=route))
    else:
        game = InterventionalGame(ensemble, call.background, family, parameters, n_rows,
                                  n_threads, route=route)
    if not math.isfinite(n_rows) and len(game.groups) == 1:
        game._summary(0, n_threads)  # once, before the game is shipped
    # a summary group's tables are rebuilt per block when there are several:
    # blocks of many rows, bounded by the memory of their values (the game's
    # values and the block's output: two doubles per row, output and column)
    return map_rows(call, game_values, game=game, trailing_shape=call.trailing_shape(
        ensemble.n_features + 1), desc=desc, seconds_per_row=semivalue_seconds(ensemble, 1),
        bytes_per_row=16 * ensemble.n_outputs * (ensemble.n_features + 1))
