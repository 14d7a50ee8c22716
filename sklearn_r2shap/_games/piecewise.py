"""The piecewise-linear game (LightGBM ``linear_tree``; documentation page "Piecewise-linear trees").

:class:`_PiecewiseGame` holds what the kernel needs besides the rows, built
from background statistics (:func:`game_from_statistics`, from covers and
leaf means summed over blocks of background rows by :mod:`..piecewise`);
:func:`game_values` is the block function: the exact SHAP values of a block of
checked rows, by pattern tables for shallow trees or the per-row quadrature
kernel (the same values).

Layer: games. Imports the ground floor, ``_model`` and ``_kernels``.
"""
from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from .._kernels import _piecewise, _predict, _semivalues
from .._model import TreeEnsemble
from .._numerics import beta_quadrature

__all__ = ["game_from_statistics", "game_values"]


# ----------------------------------------------------------------------------
# The game: covers and leaf means from background data


@dataclass
class _PiecewiseGame:
    """Everything the kernel needs besides the rows (built once per background)."""

    ensemble: TreeEnsemble
    cover: np.ndarray  # (n_nodes,) background weight reaching each node
    cover_ratio: np.ndarray  # (n_nodes,)
    leaf_const: np.ndarray  # (n_nodes, n_values): c_l = b_l + sum_k a_lk mu_lk
    fallback: np.ndarray  # (n_nodes, n_values)
    linear_start: np.ndarray  # (n_nodes + 1,)
    linear_feature: np.ndarray  # (n_entries,)
    linear_coef: np.ndarray
    linear_mean: np.ndarray  # mu_lk
    linear_node: np.ndarray  # deepest edge on the path with the entry's feature, or -1
    points: np.ndarray  # Gauss-Legendre nodes on (0, 1)
    weights: np.ndarray
    expected_value: np.ndarray  # (n_outputs,)
    tables: Optional[dict] = None  # row-independent structure of the pattern tables


def _linear_arrays(ensemble):
    """(start, feature, coef, fallback) of the ensemble; empty for constant leaves."""
    n_nodes = ensemble.n_nodes
    if not ensemble.has_linear_leaves:
        return (np.zeros(n_nodes + 1, dtype=np.int64), np.zeros(0, dtype=np.int64),
                np.zeros(0), np.ascontiguousarray(ensemble.value, dtype=np.float64))
    start = np.ascontiguousarray(ensemble.linear_start, dtype=np.int64)
    feature = np.ascontiguousarray(ensemble.linear_feature, dtype=np.int64)
    coef = np.ascontiguousarray(ensemble.linear_coef, dtype=np.float64)
    fallback = ensemble.linear_fallback
    fallback = ensemble.value if fallback is None else fallback
    fallback = np.ascontiguousarray(np.asarray(fallback, dtype=np.float64).reshape(n_nodes, -1))
    if start.shape != (n_nodes + 1,) or len(feature) != start[-1] or len(coef) != start[-1]:
        raise ValueError("the ensemble's linear_start / linear_feature / linear_coef do not match.")
    if len(feature) and ensemble.n_values != 1:
        raise ValueError("linear leaves need one value per leaf (n_values == 1).")
    if np.any(feature < 0) or np.any(feature >= ensemble.n_features):
        raise ValueError(f"a linear feature index is outside [0, {ensemble.n_features}).")
    if not np.all(np.isfinite(coef)):
        raise ValueError("linear coefficients must be finite.")
    entry_leaf = np.repeat(np.arange(n_nodes), np.diff(start))
    if np.any(ensemble.children_left[entry_leaf] >= 0):
        raise ValueError("an internal node has linear terms; only leaves may.")
    if len(feature):
        pairs = entry_leaf * ensemble.n_features + feature
        if len(np.unique(pairs)) != len(pairs):
            raise ValueError("a leaf lists the same linear feature twice; sum the coefficients.")
    return start, feature, coef, fallback


