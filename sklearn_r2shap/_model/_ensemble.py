"""The one representation of a trained tree ensemble used by every kernel.

Adapters (one module per library) translate a fitted model into
:class:`TreeArrays` (one tree each, or all trees stacked in one);
:meth:`TreeEnsemble.from_trees` concatenates them into flat node arrays,
renumbers each tree in depth-first preorder (a parent comes before its
children, and every subtree is a contiguous range starting at its root, with
the left subtree first: the kernels rely on both) and derives the
row-independent quantities of the path-dependent game (doc/local_attributions.rst):

* ``cover_ratio[k] = c_k / c_parent(k)``, the fraction of the parent's cover
  that reaches ``k`` (1 for a root);
* ``prev_same[k]``: the nearest ancestor edge on the path to ``k`` that splits
  on the same feature as the edge into ``k`` (-1 if none), which lets the
  kernels keep one factor per *feature* on a path when a feature repeats
  (TreeGrad, Algorithm 9, ``e^uparrow``);
* ``n_path_features``: the largest number of distinct features on a
  root-to-leaf path, which fixes the degree of the polynomials the quadrature
  kernels integrate.

Layer: models (imports the ground floor and ``_kernels``).
"""
from dataclasses import dataclass, field, replace
from typing import List, Optional

import numpy as np

from .._kernels import _forest, _predict
from .._validation import check_rows, resolve_n_jobs

# Decision types of an internal node (``decision_type``). NaN always goes to
# ``default_child``; a category in the node's set goes to ``children_left``.
DECISION_LEQ = 0  # x <= threshold goes left (scikit-learn, LightGBM, CatBoost)
DECISION_LT = 1  # x < threshold goes left (XGBoost)
DECISION_LEQ_ZERO_MISSING = 2  # LightGBM missing_type=Zero: |x| <= 1e-35f -> default
DECISION_CATEGORICAL = 3  # int(x) in the node's category bitset goes left


@dataclass
class TreeArrays:
    """One tree as an adapter produces it (local node indices, root = 0), or
    several trees stacked (``tree_start``).

    Parameters
    ----------
    children_left, children_right : ndarray of int, shape (n_nodes,)
        Local child indices, -1 for a leaf.
    default_left : ndarray of bool, shape (n_nodes,)
        Whether a missing value (NaN) goes to the left child.
    feature : ndarray of int, shape (n_nodes,)
        Split feature (column of X); ignored for leaves.
    threshold : ndarray of float64, shape (n_nodes,)
        Numeric threshold; ignored for leaves and categorical nodes.
    decision_type : ndarray of uint8, shape (n_nodes,)
        One of the ``DECISION_*`` constants.
    cover : ndarray of float64, shape (n_nodes,)
        The library's own cover (sample weight or hessian sum) of each node.
    value : ndarray of float64, shape (n_nodes, n_values)
        Leaf outputs, already multiplied by the tree's weight in the ensemble
        (learning rate, 1/T, CatBoost scale); ignored for internal nodes.
    categories : dict, optional
        ``{node: array of non-negative ints}``: the categories that go left at
        a categorical node (``node``: a row of these arrays).
    output : int or ndarray of int, default=0
        The output (class) the tree adds to when ``n_values == 1``; with
        ``tree_start``, one per tree or one for all.
    linear_terms : dict, optional
        Linear leaves: ``{leaf: (features, coefficients)}``; the leaf predicts
        ``value[leaf] + coefficients @ x[features]`` (LightGBM ``linear_tree``).
    fallback_value : ndarray of shape (n_nodes, n_values), optional
        With linear leaves: what a leaf predicts when one of its linear
        features is NaN (LightGBM's constant ``leaf_value``).
    tree_start : ndarray of int, shape (n_trees + 1,), optional
        Several trees in one: tree t is rows ``tree_start[t]:tree_start[t + 1]``
        (``tree_start[0] == 0``, ``tree_start[-1] == n_nodes``), its child
        indices local to it (its root is its local node 0). Adapters that read
        all trees at once give them so: nothing is then done tree by tree.
    """

    children_left: np.ndarray
    children_right: np.ndarray
    default_left: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    decision_type: np.ndarray
    cover: np.ndarray
    value: np.ndarray
    categories: dict = field(default_factory=dict)
    output: int = 0
    linear_terms: Optional[dict] = None
    fallback_value: Optional[np.ndarray] = None
    tree_start: Optional[np.ndarray] = None


