"""Exact SHAP values of piecewise-linear tree ensembles (documentation page
"Piecewise-linear trees").

A leaf of a piecewise-linear tree predicts ``b_l + sum_k a_lk x_k`` instead
of a constant (LightGBM ``linear_tree=True``; the three tree types of
Guryanov's paper, see :func:`piecewise_ensemble`). The game is the
path-dependent value function of TreeSHAP in which, inside leaf ``l``, a
linear feature ``k`` that is not in the coalition ``S`` takes its leaf mean
``mu_lk``: the mean of ``x_k`` over the background rows routed to ``l``.
LightGBM stores neither these means nor covers that match them, so both are
computed from background data (pass the training data: then the covers are
LightGBM's own counts and ``b_l + sum_k a_lk mu_lk`` is the leaf's mean
prediction on the rows it was fitted on).

:func:`piecewise_shap_values` is the functional form;
:class:`~sklearn_r2shap.PiecewiseLinearExplainer` (in ``_estimators``) fits a
LightGBM ``linear_tree`` model (or takes a fitted one), explains it and
selects features by mean ``|SHAP|``.

Missing values follow LightGBM's rule: a leaf whose linear features include
one with NaN predicts its constant fallback ``leaf_value``. In the game, leaf
``l`` predicts the fallback when a linear feature with NaN is in ``S``
(otherwise that feature sits at its mean), so the values add up to the
model's prediction for every row, NaN or not. Leaf means are taken over the
background rows whose linear features of that leaf are all non-NaN: the rows
LightGBM fits the leaf's linear model on and predicts with it (0 for a leaf
that no such row reaches: the leaf then sits at its constant ``b_l``).

The game (covers, leaf means, the block function of SHAP values) lives in
:mod:`._games.piecewise`; this module builds it from background rows (in
memory, or a dask background in one tree-reduced pass) and hands the block
function to an executor.

Layer: public functions. Imports the layers below; never an estimator.
"""
import numbers
from dataclasses import replace

import numpy as np

from ._execution import local as _local
from ._execution.cost import semivalue_seconds
from ._execution.run import map_rows, reduce_rows
from ._games import piecewise as _pw
from ._kernels import _piecewise
from ._model import TreeArrays, TreeEnsemble, to_ensemble
from ._model._ensemble import DECISION_CATEGORICAL, DECISION_LEQ, DECISION_LT
from ._prepare import prepare, row_argument
from ._validation import check_row_weights

__all__ = [
    "piecewise_shap_values",
    "piecewise_predict",
    "piecewise_ensemble",
]


# ----------------------------------------------------------------------------
# The game: covers and leaf means from background data


# ----------------------------------------------------------------------------
# The public functions


def _build_game(ensemble, background, background_weight, n_threads):
    """Covers and leaf means from the background rows (summed by the executor's
    entry for sums over rows: in memory, or over a dask background's
    partitions in one pass), then the leaf constants."""
    start, feature, coef, fallback = _pw._linear_arrays(ensemble)
    call = prepare(ensemble, background, n_jobs=n_threads, ensemble_of=to_ensemble)
    total = reduce_rows(call, _leaf_statistics_part, payload=(ensemble, start, feature),
                        arguments={
                            "background_weight": row_argument(call, background_weight,
                                                              "background_weight")})
    if total["rows"] == 0:
        raise ValueError("background must contain at least one row.")
    if not total["weight"] > 0:
        raise ValueError("background_weight must not be all zero.")
    return _pw.game_from_statistics(ensemble, start, feature, coef, fallback, total["cover"],
                                    total["complete"], total["entry_sum"])