def game_from_statistics(ensemble, start, feature, coef, fallback, cover, complete, entry_sum):
    """The game from the background's covers, complete-row weights and linear-feature
    sums (:func:`leaf_statistics`, added over blocks of background rows): the leaf
    means, the leaf constants, the cover ratios and the quadrature rule."""
    entry_leaf = np.repeat(np.arange(ensemble.n_nodes), np.diff(start))
    count = complete[entry_leaf]
    mean = np.where(count > 0, entry_sum / np.where(count > 0, count, 1.0), 0.0)
    leaf_const = np.array(ensemble.value, dtype=np.float64, order="C")
    if len(feature):
        np.add.at(leaf_const[:, 0], entry_leaf, coef * mean)
    # cover ratios as TreeEnsemble.from_trees: a parent with zero cover splits evenly
    parent = ensemble.parent
    ratio = np.ones(ensemble.n_nodes)
    has_parent = parent >= 0
    parent_cover = cover[parent[has_parent]]
    ratio[has_parent] = np.where(
        parent_cover > 0, cover[has_parent] / np.where(parent_cover > 0, parent_cover, 1.0), 0.5)
    node, leaf_dim = _piecewise.linear_structure(ensemble, start, feature)
    # grad of a leaf's term is a product of (dim - 1) factors linear in t
    degree = max(1, int(leaf_dim.max(initial=1))) - 1
    points, weights = beta_quadrature(1, 1, degree)
    tree_means = _predict.node_means(replace(ensemble, cover_ratio=ratio, value=leaf_const))[
        ensemble.tree_start[:-1]]
    expected = np.asarray(ensemble.base_value, dtype=np.float64).copy()
    if ensemble.n_values == 1:
        np.add.at(expected, ensemble.tree_output, tree_means[:, 0])
    else:
        expected += tree_means.sum(axis=0)
    return _PiecewiseGame(
        ensemble=ensemble, cover=cover, cover_ratio=np.ascontiguousarray(ratio),
        leaf_const=leaf_const, fallback=fallback, linear_start=start, linear_feature=feature,
        linear_coef=coef, linear_mean=np.ascontiguousarray(mean),
        linear_node=np.ascontiguousarray(node, dtype=np.int64),
        points=np.ascontiguousarray(points), weights=np.ascontiguousarray(weights),
        expected_value=expected,
    )


# Pattern tables (see _piecewise.pyx) hold 2^d (1 + n_entries) d' numbers per
# leaf; beyond this many per tree, or when rows are too few to repay them, a
# tree goes to the per-row quadrature kernel (the same values).
_MAX_TABLE_ENTRIES = 1 << 22
_TABLE_GROUP_ENTRIES = 1 << 23
# The routes a caller may force (``route=``; tests check both).
ROUTES = ("tables", "quadrature")