def leaf_arrays(n_nodes):
    """The split fields of :class:`TreeArrays` for ``n_nodes`` nodes that are
    all leaves (no children, NaN to the right, feature 0, threshold 0,
    ``DECISION_LEQ``): an adapter then writes its internal nodes."""
    return dict(children_left=np.full(n_nodes, -1, dtype=np.int64),
                children_right=np.full(n_nodes, -1, dtype=np.int64),
                default_left=np.zeros(n_nodes, dtype=bool),
                feature=np.zeros(n_nodes, dtype=np.int64),
                threshold=np.zeros(n_nodes),
                decision_type=np.full(n_nodes, DECISION_LEQ, dtype=np.uint8))


@dataclass
class TreeEnsemble:
    """Flat arrays of all nodes of all trees of a fitted model.

    ``f(x)[o] = base_value[o] + sum over trees t writing to o of value[leaf_t(x)]``
    in the model's raw (margin) space. Build it with :meth:`from_trees`.
    """

    children_left: np.ndarray  # int64, global index, -1 for a leaf
    children_right: np.ndarray
    default_child: np.ndarray  # int64, child taken by NaN
    feature: np.ndarray  # int64, -1 for a leaf
    threshold: np.ndarray  # float64
    decision_type: np.ndarray  # uint8
    cat_start: np.ndarray  # int64, first uint32 word of the node's bitset
    cat_words: np.ndarray  # int64, number of words (0 if not categorical)
    cat_bitsets: np.ndarray  # uint32
    cover: np.ndarray  # float64
    cover_ratio: np.ndarray  # float64, c_k / c_parent(k)
    parent: np.ndarray  # int64, -1 for a root
    prev_same: np.ndarray  # int64
    value: np.ndarray  # float64, (n_nodes, n_values)
    tree_start: np.ndarray  # int64, (n_trees + 1,)
    tree_output: np.ndarray  # int64, (n_trees,)
    base_value: np.ndarray  # float64, (n_outputs,)
    n_features: int
    n_path_features: int
    max_depth: int
    averaging: bool = False
    x_float32: bool = False
    model_type: str = ""
    objective: str = ""
    feature_names: Optional[np.ndarray] = None
    # Linear leaves (LightGBM linear_tree): for leaf k, its coefficients are
    # linear_coef[linear_start[k]:linear_start[k + 1]] on the features
    # linear_feature[...], and value[k] holds the constant term.
    linear_start: Optional[np.ndarray] = None
    linear_feature: Optional[np.ndarray] = None
    linear_coef: Optional[np.ndarray] = None
    linear_fallback: Optional[np.ndarray] = None  # leaf value used when a linear feature is NaN
    info: dict = field(default_factory=dict)
    # When players are not the split features (feature groups, ``with_players``):
    # ``feature`` holds each node's player and ``route_feature`` the column its rule reads.
    route_feature: Optional[np.ndarray] = None

    # An ensemble is never changed after it is built (every ``with_*`` method
    # returns a copy), so what depends on it alone -- the games' plans and
    # tables, the expected value -- is kept with it: a prepared explainer, or
    # any caller passing the same ensemble again, pays for them once. Not a
    # dataclass field: ``replace`` gives the copy a cache of its own, and
    # pickles (dask tasks) carry none.
    def __post_init__(self):
        self._cache = {}

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_cache"] = {}
        return state

    def cached(self, key, build):
        """``build()``, computed once for this ensemble and kept under ``key``."""
        cache = self.__dict__.setdefault("_cache", {})
        if key not in cache:
            cache[key] = build()
        return cache[key]

    @property
    def n_trees(self):
        return len(self.tree_start) - 1

    @property
    def n_nodes(self):
        return len(self.feature)

    @property
    def n_outputs(self):
        return len(self.base_value)

    @property
    def n_values(self):
        return self.value.shape[1]

    @property
    def is_leaf(self):
        return self.children_left < 0

    @property
    def has_linear_leaves(self):
        return self.linear_start is not None

    @classmethod
    def from_trees(
        cls,
        trees: List[TreeArrays],
        *,
        base_value,
        n_features,
        averaging=False,
        x_float32=False,
        model_type="",
        objective="",
        feature_names=None,
        info=None,
    ):
        """Concatenate adapter trees into one ensemble (see module docstring)."""
        if not trees:
            raise ValueError(f"{model_type}: the model has no trees to explain.")
        base_value = np.atleast_1d(np.asarray(base_value, dtype=np.float64)).copy()
        n_values = np.asarray(trees[0].value).reshape(len(trees[0].feature), -1).shape[1]
        if n_values not in (1, len(base_value)):
            raise ValueError("leaf values must have width 1 or n_outputs")

        forest = _stacked(trees, n_values)
        tree_start = forest.tree_start
        # One walk per tree (nogil) renumbers the nodes in preorder and finds the
        # path structure; the rest treats all nodes of all trees at once, so
        # models of thousands of trees are read in milliseconds.
        (order, left, right, parent, feature, prev_same, n_path_features,
         max_depth) = _structure(forest.children_left, forest.children_right, forest.feature,
                                 tree_start, n_features, model_type)
        if order is None:  # already in preorder (scikit-learn numbers its trees so)

            def take(a):
                return a.copy()  # the ensemble owns its arrays

        else:  # new node i is old node order[i]

            def take(a):
                return a[order]

        leaf = left < 0
        decision = take(forest.decision_type)
        decision[leaf] = DECISION_LEQ
        value = take(forest.value)
        value[np.flatnonzero(~leaf)] = 0.0  # (the kernels sum value * weight over all nodes)
        bad_leaf = np.flatnonzero(~np.all(np.isfinite(value), axis=1))
        if len(bad_leaf):
            # v_x(S) weighs every leaf by a cover ratio, so one infinite or NaN
            # leaf (e.g. a zero-weight node of a model fitted with negative
            # sample weights) would make every row's values NaN.
            k = int(bad_leaf[0])
            t = int(np.searchsorted(tree_start, k, side="right")) - 1
            raise ValueError(
                f"{model_type}: tree {t} has {len(bad_leaf)} leaf value(s) that are not "
                f"finite (first: {value[k].tolist()}); such a model predicts inf or NaN "
                "and cannot be explained. This happens when a node's total sample weight "
                "is zero or negative, e.g. with negative sample_weight."
            )
        categorical = np.flatnonzero(decision == DECISION_CATEGORICAL)
        cat_start, cat_words, cat_bitsets = _category_bitsets(
            forest.categories, categorical, categorical if order is None else order[categorical],
            len(feature), model_type)

        cover = take(forest.cover)
        if not np.all(np.isfinite(cover)) or np.any(cover < 0):
            raise ValueError(f"{model_type}: node covers must be finite and non-negative.")
        cover_ratio = _forest.cover_ratio(cover, parent)

        linear = {}
        if forest.linear_terms is not None:
            position = None  # old node k is new node position[k]
            if order is not None:
                position = np.empty_like(order)
                position[order] = np.arange(len(order))
            linear = _linear_arrays(forest.linear_terms, position, len(feature))
            linear["linear_fallback"] = take(forest.fallback_value)

        return cls(
            children_left=left,
            children_right=right,
            default_child=np.where(forest.default_left if order is None
                                   else forest.default_left[order], left, right),
            feature=feature,
            threshold=take(forest.threshold),
            decision_type=decision,
            cat_start=cat_start,
            cat_words=cat_words,
            cat_bitsets=cat_bitsets,
            cover=cover,
            cover_ratio=cover_ratio,
            parent=parent,
            prev_same=prev_same,
            value=value,
            tree_start=tree_start,
            tree_output=forest.output,
            base_value=base_value,
            n_features=int(n_features),
            n_path_features=int(n_path_features),
            max_depth=int(max_depth),
            averaging=bool(averaging),
            x_float32=bool(x_float32),
            model_type=model_type,
            objective=objective,
            feature_names=None if feature_names is None else np.asarray(feature_names, dtype=object),
            info=dict(info or {}),
            **linear,
        )

    def with_data_covers(self, X, sample_weight=None, *, n_jobs=None):
        """A copy whose covers are the (weighted) numbers of rows of ``X`` reaching each node.

        The path-dependent game weighs the children of a node by their covers
        (the cover ratios). Libraries store covers from training: a sample
        weight sum, a hessian sum or an unweighted count. A model whose
        stored covers ignore sample weights (scikit-learn's
        HistGradientBoosting keeps unweighted counts) can be given the
        weighted covers of its training rows here, so that a row of weight 2
        counts like two copies of the row.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_rows, n_features)
            Rows routed as ``predict`` routes them (checked like rows to explain).
        sample_weight : array-like of shape (n_rows,), default=None
            Non-negative, finite weights; None weighs every row 1.
        n_jobs : int, default=None
            Threads; None uses all cores.

        Returns
        -------
        TreeEnsemble
            The same trees and values; ``cover`` and ``cover_ratio`` replaced.
            A node no row (of positive weight) reaches gets cover 0 and splits
            its parent's weight evenly with its sibling if that is 0 too.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.tree import DecisionTreeRegressor
        >>> from sklearn_r2shap import to_ensemble
        >>> X = np.arange(8.0).reshape(-1, 1)
        >>> tree = DecisionTreeRegressor(max_depth=1).fit(X, X[:, 0])
        >>> weights = np.array([3.0, 1, 1, 1, 1, 1, 1, 1])
        >>> to_ensemble(tree).with_data_covers(X, weights).cover.tolist()
        [10.0, 6.0, 4.0]
        """
        X = check_rows(self, X)
        n_rows = X.shape[0]
        if sample_weight is None:
            weight = np.ones(n_rows)
        else:
            weight = np.asarray(sample_weight, dtype=np.float64)
            if weight.shape != (n_rows,):
                raise ValueError(f"sample_weight must have shape ({n_rows},), got {weight.shape}.")
            if not np.all(np.isfinite(weight)) or np.any(weight < 0):
                raise ValueError("sample_weight must be finite and non-negative.")
        leaves = _predict.apply(self, X, resolve_n_jobs(n_jobs))
        cover = np.bincount(leaves.ravel(), weights=np.repeat(weight, self.n_trees),
                            minlength=self.n_nodes).astype(np.float64)
        # Children come after their parents (preorder): add bottom-up by depth.
        depth = np.zeros(self.n_nodes, dtype=np.int64)
        has_parent = np.flatnonzero(self.parent >= 0)
        for _ in range(self.max_depth):
            depth[has_parent] = depth[self.parent[has_parent]] + 1
        for level in range(int(depth.max(initial=0)), 0, -1):
            nodes = np.flatnonzero(depth == level)
            np.add.at(cover, self.parent[nodes], cover[nodes])
        info = dict(self.info, covers="data")
        return replace(self, cover=cover, cover_ratio=_forest.cover_ratio(cover, self.parent),
                                   info=info)

    def with_players(self, player_of_column):
        """A copy whose game has the players ``player_of_column[j]`` instead of the features.

        Every split on column j is credited to player ``player_of_column[j]``
        while it still routes rows by column j (``route_feature``), so the
        path-dependent game of a set T of players is that of the union of
        their columns (documentation page "Pipelines, Explanation results and IsolationForest"); every kernel then
        computes the values of the players. Players are numbered
        ``0..n_players-1 <= n_features - 1``, the rest of the value columns
        are null players.
        """
        player_of_column = np.asarray(player_of_column, dtype=np.int64)
        if player_of_column.shape != (self.n_features,):
            raise ValueError("player_of_column needs one player per column.")
        if self.has_linear_leaves:
            raise ValueError("feature groups are not supported for linear leaves.")
        route = self.feature if self.route_feature is None else self.route_feature
        players = np.where(route >= 0, player_of_column[np.maximum(route, 0)], route)
        prev_same, n_path_features, _ = _path_structure(self, players)
        return replace(self, feature=players.astype(np.int64), route_feature=route.copy(),
                       prev_same=prev_same, n_path_features=int(n_path_features),
                       info=dict(self.info))

    def tree_nodes(self, t):
        """Global node indices of tree ``t``."""
        return np.arange(self.tree_start[t], self.tree_start[t + 1])

    def per_output(self, outputs=None):
        """A copy with one value per leaf: tree t becomes one tree per output.

        For vector-leaf ensembles (``n_values == n_outputs > 1``: scikit-learn
        tree classifiers' class probabilities, CatBoost multiclass), tree t
        is repeated for each output c in ``outputs`` (default: all), in the
        order (t, c0), (t, c1), ..., with leaf values ``value[:, c]`` and
        ``tree_output = c``. The kernels need ``n_values == 1``.
        """
        if self.n_values == 1:
            return self
        if self.has_linear_leaves:
            raise ValueError("per_output does not support linear leaves")
        outputs = np.arange(self.n_values) if outputs is None else np.asarray(outputs, np.int64)
        sizes = np.diff(self.tree_start)
        n_trees, n_out = self.n_trees, len(outputs)
        block_size = np.repeat(sizes, n_out)  # blocks in the order (t, c)
        new_start = np.concatenate([[0], np.cumsum(block_size)]).astype(np.int64)
        # source node of every new node, and the offset new - old of its block
        old_start = np.repeat(self.tree_start[:-1], n_out)
        offset = np.repeat(new_start[:-1] - old_start, block_size)
        source = np.arange(new_start[-1]) - offset
        column = np.repeat(np.tile(outputs, n_trees), block_size)
        return self._gathered(source, offset, new_start,
                              value=np.ascontiguousarray(self.value[source, column][:, None]),
                              tree_output=np.tile(outputs, n_trees).astype(np.int64))

    def single_output(self, output):
        """The single-output ensemble of output ``output``: f_output(x) alone.

        Vector leaves keep column ``output`` (:meth:`per_output`); with one
        value per leaf, the trees adding to ``output`` are kept, in the
        model's order. The result has ``n_outputs == n_values == 1``, base
        value ``base_value[output]``, and predicts column ``output`` of the
        raw prediction exactly.
        """
        output = int(output)
        if not 0 <= output < self.n_outputs:
            raise ValueError(f"output must be in [0, {self.n_outputs}), got {output}.")
        if self.n_outputs == 1:
            return self
        if self.has_linear_leaves:
            raise ValueError("single_output does not support linear leaves")
        if self.n_values > 1:
            work = self.per_output([output])
        else:
            work = self._keep_trees(np.flatnonzero(self.tree_output == output))
        _, n_path_features, max_depth = _path_structure(work, work.feature)
        return replace(work, tree_output=np.zeros(work.n_trees, dtype=np.int64),
                       base_value=self.base_value[[output]].copy(),
                       n_path_features=int(n_path_features), max_depth=int(max_depth),
                       info=dict(self.info, output=output))

    def _keep_trees(self, trees):
        """A copy holding the trees ``trees`` only (in that order), renumbered."""
        if len(trees) == 0:
            raise ValueError(f"{self.model_type}: no tree adds to this output.")
        starts, stops = self.tree_start[trees], self.tree_start[trees + 1]
        sizes = stops - starts
        new_start = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        source = np.concatenate([np.arange(a, b) for a, b in zip(starts, stops)])
        offset = np.repeat(new_start[:-1] - starts, sizes)
        return self._gathered(source, offset, new_start,
                              value=np.ascontiguousarray(self.value[source]),
                              tree_output=self.tree_output[trees].copy())

    def _gathered(self, source, offset, tree_start, **changes):
        """A copy of nodes ``source`` (new node i is old node ``source[i]``, its
        block moved by ``offset[i]``), trees starting at ``tree_start``; node
        links renumbered, ``changes`` (the values, ``tree_output``) as given."""

        def moved(index):
            index = index[source]
            return np.where(index >= 0, index + offset, index).astype(np.int64)

        return replace(
            self,
            children_left=moved(self.children_left),
            children_right=moved(self.children_right),
            default_child=moved(self.default_child),
            feature=self.feature[source].copy(),
            route_feature=None if self.route_feature is None else self.route_feature[source].copy(),
            threshold=self.threshold[source].copy(),
            decision_type=self.decision_type[source].copy(),
            cat_start=self.cat_start[source].copy(),
            cat_words=self.cat_words[source].copy(),
            cover=self.cover[source].copy(),
            cover_ratio=self.cover_ratio[source].copy(),
            parent=moved(self.parent),
            prev_same=moved(self.prev_same),
            tree_start=tree_start,
            info=dict(self.info),
            **changes,
        )


