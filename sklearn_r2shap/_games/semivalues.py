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
import threading

import numpy as np

from .._errors import UnsupportedModelError
from .._kernels import _predict, _saabas, _semivalues, _treeprob
from .._numerics import _gauss_legendre

__all__ = ["SemivalueGame", "uniform_semivalues", "treeprob_values", "saabas", "predict_raw", "expected_values",
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
# Tables of at most this many entries in all (8 bytes each) are built once per
# call and kept for every block of rows; beyond it, per block.
_RESIDENT_TABLE_ENTRIES = 1 << 25
# Tests set this to "tables" or "quadrature" to check both routes.
_FORCE_ROUTE = None


class SemivalueGame:
    """The semivalues sum_l w_l grad F_x(t_l 1) of an ensemble's path-dependent
    game, for the block function :func:`uniform_semivalues`.

    The pattern tables of the trees that repay them for ``n_rows`` rows (all
    the rows of the call; None: each block's rows) are built on the first
    block and kept for the next ones, up to ``_RESIDENT_TABLE_ENTRIES``
    entries; they are not pickled (a dask worker builds its own once).
    """

    def __init__(self, ensemble, points, weights, n_rows=None):
        self.ensemble = ensemble
        self.points, self.weights = (np.ascontiguousarray(a, dtype=np.float64)
                                     for a in (points, weights))
        self.n_rows = n_rows
        self._structure = None
        self._resident = None  # (trees, tables, start_by_unit) once built
        self._lock = threading.Lock()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_resident"] = state["_lock"] = None
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def structure(self):
        if self._structure is None:
            structure = _semivalues.pattern_structure(self.ensemble)
            leaf_dim = structure["leaf_dim"]
            tree_leaf_start = structure["tree_leaf_start"]
            entries = (1 << np.minimum(leaf_dim, 62)) * leaf_dim
            structure["entries"] = entries
            if len(entries):
                structure["tree_entries"] = np.add.reduceat(entries, tree_leaf_start[:-1])
                structure["tree_leaf_terms"] = np.add.reduceat(leaf_dim, tree_leaf_start[:-1])
                structure["tree_max_dim"] = np.maximum.reduceat(leaf_dim, tree_leaf_start[:-1])
            else:
                structure["tree_entries"] = structure["tree_leaf_terms"] = \
                    structure["tree_max_dim"] = np.zeros(self.ensemble.n_trees, dtype=np.int64)
            structure["units"] = self._units(structure)
            self._structure = structure
        return self._structure

    def _units(self, structure):
        """Table units (kernel ``_semivalues``): single-output trees tabulate
        a leaf whose sibling is a leaf together with it, value-weighted;
        other leaves (and every leaf of vector-valued trees) on their own."""
        ensemble = self.ensemble
        leaf_node = structure["leaf_node"]
        index = np.arange(len(leaf_node), dtype=np.int64)
        right = np.full(len(leaf_node), -1, dtype=np.int64)
        keep = np.ones(len(leaf_node), dtype=bool)
        if ensemble.n_values == 1 and len(leaf_node):
            parent = ensemble.parent[leaf_node]
            has_parent = parent >= 0
            parent = np.where(has_parent, parent, 0)
            is_left = ensemble.children_left[parent] == leaf_node
            sibling = np.where(is_left, ensemble.children_right[parent],
                               ensemble.children_left[parent])
            paired = has_parent & (ensemble.children_left[sibling] < 0)
            keep = ~paired | is_left
            right = np.where(paired, np.searchsorted(leaf_node, sibling), -1)
        leaf, right = index[keep], right[keep].astype(np.int64)
        if ensemble.n_values == 1:
            value = ensemble.value[:, 0]
            scale_left = value[leaf_node[leaf]].astype(np.float64)
            scale_right = np.where(right >= 0, value[leaf_node[np.maximum(right, 0)]], 0.0)
        else:
            scale_left = np.ones(len(leaf))
            scale_right = np.zeros(len(leaf))
        return {
            "leaf": leaf, "right": right,
            "slot": structure["node_slot"][leaf_node[leaf]].astype(np.int64),
            "entries": structure["entries"][leaf] * np.where(right >= 0, 2, 1),
            "tree_unit_start": np.searchsorted(leaf, structure["tree_leaf_start"]).astype(
                np.int64),
            "scale_left": np.ascontiguousarray(scale_left, dtype=np.float64),
            "scale_right": np.ascontiguousarray(scale_right, dtype=np.float64),
        }

    def savings(self, n_rows):
        """Per tree, the work the pattern tables save over the quadrature
        kernel for ``n_rows`` rows (negative: they cost more), in units of
        about half a nanosecond: building a table entry costs about 20 + 2m
        (memory), a row about 4 per node and 1 per leaf term, the quadrature
        kernel 12 per node and point (2026-11, measured on XGBoost depth 8
        and LightGBM 255-leaf models)."""
        structure = self.structure()
        m = len(self.points)
        tree_nodes = np.diff(self.ensemble.tree_start)
        build = (20.0 + 2.0 * m) * structure["tree_entries"]
        rows = n_rows * (4.0 * tree_nodes + structure["tree_leaf_terms"])
        return n_rows * 12.0 * m * tree_nodes - rows - build

    def tabulated(self, n_rows):
        """Which trees go through the pattern tables for ``n_rows`` rows."""
        structure = self.structure()
        feasible = ((structure["tree_entries"] <= _MAX_TABLE_ENTRIES)
                    & (structure["tree_max_dim"] <= 30))
        if _FORCE_ROUTE == "tables":
            return feasible
        if _FORCE_ROUTE == "quadrature":
            return np.zeros(self.ensemble.n_trees, dtype=bool)
        return feasible & (self.savings(n_rows) > 0)

    def resident(self):
        """The tabulated trees whose tables are kept for every block: by
        savings per entry, within ``_RESIDENT_TABLE_ENTRIES``."""
        entries = self.structure()["tree_entries"]
        trees = np.flatnonzero(self.tabulated(self.n_rows))
        order = np.argsort(-self.savings(self.n_rows)[trees] / np.maximum(entries[trees], 1),
                           kind="stable")
        trees = trees[order]
        return np.sort(trees[np.cumsum(entries[trees]) <= _RESIDENT_TABLE_ENTRIES])

    def _tables(self, trees, n_threads):
        """(tables, start of each unit's table by unit index, -1 elsewhere)."""
        structure = self.structure()
        units = structure["units"]
        tree_unit_start = units["tree_unit_start"]
        selected = (np.concatenate([np.arange(tree_unit_start[g], tree_unit_start[g + 1])
                                    for g in trees]).astype(np.int64)
                    if len(trees) else np.zeros(0, dtype=np.int64))
        table_start = np.concatenate([[0], np.cumsum(units["entries"][selected])]).astype(
            np.int64)
        tables = _semivalues.pattern_tables(structure, units, selected, table_start,
                                            self.points, self.weights, units["scale_left"],
                                            units["scale_right"], n_threads)
        start_by_unit = np.full(len(units["leaf"]), -1, dtype=np.int64)
        start_by_unit[selected] = table_start[:-1]
        return tables, start_by_unit

    def _add_tabulated(self, X, trees, tables, table_start, phi, n_threads):
        structure = self.structure()
        _semivalues.pattern_semivalues(self.ensemble, X, structure, structure["units"],
                                       np.asarray(trees, dtype=np.int64), tables, table_start,
                                       self.ensemble.n_values == 1, phi, n_threads)

    def values(self, X, n_threads):
        """The semivalues of rows X, shape (n_rows, n_outputs, n_features)."""
        ensemble = self.ensemble
        phi = np.zeros((X.shape[0], ensemble.n_outputs, ensemble.n_features))
        if X.shape[0] == 0:
            return phi
        structure = self.structure()
        tree_entries = structure["tree_entries"]
        if self.n_rows is None:
            resident = np.zeros(0, dtype=np.int64)
        else:
            with self._lock:
                if self._resident is None:  # kept for the next blocks
                    trees = self.resident()
                    self._resident = (trees,) + self._tables(trees, n_threads)
            resident, tables, start_by_unit = self._resident
        tabulate = self.tabulated(X.shape[0])
        tabulate[resident] = True
        _semivalues.semivalues_uniform(ensemble, X, self.points, self.weights,
                                       np.flatnonzero(~tabulate).astype(np.int64), phi,
                                       n_threads)
        if len(resident):
            self._add_tabulated(X, resident, tables, start_by_unit, phi, n_threads)
        tabulate[resident] = False
        group, group_entries = [], 0
        others = list(np.flatnonzero(tabulate))
        for position, t in enumerate(others):  # tables built for this block only
            group.append(t)
            group_entries += tree_entries[t]
            if group_entries >= _TABLE_GROUP_ENTRIES or position == len(others) - 1:
                block_tables, block_start = self._tables(group, n_threads)
                self._add_tabulated(X, group, block_tables, block_start, phi, n_threads)
                group, group_entries = [], 0
        return phi


def uniform_semivalues(game, X, *, points=None, weights=None, n_threads):
    """sum_l w_l grad F_x(t_l 1) for every row: tabulated for shallow trees and
    many rows, by the per-row quadrature kernel otherwise (same values).

    ``game``: a :class:`SemivalueGame` (tables kept across blocks), or an
    ensemble with ``points`` and ``weights`` (tables for these rows only)."""
    if not isinstance(game, SemivalueGame):
        game = SemivalueGame(game, points, weights)
    return with_expected_value(game.ensemble, game.values(X, n_threads))


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
