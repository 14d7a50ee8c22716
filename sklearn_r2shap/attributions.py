"""Per-row attributions of tree models: SHAP, Saabas, Banzhaf, Beta Shapley.

Every function returns the attributions of the path-dependent game
(documentation page "Local attributions") as a float64 array of shape
``(n_rows, n_features + 1)``, the last column the expected value
``v_x(empty)`` with the model's base value included, or
``(n_rows, n_outputs, n_features + 1)`` for models with several outputs
(multiclass). Values are in the model's raw (margin) space. A dask array or
dask DataFrame of rows gives a lazy dask array of the same row blocks; a
Spark DataFrame, a lazy Spark DataFrame of the same partitions.

Each function validates its arguments, converts the model once and hands a
block function of :mod:`._games.semivalues` to an executor
(:mod:`._execution.local`: fixed blocks of rows; :mod:`._execution.dask`
and :mod:`._execution.spark`: partitions), which checks the rows and runs it.

Layer: public functions. Imports the layers below (ground floor, ``_model``,
``_games``, ``_execution``); never an estimator.
"""
import functools

import numpy as np

from . import _pipeline
from . import interventional as _interventional
from ._execution.cost import semivalue_seconds
from ._execution.run import map_rows
from ._games import semivalues as _games
from ._model import to_ensemble
from ._numerics import beta_quadrature
from ._prepare import prepare
from ._validation import check_semivalue

__all__ = ["shap_values", "saabas_values", "banzhaf_values", "beta_shapley_values",
           "probabilistic_values"]


def _banzhaf_rule(q, degree):
    """grad F(q 1): one point, exact for any degree."""
    return np.array([q]), np.array([1.0])


def semivalues(model, X, *, semivalue="shapley", q=0.5, alpha=1, beta=1, background=None,
               feature_groups=None, n_jobs=None, verbose="auto", route=None):
    """The one function behind :func:`shap_values`, :func:`beta_shapley_values`
    and :func:`banzhaf_values` (and ``TreeGradRanker.values``).

    ``semivalue``: one of ``"shapley"``, ``"banzhaf"``, ``"weighted_banzhaf"``
    (with ``q``) or ``"beta"`` (with ``alpha`` and ``beta``), checked by
    :func:`._validation.check_semivalue`. The path-dependent game, or with
    ``background`` the interventional one; ``route`` forces a route of the
    game (:data:`._games.semivalues.ROUTES`, or with ``background``
    :data:`._games.interventional.ROUTES`; tests check each).
    """
    family, parameters = check_semivalue(semivalue, q=q, alpha=alpha, beta=beta)
    call = prepare(model, X, feature_groups=feature_groups, background=background, n_jobs=n_jobs,
                   verbose=verbose)
    return semivalues_of(call, family, parameters, route=route)


def semivalues_of(call, family="beta", parameters=(1, 1), *, route=None):
    """The semivalues of a prepared call (:func:`._prepare.prepare`): the
    interventional game when it has a background, else the path-dependent
    one; one column per player, the expected value last. ``(family,
    parameters)``: a checked semivalue (:func:`._validation.check_semivalue`;
    the default is Shapley's)."""
    if family == "banzhaf":
        desc = "Banzhaf values"
    elif tuple(parameters) == (1, 1):
        desc = "SHAP values"
    else:
        desc = "Beta({}, {}) Shapley values".format(*parameters)
    if call.background is not None:
        return call.players_only(_interventional.values_of(call, family, parameters, desc=desc,
                                                           route=route))
    rule_of = (functools.partial(_banzhaf_rule, *parameters) if family == "banzhaf" else
               functools.partial(beta_quadrature, *parameters))
    return call.players_only(path_dependent_semivalues(call, rule_of, desc, route=route))


def path_dependent_semivalues(call, rule_of, desc, *, route=None):
    """Quadrature semivalues of every row of a prepared call; ``rule_of(degree)``:
    the points and weights exact for polynomials of that degree (the
    ensemble's rule for degree ``n_path_features - 1``; trees and leaves of
    fewer distinct path features take smaller rules)."""
    ensemble = call.ensemble
    # the game's plan is kept with the ensemble; tables built once for X's rows
    # (a dask partition: for its own rows)
    return map_rows(call, _games.uniform_semivalues, plan=functools.partial(
        _games.semivalue_game, rule_of=rule_of, route=route),
                    trailing_shape=call.trailing_shape(ensemble.n_features + 1), desc=desc,
                    seconds_per_row=lambda game: game.seconds_per_row())