def _stacked(trees, n_values):
    """All nodes of ``trees`` (each one tree or several) as one :class:`TreeArrays`.

    The arrays are concatenated in the ensemble's dtypes; ``tree_start`` spans
    all trees, ``output`` holds one output per tree, ``categories`` and
    ``linear_terms`` are keyed by row (``linear_terms`` is None when no part
    has linear leaves, and ``fallback_value`` then too).
    """
    sizes, outputs, categories = [], [], {}
    linear_terms = {} if any(tree.linear_terms is not None for tree in trees) else None
    offset = 0
    for tree in trees:
        n = len(tree.feature)
        starts = np.array([0, n]) if tree.tree_start is None else np.asarray(tree.tree_start)
        if starts[0] != 0 or starts[-1] != n or np.any(np.diff(starts) < 1):
            raise ValueError(f"tree_start must run from 0 to the number of nodes ({n}) "
                             f"with at least one node per tree, got {starts.tolist()}.")
        sizes.append(np.diff(starts))
        outputs.append(np.broadcast_to(np.asarray(tree.output, dtype=np.int64), len(starts) - 1))
        # (Python loops over the categorical nodes and linear leaves only)
        categories.update({int(k) + offset: v for k, v in (tree.categories or {}).items()})
        if tree.linear_terms:
            linear_terms.update({int(k) + offset: v for k, v in tree.linear_terms.items()})
        offset += n

    def joined(name, dtype):
        parts = [np.asarray(getattr(tree, name), dtype=dtype) for tree in trees]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    values = []
    for tree in trees:
        values.append(np.asarray(tree.value, dtype=np.float64).reshape(len(tree.feature), -1))
        if values[-1].shape[1] != n_values:
            raise ValueError("all trees must have leaf values of the same width")
    fallback = None
    if linear_terms is not None:
        fallback = np.concatenate([
            value if tree.fallback_value is None else np.asarray(
                tree.fallback_value, dtype=np.float64).reshape(value.shape[0], -1)
            for tree, value in zip(trees, values)
        ])
    return TreeArrays(
        children_left=joined("children_left", np.int64),
        children_right=joined("children_right", np.int64),
        default_left=joined("default_left", bool),
        feature=joined("feature", np.int64),
        threshold=joined("threshold", np.float64),
        decision_type=joined("decision_type", np.uint8),
        cover=joined("cover", np.float64),
        value=values[0] if len(values) == 1 else np.concatenate(values),
        categories=categories,
        output=np.concatenate(outputs),
        linear_terms=linear_terms,
        fallback_value=fallback,
        tree_start=np.concatenate([[0], np.cumsum(np.concatenate(sizes))]).astype(np.int64),
    )


