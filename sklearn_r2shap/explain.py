"""Per-row attributions of tree models: SHAP, Saabas, Banzhaf, Beta Shapley.

Every function returns the attributions of the path-dependent game
(DESIGN.md sections 1-2) as a float64 array of shape
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
from scipy.special import betaln

from . import _dask
from ._kernels import _predict, _saabas, _semivalues
from ._model import to_ensemble
from ._validation import check_rows, resolve_n_jobs

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

    Exact for polynomials ``g`` of degree ``<= degree``: Gauss-Legendre with
    ``ceil((degree + alpha + beta - 1) / 2)`` nodes, the Beta density
    ``t^(beta-1) (1-t)^(alpha-1) / B(alpha, beta)`` folded into the weights
    (TreeGrad-Shap, Algorithm 7; DESIGN.md section 2).
    """
    total_degree = degree + (alpha - 1) + (beta - 1)
    n_nodes = max(1, math.ceil((total_degree + 1) / 2))
    nodes, weights = _gauss_legendre(n_nodes)
    t = (nodes + 1.0) / 2.0
    log_density = (beta - 1) * np.log(t) + (alpha - 1) * np.log1p(-t) - betaln(alpha, beta)
    return t, weights / 2.0 * np.exp(log_density)


def _check_beta_parameter(name, value):
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    return int(value)


def _prepare(model, X):
    ensemble = to_ensemble(model)
    if ensemble.has_linear_leaves:
        from ._model import UnsupportedModelError

        raise UnsupportedModelError(
            f"{ensemble.model_type} has linear leaves (linear_tree=True); use "
            "PiecewiseLinearExplainer to explain it."
        )
    return ensemble, check_rows(ensemble, X)


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
    ensemble = to_ensemble(model)
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


def shap_values(model, X, *, n_jobs=None):
    """Exact path-dependent SHAP values (TreeSHAP's game) of every row.

    Parameters
    ----------
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like, DataFrame, dask Array or dask DataFrame of shape (n_rows, n_features)
        Rows to explain. NaN is allowed where the model accepts it.
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
    if _dask.is_dask_collection(X):
        return _dask.explain(shap_values, model, X, n_jobs=n_jobs)
    return beta_shapley_values(model, X, alpha=1, beta=1, n_jobs=n_jobs)


def beta_shapley_values(model, X, *, alpha=1, beta=1, n_jobs=None):
    """Exact Beta(alpha, beta) Shapley values of the path-dependent game.

    The semivalue with weights ``w(s) = B(s + beta, n - 1 - s + alpha) / B(alpha, beta)``
    (DESIGN.md section 2): (1, 1) is Shapley, (16, 1) weights small
    coalitions, (1, 16) large ones. Computed by TreeGrad-Shap: Gauss-Legendre
    quadrature of the multilinear extension's gradient, stable at any depth.

    Parameters
    ----------
    model : fitted tree model
    X : array-like, DataFrame, dask Array or dask DataFrame of shape (n_rows, n_features)
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
    X : array-like, DataFrame, dask Array or dask DataFrame of shape (n_rows, n_features)
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
    X : array-like, DataFrame, dask Array or dask DataFrame of shape (n_rows, n_features)
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
    if _dask.is_dask_collection(X):
        return _dask.explain(saabas_values, model, X, n_jobs=n_jobs)
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
    if _dask.is_dask_collection(X):
        return _dask.predict(predict_raw, model, X, n_jobs=n_jobs)
    ensemble, X = _prepare(model, X)
    return _predict.predict_raw(ensemble, X, resolve_n_jobs(n_jobs))


def probabilistic_values(model, X, weights, *, n_jobs=None):
    """Any probabilistic value (semivalue) of the path-dependent game, by TreeProb.

    ``phi_i = sum over S in N \\ {i} of weights[|S|] * (v_x(S + i) - v_x(S))``
    with n = ``n_features`` players (DESIGN.md section 2); ``weights[s]``
    weighs every coalition of size s. Shapley: ``s! (n-1-s)! / n!``; weighted
    Banzhaf: ``q^s (1-q)^(n-1-s)``. The weights make a probabilistic value
    when ``sum_s C(n-1, s) weights[s] = 1``; other scalings scale the result.

    TreeProb (treegrad-ranker, Algorithm 4) encodes each tree's polynomials by
    their values at the M-th roots of unity, ``M = min(tree depth, n_features)``.
    It is **less stable than the quadrature-based functions**
    (:func:`shap_values`, :func:`banzhaf_values`, :func:`beta_shapley_values`,
    accurate to ~1e-13 at any depth): padding every leaf's polynomial to
    degree M multiplies rounding errors by about ``2^M / M``. Measured
    relative errors of Shapley values (tests/test_treeprob.py, deep
    caterpillar trees): ~2e-12 at M = 20, ~5e-9 at M = 30, ~3e-6 at M = 40,
    ~4e-3 at M = 50 and 0.1-0.7 at M = 60, where the values are meaningless.
    It loses about three digits per ten levels: expect errors above 1e-9
    once trees are deeper than ~30 *in a model with at least as many
    features*; with few features (M = n_features <= 25) it stays accurate at
    any depth. Use it for weight vectors that are not a Beta Shapley or
    weighted Banzhaf value, on trees of moderate depth.

    Parameters
    ----------
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like or DataFrame of shape (n_rows, n_features)
        Rows to explain.
    weights : array-like of shape (n_features,)
        Non-negative weight of a coalition of each size s = 0..n_features-1.
    n_jobs : int, default=None
        Threads; None uses all cores.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        The values, the expected value ``v_x(empty)`` last.

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
    from ._kernels import _treeprob

    ensemble, X = _prepare(model, X)
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (ensemble.n_features,):
        raise ValueError(
            f"weights must have one entry per coalition size 0..{ensemble.n_features - 1}, "
            f"shape ({ensemble.n_features},); got shape {weights.shape}."
        )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("weights must be finite and non-negative.")
    phi = np.zeros((X.shape[0], ensemble.n_outputs, ensemble.n_features))
    _treeprob.treeprob(ensemble, X, weights, phi, resolve_n_jobs(n_jobs))
    return _with_expected_value(ensemble, phi)
