"""Per-row attributions of tree models: SHAP, Saabas, Banzhaf, Beta Shapley.

Every function returns the attributions of the path-dependent game
(documentation page "Local attributions") as a float64 array of shape
``(n_rows, n_features + 1)``, the last column the expected value
``v_x(empty)`` with the model's base value included, or
``(n_rows, n_outputs, n_features + 1)`` for models with several outputs
(multiclass). Values are in the model's raw (margin) space. A dask array or
dask DataFrame of rows gives a lazy dask array of the same row blocks
(``_dask.py``).
"""
import functools
import math

import numpy as np

from . import _dask, _groups, _pipeline
from ._kernels import _predict, _saabas, _semivalues
from ._model import to_ensemble
from ._validation import check_rows, map_row_blocks, resolve_n_jobs

__all__ = ["shap_values", "saabas_values", "banzhaf_values", "beta_shapley_values",
           "probabilistic_values"]


@functools.lru_cache(maxsize=64)
def _gauss_legendre(n_nodes):
    """Gauss-Legendre nodes and weights on [-1, 1] by Newton's method on the
    Legendre recurrence (no LAPACK call, whose idle BLAS threads would compete
    with the kernels' OpenMP threads)."""
    i = np.arange(1, n_nodes + 1)
    x = np.cos(np.pi * (i - 0.25) / (n_nodes + 0.5))
    for _ in range(100):
        p0, p1 = np.ones_like(x), x.copy()
        for k in range(2, n_nodes + 1):
            p0, p1 = p1, ((2 * k - 1) * x * p1 - (k - 1) * p0) / k
        derivative = n_nodes * (x * p1 - p0) / (x * x - 1.0) if n_nodes > 1 else np.ones_like(x)
        step = p1 / derivative
        x = x - step
        if np.max(np.abs(step)) < 1e-16:
            break
    p0, p1 = np.ones_like(x), x.copy()
    for k in range(2, n_nodes + 1):
        p0, p1 = p1, ((2 * k - 1) * x * p1 - (k - 1) * p0) / k
    derivative = n_nodes * (x * p1 - p0) / (x * x - 1.0) if n_nodes > 1 else np.ones_like(x)
    weights = 2.0 / ((1.0 - x * x) * derivative * derivative)
    return x[::-1].copy(), weights[::-1].copy()


def beta_quadrature(alpha, beta, degree):
    """Nodes and weights integrating ``g(t) Beta(t; beta, alpha)`` exactly on [0, 1].

    Gauss quadrature for the Beta density ``t^(beta-1) (1-t)^(alpha-1) / B(alpha, beta)``
    as weight function (Gauss-Jacobi on [0, 1]): ``ceil((degree + 1) / 2)``
    nodes integrate every polynomial ``g`` of degree ``<= degree`` exactly,
    whatever ``alpha`` and ``beta`` (TreeGrad-Shap, Algorithm 7, integrates the
    gradient of the multilinear extension against this density). The weights
    are positive and sum to 1. ``alpha = beta = 1`` is Gauss-Legendre.

    Parameters
    ----------
    alpha, beta : int >= 1
    degree : int >= 0

    Returns
    -------
    nodes, weights : ndarray of shape (ceil((degree + 1) / 2),)

    Examples
    --------
    >>> from sklearn_r2shap.explain import beta_quadrature
    >>> t, w = beta_quadrature(10**6, 1, 5)
    >>> len(t), bool(np.isclose(w @ t, 1 / (10**6 + 1), rtol=1e-13))
    (3, True)
    """
    n_nodes = max(1, math.ceil((degree + 1) / 2))
    if alpha == 1 and beta == 1:
        nodes, weights = _gauss_legendre(n_nodes)
        return (nodes + 1.0) / 2.0, weights / 2.0
    if beta > alpha:
        # Beta(beta, alpha) is the mirror image of Beta(alpha, beta): build the
        # rule where its nodes crowd near 0 (full relative precision) and reflect.
        nodes, weights = _gauss_beta(int(beta), int(alpha), n_nodes)
        return (1.0 - nodes)[::-1].copy(), weights[::-1].copy()
    return _gauss_beta(int(alpha), int(beta), n_nodes)


