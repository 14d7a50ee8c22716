"""The one representation of a trained tree ensemble used by every kernel.

Adapters (one module per library) translate a fitted model into a list of
:class:`TreeArrays`; :meth:`TreeEnsemble.from_trees` concatenates them into
flat node arrays, renumbers each tree in depth-first preorder (a parent comes
before its children, and every subtree is a contiguous range starting at its
root, with the left subtree first: the kernels rely on both) and derives the
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

from .._kernels import _predict
from .._validation import check_rows, resolve_n_jobs

# Decision types of an internal node (``decision_type``). NaN always goes to
# ``default_child``; a category in the node's set goes to ``children_left``.
DECISION_LEQ = 0  # x <= threshold goes left (scikit-learn, LightGBM, CatBoost)
DECISION_LT = 1  # x < threshold goes left (XGBoost)
DECISION_LEQ_ZERO_MISSING = 2  # LightGBM missing_type=Zero: |x| <= 1e-35f -> default
DECISION_CATEGORICAL = 3  # int(x) in the node's category bitset goes left


@dataclass
class TreeArrays:
    """One tree as an adapter produces it (local node indices, root = 0).

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
        a categorical node.
    output : int, default=0
        The output (class) the tree adds to when ``n_values == 1``.
    linear_terms : dict, optional
        Linear leaves: ``{leaf: (features, coefficients)}``; the leaf predicts
        ``value[leaf] + coefficients @ x[features]`` (LightGBM ``linear_tree``).
    fallback_value : ndarray of shape (n_nodes, n_values), optional
        With linear leaves: what a leaf predicts when one of its linear
        features is NaN (LightGBM's constant ``leaf_value``).
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

        parts = {k: [] for k in ("left", "right", "default", "feature", "threshold",
                                 "decision", "cover", "value")}
        cat_lists, tree_start, tree_output = [], [0], []
        has_linear = any(tree.linear_terms is not None for tree in trees)
        linear_lists, fallback_parts = [], []
        offset = 0
        for tree in trees:
            order = _preorder(tree.children_left, tree.children_right)
            n = len(order)
            new_index = np.empty(n, dtype=np.int64)
            new_index[order] = np.arange(n)
            left = np.asarray(tree.children_left, dtype=np.int64)[order]
            right = np.asarray(tree.children_right, dtype=np.int64)[order]
            leaf = left < 0
            left_g = np.where(leaf, -1, new_index[np.maximum(left, 0)] + offset)
            right_g = np.where(leaf, -1, new_index[np.maximum(right, 0)] + offset)
            default_left = np.asarray(tree.default_left, dtype=bool)[order]
            parts["left"].append(left_g)
            parts["right"].append(right_g)
            parts["default"].append(np.where(default_left, left_g, right_g))
            parts["feature"].append(np.where(leaf, -1, np.asarray(tree.feature, dtype=np.int64)[order]))
            parts["threshold"].append(np.asarray(tree.threshold, dtype=np.float64)[order])
            parts["decision"].append(np.asarray(tree.decision_type, dtype=np.uint8)[order])
            parts["cover"].append(np.asarray(tree.cover, dtype=np.float64)[order])
            value = np.asarray(tree.value, dtype=np.float64).reshape(n, -1)
            if value.shape[1] != n_values:
                raise ValueError("all trees must have leaf values of the same width")
            parts["value"].append(value[order])
            if tree.categories or tree.linear_terms:
                for local in order:
                    cats = tree.categories.get(int(local)) if tree.categories else None
                    cat_lists.append(None if cats is None else np.asarray(cats, dtype=np.int64))
                    linear_lists.append((tree.linear_terms or {}).get(int(local)))
            else:
                cat_lists.extend([None] * n)
                linear_lists.extend([None] * n)
            if has_linear:
                fallback = value if tree.fallback_value is None else np.asarray(
                    tree.fallback_value, dtype=np.float64).reshape(n, -1)
                fallback_parts.append(fallback[order])
            tree_start.append(offset + n)
            tree_output.append(int(tree.output))
            offset += n

        feature = np.concatenate(parts["feature"])
        decision = np.concatenate(parts["decision"])
        left = np.concatenate(parts["left"])
        right = np.concatenate(parts["right"])
        leaf = left < 0
        if np.any(feature[~leaf] >= n_features) or np.any(feature[~leaf] < 0):
            raise ValueError(f"{model_type}: a split feature index is outside [0, {n_features}).")
        decision[leaf] = DECISION_LEQ
        value = np.ascontiguousarray(np.concatenate(parts["value"]))
        value[leaf == False] = 0.0  # noqa: E712  (the kernels sum value * weight over all nodes)
        bad_leaf = np.flatnonzero(~np.all(np.isfinite(value), axis=1))
        if len(bad_leaf):
            # v_x(S) weighs every leaf by a cover ratio, so one infinite or NaN
            # leaf (e.g. a zero-weight node of a model fitted with negative
            # sample weights) would make every row's values NaN.
            k = int(bad_leaf[0])
            t = int(np.searchsorted(np.asarray(tree_start), k, side="right")) - 1
            raise ValueError(
                f"{model_type}: tree {t} has {len(bad_leaf)} leaf value(s) that are not "
                f"finite (first: {value[k].tolist()}); such a model predicts inf or NaN "
                "and cannot be explained. This happens when a node's total sample weight "
                "is zero or negative, e.g. with negative sample_weight."
            )

        # Category sets as uint32 bitsets, one run of words per categorical node.
        cat_start = np.zeros(len(feature), dtype=np.int64)
        cat_words = np.zeros(len(feature), dtype=np.int64)
        words = []
        n_words_total = 0
        for k in np.flatnonzero(decision == DECISION_CATEGORICAL):
            cats = cat_lists[k]
            cats = np.zeros(0, dtype=np.int64) if cats is None else cats
            if np.any(cats < 0):
                raise ValueError(f"{model_type}: negative category in a categorical split.")
            n_words = int(cats.max()) // 32 + 1 if len(cats) else 1
            bits = np.zeros(n_words, dtype=np.uint32)
            np.bitwise_or.at(bits, cats // 32, (np.uint32(1) << (cats % 32).astype(np.uint32)))
            cat_start[k] = n_words_total
            cat_words[k] = n_words
            words.append(bits)
            n_words_total += n_words
        cat_bitsets = np.concatenate(words) if words else np.zeros(1, dtype=np.uint32)

        tree_start = np.asarray(tree_start, dtype=np.int64)
        cover = np.concatenate(parts["cover"])
        if not np.all(np.isfinite(cover)) or np.any(cover < 0):
            raise ValueError(f"{model_type}: node covers must be finite and non-negative.")
        parent = np.full(len(feature), -1, dtype=np.int64)
        internal = np.flatnonzero(~leaf)
        parent[left[internal]] = internal
        parent[right[internal]] = internal
        cover_ratio = _cover_ratio(cover, parent)
        prev_same, n_path_features, max_depth = _path_structure(parent, feature)

        linear = {}
        if has_linear:
            counts = [0 if t is None else len(t[0]) for t in linear_lists]
            linear["linear_start"] = np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)
            feats = [np.asarray(t[0], dtype=np.int64) for t in linear_lists if t is not None]
            coefs = [np.asarray(t[1], dtype=np.float64) for t in linear_lists if t is not None]
            linear["linear_feature"] = np.concatenate(feats) if feats else np.zeros(0, np.int64)
            linear["linear_coef"] = np.concatenate(coefs) if coefs else np.zeros(0)
            linear["linear_fallback"] = np.ascontiguousarray(np.concatenate(fallback_parts))

        return cls(
            children_left=left,
            children_right=right,
            default_child=np.concatenate(parts["default"]),
            feature=feature,
            threshold=np.concatenate(parts["threshold"]),
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
            tree_output=np.asarray(tree_output, dtype=np.int64),
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
        return replace(self, cover=cover, cover_ratio=_cover_ratio(cover, self.parent),
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
        prev_same, n_path_features, _ = _path_structure(self.parent, players)
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
        _, n_path_features, max_depth = _path_structure(work.parent, work.feature)
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


def _cover_ratio(cover, parent):
    """``c_k / c_parent(k)`` (1 for a root)."""
    cover_ratio = np.ones(len(cover))
    has_parent = parent >= 0
    parent_cover = cover[parent[has_parent]]
    # A parent with zero cover splits its (zero) mass evenly: v_x stays finite.
    cover_ratio[has_parent] = np.where(
        parent_cover > 0, cover[has_parent] / np.where(parent_cover > 0, parent_cover, 1.0), 0.5
    )
    return cover_ratio


_SMALL_TREE = 256  # nodes: below it, _preorder walks a Python stack


def _preorder(children_left, children_right):
    """Local node indices in depth-first preorder (left subtree first) from node 0."""
    left = np.asarray(children_left, dtype=np.int64)
    right = np.asarray(children_right, dtype=np.int64)
    n = len(left)
    if n <= _SMALL_TREE:  # a plain stack walk: numpy's per-call overhead dominates small trees
        return _preorder_small(left.tolist(), right.tolist())
    levels = [np.array([0], dtype=np.int64)]
    seen = 1
    while True:  # breadth-first levels, vectorised
        internal = levels[-1][left[levels[-1]] >= 0]
        if len(internal) == 0:
            break
        levels.append(np.concatenate([left[internal], right[internal]]))
        seen += len(levels[-1])
        if seen > n:
            raise ValueError("the tree's child arrays contain a cycle")
    if seen != n:
        raise ValueError(f"the tree has {n - seen} nodes unreachable from its root")
    size = np.ones(n, dtype=np.int64)
    for level in reversed(levels):  # subtree sizes, bottom-up
        internal = level[left[level] >= 0]
        size[internal] += size[left[internal]] + size[right[internal]]
    position = np.zeros(n, dtype=np.int64)
    for level in levels:  # preorder positions, top-down
        internal = level[left[level] >= 0]
        position[left[internal]] = position[internal] + 1
        position[right[internal]] = position[internal] + 1 + size[left[internal]]
    order = np.empty(n, dtype=np.int64)
    order[position] = np.arange(n)
    return order


def _preorder_small(left, right):
    """:func:`_preorder` for a small tree given as lists, with the same checks."""
    n = len(left)
    order, stack = [], [0]
    while stack:
        k = stack.pop()
        order.append(k)
        if len(order) > n:
            raise ValueError("the tree's child arrays contain a cycle")
        if left[k] >= 0:
            stack.append(right[k])
            stack.append(left[k])
    if len(order) != n or len(set(order)) != n:
        raise ValueError(f"the tree has {n - len(set(order))} nodes unreachable from its root")
    return np.asarray(order, dtype=np.int64)


def _path_structure(parent, feature):
    """``prev_same``, the most distinct features on a path, and the depth."""
    n = len(parent)
    prev_same = np.full(n, -1, dtype=np.int64)
    has_parent = np.flatnonzero(parent >= 0)
    edge_feature = np.full(n, -1, dtype=np.int64)
    edge_feature[has_parent] = feature[parent[has_parent]]
    # Walk all edges up together, one level a step.
    nodes = has_parent
    anc = parent[nodes]
    depth = np.zeros(n, dtype=np.int64)
    active = np.ones(len(nodes), dtype=bool)
    while np.any(active):
        idx = np.flatnonzero(active)
        a = anc[idx]
        match = edge_feature[a] == edge_feature[nodes[idx]]
        prev_same[nodes[idx[match]]] = a[match]
        active[idx[match]] = False
        up = parent[a]
        stop = up < 0
        active[idx[stop & ~match]] = False
        anc[idx] = np.where(stop, a, up)
    # Depth and distinct-feature counts, parents before children.
    distinct = np.zeros(n, dtype=np.int64)
    new_feature = (prev_same[has_parent] < 0).astype(np.int64)
    while True:  # relax level by level; converges after max-depth passes
        new_depth = depth[parent[has_parent]] + 1
        new_distinct = distinct[parent[has_parent]] + new_feature
        if np.array_equal(new_depth, depth[has_parent]) and np.array_equal(
            new_distinct, distinct[has_parent]
        ):
            break
        depth[has_parent] = new_depth
        distinct[has_parent] = new_distinct
    return prev_same, int(distinct.max(initial=0)), int(depth.max(initial=0))