def _global_children(children_left, children_right, tree_start):
    """Child indices local to each tree made indices into all nodes (-1: none).

    A node is a leaf when its left child is negative (its right one is then
    ignored); a child index past the end of its tree is refused.
    """
    sizes = np.diff(tree_start)
    internal = children_left >= 0
    children_right = np.where(internal, children_right, -1)
    for children in (children_left, children_right):
        largest = np.maximum.reduceat(children, tree_start[:-1])  # per tree
        if np.any(largest >= sizes):
            t = int(np.argmax(largest >= sizes))
            raise ValueError(f"tree {t} has a child index outside the tree ({sizes[t]} nodes).")
    base = np.repeat(tree_start[:-1], sizes)
    left = np.where(internal, children_left + base, -1)
    right = np.where(children_right >= 0, children_right + base, -1)
    return left, right


def _structure(children_left, children_right, feature, tree_start, n_features, model_type):
    """:func:`_forest.forest_structure` of stacked adapter trees (local child
    indices), or the error that names what is wrong with them."""
    children_left, children_right, feature = (
        np.ascontiguousarray(a, dtype=np.int64) for a in (children_left, children_right, feature))
    tree_start = np.ascontiguousarray(tree_start, dtype=np.int64)
    structure = _forest.forest_structure(children_left, children_right, feature, tree_start,
                                         int(n_features), True)
    if structure is not None:
        return structure
    _refuse_broken_trees(children_left, children_right, tree_start)
    split = feature[children_left >= 0]  # (every node is reachable now)
    if len(split) and (split.min() < 0 or split.max() >= n_features):
        raise ValueError(f"{model_type}: a split feature index is outside [0, {n_features}).")
    raise RuntimeError("forest_structure refused trees that pass every check.")