@functools.lru_cache(maxsize=64)
def _gauss_beta(alpha, beta, n_nodes):
    """Gauss rule of the Beta(beta, alpha) density on [0, 1] (Golub-Welsch).

    The three-term recurrence of the polynomials orthonormal for the density
    is that of the Jacobi polynomials P^(A, B), A = alpha - 1, B = beta - 1,
    moved from [-1, 1] to [0, 1]. Its diagonal is written as a sum of
    positive terms, so that it keeps full relative precision when alpha or
    beta is huge and the nodes crowd near 0 or 1. The nodes (eigenvalues of
    the tridiagonal Jacobi matrix) are polished by Newton steps on the
    recurrence; the weights are the Christoffel numbers
    ``1 / sum_k p_k(t)^2``, positive by construction.
    """
    from scipy.linalg import eigvalsh_tridiagonal

    A, B = float(alpha - 1), float(beta - 1)
    s = A + B
    n = np.arange(n_nodes, dtype=np.float64)
    diagonal = np.empty(n_nodes)
    diagonal[0] = (B + 1.0) / (s + 2.0)  # the mean beta / (alpha + beta)
    m = n[1:]
    diagonal[1:] = (2 * m * m + 2 * m * s + 2 * m + s * (B + 1.0)) / (
        (2 * m + s) * (2 * m + s + 2.0))
    m = np.arange(1, n_nodes, dtype=np.float64)
    off = np.sqrt(m * (m + A) * (m + B) * (m + s)
                  / ((2 * m + s) ** 2 * (2 * m + s + 1.0) * (2 * m + s - 1.0)))
    nodes = eigvalsh_tridiagonal(diagonal, off) if n_nodes > 1 else diagonal.copy()

    def recurrence(t):
        """p_0..p_{N-1} at t, and p_N and its derivative (orthonormal, p_0 = 1)."""
        p = np.zeros((n_nodes + 1, len(t)))
        dp = np.zeros_like(p)
        p[0] = 1.0
        previous, d_previous = np.zeros_like(t), np.zeros_like(t)
        for k in range(n_nodes):
            scale = off[k] if k < n_nodes - 1 else 1.0  # p_N up to a constant factor
            back = off[k - 1] if k > 0 else 0.0
            p[k + 1] = ((t - diagonal[k]) * p[k] - back * previous) / scale
            dp[k + 1] = (p[k] + (t - diagonal[k]) * dp[k] - back * d_previous) / scale
            previous, d_previous = p[k], dp[k]
        return p, dp

    for _ in range(3):  # Newton on p_N: eigenvalues are already close to roots
        p, dp = recurrence(nodes)
        nodes = nodes - p[n_nodes] / dp[n_nodes]
    p, _ = recurrence(nodes)
    weights = 1.0 / np.sum(p[:n_nodes] ** 2, axis=0)
    return nodes, weights


def _check_beta_parameter(name, value):
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    return int(value)


def _explained(model):
    """The model's ensemble, refusing linear leaves (see piecewise.py)."""
    ensemble = to_ensemble(model)
    if ensemble.has_linear_leaves:
        from ._model import UnsupportedModelError

        raise UnsupportedModelError(
            f"{ensemble.model_type} has linear leaves (linear_tree=True); use "
            "PiecewiseLinearExplainer to explain it."
        )
    return ensemble


def _prepare(model, X):
    ensemble = _explained(model)
    return ensemble, check_rows(ensemble, X)


def _by_blocks(function):
    """``function(ensemble, rows, ...)`` on a model and X; a sparse X goes in
    blocks of rows (each made dense on its own), the results concatenated."""
    @functools.wraps(function)
    def wrapper(model, X, *args, **kwargs):
        ensemble = _explained(model)
        return map_row_blocks(lambda rows, _: function(ensemble, rows, *args, **kwargs), X)
    return wrapper


