"""Per-row semivalues of the path-dependent game, Saabas, and raw predictions.

Block functions ``f(ensemble, X, *, ..., n_threads)`` of checked rows (documentation
page "Local attributions"): :func:`uniform_semivalues` (Shapley, Beta Shapley, weighted
Banzhaf: TreeGrad-Shap's quadrature of the multilinear extension's gradient,
pattern tables for shallow trees), :func:`treeprob_values` (any
probabilistic value, TreeProb), :func:`saabas` and :func:`predict_raw`. Each
returns an array with one row per input row.

Layer: games. Imports the ground floor, ``_model`` and ``_kernels``.
"""
import functools
import heapq
import math
from fractions import Fraction
import threading

import numpy as np

from .._errors import UnsupportedModelError
from .._kernels import _predict, _saabas, _semivalues, _treeprob
from .._model import is_prepared
from .._numerics import _gauss_legendre

__all__ = ["SemivalueGame", "semivalue_game", "uniform_semivalues", "treeprob_values", "saabas", "predict_raw", "expected_values",
           "with_expected_value"]


def node_means(ensemble):
    """Each node's cover-weighted mean of the leaf values below it (kept with
    the ensemble)."""
    return ensemble.cached("node_means", lambda: _predict.node_means(ensemble))


def expected_values(ensemble):
    """v_x(empty): the base value plus each tree's cover-weighted mean, per output."""
    return ensemble.cached("expected_values", lambda: _expected_values(ensemble)).copy()


def _expected_values(ensemble):
    means = node_means(ensemble)[ensemble.tree_start[:-1]]
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
# (or when rows are too few to repay them) a tree's leaves go to the quadrature kernel.
_MAX_TABLE_ENTRIES = 1 << 22
_TABLE_GROUP_ENTRIES = 1 << 23
# Tables of at most this many entries in all (8 bytes each) are built once per
# call and kept for every block of rows; beyond it, per block.
_RESIDENT_TABLE_ENTRIES = 1 << 25
# Leaves of more distinct path features are never tabulated (32-bit patterns).
_MAX_TABLE_DIM = 30
# The routes a caller may force (``route=``; tests check each): every feasible
# tree tabulated, none, or "mixed" (the leaves of up to the median d of each
# tree tabulated, at least the deepest ones by quadrature).
ROUTES = ("tables", "quadrature", "mixed")
# The rows a prepared explainer's game plans its routes for (tables for a call
# of this many rows, built once and kept for every call).
PREPARED_ROWS = 100_000
# Seconds of one unit of :meth:`SemivalueGame.curves` on one thread.
_SECONDS_PER_CURVE_UNIT = 0.5e-9


# held while a structure shared by a game's copies gets its leaves' paths
_PATHS_LOCK = threading.Lock()