def _leaf_statistics_part(payload, rows, first, subset, arguments, *, n_threads,
                          progress=None):
    """Covers, complete-row weights and linear-feature sums of one part of the
    background (a part function of :func:`._execution.run.reduce_rows`); a
    sparse background one dense block at a time."""
    ensemble, start, feature = payload
    weight = arguments["background_weight"]
    weight = (np.ones(rows.shape[0]) if weight is None else
              check_row_weights(weight, rows.shape[0], "background_weight",
                                partition_of="background"))

    def sums(low, high, B):
        cover, complete, entry_sum = _piecewise.leaf_statistics(
            ensemble, B, weight[low:high], start, feature,
            _pw._threads_for(ensemble.n_trees * B.shape[0], 1 << 14, n_threads))
        return {"cover": cover, "complete": complete, "entry_sum": entry_sum}

    total = _local.reduce_blocks(sums, ensemble, rows, block_rows=max(1, rows.shape[0]))
    if total is None:  # an empty part
        total = sums(0, 0, np.empty((0, ensemble.n_features)))
    return {"rows": rows.shape[0], "weight": float(weight.sum()), **total}


def values_of(call, game, *, route=None):
    """The game's values over a prepared call's rows (``route``: one of
    :data:`._games.piecewise.ROUTES`, or None to choose by cost)."""
    ensemble = game.ensemble
    return map_rows(call, _pw.game_values, game=game, desc="Piecewise SHAP values",
                    trailing_shape=call.trailing_shape(ensemble.n_features + 1),
                    seconds_per_row=semivalue_seconds(ensemble, len(game.points)), route=route)


def _values(game, X, n_jobs, verbose=0):
    """The values of a built game on rows X (for :class:`PiecewiseLinearExplainer`)."""
    return values_of(prepare(game.ensemble, X, n_jobs=n_jobs, verbose=verbose,
                             ensemble_of=to_ensemble), game)


def piecewise_shap_values(model, X, *, background, background_weight=None, n_jobs=None,
                          verbose="auto"):
    """Exact SHAP values of a piecewise-linear tree ensemble (or a constant-leaf one).

    The game (documentation page "Piecewise-linear trees") is TreeSHAP's path-dependent value
    function in which, inside leaf ``l``, a linear feature ``k`` not in the
    coalition takes its leaf mean ``mu_lk``; covers and leaf means are
    computed from ``background``, the rows routed through the trees. With
    ``c_l = b_l + sum_k a_lk mu_lk``, the value at ``S`` is the ordinary tree
    game with leaf values ``c_l`` plus, for every leaf and linear feature
    ``k`` in ``S``, ``a_lk (x_k - mu_lk)`` times the leaf's path weight. The
    Shapley values are computed exactly (Gauss-Legendre quadrature of the
    multilinear extension's gradient), in O(leaves x (depth + linear terms))
    per tree and row.

    Parameters
    ----------
    model : fitted LightGBM model, TreeEnsemble or any supported tree model
        ``LGBMRegressor`` / ``LGBMClassifier`` / ``Booster`` with
        ``linear_tree=True``, an ensemble from :func:`piecewise_ensemble`, or
        a constant-leaf model (then the values equal :func:`shap_values`
        computed with covers counted on ``background``).
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
        Rows to explain; NaN allowed. A dask collection gives a lazy dask
        array of the same row blocks.
    background : array-like, DataFrame, sparse matrix or dask collection of shape (n_background, n_features)
        Rows that define the covers and the leaf means. Pass the training
        data for values consistent with the model's leaf values (LightGBM's
        own covers are its training counts).
        A dask collection is reduced at once, in one pass over its
        partitions.
    background_weight : array-like of shape (n_background,), optional
        Weights of the background rows (weighted covers and means), e.g. the
        sample weights the model was fitted with. A dask collection of the same row
        blocks when ``background`` is one.
    n_jobs : int, default=None
    verbose : "auto" or int, default="auto"
        Threads (None: all cores) and progress, as in :func:`~sklearn_r2shap.shap_values`.

    Returns
    -------
    ndarray of shape (n_rows, n_features + 1) or (n_rows, n_outputs, n_features + 1)
        Shapley values in the model's raw (margin) space, the expected value
        ``v_x(empty)`` last. Each row sums to the model's raw prediction.

    See Also
    --------
    PiecewiseLinearExplainer : the estimator form.
    piecewise_ensemble : build a piecewise-linear ensemble from arrays.

    Examples
    --------
    >>> import lightgbm
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn_r2shap.piecewise import piecewise_shap_values
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = lightgbm.LGBMRegressor(linear_tree=True, n_estimators=20, num_leaves=8,
    ...                                verbose=-1).fit(X, y)
    >>> phi = piecewise_shap_values(model, X[:5], background=X)
    >>> phi.shape
    (5, 11)
    >>> bool(np.allclose(phi.sum(axis=1), model.predict(X[:5], raw_score=True)))
    True
    """
    return _shap_values(model, X, background=background, background_weight=background_weight,
                        n_jobs=n_jobs, verbose=verbose)