def _with_expected_value(ensemble, contributions):
    """Append v_x(empty) = base + sum of tree means as the last column."""
    n_rows = contributions.shape[0]
    expected = expected_value(ensemble)
    out = np.empty((n_rows, ensemble.n_outputs, ensemble.n_features + 1))
    out[:, :, :-1] = contributions
    out[:, :, -1] = expected
    return out[:, 0, :] if ensemble.n_outputs == 1 else out


def expected_value(model):
    """v_x(empty): the base value plus each tree's cover-weighted mean, per output."""
    ensemble = to_ensemble(_pipeline.final_step(model))
    means = _predict.node_means(ensemble)[ensemble.tree_start[:-1]]
    expected = ensemble.base_value.copy()
    if ensemble.n_values == 1:
        np.add.at(expected, ensemble.tree_output, means[:, 0])
    else:
        expected += means.sum(axis=0)
    return expected


# Pattern tables hold 2^d numbers per leaf; beyond this many entries per tree
# (or when rows are too few to repay them) a tree goes to the quadrature kernel.
_MAX_TABLE_ENTRIES = 1 << 22
_TABLE_GROUP_ENTRIES = 1 << 23
# Tests set this to "tables" or "quadrature" to check both routes.
_FORCE_ROUTE = None


@_by_blocks
def _uniform_semivalues(model, X, points_weights, n_jobs):
    """sum_l w_l grad F_x(t_l 1) for every row: tabulated for shallow trees and
    many rows, by the per-row quadrature kernel otherwise (same values)."""
    ensemble, X = _prepare(model, X)
    points, weights = (np.ascontiguousarray(a, dtype=np.float64) for a in points_weights(ensemble))
    n_threads = resolve_n_jobs(n_jobs)
    phi = np.zeros((X.shape[0], ensemble.n_outputs, ensemble.n_features))
    structure = _semivalues.pattern_structure(ensemble)
    leaf_dim = structure["leaf_dim"]
    entries = (1 << np.minimum(leaf_dim, 62)) * leaf_dim
    tree_leaf_start = structure["tree_leaf_start"]
    tree_entries = np.add.reduceat(entries, tree_leaf_start[:-1]) if len(entries) else np.zeros(0)
    tree_nodes = np.diff(ensemble.tree_start)
    tree_leaf_terms = np.add.reduceat(leaf_dim, tree_leaf_start[:-1]) if len(entries) else 0
    m = len(points)
    n_rows = X.shape[0]
    feasible = (tree_entries <= _MAX_TABLE_ENTRIES) & (
        np.maximum.reduceat(leaf_dim, tree_leaf_start[:-1]) <= 40 if len(entries) else True)
    cheaper = (2.0 * m * tree_entries + n_rows * (6.0 * tree_nodes + 2.0 * tree_leaf_terms)
               < n_rows * 12.0 * m * tree_nodes)
    if _FORCE_ROUTE == "tables":
        tabulate = feasible
    elif _FORCE_ROUTE == "quadrature":
        tabulate = np.zeros(ensemble.n_trees, dtype=bool)
    else:
        tabulate = feasible & cheaper
    _semivalues.semivalues_uniform(
        ensemble, X, points, weights, np.flatnonzero(~tabulate).astype(np.int64), phi, n_threads
    )
    group, group_entries = [], 0
    tabulated = list(np.flatnonzero(tabulate))
    for position, t in enumerate(tabulated):
        group.append(t)
        group_entries += tree_entries[t]
        if group_entries >= _TABLE_GROUP_ENTRIES or position == len(tabulated) - 1:
            leaves = np.concatenate(
                [np.arange(tree_leaf_start[g], tree_leaf_start[g + 1]) for g in group]
            ).astype(np.int64)
            sizes = entries[leaves]
            table_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
            tables = _semivalues.pattern_tables(structure, leaves, table_start, points, weights,
                                                n_threads)
            start_by_leaf = np.full(len(leaf_dim), -1, dtype=np.int64)
            start_by_leaf[leaves] = table_start[:-1]
            _semivalues.pattern_semivalues(ensemble, X, structure, np.asarray(group, np.int64),
                                           tables, start_by_leaf, phi, n_threads)
            group, group_entries = [], 0
    return _with_expected_value(ensemble, phi)


