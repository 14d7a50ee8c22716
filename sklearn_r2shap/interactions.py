"""SHAP interaction values of tree models (the path-dependent game).

The exact Shapley interaction values of TreeSHAP's game (documentation page
"Local attributions", section "Interaction values"), laid out as XGBoost's
``pred_interactions``. The kernel is ``_kernels/_interactions.pyx``; rows,
validation and dask collections go through the same helpers as
:func:`~sklearn_r2shap.shap_values`.

Layer: public functions. Imports ``attributions`` (the expected value), ``_pipeline``
and the layers below; never an estimator.
"""
import numpy as np

from . import _pipeline
from ._execution import dask as _dask
from ._kernels import _interactions, _semivalues
from ._validation import check_rows, iter_row_blocks, n_rows_features, resolve_n_jobs
from ._model import explainable_ensemble as _explained
from ._numerics import beta_quadrature
from .attributions import expected_value

__all__ = ["shap_interaction_values"]

# A tree is tabulated (2^d patterns per leaf) when its tables hold at most this
# many numbers; tables are built in groups of about this many numbers.
_MAX_TABLE_ENTRIES = 1 << 22
_TABLE_GROUP_ENTRIES = 1 << 23
# Table groups are kept between blocks of a sparse X up to this many numbers
# in all (beyond, each block builds them again).
_TABLE_CACHE_ENTRIES = 1 << 23
# Rows of a dask array are rechunked so that one task's output stays below this.
_BLOCK_OUTPUT_BYTES = 1 << 26
# Tests set this to "tables" or "rows" to check both routes.
_FORCE_ROUTE = None


def shap_interaction_values(model, X, *, n_jobs=None):
    """Exact SHAP interaction values of the path-dependent game of every row.

    For a row x, v = v_x the path-dependent game (TreeSHAP's) and M features,
    the pairwise values are (Lundberg et al. 2020, eq. 8)

    ``Phi_ij = sum over S in N \\ {i, j} of |S|! (M - |S| - 2)! / (2 (M - 1)!)
    * [v(S + i + j) - v(S + i) - v(S + j) + v(S)]``

    for ``i != j`` (so ``Phi_ij = Phi_ji``, and the pair's total interaction
    is ``Phi_ij + Phi_ji``), and the main effects ``Phi_ii = phi_i - sum_{j != i}
    Phi_ij`` with ``phi`` the SHAP values: row ``j`` of a matrix sums to
    :func:`shap_values`' ``j``-th value, the whole matrix to the raw prediction.
    Exact at any depth: per tree, Gauss-Legendre quadrature of the second
    derivatives of the game's multilinear extension.

    Parameters
    ----------
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
        Rows to explain. NaN is allowed where the model accepts it.
    n_jobs : int, default=None
        Threads; None uses all cores.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1, n_features + 1) or (n_rows, n_outputs, n_features + 1, n_features + 1)
        As XGBoost's ``pred_interactions``: ``[i, j]`` the values above, the
        last row and column 0 but for the corner, the expected value
        ``v_x(empty)``. Models with several outputs (multiclass) have the
        output axis after the rows, as in :func:`shap_values`. Values are in
        the model's raw (margin) space. The result takes
        ``8 * n_outputs * (n_features + 1)**2`` bytes per row (3.5 kB for 20
        features, 82 kB for 100, 8 MB for 1,000); a dask collection gives a
        lazy dask array whose blocks are the row blocks of ``X``, a dask
        array's rows rechunked so that a block's output stays under 64 MB.

    See Also
    --------
    shap_values : the SHAP values, the row sums of these matrices.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from sklearn_r2shap import shap_interaction_values, shap_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = GradientBoostingRegressor(n_estimators=20, max_depth=3).fit(X, y)
    >>> phi = shap_interaction_values(model, X[:5])
    >>> phi.shape
    (5, 11, 11)
    >>> bool(np.allclose(phi, phi.transpose(0, 2, 1)))
    True
    >>> bool(np.allclose(phi.sum(axis=2), shap_values(model, X[:5])))
    True
    >>> bool(np.allclose(phi.sum(axis=(1, 2)), model.predict(X[:5])))
    True
    """
    model, X, _ = _pipeline.unwrap(model, X)  # a Pipeline: its last step, X transformed
    if _dask.is_dask_collection(X):
        return _dask_interaction_values(model, X, n_jobs)
    return _interaction_values(_explained(model), X, resolve_n_jobs(n_jobs))