def _shap_values(model, X, *, background, background_weight=None, n_jobs=None, verbose="auto",
                 route=None):
    """:func:`piecewise_shap_values`, with the ``route`` of the game's values
    (:data:`._games.piecewise.ROUTES`; None chooses by cost)."""
    # the background is summed (covers, leaf means), not explained: checked as it is read
    call = prepare(model, X, background=background, n_jobs=n_jobs, verbose=verbose,
                   ensemble_of=to_ensemble, check_background=False)
    game = _build_game(call.ensemble, call.background, background_weight, call.n_threads)
    return values_of(call, game, route=route)


def piecewise_predict(model, X, *, n_jobs=None, verbose="auto"):
    """Raw prediction of a tree ensemble with linear leaves, shape (n_rows, n_outputs).

    A leaf predicts ``b_l + sum_k a_lk x_k``, or its fallback value when one
    of those ``x_k`` is NaN (LightGBM's rule); constant leaves their value.
    ``verbose``: progress, as in :func:`~sklearn_r2shap.shap_values`.

    Examples
    --------
    >>> from sklearn_r2shap.piecewise import piecewise_ensemble, piecewise_predict
    >>> stump = dict(children_left=[1, -1, -1], children_right=[2, -1, -1],
    ...              feature=[0, 0, 0], threshold=[0.0, 0.0, 0.0], value=[0.0, 1.0, 2.0],
    ...              coef=[[0, 0], [0.5, 0], [0, -1.0]])
    >>> ensemble = piecewise_ensemble([stump], n_features=2)
    >>> piecewise_predict(ensemble, [[-2.0, 0.0], [1.0, 3.0]])[:, 0].tolist()
    [0.0, -1.0]
    """
    call = prepare(model, X, n_jobs=n_jobs, verbose=verbose, ensemble_of=to_ensemble)
    ensemble = call.ensemble
    return map_rows(call, _pw.predict_block, trailing_shape=(ensemble.n_outputs,),
                    desc="Piecewise predictions", seconds_per_row=semivalue_seconds(ensemble, 1),
                    linear=_pw._linear_arrays(ensemble))


# ----------------------------------------------------------------------------
# Piecewise-linear trees from arrays

_DECISIONS = {"<=": DECISION_LEQ, "<": DECISION_LT}