class SemivalueGame:
    """The semivalues sum_l w_l grad F_x(t_l 1) of an ensemble's path-dependent
    game, for the block function :func:`uniform_semivalues`.

    grad F_x is a sum over leaves, so each tree splits its leaves at a number
    of distinct path features D_t (its route): the leaves of at most D_t
    features go through pattern tables, the others through the quadrature
    kernel on the part of the tree leading to them (D_t = 0: the whole tree
    by quadrature). Each group of leaves takes the smallest rule exact for
    it: ``rule_of(degree)`` gives the points and weights exact for
    polynomials of that degree, and leaves of d features have a gradient of
    degree d - 1 (without ``rule_of``, every leaf takes ``points`` and
    ``weights``).

    The pattern tables of the trees that repay them for ``n_rows`` rows (all
    the rows of the call; None: each block's rows) are built on the first
    block and kept for the next ones, up to ``_RESIDENT_TABLE_ENTRIES``
    entries; they are not pickled (a dask worker builds its own once).
    """

    def __init__(self, ensemble, points, weights, n_rows=None, rule_of=None, route=None):
        if route is not None and route not in ROUTES:
            raise ValueError(f"route must be None or one of {ROUTES}, got {route!r}.")
        self.ensemble = ensemble
        self.route = route
        self.points, self.weights = (np.ascontiguousarray(a, dtype=np.float64)
                                     for a in (points, weights))
        self.n_rows = n_rows
        self.rules = self._rules(rule_of)
        self._structure = None
        self._curves = {}
        # shared by the copies of :meth:`for_rows`, the last of each kept:
        # "part" (routes, part), "tables" (resident routes, tables, starts),
        # "resident" {n_rows: routes}
        self._kept = {}
        self._resident = None  # (routes, tables, start_by_unit) once built
        self._fixed = None  # the routes of :meth:`for_rows` with ``fixed``
        self._lock = threading.Lock()

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_resident"] = state["_lock"] = None
        state["_kept"], state["_curves"] = {}, {}
        return state

    def for_rows(self, n_rows, *, fixed=False):
        """This game for a call of ``n_rows`` rows: a copy that shares the
        row-independent plan (structure, cost curves, rules) and what was kept
        of earlier calls (the quadrature part of the last routes, the last
        resident tables); the routes it takes, and so its values, are those
        of a game made anew for ``n_rows`` rows.

        ``fixed`` (a prepared explainer's game): every tree takes, whatever
        ``n_rows``, the route it would take in a call of
        :data:`PREPARED_ROWS` rows (its tables built at the first call and
        kept), so that a row's values do not depend on the other rows of
        its call or on earlier calls."""
        self.curves()
        game = object.__new__(SemivalueGame)  # not copy.copy: __getstate__ drops the plan
        game.__dict__.update(self.__dict__)
        game.n_rows = n_rows
        game._resident = None
        game._lock = threading.Lock()
        game._fixed = self._fixed_routes() if fixed else None
        return game

    def _fixed_routes(self):
        kept = self._kept
        if "fixed" not in kept:
            kept["fixed"] = self.for_rows(PREPARED_ROWS).resident()
        return kept["fixed"]

    def __setstate__(self, state):
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def _rules(self, rule_of):
        """(points, weights, sizes): row d, padded, the rule of the leaves of
        d distinct path features; never more points than the given rule."""
        d_max = max(1, int(self.ensemble.n_path_features))
        m = len(self.points)
        rows = []
        for d in range(d_max + 1):
            rule = None if rule_of is None else rule_of(max(d - 1, 0))
            if rule is None or len(rule[0]) >= m:
                rule = (self.points, self.weights)
            rows.append(rule)
        points = np.zeros((d_max + 1, m))
        weights = np.zeros((d_max + 1, m))
        sizes = np.array([len(p) for p, _ in rows], dtype=np.int64)
        for d, (p, w) in enumerate(rows):
            points[d, :len(p)] = p
            weights[d, :len(w)] = w
        return points, weights, sizes

    def structure(self):
        if self._structure is None:
            structure = _semivalues.pattern_structure(self.ensemble, paths=False)
            leaf_dim = structure["leaf_dim"]
            tree_leaf_start = structure["tree_leaf_start"]
            entries = (1 << np.minimum(leaf_dim, 62)) * leaf_dim
            structure["entries"] = entries
            if len(entries):
                structure["tree_max_dim"] = np.maximum.reduceat(leaf_dim, tree_leaf_start[:-1])
            else:
                structure["tree_max_dim"] = np.zeros(self.ensemble.n_trees, dtype=np.int64)
            structure["leaf_tree"] = np.repeat(np.arange(self.ensemble.n_trees, dtype=np.int64),
                                               np.diff(tree_leaf_start))
            structure["units"] = self._units(structure)
            self._structure = structure
        return self._structure

    def _structure_with_paths(self):
        """:meth:`structure` with the leaves' paths (``pattern_paths``), which only
        tables read: made at the first tables (a call of one row of deep trees,
        all on the quadrature route, never writes them)."""
        structure = self.structure()
        if "leaf_feature" not in structure:
            # the copies of one game (dask's threads) share the structure: the
            # paths are written once, never replaced under a running kernel,
            # which reads them by pointer
            with _PATHS_LOCK:
                if "leaf_feature" not in structure:
                    structure.update(_semivalues.pattern_paths(self.ensemble, structure))
        return structure

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
            leaf_of_node = np.zeros(ensemble.n_nodes, dtype=np.int64)
            leaf_of_node[leaf_node] = index
            right = np.where(paired, leaf_of_node[sibling], -1)
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
            "dim": structure["leaf_dim"][leaf],  # a pair's leaves share their features
            "entries": structure["entries"][leaf] * np.where(right >= 0, 2, 1),
            "tree": structure["leaf_tree"][leaf],
            "tree_unit_start": np.searchsorted(leaf, structure["tree_leaf_start"]).astype(
                np.int64),
            "scale_left": np.ascontiguousarray(scale_left, dtype=np.float64),
            "scale_right": np.ascontiguousarray(scale_right, dtype=np.float64),
        }

    def curves(self):
        """Per tree t and route D (columns 0 to the largest d): the table
        entries, the work of building them and the work per row, in units of
        about half a nanosecond: building a table entry costs about
        20 + 2m (memory), a row about 4 per node of a tree with tables and 1
        per tabulated leaf term, the quadrature kernel 12 per node of the
        tree's part and point (2026-11, measured on XGBoost depth 8 and
        LightGBM 255-leaf models)."""
        if "entries" not in self._curves:
            structure = self.structure()
            ensemble = self.ensemble
            units = structure["units"]
            sizes = self.rules[2]
            n_trees, width = ensemble.n_trees, len(sizes)
            tree_nodes = np.diff(ensemble.tree_start)

            def by_dim(tree, dim, amount):  # cumulative over d <= D
                cell = np.asarray(tree, dtype=np.int64) * width + dim
                amount = np.broadcast_to(np.asarray(amount, dtype=np.float64), cell.shape)
                table = np.bincount(cell, weights=amount, minlength=n_trees * width)
                return np.cumsum(table.reshape(n_trees, width), axis=1)

            entries = by_dim(units["tree"], units["dim"], units["entries"])
            build = by_dim(units["tree"], units["dim"],
                           units["entries"] * (20.0 + 2.0 * sizes[units["dim"]]))
            terms = by_dim(structure["leaf_tree"], structure["leaf_dim"], structure["leaf_dim"])
            node_tree = np.repeat(np.arange(n_trees), tree_nodes)
            nodes_le = by_dim(node_tree, structure["node_below_dim"], 1.0)
            part_nodes = tree_nodes[:, None] - nodes_le  # nodes above a leaf of d > D
            part_nodes[part_nodes <= 1] = 0  # no leaf left: the kernel skips the tree
            m_part = sizes[structure["tree_max_dim"]][:, None]
            row = (np.where(entries > 0, 4.0 * tree_nodes[:, None], 0.0) + terms
                   + 12.0 * m_part * part_nodes)
            feasible = (entries <= _MAX_TABLE_ENTRIES) & (np.arange(width) <= _MAX_TABLE_DIM)
            self._curves = {"entries": entries, "build": build, "row": row,
                            "feasible": feasible}
        return self._curves

    def forced_routes(self):
        """The routes of a forced ``route`` (None without)."""
        if self.route is None:
            return None
        curves = self.curves()
        feasible = curves["feasible"]
        largest = feasible.shape[1] - 1 - np.argmax(feasible[:, ::-1], axis=1)
        if self.route == "tables":
            return largest
        if self.route == "quadrature":
            return np.zeros(self.ensemble.n_trees, dtype=np.int64)
        structure = self.structure()
        leaf_dim, start = structure["leaf_dim"], structure["tree_leaf_start"]
        middle = np.array([np.median(leaf_dim[start[t]:start[t + 1]]) if start[t + 1] > start[t]
                           else 0 for t in range(self.ensemble.n_trees)]).astype(np.int64)
        return np.minimum(np.minimum(middle, structure["tree_max_dim"] - 1), largest).clip(0)

    def routes(self, n_rows):
        """Per tree, the route D_t cheapest for ``n_rows`` rows (tables built
        for them)."""
        forced = self.forced_routes()
        if forced is not None:
            return forced
        curves = self.curves()
        cost = np.where(curves["feasible"], curves["build"] + n_rows * curves["row"], np.inf)
        return np.argmin(cost, axis=1).astype(np.int64)

    def seconds_per_row(self):
        """One thread's seconds per row, each tree on its cheapest route for
        the call's rows (tables built once, shared by them); it sizes the
        executor's blocks (issue 31: the quadrature estimate of every node,
        5 to 15 times the time of the tables, made blocks of 1,500 rows of a
        depth-8 ensemble, 3 table blocks to share among the threads)."""
        curves = self.curves()
        n_rows = max(1, self.n_rows or 1)
        if self._fixed is not None:  # the tables are kept: no building to share
            kept = self._kept
            if "fixed seconds" not in kept:
                row = curves["row"][np.arange(self.ensemble.n_trees), self._fixed]
                kept["fixed seconds"] = float(np.sum(row)) * _SECONDS_PER_CURVE_UNIT
            return kept["fixed seconds"]
        forced = self.forced_routes()
        if forced is not None:
            trees = np.arange(self.ensemble.n_trees)
            cost = curves["build"][trees, forced] / n_rows + curves["row"][trees, forced]
        else:
            cost = np.where(curves["feasible"], curves["build"] / n_rows + curves["row"],
                            np.inf).min(axis=1)
        return float(np.sum(cost)) * _SECONDS_PER_CURVE_UNIT

    def resident(self):
        """The routes of the trees whose tables are kept for every block (0
        elsewhere), within ``_RESIDENT_TABLE_ENTRIES`` entries: greedily by
        work saved per entry, each tree moving to the route of best ratio
        (kept per number of rows)."""
        kept = self._kept.setdefault("resident", {})
        routes = kept.get(self.n_rows)
        if routes is None:
            if len(kept) >= 16:
                kept.clear()
            routes = kept[self.n_rows] = self._resident_routes()
        return routes.copy()

    def _resident_routes(self):
        curves = self.curves()
        n_trees = self.ensemble.n_trees
        entries = curves["entries"]
        cost = curves["build"] + self.n_rows * curves["row"]
        forced = self.forced_routes()
        budget = _RESIDENT_TABLE_ENTRIES
        routes = np.zeros(n_trees, dtype=np.int64)
        if forced is not None:  # by saving per entry, whatever its sign
            trees = np.flatnonzero(forced > 0)
            taken = entries[trees, forced[trees]]
            saving = (cost[trees, 0] - cost[trees, forced[trees]]) / np.maximum(taken, 1)
            order = np.argsort(-saving, kind="stable")
            trees, taken = trees[order], taken[order]
            keep = trees[np.cumsum(taken) <= budget]
            routes[keep] = forced[keep]
            return routes
        cost = np.where(curves["feasible"], cost, np.inf)
        heap = []

        def push(t):
            here = routes[t]
            extra = entries[t] - entries[t, here]
            gain = cost[t, here] - cost[t]
            ok = (gain > 0) & (extra <= budget) & np.isfinite(cost[t])
            ok[:here + 1] = False
            if ok.any():
                ratio = np.where(ok, gain / np.maximum(extra, 1.0), -np.inf)
                best = int(np.argmax(ratio))
                heapq.heappush(heap, (-ratio[best], t, best, here))

        # a tree is pushed at all only if some route saves work from route 0
        gain = cost[:, :1] - cost
        start = (gain > 0) & (entries - entries[:, :1] <= budget) & np.isfinite(cost)
        start[:, 0] = False
        for t in np.flatnonzero(start.any(axis=1)):
            push(t)
        while heap:
            _, t, route, here = heapq.heappop(heap)
            if routes[t] != here:
                continue
            extra = entries[t, route] - entries[t, here]
            if extra > budget:  # the budget shrank since: look again
                push(t)
                continue
            budget -= extra
            routes[t] = route
            push(t)
        return routes

    def _tables(self, routes, trees, n_threads):
        """(tables, start of each unit's table by unit index, -1 elsewhere)
        of the units of ``trees`` tabulated on ``routes``."""
        structure = self.structure()
        units = structure["units"]
        tree_unit_start = units["tree_unit_start"]
        selected = (np.concatenate([np.arange(tree_unit_start[g], tree_unit_start[g + 1])
                                    for g in trees]).astype(np.int64)
                    if len(trees) else np.zeros(0, dtype=np.int64))
        selected = selected[units["dim"][selected] <= routes[units["tree"][selected]]]
        table_start = np.concatenate([[0], np.cumsum(units["entries"][selected])]).astype(
            np.int64)
        points, weights, sizes = self.rules
        tables = (_semivalues.pattern_tables(self._structure_with_paths(), units, selected,
                                             table_start, points, weights, sizes,
                                             units["scale_left"], units["scale_right"],
                                             n_threads)
                  if len(selected) else np.zeros(0))
        start_by_unit = np.full(len(units["leaf"]), -1, dtype=np.int64)
        start_by_unit[selected] = table_start[:-1]
        return tables, start_by_unit

    def _resident_tables(self, resident, n_threads):
        """:meth:`_tables` of the resident routes, those of the last call
        reused when its routes were the same."""
        key = resident.tobytes()
        last_key, tables = self._kept.get("tables", (None, None))
        if last_key != key:
            tables = self._tables(resident, np.flatnonzero(resident), n_threads)
            self._kept["tables"] = (key, tables)
        return tables

    def _add_tabulated(self, X, trees, tables, table_start, phi, n_threads):
        structure = self._structure_with_paths()
        _semivalues.pattern_semivalues(self.ensemble, X, structure, structure["units"],
                                       np.asarray(trees, dtype=np.int64), tables, table_start,
                                       self.ensemble.n_values == 1, phi, n_threads)

    def _part(self, routes):
        """The parts of the trees left to the quadrature kernel on ``routes``."""
        key = routes.tobytes()
        last_key, part = self._kept.get("part", (None, None))
        if last_key != key:
            structure = self.structure()
            keep = np.zeros(self.ensemble.n_nodes, dtype=np.uint8)
            deep = structure["leaf_dim"] > routes[structure["leaf_tree"]]
            keep[structure["leaf_node"][deep]] = 1
            part = _semivalues.part_nodes(self.ensemble, keep)
            # the trees with a part of more than one node (others add nothing)
            part["trees"] = np.flatnonzero(np.diff(part["start"]) > 1).astype(np.int64)
            self._kept["part"] = (key, part)  # the last one only
        return part

    def values(self, X, n_threads):
        """The semivalues of rows X, shape (n_rows, n_outputs, n_features)."""
        ensemble = self.ensemble
        phi = np.zeros((X.shape[0], ensemble.n_outputs, ensemble.n_features))
        if X.shape[0] == 0:
            return phi
        structure = self.structure()
        entries = self.curves()["entries"]
        if self._fixed is not None:
            with self._lock:
                resident = self._fixed
                tables, start_by_unit = self._resident_tables(resident, n_threads)
        elif self.n_rows is None:
            resident = np.zeros(ensemble.n_trees, dtype=np.int64)
        else:
            with self._lock:
                if self._resident is None:  # kept for the next blocks
                    resident = self.resident()
                    self._resident = (resident,) + self._resident_tables(resident, n_threads)
            resident, tables, start_by_unit = self._resident
        routes = (resident if self._fixed is not None else
                  np.where(resident > 0, resident, self.routes(X.shape[0])))
        part = self._part(routes)
        points, weights, sizes = self.rules
        if len(part["trees"]):
            _semivalues.part_semivalues(ensemble, X, part, part["trees"],
                                        structure["tree_max_dim"], points, weights, sizes, phi,
                                        n_threads)
        if np.any(resident > 0):
            self._add_tabulated(X, np.flatnonzero(resident), tables, start_by_unit, phi,
                                n_threads)
        group, group_entries = [], 0
        others = np.flatnonzero((resident == 0) & (routes > 0))
        for position, t in enumerate(others):  # tables built for this block only
            group.append(t)
            group_entries += entries[t, routes[t]]
            if group_entries >= _TABLE_GROUP_ENTRIES or position == len(others) - 1:
                block_tables, block_start = self._tables(routes, group, n_threads)
                self._add_tabulated(X, group, block_tables, block_start, phi, n_threads)
                group, group_entries = [], 0
        return phi