def shap_values(model, X, *, groups=None, n_jobs=None):
    """Exact path-dependent SHAP values (TreeSHAP's game) of every row.

    Parameters
    ----------
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
        Rows to explain. NaN is allowed where the model accepts it.
    groups : mapping or "input", default=None
        Feature groups as players: a mapping of group name to columns (names
        or indices; a column in at most one group, every other column a
        player of its own, after the groups). The values are the exact
        Shapley values of the game whose players are the groups (page
        :ref:`explanations`), not sums of the members' values. ``"input"``:
        for a Pipeline, each input column's transformed columns (e.g. its
        one-hot columns) form its group. The result then has one column per
        player, the expected value last (:func:`explain` names them).
    n_jobs : int, default=None
        Threads; None uses all cores.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        Shapley values, the expected value last; a row sums to the model's
        raw prediction.

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
    if groups is not None:  # the groups as players (_groups.py)
        return _groups.grouped(shap_values, model, X, groups, n_jobs=n_jobs)[0]
    model, X, _ = _pipeline.unwrap(model, X)  # a Pipeline: its last step, X transformed
    if _dask.is_dask_collection(X):
        return _dask.explain(shap_values, model, X, n_jobs=n_jobs)
    return beta_shapley_values(model, X, alpha=1, beta=1, n_jobs=n_jobs)


def beta_shapley_values(model, X, *, alpha=1, beta=1, n_jobs=None):
    """Exact Beta(alpha, beta) Shapley values of the path-dependent game.

    The semivalue with weights ``w(s) = B(s + beta, n - 1 - s + alpha) / B(alpha, beta)``
    (documentation page "Local attributions"): (1, 1) is Shapley, (16, 1) weights small
    coalitions, (1, 16) large ones. Computed by TreeGrad-Shap: Gauss quadrature
    of the multilinear extension's gradient against the Beta density, stable
    at any depth; the cost does not depend on ``alpha`` and ``beta``.

    Parameters
    ----------
    model : fitted tree model
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
    alpha, beta : int >= 1, default=1
    n_jobs : int, default=None

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
    model, X, _ = _pipeline.unwrap(model, X)  # a Pipeline: its last step, X transformed
    alpha = _check_beta_parameter("alpha", alpha)
    beta = _check_beta_parameter("beta", beta)
    if _dask.is_dask_collection(X):
        return _dask.explain(beta_shapley_values, model, X, n_jobs=n_jobs, alpha=alpha, beta=beta)
    return _uniform_semivalues(
        model, X, lambda ens: beta_quadrature(alpha, beta, ens.n_path_features - 1), n_jobs
    )