def expected_value(model):
    """v_x(empty): the base value plus each tree's cover-weighted mean, per output."""
    return _games.expected_values(to_ensemble(_pipeline.final_step(model)))


def shap_values(model, X, *, background=None, feature_groups=None, n_jobs=None, verbose="auto"):
    """Exact SHAP values of every row: path-dependent (TreeSHAP's game), or
    interventional given ``background``.

    Parameters
    ----------
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like, DataFrame, sparse matrix, dask Array, dask DataFrame or Spark DataFrame of shape (n_rows, n_features)
        Rows to explain. NaN is allowed where the model accepts it. A Spark
        DataFrame (or ``sklearn_r2shap.spark.SparkRows``, naming its
        feature columns, the columns kept and the layout) gives a lazy Spark
        DataFrame of the kept columns and the values (page :ref:`spark`).
    background : array-like, DataFrame or sparse matrix of shape (n_background, n_features), default=None
        If given, the Shapley values of the interventional game
        ``v_x(S) = mean over background rows b of f(x_S, b_rest)``
        (``sklearn_r2shap.interventional``, page "Path-dependent and
        interventional values"); the expected value is then the mean raw
        prediction over the background. Cost linear in rows + background rows.
    feature_groups : mapping or "input", default=None
        Feature groups as players: a mapping of group name to columns (names
        or indices; a column in at most one group, every other column a
        player of its own, after the groups). The values are the exact
        Shapley values of the game whose players are the groups (page
        :ref:`explanations`), not sums of the members' values. ``"input"``:
        for a Pipeline, each input column's transformed columns (e.g. its
        one-hot columns) form its group. With ``background``, the
        interventional game of the groups: a hybrid row takes a group's
        columns all from x or all from the background row. The result then
        has one column per player, the expected value last (:func:`explain`
        names them).
    n_jobs : int, default=None
        Threads; None uses all cores. The values do not depend on it (bit
        for bit).
    verbose : "auto" or int, default="auto"
        Progress with the estimated time left (a tqdm bar where tqdm is
        installed, else lines on stderr): "auto" shows it when the work is
        estimated to take more than about 10 seconds, 0 never, 1 always.
        Not for a dask X (use dask's dashboard).

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        Shapley values, the expected value last; a row sums to the model's
        raw prediction. For a dask X, a lazy dask array; for a Spark
        DataFrame, a lazy Spark DataFrame (the same values, bit for bit).

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import shap_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    >>> phi = shap_values(model, X[:5])
    >>> phi.shape
    (5, 11)
    >>> bool(np.allclose(phi.sum(axis=1), model.predict(X[:5])))
    True
    """
    return semivalues(model, X, background=background, feature_groups=feature_groups, n_jobs=n_jobs,
                      verbose=verbose)


def beta_shapley_values(model, X, *, alpha=1, beta=1, background=None, feature_groups=None,
                        n_jobs=None, verbose="auto"):
    """Exact Beta(alpha, beta) Shapley values of the path-dependent game.

    The semivalue with weights ``w(s) = B(s + beta, n - 1 - s + alpha) / B(alpha, beta)``
    (documentation page "Local attributions"): (1, 1) is Shapley, (16, 1) weights small
    coalitions, (1, 16) large ones. Computed by TreeGrad-Shap: Gauss quadrature
    of the multilinear extension's gradient against the Beta density, stable
    at any depth; the cost does not depend on ``alpha`` and ``beta``.

    Parameters
    ----------
    model, X, background, feature_groups, n_jobs, verbose
        As in :func:`shap_values`: with ``background``, the values of the
        interventional game; with ``feature_groups``, the exact values of the
        game whose players are the groups.
    alpha, beta : int >= 1, default=1
        The parameters of the Beta density of the weights.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        The values, the expected value ``v_x(empty)`` last.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from sklearn_r2shap import beta_shapley_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    >>> beta_shapley_values(model, X[:3], alpha=16, beta=1).shape
    (3, 11)
    """
    return semivalues(model, X, semivalue="beta", alpha=alpha, beta=beta, background=background,
                      feature_groups=feature_groups, n_jobs=n_jobs, verbose=verbose)