def _tree_arrays(spec, n_features):
    if isinstance(spec, TreeArrays):
        return spec
    spec = dict(spec)
    known = {"children_left", "children_right", "feature", "threshold", "value", "coef",
             "node_coef", "cover", "default_left", "decision_type", "categories", "fallback",
             "output"}
    unknown = set(spec) - known
    if unknown:
        raise ValueError(f"unknown tree keys {sorted(unknown)}; expected some of {sorted(known)}.")
    left = np.asarray(spec["children_left"], dtype=np.int64)
    right = np.asarray(spec["children_right"], dtype=np.int64)
    n = len(left)
    if right.shape != (n,):
        raise ValueError("children_left and children_right must have the same length.")
    leaf = left < 0
    feature = np.asarray(spec.get("feature", np.zeros(n)), dtype=np.int64)
    threshold = np.asarray(spec.get("threshold", np.zeros(n)), dtype=np.float64)
    value = np.asarray(spec.get("value", np.zeros(n)), dtype=np.float64).reshape(n, -1)
    if value.shape[1] != 1:
        raise ValueError("piecewise_ensemble takes one value per node.")
    cover = np.asarray(spec.get("cover", np.ones(n)), dtype=np.float64)
    default_left = np.asarray(spec.get("default_left", np.zeros(n, dtype=bool)), dtype=bool)
    kinds = spec.get("decision_type")
    decision = np.full(n, DECISION_LEQ, dtype=np.uint8)
    if kinds is not None:
        for k, kind in enumerate(kinds):
            if kind not in _DECISIONS:
                raise ValueError(f"decision_type must be '<=' or '<', got {kind!r}.")
            decision[k] = _DECISIONS[kind]
    categories = {int(k): np.asarray(v, dtype=np.int64)
                  for k, v in (spec.get("categories") or {}).items()}
    for k in categories:
        decision[k] = DECISION_CATEGORICAL
    for name, array in (("feature", feature), ("threshold", threshold), ("cover", cover),
                        ("default_left", default_left)):
        if array.shape != (n,):
            raise ValueError(f"{name} must have one entry per node ({n}), got {array.shape}.")

    coef = np.zeros((n, n_features))
    if spec.get("coef") is not None:
        given = np.asarray(spec["coef"], dtype=np.float64)
        if given.shape != (n, n_features):
            raise ValueError(f"coef must have shape (n_nodes, n_features) = {(n, n_features)}, "
                             f"got {given.shape}.")
        coef += np.where(leaf[:, None], given, 0.0)
    if spec.get("node_coef") is not None:
        # type 3: an internal node's coefficient on its split feature holds in
        # every leaf below it (repeated features on a path add up)
        node_coef = np.asarray(spec["node_coef"], dtype=np.float64)
        if node_coef.shape != (n,):
            raise ValueError(
                f"node_coef must have one entry per node ({n}), got {node_coef.shape}.")
        parent = np.full(n, -1, dtype=np.int64)
        parent[left[~leaf]] = np.flatnonzero(~leaf)
        parent[right[~leaf]] = np.flatnonzero(~leaf)
        for k in np.flatnonzero(leaf):
            c = k
            while parent[c] >= 0:
                c = parent[c]
                coef[k, feature[c]] += node_coef[c]
    linear_terms = {}
    for k in np.flatnonzero(leaf):
        features = np.flatnonzero(coef[k])
        if len(features):
            linear_terms[int(k)] = (features, coef[k, features])
    fallback = spec.get("fallback")
    fallback = value if fallback is None else np.asarray(fallback, np.float64).reshape(n, 1)
    return TreeArrays(
        children_left=left, children_right=right, default_left=default_left, feature=feature,
        threshold=threshold, decision_type=decision, cover=cover, value=value,
        categories=categories, output=int(spec.get("output", 0)),
        linear_terms=linear_terms, fallback_value=fallback,
    )