def _refuse_broken_trees(children_left, children_right, tree_start):
    """Raise the ValueError that names the first fault of broken trees (local
    child indices): a child index outside its tree, a cycle (a node reached
    twice), a left child without a right one, or nodes unreachable from the
    root, checked in that order for all trees at once. Returns if none."""
    left, right = _global_children(children_left, children_right, tree_start)
    levels = _internal_levels(left, right, tree_start)
    one_child = (left >= 0) & (right < 0)
    if np.any(one_child):
        k = int(np.argmax(one_child))
        t = int(np.searchsorted(tree_start, k, side="right")) - 1
        raise ValueError(f"tree {t}: node {k - tree_start[t]} has a left child but no right "
                         "child.")
    reached = np.zeros(len(left), dtype=bool)
    reached[tree_start[:-1]] = True
    for nodes in levels:
        reached[left[nodes]] = True
        reached[right[nodes]] = True
    unreached = ~reached  # (with no cycle, also the mark of a node with two parents)
    if np.any(unreached):
        t = int(np.searchsorted(tree_start, int(np.argmax(unreached)), side="right")) - 1
        count = int(np.count_nonzero(unreached[tree_start[t]:tree_start[t + 1]]))
        raise ValueError(f"tree {t}: the tree has {count} nodes unreachable from its root")