def banzhaf_values(model, X, *, q=0.5, background=None, feature_groups=None, n_jobs=None,
                   verbose="auto"):
    """Exact weighted Banzhaf values ``grad F(q 1)`` of the path-dependent game.

    Weights ``w(s) = q^s (1 - q)^(n - 1 - s)``; ``q = 0.5`` is the Banzhaf value.

    Parameters
    ----------
    model, X, background, feature_groups, n_jobs, verbose
        As in :func:`beta_shapley_values`.
    q : float in (0, 1), default=0.5
        The probability of each other player in a coalition.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        The values, the expected value ``v_x(empty)`` last (Banzhaf values
        need not add up to the prediction).

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import banzhaf_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = DecisionTreeRegressor(max_depth=2, random_state=0).fit(X, y)
    >>> banzhaf_values(model, X[:2], q=0.2).shape
    (2, 11)
    """
    return semivalues(model, X, semivalue="weighted_banzhaf", q=q, background=background,
                      feature_groups=feature_groups, n_jobs=n_jobs, verbose=verbose)


def saabas_values(model, X, *, n_jobs=None, verbose="auto"):
    """Saabas path contributions (XGBoost's ``approx_contribs``).

    Along the row's decision path, the change of the node's cover-weighted
    mean is credited to the node's split feature.

    Parameters
    ----------
    model : fitted tree model
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
    n_jobs : int, default=None
    verbose : "auto" or int, default="auto"
        As in :func:`shap_values`.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        Contributions, the expected value last; a row sums to the raw prediction.

    Examples
    --------
    >>> from sklearn.datasets import make_regression
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from sklearn_r2shap import saabas_values
    >>> X, y = make_regression(n_samples=200, n_features=4, noise=1.0, random_state=0)
    >>> model = GradientBoostingRegressor(n_estimators=10, max_depth=2, random_state=0)
    >>> contributions = saabas_values(model.fit(X, y), X[:4])
    >>> bool(np.allclose(contributions.sum(axis=1), model.predict(X[:4])))
    True
    """
    call = prepare(model, X, n_jobs=n_jobs, verbose=verbose)
    return map_rows(call, _games.saabas, trailing_shape=call.trailing_shape(
        call.ensemble.n_features + 1), desc="Saabas values",
        seconds_per_row=semivalue_seconds(call.ensemble, 1))


def predict_raw(model, X, *, n_jobs=None, verbose="auto"):
    """The ensemble's raw (margin) prediction, shape (n_rows, n_outputs).

    ``verbose``: progress, as in :func:`shap_values`.

    Examples
    --------
    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> from sklearn_r2shap import predict_raw
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(X, y)
    >>> margin = predict_raw(model, X)
    >>> margin.shape, bool(np.allclose(margin[:, 0], model.decision_function(X)))
    ((569, 1), True)
    """
    call = prepare(model, X, n_jobs=n_jobs, verbose=verbose)
    return map_rows(call, _games.predict_raw, trailing_shape=(call.ensemble.n_outputs,),
                    desc="Raw predictions", seconds_per_row=semivalue_seconds(call.ensemble, 1))