def piecewise_ensemble(trees, *, n_features, base_value=0.0, feature_names=None):
    """A tree ensemble with linear leaves, from arrays, for the explainers.

    Each tree is a dict of per-node arrays (node 0 is the root). A leaf
    ``l`` predicts ``value[l] + coef[l] @ x``, or ``fallback[l]`` when one of
    the features with a non-zero coefficient is NaN. The three types of
    Guryanov's paper are written as:

    * **type 1**: ``coef[l]`` has entries on any features;
    * **type 2**: ``coef[l]`` is non-zero only on features split on along
      ``l``'s path (LightGBM ``linear_tree``);
    * **type 3**: ``node_coef[v]``, one coefficient per internal node ``v``
      on its split feature, shared by all leaves below ``v``; it is added to
      ``coef[l, feature[v]]`` of each of them (so a feature split on twice
      on a path gets the sum of both nodes' coefficients).

    Parameters
    ----------
    trees : list of dict or TreeArrays
        Keys (arrays of length n_nodes unless stated):

        - ``children_left``, ``children_right``: child indices, -1 at leaves;
        - ``feature``, ``threshold``: split feature and threshold (ignored at
          leaves); a row goes left when ``x[feature] <= threshold``;
        - ``value``: the leaf constants ``b_l`` (ignored at internal nodes);
        - ``coef`` (optional): shape (n_nodes, n_features), leaf coefficients;
        - ``node_coef`` (optional): type-3 coefficients of internal nodes;
        - ``fallback`` (optional): leaf value when a linear feature is NaN
          (default ``value``);
        - ``cover`` (optional, default 1): the explainers recompute covers
          from background data, so it is only used by constant-leaf tools;
        - ``default_left`` (optional, default False): where NaN goes;
        - ``decision_type`` (optional): ``"<="`` (default) or ``"<"``;
        - ``categories`` (optional): ``{node: categories going left}`` makes
          ``node`` a categorical split;
        - ``output`` (optional, default 0): the output the tree adds to.
    n_features : int
        Width of the rows.
    base_value : float or array-like, default=0.0
        Added to the sum of the trees (one entry per output).
    feature_names : array-like of str, optional

    Returns
    -------
    TreeEnsemble
        Accepted by :func:`piecewise_shap_values`, :func:`piecewise_predict`
        and (with ``prefit=True``) :class:`PiecewiseLinearExplainer`.

    Examples
    --------
    A depth-1 type-2 tree on two features and a type-3 tree of depth 2:

    >>> import numpy as np
    >>> from sklearn_r2shap.piecewise import (piecewise_ensemble, piecewise_predict,
    ...                                       piecewise_shap_values)
    >>> type2 = dict(children_left=[1, -1, -1], children_right=[2, -1, -1],
    ...              feature=[0, 0, 0], threshold=[0.0, 0, 0], value=[0.0, 1.0, -1.0],
    ...              coef=[[0, 0], [2.0, 0], [-1.0, 0]])
    >>> type3 = dict(children_left=[1, 3, -1, -1, -1], children_right=[2, 4, -1, -1, -1],
    ...              feature=[1, 0, 0, 0, 0], threshold=[0.5, -0.5, 0, 0, 0],
    ...              value=[0, 0, 3.0, 1.0, 2.0], node_coef=[0.5, 1.5, 0, 0, 0])
    >>> ensemble = piecewise_ensemble([type2, type3], n_features=2)
    >>> X = np.random.default_rng(0).normal(size=(200, 2))
    >>> phi = piecewise_shap_values(ensemble, X[:3], background=X)
    >>> bool(np.allclose(phi.sum(axis=1), piecewise_predict(ensemble, X[:3])[:, 0]))
    True
    """
    if isinstance(n_features, bool) or not isinstance(n_features, numbers.Integral) \
            or n_features < 1:
        raise ValueError(f"n_features must be a positive integer, got {n_features!r}.")
    arrays = [_tree_arrays(tree, int(n_features)) for tree in trees]
    n_outputs = max([a.output for a in arrays] + [0]) + 1
    base = np.broadcast_to(np.asarray(base_value, dtype=np.float64), (n_outputs,))
    if any(a.linear_terms is None for a in arrays):  # TreeArrays given without linear terms
        arrays = [a if a.linear_terms is not None else _with_empty_linear(a) for a in arrays]
    return TreeEnsemble.from_trees(
        arrays, base_value=base, n_features=int(n_features), model_type="piecewise",
        objective="custom", feature_names=feature_names, info={"allow_nan": True},
    )


def _with_empty_linear(tree):
    return replace(tree, linear_terms={})