def _internal_levels(left, right, tree_start):
    """The internal nodes of all trees by depth: breadth-first from the roots,
    one numpy step per level for all trees together.

    ``left``, ``right``: global child indices. A node reached twice (a cycle,
    or two parents) is refused once more nodes are reached than exist.
    """
    n = len(left)
    levels, reached = [], [tree_start[:-1]]
    n_reached = len(reached[0])
    while True:
        internal = reached[-1][left[reached[-1]] >= 0]
        if len(internal) == 0:
            return levels
        levels.append(internal)
        children = np.concatenate([left[internal], right[internal]])
        reached.append(children[children >= 0])  # a missing right child: refused later
        n_reached += len(reached[-1])
        if n_reached > n:  # then some tree has more nodes reached than it holds
            sizes = np.diff(tree_start)
            tree = np.searchsorted(tree_start, np.concatenate(reached), side="right") - 1
            t = int(np.argmax(np.bincount(tree, minlength=len(sizes)) > sizes))
            raise ValueError(f"tree {t}: the tree's child arrays contain a cycle (a node "
                             "reached twice from the root)")


def _path_structure(ensemble, feature):
    """``prev_same``, the most distinct features on a path, and the depth of
    ``ensemble``'s trees (in preorder) with split features (or players) ``feature``."""
    structure = _forest.forest_structure(ensemble.children_left, ensemble.children_right,
                                         feature, ensemble.tree_start, ensemble.n_features,
                                         False)
    if structure is None:  # (an ensemble's trees are sound: a feature is out of range)
        raise ValueError(f"split features and players must lie in [0, {ensemble.n_features}).")
    return structure[5:]