def probabilistic_values(model, X, weights, *, feature_groups=None, n_jobs=None, verbose="auto"):
    """Any probabilistic value (semivalue) of the path-dependent game, by TreeProb.

    ``phi_i = sum over S in N \\ {i} of weights[|S|] * (v_x(S + i) - v_x(S))``
    with n = ``n_features`` players (page "Local attributions"); ``weights[s]``
    weighs every coalition of size s. Shapley: ``s! (n-1-s)! / n!``; weighted
    Banzhaf: ``q^s (1-q)^(n-1-s)``. The weights make a probabilistic value
    when ``sum_s C(n-1, s) weights[s] = 1``; other scalings scale the result.

    TreeProb (treegrad-ranker, Algorithm 4) encodes each tree's polynomials by
    their values at the M-th roots of unity, ``M = min(tree depth, n_features)``.
    That encoding alone is not stable: padding every leaf's polynomial to
    degree M multiplies rounding errors by about ``2^M / M`` (measured on deep
    caterpillar trees: relative errors ~2e-12 at M = 20, ~5e-9 at M = 30,
    ~4e-3 at M = 50, 0.1-14 at M = 60-64). So it is used only for trees with
    ``M <= 24``. Deeper trees go to the quadrature kernel of
    :func:`beta_shapley_values` with a rule built for the weights:
    ``phi_i = L(d_i F_x(t 1))`` for the linear functional L with
    ``L(t^s (1-t)^(n-1-s)) = weights[s]``, and interpolatory quadrature on
    ``P`` Gauss-Legendre nodes (P the most distinct features on a path)
    reproduces L on the gradient exactly; its coefficients are computed in
    exact rational arithmetic. This is accurate to ~1e-14 at any depth as long
    as the rule's coefficients do not alternate wildly (their absolute sum at
    most 1e4 times their sum; true of Shapley, Beta Shapley, Banzhaf and
    smooth weight vectors with up to ~64 distinct features on a path: beyond
    that the rounding of the float weights themselves, magnified about
    ``2^P``-fold, can make even Shapley's rule alternate, while exact powers
    of two such as the Banzhaf weights stay fine). When they do and a tree
    needs ``M > 30`` roots, an
    :class:`UnsupportedModelError` is raised rather than returning inaccurate
    values; between 25 and 30 roots TreeProb is used (errors up to ~1e-8).

    Parameters
    ----------
    model : fitted tree model
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
        The model and the rows to explain, as in :func:`shap_values`.
    weights : array-like of shape (n_features,) or (n_players,)
        Non-negative weight of a coalition of each size s = 0..n-1, n the
        number of players: the features, or with ``feature_groups`` the groups
        (then the columns in no group, each a player of its own).
    feature_groups : mapping or "input", default=None
        Feature groups as players (see :func:`shap_values`): the exact values
        of the game whose n players are the groups, with ``weights`` over
        coalitions of groups. The result has one column per player, the
        expected value last.
    n_jobs : int, default=None
        Threads; None uses all cores.
    verbose : "auto" or int, default="auto"
        As in :func:`shap_values`.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        The values, the expected value ``v_x(empty)`` last.

    Raises
    ------
    UnsupportedModelError
        If a tree needs more than 30 roots of unity and the quadrature rule of
        the weights amplifies rounding errors more than 1e4-fold.

    See Also
    --------
    beta_shapley_values, banzhaf_values : the numerically stable special cases.

    Examples
    --------
    >>> from math import comb
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import probabilistic_values, shap_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    >>> n = X.shape[1]
    >>> shapley = [1 / (n * comb(n - 1, s)) for s in range(n)]
    >>> phi = probabilistic_values(model, X[:3], shapley)
    >>> phi.shape
    (3, 11)
    >>> bool(np.allclose(phi, shap_values(model, X[:3])))
    True

    With groups, n counts the players: two groups and the 6 other columns.

    >>> groups = {"blood": [4, 5, 6, 7, 8, 9], "body": [2, 3]}
    >>> shapley = [1 / (4 * comb(3, s)) for s in range(4)]
    >>> phi = probabilistic_values(model, X[:3], shapley, feature_groups=groups)
    >>> phi.shape
    (3, 5)
    >>> bool(np.allclose(phi, shap_values(model, X[:3], feature_groups=groups)))
    True
    """
    call = prepare(model, X, feature_groups=feature_groups, n_jobs=n_jobs, verbose=verbose)
    n_players = call.n_players
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (n_players,):
        what = "feature" if feature_groups is None else "player (group, or column in no group)"
        raise ValueError(
            f"weights must have one entry per coalition size 0..{n_players - 1} of the "
            f"{n_players} players (one per {what}), shape ({n_players},); got shape "
            f"{weights.shape}."
        )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("weights must be finite and non-negative.")
    ensemble = call.ensemble
    return call.players_only(map_rows(
        call, _games.treeprob_values, trailing_shape=call.trailing_shape(ensemble.n_features + 1),
        desc="Probabilistic values", seconds_per_row=semivalue_seconds(ensemble, n_players),
        weights=weights))
