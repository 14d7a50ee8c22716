"""Per-row semivalues of the path-dependent game, Saabas, and raw predictions.

Block functions ``f(ensemble, X, *, ..., n_threads)`` of checked rows (documentation
page "Local attributions"): :func:`uniform_semivalues` (Shapley, Beta Shapley, weighted
Banzhaf: TreeGrad-Shap's quadrature of the multilinear extension's gradient,
pattern tables for shallow trees), :func:`treeprob_values` (any
probabilistic value, TreeProb), :func:`saabas` and :func:`predict_raw`. Each
returns an array with one row per input row.

Layer: games. Imports the ground floor, ``_model`` and ``_kernels``.
"""
import math

import numpy as np

from .._errors import UnsupportedModelError
from .._kernels import _predict, _saabas, _semivalues, _treeprob
from .._numerics import _gauss_legendre

__all__ = ["uniform_semivalues", "treeprob_values", "saabas", "predict_raw", "expected_values",
           "with_expected_value"]


def expected_values(ensemble):
    """v_x(empty): the base value plus each tree's cover-weighted mean, per output."""
    means = _predict.node_means(ensemble)[ensemble.tree_start[:-1]]
    expected = ensemble.base_value.copy()
    if ensemble.n_values == 1:
        np.add.at(expected, ensemble.tree_output, means[:, 0])
    else:
        expected += means.sum(axis=0)
    return expected


def with_expected_value(ensemble, contributions):
    """Append v_x(empty) = base + sum of tree means as the last column."""
    n_rows = contributions.shape[0]
    expected = expected_values(ensemble)
    out = np.empty((n_rows, ensemble.n_outputs, ensemble.n_features + 1))
    out[:, :, :-1] = contributions
    out[:, :, -1] = expected
    return out[:, 0, :] if ensemble.n_outputs == 1 else out


# Pattern tables hold 2^d numbers per leaf; beyond this many entries per tree
# (or when rows are too few to repay them) a tree goes to the quadrature kernel.
_MAX_TABLE_ENTRIES = 1 << 22
_TABLE_GROUP_ENTRIES = 1 << 23
# Tests set this to "tables" or "quadrature" to check both routes.
_FORCE_ROUTE = None


def uniform_semivalues(ensemble, X, *, points, weights, n_threads):
    """sum_l w_l grad F_x(t_l 1) for every row: tabulated for shallow trees and
    many rows, by the per-row quadrature kernel otherwise (same values)."""
    points, weights = (np.ascontiguousarray(a, dtype=np.float64) for a in (points, weights))
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
    return with_expected_value(ensemble, phi)


def saabas(ensemble, X, *, n_threads):
    """Saabas contributions of every row, the expected value last."""
    means = _predict.node_means(ensemble)
    phi = _saabas.saabas(ensemble, X, means, n_threads)
    return with_expected_value(ensemble, phi)


def predict_raw(ensemble, X, *, n_threads):
    """The raw (margin) prediction of every row, shape (n_rows, n_outputs)."""
    return _predict.predict_raw(ensemble, X, n_threads)


def treeprob_values(ensemble, X, *, weights, n_threads):
    """Probabilistic values of every row: TreeProb for shallow trees, the
    quadrature kernel with the weights' rule for deep ones (see
    :func:`~sklearn_r2shap.probabilistic_values`)."""
    phi = np.zeros((X.shape[0], ensemble.n_outputs, ensemble.n_features))
    roots = np.minimum(_treeprob.tree_depths(ensemble), len(weights))  # n players
    deep = roots > _TREEPROB_MAX_ROOTS
    if np.any(deep):
        points, rule, amplification = _semivalue_rule(weights, ensemble.n_path_features)
        if amplification <= _RULE_MAX_AMPLIFICATION:
            _semivalues.semivalues_uniform(ensemble, X, points, rule,
                                           np.flatnonzero(deep).astype(np.int64), phi, n_threads)
        elif np.any(roots > _TREEPROB_FALLBACK_ROOTS):
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
    return with_expected_value(ensemble, phi)


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