def _preorder(children_left, children_right):
    """Local node indices of one tree in depth-first preorder (left subtree first)
    from node 0, with the checks of :meth:`TreeEnsemble.from_trees`."""
    n = len(children_left)
    order = _structure(children_left, children_right, np.zeros(n, dtype=np.int64),
                       np.array([0, n]), 1, "")[0]
    return np.arange(n) if order is None else order


def _category_bitsets(categories, nodes, rows, n_nodes, model_type):
    """``cat_start``, ``cat_words`` and ``cat_bitsets`` of the categorical ``nodes``.

    ``nodes``: ascending; node ``nodes[i]``'s set is ``categories[rows[i]]``
    (empty if absent). Each node gets ``max // 32 + 1`` uint32 words (one if
    its set is empty), in node order.
    """
    cat_start = np.zeros(n_nodes, dtype=np.int64)
    cat_words = np.zeros(n_nodes, dtype=np.int64)
    if len(nodes) == 0:
        return cat_start, cat_words, np.zeros(1, dtype=np.uint32)
    # (a Python loop over the categorical nodes only: their sets come as a dict)
    sets = [np.asarray(categories.get(int(k), ()), dtype=np.int64) for k in rows]
    cats = np.concatenate(sets)
    if np.any(cats < 0):
        raise ValueError(f"{model_type}: negative category in a categorical split.")
    owner = np.repeat(np.arange(len(nodes)), [len(c) for c in sets])
    top = np.full(len(nodes), -1, dtype=np.int64)
    np.maximum.at(top, owner, cats)
    n_words = np.maximum(top // 32 + 1, 1)
    start = np.cumsum(n_words) - n_words
    bitsets = np.zeros(int(n_words.sum()), dtype=np.uint32)
    np.bitwise_or.at(bitsets, start[owner] + cats // 32,
                     np.uint32(1) << (cats % 32).astype(np.uint32))
    cat_start[nodes] = start
    cat_words[nodes] = n_words
    return cat_start, cat_words, bitsets


def _linear_arrays(linear_terms, position, n_nodes):
    """``linear_start``, ``linear_feature`` and ``linear_coef`` in node order from
    ``{row: (features, coefficients)}`` (row k is node ``position[k]``, or k
    when ``position`` is None)."""
    rows = np.fromiter(linear_terms, dtype=np.int64, count=len(linear_terms))
    nodes = rows if position is None else position[rows]
    rows, nodes = rows[np.argsort(nodes)], np.sort(nodes)
    terms = [linear_terms[int(k)] for k in rows]
    counts = np.zeros(n_nodes, dtype=np.int64)
    counts[nodes] = [len(features) for features, _ in terms]
    features = [np.asarray(f, dtype=np.int64) for f, _ in terms]
    coefs = [np.asarray(c, dtype=np.float64) for _, c in terms]
    return {
        "linear_start": np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
        "linear_feature": np.concatenate(features) if features else np.zeros(0, np.int64),
        "linear_coef": np.concatenate(coefs) if coefs else np.zeros(0),
    }