def _table_structure(game):
    """Row-independent layout of the pattern tables (computed once per game)."""
    if game.tables is None:
        ensemble = game.ensemble
        structure = _semivalues.pattern_structure(replace(ensemble, cover_ratio=game.cover_ratio))
        ext_dim, ext_start, ext_feature, ext_ratio, entry_slot = _piecewise.linear_slots(
            structure, game.linear_start, game.linear_feature)
        leaf_entries = np.diff(game.linear_start)[structure["leaf_node"]]
        dim = structure["leaf_dim"]
        size = np.where(dim <= 40, (1 << np.minimum(dim, 40)) * (1 + leaf_entries) * ext_dim,
                        np.iinfo(np.int64).max // 4)
        width = (1 + leaf_entries) * ext_dim
        tree_leaf_start = structure["tree_leaf_start"]
        game.tables = dict(
            structure=structure, ext_dim=ext_dim, ext_start=ext_start, ext_feature=ext_feature,
            ext_ratio=ext_ratio, entry_slot=entry_slot, size=size,
            tree_size=np.add.reduceat(size, tree_leaf_start[:-1]),
            tree_width=np.add.reduceat(width, tree_leaf_start[:-1]),
            tree_max_dim=np.maximum.reduceat(dim, tree_leaf_start[:-1]),
            tree_entries=np.add.reduceat(np.diff(game.linear_start), game.ensemble.tree_start[:-1]),
        )
    return game.tables


def _tabulated_trees(game, n_rows, route=None):
    """Which trees go through the pattern tables for ``n_rows`` rows without NaN
    (``route``: None chooses by cost, else every feasible tree or none)."""
    if route is not None and route not in ROUTES:
        raise ValueError(f"route must be None or one of {ROUTES}, got {route!r}.")
    ensemble = game.ensemble
    if ensemble.n_values != 1 or route == "quadrature" or n_rows == 0:
        return np.zeros(ensemble.n_trees, dtype=bool)
    tables = _table_structure(game)
    feasible = (tables["tree_size"] <= _MAX_TABLE_ENTRIES) & (tables["tree_max_dim"] <= 40)
    if route == "tables":
        return feasible
    m = len(game.points)
    nodes = np.diff(ensemble.tree_start)
    cheaper = (2.0 * m * tables["tree_size"] + n_rows * (6.0 * nodes + 2.0 * tables["tree_width"])
               < n_rows * m * (12.0 * nodes + 8.0 * tables["tree_entries"]))
    return feasible & cheaper


def _threads_for(n_items, per_thread, n_threads):
    """No more threads than chunks of work: an idle OpenMP thread still costs a
    wake-up and a barrier, which on a busy machine can exceed tiny inputs' work."""
    return int(max(1, min(n_threads, -(-n_items // per_thread))))


def _quadrature(game, X, trees, phi, n_threads):
    n_threads = _threads_for(X.shape[0], 16, n_threads)
    _piecewise.piecewise_semivalues(
        game.ensemble, X, game.cover_ratio, game.leaf_const, game.fallback, game.linear_start,
        game.linear_feature, game.linear_coef, game.linear_mean, game.linear_node,
        game.points, game.weights, np.asarray(trees, dtype=np.int64), phi, n_threads)


def _tabulate(game, X, trees, phi, n_threads):
    """Add the values of ``trees`` by pattern tables (rows without NaN in a linear feature)."""
    tables = _table_structure(game)
    structure = tables["structure"]
    tree_leaf_start = structure["tree_leaf_start"]
    group, group_size = [], 0
    for position, t in enumerate(trees):
        group.append(t)
        group_size += tables["tree_size"][t]
        if group_size < _TABLE_GROUP_ENTRIES and position < len(trees) - 1:
            continue
        leaves = np.concatenate(
            [np.arange(tree_leaf_start[g], tree_leaf_start[g + 1]) for g in group]
        ).astype(np.int64)
        table_start = np.concatenate([[0], np.cumsum(tables["size"][leaves])]).astype(np.int64)
        values = _piecewise.linear_tables(
            structure, tables["ext_dim"], tables["ext_start"], tables["ext_ratio"],
            tables["entry_slot"], game.linear_start, game.linear_coef, game.linear_mean,
            game.leaf_const, leaves,
            table_start, game.points, game.weights,
            _threads_for(int(table_start[-1]), 1 << 14, n_threads))
        start_by_leaf = np.full(len(structure["leaf_node"]), -1, dtype=np.int64)
        start_by_leaf[leaves] = table_start[:-1]
        _piecewise.linear_pattern_values(
            game.ensemble, X, structure, np.asarray(group, dtype=np.int64), values,
            start_by_leaf, tables["ext_dim"], tables["ext_start"], tables["ext_feature"],
            game.linear_start, game.linear_feature, phi,
            _threads_for(X.shape[0], 256, n_threads))
        group, group_size = [], 0


def game_values(game, X, *, route=None, n_threads):
    """SHAP values of checked rows X, the expected value last (block function;
    ``route`` forces one of :data:`ROUTES`)."""
    ensemble = game.ensemble
    phi = np.zeros((X.shape[0], ensemble.n_outputs, ensemble.n_features))
    linear_columns = np.unique(game.linear_feature)
    nan_rows = np.isnan(X[:, linear_columns]).any(axis=1)
    tabulate = _tabulated_trees(game, int(np.sum(~nan_rows)), route)
    _quadrature(game, X, np.flatnonzero(~tabulate), phi, n_threads)
    if np.any(tabulate):
        trees = np.flatnonzero(tabulate)
        clean = np.ascontiguousarray(X[~nan_rows])
        phi_clean = np.zeros((clean.shape[0],) + phi.shape[1:])
        _tabulate(game, clean, trees, phi_clean, n_threads)
        phi[~nan_rows] += phi_clean
        if np.any(nan_rows):
            phi_nan = np.zeros((int(nan_rows.sum()),) + phi.shape[1:])
            _quadrature(game, np.ascontiguousarray(X[nan_rows]), trees, phi_nan, n_threads)
            phi[nan_rows] += phi_nan
    out = np.empty((X.shape[0], ensemble.n_outputs, ensemble.n_features + 1))
    out[:, :, :-1] = phi
    out[:, :, -1] = game.expected_value
    return out[:, 0, :] if ensemble.n_outputs == 1 else out


def predict_block(ensemble, X, *, linear, n_threads):
    """Block function: the raw prediction of checked rows X with linear leaves
    (``linear``: the ensemble's ``_linear_arrays``)."""
    start, feature, coef, fallback = linear
    return _piecewise.predict_linear(ensemble, X, start, feature, coef, fallback, n_threads)
