"""SHAP interaction values of the path-dependent game: the plan of each call and its block function.

Per tree, the exact interaction values are Gauss-Legendre quadrature of the
second derivatives of the game's multilinear extension (documentation page
"Local attributions", section "Interaction values";
``_kernels/_interactions.pyx``). Trees whose leaves have few distinct path
features are tabulated once per call (2^d patterns per leaf: "tables"
route), the others are computed row by row ("rows" route); the choice is
made once, for all the rows of a call (:class:`InteractionGame`), so that
blocks of rows give the values of one call.

Layer: games. Imports the ground floor, ``_model`` and ``_kernels``.
"""
import numpy as np

from .._kernels import _interactions, _semivalues
from .._numerics import DyadicSum, beta_quadrature
from .._model import is_prepared
from .semivalues import PREPARED_ROWS, expected_values

__all__ = ["InteractionGame", "game_values", "interaction_sums", "ROUTES"]

# A tree is tabulated (2^d patterns per leaf) when its tables hold at most this
# many numbers; tables are built in groups of about this many numbers.
_MAX_TABLE_ENTRIES = 1 << 22
_TABLE_GROUP_ENTRIES = 1 << 23
# Table groups are kept between blocks of rows up to this many numbers in all
# (beyond, each block builds them again).
_TABLE_CACHE_ENTRIES = 1 << 23
# The routes a caller may force (``route=``; tests check both).
ROUTES = ("tables", "rows")


def _rules(max_dim):
    """Gauss-Legendre rules on (0, 1) for leaves of d = 0..max_dim features:
    ceil(d / 2) nodes integrate the degree d - 1 integrands of (I1), (I2)
    exactly; the rule of d is ``[rule_start[d]:rule_start[d + 1]]``."""
    points, weights, rule_start = [], [], [0]
    for d in range(max_dim + 1):
        if d > 0:
            t, w = beta_quadrature(1, 1, d - 1)
            points.append(t)
            weights.append(w)
        rule_start.append(rule_start[-1] + (len(points[-1]) if d > 0 else 0))
    cat = (lambda parts: np.ascontiguousarray(np.concatenate(parts)) if parts else np.zeros(1))
    return cat(points), cat(weights), np.asarray(rule_start, dtype=np.int64)


def _plan(ensemble, structure, n_rows, route=None, budget=None):
    """Which trees are tabulated (in groups of leaves) and which go row by row
    (``route``: None by cost, else every feasible tree or none; ``budget``:
    at most this many table entries in all, trees taken in order)."""
    leaf_dim = structure["leaf_dim"]
    tree_leaf_start = structure["tree_leaf_start"]
    n_packed = leaf_dim * (leaf_dim + 1) // 2
    entries = (1 << np.minimum(leaf_dim, 62)) * n_packed
    if len(leaf_dim):
        firsts = tree_leaf_start[:-1]
        tree_entries = np.add.reduceat(entries, firsts)
        tree_terms = np.add.reduceat(n_packed, firsts)
        deepest = np.maximum.reduceat(leaf_dim, firsts)
    else:
        tree_entries = tree_terms = deepest = np.zeros(ensemble.n_trees, dtype=np.int64)
    feasible = (tree_entries <= _MAX_TABLE_ENTRIES) & (deepest <= 40)
    # a table entry costs about a per-row term's quadrature; a row's table
    # lookup about half of it
    cheaper = tree_entries < 0.5 * n_rows * tree_terms
    if route == "tables":
        tabulate = feasible
    elif route == "rows":
        tabulate = np.zeros(ensemble.n_trees, dtype=bool)
    else:
        tabulate = feasible & cheaper
    if budget is not None:
        tabulate &= np.cumsum(np.where(tabulate, tree_entries, 0)) <= budget
    groups, group, size = [], [], 0
    for t in np.flatnonzero(tabulate):
        group.append(t)
        size += tree_entries[t]
        if size >= _TABLE_GROUP_ENTRIES:
            groups.append(group)
            group, size = [], 0
    if group:
        groups.append(group)
    return np.flatnonzero(~tabulate).astype(np.int64), groups, entries


def _group_leaves(structure, group):
    tree_leaf_start = structure["tree_leaf_start"]
    return np.concatenate(
        [np.arange(tree_leaf_start[t], tree_leaf_start[t + 1]) for t in group]).astype(np.int64)


def _tables(ensemble, structure, group, entries):
    """The leaves of a group of trees, where each one's table starts, and the
    factor its table is scaled by."""
    leaves = _group_leaves(structure, group)
    table_start = np.concatenate([[0], np.cumsum(entries[leaves])]).astype(np.int64)
    if ensemble.n_values == 1:  # the leaf value goes into the table
        scale = np.ascontiguousarray(ensemble.value[structure["leaf_node"][leaves], 0])
    else:
        scale = np.ones(len(leaves))
    return leaves, table_start, scale


