"""The interventional game with background data: its per-tree summary and block function.

For background rows b in B, the interventional game of a row x is
``v_x(S) = mean over b of f(z)`` with ``z_S = x_S`` and ``z_rest = b_rest``
(Janzing et al. 2020; documentation page "Path-dependent and interventional
values"). :class:`InterventionalGame` summarises the background once per
tree (``_kernels/_interventional.pyx``, where the closed form is derived):
for every leaf, a histogram of the patterns of path conditions the
background rows satisfy, turned into a table of the leaf's values for each
pattern a row can have ("tables" route), or the leaf's distinct background
patterns and their counts ("direct" route, for trees whose tables would be
too large or too costly for the rows at hand). :func:`game_values` is the
block function the executor runs over blocks of rows.

Layer: games. Imports the ground floor, ``_model`` and ``_kernels``.
"""
import math
from fractions import Fraction

import numpy as np

from .._errors import UnsupportedModelError
from .._kernels import _interventional, _predict, _semivalues

__all__ = ["InterventionalGame", "game_values", "ROUTES"]

# A leaf's table holds 2^d x d numbers (d distinct features on its path) and
# costs about 3^d operations to build: trees whose tables pass this many
# entries, or whose tables cost more than running every row over the leaves'
# distinct background patterns, take that direct route instead (same values).
_MAX_TABLE_ENTRIES = 1 << 22
# Tables are built and used this many entries at a time (memory bound).
_TABLE_GROUP_ENTRIES = 1 << 23
# Background patterns (rows x leaves) of direct-route trees, at a time.
_PATTERN_GROUP_ENTRIES = 1 << 23
# The routes a caller may force (``route=``; tests check both).
ROUTES = ("tables", "direct")


def _weight_matrices(family, parameters, size):
    """W+(k, m) and W-(k, m) for k, m < ``size`` (kernel header): the value
    of a feature x satisfies and b fails (+), or b satisfies and x fails (-),
    on a leaf where k features are of the first kind and m of the second."""
    w_plus = np.zeros((size, size))
    w_minus = np.zeros((size, size))
    if family == "banzhaf":
        (q,) = parameters
        for k in range(size):
            for m in range(size):
                if k >= 1:
                    w_plus[k, m] = q ** (k - 1) * (1.0 - q) ** m
                if m >= 1:
                    w_minus[k, m] = q ** k * (1.0 - q) ** (m - 1)
        return w_plus, w_minus
    alpha, beta = parameters  # mu = Beta(beta, alpha); Shapley: (1, 1)

    if max(alpha, beta) <= 1000:
        def beta_ratio(p, r):  # B(p, r) / B(beta, alpha), exactly
            def b(x, y):
                return Fraction(math.factorial(x - 1) * math.factorial(y - 1),
                                math.factorial(x + y - 1))
            return float(b(p, r) / b(beta, alpha))
    else:
        def beta_ratio(p, r):
            return math.exp(math.lgamma(p) + math.lgamma(r) - math.lgamma(p + r)
                            - math.lgamma(beta) - math.lgamma(alpha)
                            + math.lgamma(alpha + beta))
    for k in range(size):
        for m in range(size):
            if k >= 1:  # int t^(k-1) (1-t)^m dBeta(t; beta, alpha)
                w_plus[k, m] = beta_ratio(k - 1 + beta, m + alpha)
            if m >= 1:  # int t^k (1-t)^(m-1) dBeta(t; beta, alpha)
                w_minus[k, m] = beta_ratio(k + beta, m - 1 + alpha)
    return w_plus, w_minus