def _output_shape(ensemble):
    width = ensemble.n_features + 1
    return (width, width) if ensemble.n_outputs == 1 else (ensemble.n_outputs, width, width)


def _dask_interaction_values(model, X, n_jobs):
    ensemble = _explained(model)
    shape = _output_shape(ensemble)
    if hasattr(X, "chunks") and hasattr(X, "rechunk") and X.ndim == 2:
        bound = max(1, _BLOCK_OUTPUT_BYTES // (8 * int(np.prod(shape))))
        known = all(np.isfinite(c) for c in X.chunks[0])
        if known and len(X.chunks[0]) and max(X.chunks[0]) > bound:
            X = X.rechunk({0: bound})
    return _dask.map_rows(shap_interaction_values, ensemble, X, trailing_shape=shape,
                          n_jobs=n_jobs, check=lambda empty: check_rows(ensemble, empty))


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


def _plan(ensemble, structure, n_rows):
    """Which trees are tabulated (in groups of leaves) and which go row by row."""
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
    if _FORCE_ROUTE == "tables":
        tabulate = feasible
    elif _FORCE_ROUTE == "rows":
        tabulate = np.zeros(ensemble.n_trees, dtype=bool)
    else:
        tabulate = feasible & cheaper
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


def _interaction_values(ensemble, X, n_threads):
    n_rows, _ = n_rows_features(X)
    out = np.zeros((n_rows, ensemble.n_outputs) + _output_shape(ensemble)[-2:])
    structure = _semivalues.pattern_structure(ensemble)
    rule = _rules(int(np.max(structure["leaf_dim"], initial=0)))
    by_rows, groups, entries = _plan(ensemble, structure, n_rows)
    width = ensemble.n_features + 1
    # rows per block of the table route: their matrices stay in a core's cache
    block = int(min(64, max(1, (1 << 15) // (ensemble.n_outputs * width * width))))
    offsets = _interactions.packed_offsets(structure, width)
    expected = np.ascontiguousarray(expected_value(ensemble), dtype=np.float64)
    cache = {}
    cache_entries = sum(int(entries[_group_leaves(structure, g)].sum()) for g in groups)
    # a dense X is one block; a sparse X goes in dense blocks of bounded size
    for start, stop, rows in iter_row_blocks(ensemble, X, max(n_rows, 1)):
        part = out[start:stop]
        _interactions.row_interactions(ensemble, rows, structure, by_rows, *rule, *offsets,
                                       part, n_threads)
        for g, group in enumerate(groups):
            if g in cache:
                tables, start_by_leaf = cache[g]
            else:
                leaves, table_start, scale = _tables(ensemble, structure, group, entries)
                tables = _interactions.interaction_tables(structure, leaves, table_start, scale,
                                                          *rule, n_threads)
                start_by_leaf = np.full(len(structure["leaf_dim"]), -1, dtype=np.int64)
                start_by_leaf[leaves] = table_start[:-1]
                if stop < n_rows and cache_entries <= _TABLE_CACHE_ENTRIES:
                    cache[g] = tables, start_by_leaf
            _interactions.pattern_interactions(
                ensemble, rows, structure, np.asarray(group, dtype=np.int64), tables,
                start_by_leaf, *offsets, part, block, n_threads)
        _interactions.finish(part, expected, n_threads)
    return out[:, 0] if ensemble.n_outputs == 1 else out