def _rule_key(rule_of):
    """A key of a quadrature rule function: a ``functools.partial``'s function and
    arguments, else the function itself."""
    if isinstance(rule_of, functools.partial):
        return (rule_of.func, rule_of.args, tuple(sorted(rule_of.keywords.items())))
    return rule_of


def semivalue_game(ensemble, rule_of, n_rows, route=None):
    """The :class:`SemivalueGame` of ``rule_of``'s semivalue for ``n_rows`` rows;
    its row-independent plan is kept with the ensemble, so that later calls on
    the same ensemble skip it. On a prepared ensemble (:func:`is_prepared`:
    an explainer's) its routes are fixed, its tables kept."""
    def build():
        points, weights = rule_of(max(1, int(ensemble.n_path_features)) - 1)
        return SemivalueGame(ensemble, points, weights, rule_of=rule_of, route=route)

    game = ensemble.cached(("semivalue game", _rule_key(rule_of), route), build)
    return game.for_rows(n_rows, fixed=is_prepared(ensemble) and route is None)



def uniform_semivalues(game, X, *, n_threads):
    """sum_l w_l grad F_x(t_l 1) for every row: tabulated for shallow leaves
    and many rows, by the per-row quadrature kernel otherwise (same values).

    ``game``: a :class:`SemivalueGame` (:func:`semivalue_game`; tables kept
    across blocks)."""
    return with_expected_value(game.ensemble, game.values(X, n_threads))


def saabas(ensemble, X, *, n_threads):
    """Saabas contributions of every row, the expected value last."""
    phi = _saabas.saabas(ensemble, X, node_means(ensemble), n_threads)
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