class InterventionalGame:
    """The background's per-tree summary, ready to explain rows.

    Parameters
    ----------
    ensemble : TreeEnsemble
    background : ndarray, checked (:func:`check_rows`)
    family, parameters : the semivalue ("beta", (alpha, beta)) or ("banzhaf", (q,))
        (``_validation.check_semivalue``)
    n_rows : float
        Rows expected to be explained (chooses each tree's route).
    n_threads : int
    route : {None, "tables", "direct"}
        None chooses each tree's route by cost; "tables" tabulates every
        tree whose tables fit, "direct" none (the same values).
    """

    def __init__(self, ensemble, background, family, parameters, n_rows, n_threads, route=None):
        if route is not None and route not in ROUTES:
            raise ValueError(f"route must be None or one of {ROUTES}, got {route!r}.")
        self.ensemble = ensemble
        self.n_background = background.shape[0]
        self.structure = structure = _semivalues.pattern_structure(ensemble)
        leaf_dim = structure["leaf_dim"]
        tree_leaf_start = structure["tree_leaf_start"]
        max_dim = int(leaf_dim.max(initial=0))
        if max_dim > 63:
            raise UnsupportedModelError(
                f"{ensemble.model_type} has a path with {max_dim} distinct features; "
                "interventional values support at most 63 (use shap_values without "
                "background for the path-dependent values)."
            )
        self.w_plus, self.w_minus = _weight_matrices(family, parameters, max_dim + 1)
        self.expected_value = _predict.predict_raw(ensemble, background, n_threads).mean(axis=0)
        n_trees = ensemble.n_trees
        if n_trees == 0 or len(leaf_dim) == 0:
            self.groups, self._summaries = [], {}
            return
        starts = tree_leaf_start[:-1]
        power = np.ldexp(1.0, np.minimum(leaf_dim, 63).astype(int))  # 2^d as float
        tree_entries = np.add.reduceat(power * leaf_dim, starts)
        tree_build = np.add.reduceat(3.0 ** np.minimum(leaf_dim, 63) * (1 + leaf_dim / 4), starts)
        distinct = np.minimum(power, self.n_background)
        tree_direct = n_rows * np.add.reduceat(distinct * (2 + leaf_dim / 4), starts)
        multi_node = np.diff(ensemble.tree_start) > 1
        feasible = tree_entries <= _MAX_TABLE_ENTRIES
        if route == "tables":
            tabulate = feasible
        elif route == "direct":
            tabulate = np.zeros(n_trees, dtype=bool)
        else:
            tabulate = feasible & (tree_build <= tree_direct)
        self.scale = 1.0 / self.n_background
        self.background = background
        # Trees in groups of bounded size: tabulated ones (histograms -> tables)
        # and the others (distinct background patterns per leaf). A group's
        # summary is built when rows come; kept when it is the only group
        # (so sparse blocks and dask partitions reuse it), else rebuilt.
        self.groups = []
        for route, selected, size_of in (
                ("tables", tabulate & multi_node, tree_entries),
                ("direct", ~tabulate & multi_node,
                 self.n_background * np.diff(tree_leaf_start))):
            limit = _TABLE_GROUP_ENTRIES if route == "tables" else _PATTERN_GROUP_ENTRIES
            group, size = [], 0
            trees = list(np.flatnonzero(selected))
            for position, t in enumerate(trees):
                group.append(t)
                size += size_of[t]
                if size >= limit or position == len(trees) - 1:
                    self.groups.append((route, np.asarray(group, np.int64)))
                    group, size = [], 0
        self._summaries = {}

    def _summary(self, index, n_threads):
        if index in self._summaries:
            return self._summaries[index]
        route, trees = self.groups[index]
        if route == "tables":
            summary = self._tables(trees, self.background, self.scale, n_threads)
        else:
            summary = self._patterns(trees, self.background, n_threads)
        if len(self.groups) == 1:
            self._summaries[index] = summary
        return summary

    def _leaves(self, trees):
        start = self.structure["tree_leaf_start"]
        return np.concatenate([np.arange(start[t], start[t + 1]) for t in trees]).astype(np.int64)

    def _tables(self, trees, background, scale, n_threads):
        structure = self.structure
        leaf_dim = structure["leaf_dim"]
        leaves = self._leaves(trees)
        dim = leaf_dim[leaves]
        hist_by_leaf = np.full(len(leaf_dim), -1, dtype=np.int64)
        hist_by_leaf[leaves] = np.concatenate([[0], np.cumsum(1 << dim)])[:-1]
        hist = _interventional.background_histograms(
            self.ensemble, structure, background, trees, hist_by_leaf, n_threads)
        table_start = np.concatenate([[0], np.cumsum((1 << dim) * dim)]).astype(np.int64)
        tables = _interventional.interventional_tables(
            structure, leaves, hist, hist_by_leaf, table_start, self.w_plus, self.w_minus,
            scale, n_threads)
        start_by_leaf = np.full(len(leaf_dim), -1, dtype=np.int64)
        start_by_leaf[leaves] = table_start[:-1]
        if self.ensemble.n_values != 1:
            return trees, tables, start_by_leaf
        return (trees,) + self._units(leaves, tables, start_by_leaf, n_threads)

    def _units(self, leaves, tables, start_by_leaf, n_threads):
        """Pair sibling leaves (kernel ``unit_tables``): leaf values folded in."""
        ens, structure = self.ensemble, self.structure
        leaf_node = structure["leaf_node"]
        nodes = leaf_node[leaves]
        parent = ens.parent[nodes]
        left, right = ens.children_left[parent], ens.children_right[parent]
        first = (left == nodes) & (ens.children_left[right] < 0)  # left leaf, sibling a leaf
        second = (right == nodes) & (ens.children_left[left] < 0)
        unit_first = leaves[~second]
        unit_second = np.full(len(unit_first), -1, dtype=np.int64)
        unit_second[first[~second]] = np.searchsorted(leaf_node, right[first])
        dim = structure["leaf_dim"][unit_first]
        unit_bit = structure["node_slot"][leaf_node[unit_first]]
        sizes = (1 << (dim + (unit_second >= 0))) * dim
        unit_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        unit_tables = _interventional.unit_tables(
            ens, structure, tables, start_by_leaf, unit_first, unit_second, unit_bit,
            unit_start, n_threads)
        tree = np.searchsorted(structure["tree_leaf_start"], unit_first, side="right") - 1
        tree_unit_start = np.concatenate(
            [[0], np.cumsum(np.bincount(tree, minlength=ens.n_trees))]).astype(np.int64)
        return tree_unit_start, unit_first, unit_second, unit_bit, unit_start, unit_tables

    def _patterns(self, trees, background, n_threads):
        structure = self.structure
        n_leaves_all = len(structure["leaf_dim"])
        leaves = self._leaves(trees)
        column = np.full(n_leaves_all, -1, dtype=np.int64)
        column[leaves] = np.arange(len(leaves))
        patterns = _interventional.background_patterns(
            self.ensemble, structure, background, trees, column, len(leaves), n_threads)
        # distinct patterns of each leaf (column) and their counts
        ordered = np.sort(patterns, axis=0).T  # (leaves, background rows)
        new = np.ones(ordered.shape, dtype=bool)
        new[:, 1:] = ordered[:, 1:] != ordered[:, :-1]
        first = np.flatnonzero(new.ravel())
        counts = np.diff(np.append(first, new.size)).astype(np.float64)
        distinct = ordered.ravel()[first]
        per_leaf = np.zeros(n_leaves_all, dtype=np.int64)
        per_leaf[leaves] = new.sum(axis=1)  # leaves ascend, as the columns
        pattern_start = np.concatenate([[0], np.cumsum(per_leaf)]).astype(np.int64)
        return trees, pattern_start, distinct, counts

    def values(self, rows, n_threads):
        """Semivalues (without the expected value) of checked rows, shape
        (n_rows, n_outputs, n_features)."""
        ensemble = self.ensemble
        phi = np.zeros((rows.shape[0], ensemble.n_outputs, ensemble.n_features))
        for index, (route, _) in enumerate(self.groups):
            summary = self._summary(index, n_threads)
            if route == "tables" and len(summary) == 3:  # several values per leaf
                trees, tables, start_by_leaf = summary
                _interventional.table_semivalues(ensemble, rows, self.structure, trees, tables,
                                                 start_by_leaf, phi, n_threads)
            elif route == "tables":
                _interventional.unit_semivalues(ensemble, rows, self.structure, *summary, phi,
                                                n_threads)
            else:
                trees, pattern_start, distinct, counts = summary
                _interventional.direct_semivalues(
                    ensemble, rows, self.structure, trees, pattern_start, distinct, counts,
                    self.w_plus, self.w_minus, self.scale, phi, n_threads)
        return phi


def game_values(game, X, *, n_threads):
    """Block function: the values of checked rows X, the mean raw prediction over
    the background last, shape (n_rows, [n_outputs,] n_features + 1)."""
    ensemble = game.ensemble
    phi = game.values(X, n_threads)
    out = np.empty((phi.shape[0], ensemble.n_outputs, ensemble.n_features + 1))
    out[:, :, :-1] = phi
    out[:, :, -1] = game.expected_value
    return out[:, 0, :] if ensemble.n_outputs == 1 else out