def banzhaf_values(model, X, *, q=0.5, n_jobs=None):
    """Exact weighted Banzhaf values ``grad F(q 1)`` of the path-dependent game.

    Weights ``w(s) = q^s (1 - q)^(n - 1 - s)``; ``q = 0.5`` is the Banzhaf value.

    Parameters
    ----------
    model : fitted tree model
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
    q : float in (0, 1), default=0.5
    n_jobs : int, default=None

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
    model, X, _ = _pipeline.unwrap(model, X)  # a Pipeline: its last step, X transformed
    q = float(q)
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in the open interval (0, 1), got {q}.")
    if _dask.is_dask_collection(X):
        return _dask.explain(banzhaf_values, model, X, n_jobs=n_jobs, q=q)
    return _uniform_semivalues(model, X, lambda ens: (np.array([q]), np.array([1.0])), n_jobs)


def saabas_values(model, X, *, n_jobs=None):
    """Saabas path contributions (XGBoost's ``approx_contribs``).

    Along the row's decision path, the change of the node's cover-weighted
    mean is credited to the node's split feature.

    Parameters
    ----------
    model : fitted tree model
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
    n_jobs : int, default=None

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        Contributions, the expected value last; a row sums to the raw prediction.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import saabas_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    >>> bool(np.allclose(saabas_values(model, X[:4]).sum(axis=1), model.predict(X[:4])))
    True
    """
    model, X, _ = _pipeline.unwrap(model, X)  # a Pipeline: its last step, X transformed
    if _dask.is_dask_collection(X):
        return _dask.explain(saabas_values, model, X, n_jobs=n_jobs)
    return _saabas_values(model, X, n_jobs)


@_by_blocks
def _saabas_values(model, X, n_jobs):
    ensemble, X = _prepare(model, X)
    means = _predict.node_means(ensemble)
    phi = _saabas.saabas(ensemble, X, means, resolve_n_jobs(n_jobs))
    return _with_expected_value(ensemble, phi)


def predict_raw(model, X, *, n_jobs=None):
    """The ensemble's raw (margin) prediction, shape (n_rows, n_outputs).

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from sklearn_r2shap import predict_raw
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = RandomForestRegressor(n_estimators=3, random_state=0).fit(X, y)
    >>> bool(np.allclose(predict_raw(model, X)[:, 0], model.predict(X)))
    True
    """
    model, X, _ = _pipeline.unwrap(model, X)  # a Pipeline: its last step, X transformed
    if _dask.is_dask_collection(X):
        return _dask.predict(predict_raw, model, X, n_jobs=n_jobs)
    return _predict_raw(model, X, n_jobs)


@_by_blocks
def _predict_raw(model, X, n_jobs):
    ensemble, X = _prepare(model, X)
    return _predict.predict_raw(ensemble, X, resolve_n_jobs(n_jobs))


def probabilistic_values(model, X, weights, *, n_jobs=None):
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
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features)
        Rows to explain.
    weights : array-like of shape (n_features,)
        Non-negative weight of a coalition of each size s = 0..n_features-1.
    n_jobs : int, default=None
        Threads; None uses all cores.

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
    >>> from sklearn_r2shap import shap_values
    >>> from sklearn_r2shap.explain import probabilistic_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    >>> n = X.shape[1]
    >>> shapley = [1 / (n * comb(n - 1, s)) for s in range(n)]
    >>> phi = probabilistic_values(model, X[:3], shapley)
    >>> phi.shape
    (3, 11)
    >>> bool(np.allclose(phi, shap_values(model, X[:3])))
    True
    """
    model, X, _ = _pipeline.unwrap(model, X)  # a Pipeline: its last step, X transformed
    ensemble = _explained(model)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (ensemble.n_features,):
        raise ValueError(
            f"weights must have one entry per coalition size 0..{ensemble.n_features - 1}, "
            f"shape ({ensemble.n_features},); got shape {weights.shape}."
        )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("weights must be finite and non-negative.")
    return _treeprob_values(ensemble, X, weights, n_jobs)


@_by_blocks
def _treeprob_values(model, X, weights, n_jobs):
    from ._kernels import _treeprob

    ensemble, X = _prepare(model, X)
    phi = np.zeros((X.shape[0], ensemble.n_outputs, ensemble.n_features))
    n_threads = resolve_n_jobs(n_jobs)
    roots = np.minimum(_treeprob.tree_depths(ensemble), ensemble.n_features)
    deep = roots > _TREEPROB_MAX_ROOTS
    if np.any(deep):
        points, rule, amplification = _semivalue_rule(weights, ensemble.n_path_features)
        if amplification <= _RULE_MAX_AMPLIFICATION:
            _semivalues.semivalues_uniform(ensemble, X, points, rule,
                                           np.flatnonzero(deep).astype(np.int64), phi, n_threads)
        elif np.any(roots > _TREEPROB_FALLBACK_ROOTS):
            from ._model import UnsupportedModelError

            raise UnsupportedModelError(
                f"probabilistic_values cannot compute these weights accurately for "
                f"{ensemble.model_type}: a tree is {int(roots.max())} levels deep, where "
                "TreeProb's roots-of-unity encoding loses about 2^depth / depth in accuracy, "
                "and the quadrature rule of these weights amplifies rounding errors by "
                f"{amplification:.1e}. Use trees of depth <= {_TREEPROB_FALLBACK_ROOTS}, or "
                "weights of a Beta Shapley or weighted Banzhaf value "
                "(beta_shapley_values, banzhaf_values), which are stable at any depth."
            )
        else:
            deep[:] = False
    _treeprob.treeprob(ensemble, X, weights, phi, n_threads,
                       trees=np.flatnonzero(~deep).astype(np.int64))
    return _with_expected_value(ensemble, phi)


# TreeProb keeps a relative accuracy of about 1e-10 up to this many roots of
# unity (it loses ~2^M / M; measured in tests/test_treeprob.py); deeper trees
# go to the quadrature kernel when the weights' rule allows it.
_TREEPROB_MAX_ROOTS = 24
# Without a usable rule, TreeProb is still used up to here (errors <~ 1e-8).
_TREEPROB_FALLBACK_ROOTS = 30
# Largest sum_l |c_l| / sum_l c_l of a rule used (rounding errors ~ eps times it).
_RULE_MAX_AMPLIFICATION = 1e4


def _semivalue_rule(weights, n_points):
    """Points t_l and weights c_l with ``sum_l c_l p(t_l) = L(p)`` for every
    polynomial p of degree < ``n_points``, where L is the linear functional of
    a semivalue: ``L(t^s (1-t)^(n-1-s)) = weights[s]``, so that
    ``L(d_i F_x(t 1)) = phi_i`` (the identity behind TreeGrad-Shap: d_i F_x(t 1)
    is ``sum_S t^|S| (1-t)^(n-1-|S|) (v_x(S + i) - v_x(S))``). A tree with at
    most ``n_points`` distinct features on a path has a gradient of degree
    < ``n_points``, so the quadrature kernel gives its values exactly.

    The points are Gauss-Legendre nodes and ``c_l = L(lagrange_l)``, with the
    Lagrange polynomials expanded in Legendre polynomials (Christoffel-Darboux,
    ``lagrange_l = lambda_l sum_j (2j+1) P_j(x_l) P_j(x)``). ``L(P_j)`` is the
    alternating sum ``sum_k (-1)^(j-k) C(j,k)^2 q^(j+1)_k`` of the weights
    summed over null players (Lemma 3 of the treegrad-ranker paper), computed
    in exact rational arithmetic: the cancellation that ruins TreeProb's
    roots-of-unity encoding happens here once per call, on exact numbers.

    Returns ``(points, c, amplification)`` with ``amplification =
    sum |c_l| / sum c_l`` (1 for Shapley or any positive rule), the factor by
    which the rule can magnify rounding errors.
    """
    from fractions import Fraction

    from ._kernels import _treeprob

    n_points = max(1, int(n_points))
    # q^(P) in floating point: sums of non-negative numbers (backward stable)
    q = [Fraction(float(v)) for v in _treeprob.reduce_weights(weights, n_points)]
    legendre_functional = [Fraction(0)] * n_points
    for j in range(n_points - 1, -1, -1):  # q holds q^(j+1)
        legendre_functional[j] = sum(
            (-1) ** (j - k) * math.comb(j, k) ** 2 * q[k] for k in range(j + 1))
        q = [q[k] + q[k + 1] for k in range(j)]
    x, lam = _gauss_legendre(n_points)
    values = np.empty((n_points, n_points))  # P_j(x_l)
    values[0] = 1.0
    if n_points > 1:
        values[1] = x
    for j in range(2, n_points):
        values[j] = ((2 * j - 1) * x * values[j - 1] - (j - 1) * values[j - 2]) / j
    functional = np.array([float(v) for v in legendre_functional])
    c = (lam / 2.0) * (((2 * np.arange(n_points) + 1) * functional) @ values)
    total = float(legendre_functional[0])  # L(1)
    amplification = float(np.sum(np.abs(c)) / total) if total > 0 else 1.0
    return (x + 1.0) / 2.0, c, amplification