def _row_independent(ensemble):
    """(pattern structure, rules, packed offsets, expected values, rows per
    table block) of an ensemble."""
    structure = _semivalues.pattern_structure(ensemble)
    rule = _rules(int(np.max(structure["leaf_dim"], initial=0)))
    width = ensemble.n_features + 1
    offsets = _interactions.packed_offsets(structure, width)
    expected = np.ascontiguousarray(expected_values(ensemble), dtype=np.float64)
    # rows per block of the table route: their matrices stay in a core's cache
    block = int(min(64, max(1, (1 << 15) // (ensemble.n_outputs * width * width))))
    return structure, rule, offsets, expected, block


class InteractionGame:
    """The plan of one call: the trees by route, the quadrature rules, the
    tables (built at the first block, kept for the next ones within
    ``_TABLE_CACHE_ENTRIES``).

    Parameters
    ----------
    ensemble : TreeEnsemble
    n_rows : int or float
        Rows of the call (chooses each tree's route).
    route : {None, "tables", "rows"}
        None chooses by cost; else every feasible tree tabulated, or none.
    """

    def __init__(self, ensemble, n_rows, route=None):
        if route is not None and route not in ROUTES:
            raise ValueError(f"route must be None or one of {ROUTES}, got {route!r}.")
        self.ensemble = ensemble
        # what depends on the ensemble alone is kept with it
        self.structure, self.rule, self.offsets, self.expected, self.block = ensemble.cached(
            "interaction game", lambda: _row_independent(ensemble))
        structure = self.structure
        # a prepared explainer's plan: for many rows, within the tables kept,
        # whatever the rows of a call (a row's values do not depend on them)
        fixed = is_prepared(ensemble) and route is None
        self.by_rows, self.groups, self.entries = _plan(
            ensemble, structure, PREPARED_ROWS if fixed else n_rows, route,
            budget=_TABLE_CACHE_ENTRIES if fixed else None)
        self.keep = sum(int(self.entries[_group_leaves(structure, g)].sum())
                        for g in self.groups) <= _TABLE_CACHE_ENTRIES
        self._tables = (ensemble.cached(("interaction tables", tuple(map(tuple, self.groups))),
                                        dict) if fixed else {})

    def tables(self, g, n_threads):
        """(tables, start of each leaf's table) of tree group ``g``."""
        if g in self._tables:
            return self._tables[g]
        structure = self.structure
        leaves, table_start, scale = _tables(self.ensemble, structure, self.groups[g],
                                             self.entries)
        tables = _interactions.interaction_tables(structure, leaves, table_start, scale,
                                                  *self.rule, n_threads)
        start_by_leaf = np.full(len(structure["leaf_dim"]), -1, dtype=np.int64)
        start_by_leaf[leaves] = table_start[:-1]
        if self.keep:
            self._tables[g] = tables, start_by_leaf
        return tables, start_by_leaf


def game_values(game, X, *, n_threads):
    """Block function: the interaction matrices of checked rows X, shape
    (n_rows, [n_outputs,] n_features + 1, n_features + 1), of an
    :class:`InteractionGame` (one plan for every block)."""
    ensemble = game.ensemble
    width = ensemble.n_features + 1
    out = np.zeros((X.shape[0], ensemble.n_outputs, width, width))
    _interactions.row_interactions(ensemble, X, game.structure, game.by_rows, *game.rule,
                                   *game.offsets, out, n_threads)
    for g, group in enumerate(game.groups):
        tables, start_by_leaf = game.tables(g, n_threads)
        _interactions.pattern_interactions(
            ensemble, X, game.structure, np.asarray(group, dtype=np.int64), tables,
            start_by_leaf, *game.offsets, out, game.block, n_threads)
    _interactions.finish(out, game.expected, n_threads)
    return out[:, 0] if ensemble.n_outputs == 1 else out


def interaction_sums(game, start, X, weight, *, n_threads):
    """Statistics function: the weighted sums over rows X (global rows
    ``start, start + 1, ...``) of Phi, |Phi| and Phi^2 and of the weights, as
    :class:`~.._numerics.DyadicSum` (bit-identical for any blocks and
    partitions); ``weight`` None weighs every row 1."""
    phi = game_values(game, X, n_threads=n_threads)
    if weight is None:
        weight = np.ones(X.shape[0])
    w = np.asarray(weight, dtype=np.float64).reshape((-1,) + (1,) * (phi.ndim - 1))
    weighted = w * phi
    statistics = {"weight": DyadicSum.of(start, np.asarray(weight, dtype=np.float64)),
                  "sum": DyadicSum.of(start, weighted)}
    np.abs(weighted, out=weighted)  # w >= 0: w |Phi|
    statistics["abs"] = DyadicSum.of(start, weighted)
    np.multiply(weighted, np.abs(phi, out=phi), out=weighted)  # w Phi^2
    statistics["square"] = DyadicSum.of(start, weighted)
    return statistics
