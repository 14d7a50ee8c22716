"""CatBoost adapter: oblivious and non-symmetric trees from the JSON export.

CatBoost binarizes a float feature as ``float32(x) > border`` (the split's
"true" side), so ``x <= border`` goes left (``DECISION_LEQ``, float32
compare). A NaN is routed by the feature's ``nan_value_treatment``:
``AsFalse`` (``nan_mode="Min"``) and ``AsIs`` (``"Forbidden"``, NaN compares
false) take the false side, ``AsTrue`` (``"Max"``) the true side.

An oblivious tree of depth d applies split i at every node of one level and
its leaf index is ``sum_i bit_i << i`` (bit i: split i's true side); it is
expanded here into an ordinary binary tree of ``2^(d+1) - 1`` nodes with the
last split at the root, the order in which CatBoost's own ShapValues walk it
(the path-dependent game depends on the order). Covers are CatBoost's leaf
weights (what its own ShapValues use, doc/local_attributions.rst); an internal
node's cover is the sum of its leaves' weights.

A one-hot split compares a 32-bit hash of the category's string form with one
stored hash. CatBoost exports the hashes of the categories of a pool it is
given, so the integer codes ``k`` whose ``str(k)`` hashes to a split's value are
found by exporting the model with a pool of candidate codes 0..1023; the
node then sends those codes left (``DECISION_CATEGORICAL``). Codes outside
that range go right, as in CatBoost unless their string happens to collide
with the split's 32-bit hash. CatBoost rejects NaN categories; they go right.

Categories that are not such codes (strings, negative or larger integers) are
explained through the hashes themselves: the split hashes of categorical
feature j, sorted, number its categories 0..K_j-1, and a node sends the
number of its hash left. Rows to explain are then encoded by
``info["encode_rows"]`` (:class:`_HashEncoder`): each category is hashed by
CatBoost (the same pool export) and replaced by the number of its hash, or
-1 (every one-hot split's false side) when no split tests it. CTR, text and
embedding splits are not represented.

Layer: models (imports ``_errors`` and ``_ensemble``).
"""
import json
import os
import tempfile

import numpy as np

from .._errors import UnsupportedModelError, import_optional
from ._ensemble import (DECISION_CATEGORICAL, DECISION_LEQ, TreeArrays, TreeEnsemble,
                        leaf_arrays)

# Candidate integer codes searched for one-hot categories; other categories
# are numbered by their hashes (_HashEncoder).
_CODE_RANGES = (1 << 10,)


def convert(model):
    """Translate a fitted CatBoost model into a :class:`TreeEnsemble`.

    Parameters
    ----------
    model : CatBoost, CatBoostRegressor, CatBoostClassifier or CatBoostRanker
        A fitted model with symmetric (oblivious), Depthwise or Lossguide trees
        on float features and, optionally, one-hot categorical features
        (integers or strings; rows with strings are encoded by
        ``info["encode_rows"]``).

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    UnsupportedModelError
        For an unfitted model, text or embedding features, CTR splits, or a
        model without leaf weights.
    """
    name = type(model).__name__
    if not model.is_fitted():
        raise UnsupportedModelError(f"{name} is not fitted.")
    for kind, indices in (("text", model._get_text_feature_indices()),
                          ("embedding", model._get_embedding_feature_indices())):
        if len(indices):
            raise UnsupportedModelError(
                f"{name} uses {kind} features {list(indices)}; their estimated-feature "
                "splits cannot be represented as tree splits on the input columns."
            )
    spec = _export_json(model)
    features = spec["features_info"]
    info_float = {f["feature_index"]: f for f in features.get("float_features", [])}
    info_cat = {f["feature_index"]: f for f in features.get("categorical_features", [])}
    n_features = _n_features(model, spec)
    scale, bias = spec.get("scale_and_bias", [1.0, [0.0]])
    bias = np.atleast_1d(np.asarray(bias, dtype=np.float64))
    n_dim = len(bias)

    raw_trees = spec.get("oblivious_trees")
    oblivious = raw_trees is not None
    if not oblivious:
        raw_trees = spec.get("trees", [])
    splits = [s for tree in raw_trees for s in _iter_splits(tree, oblivious)]
    for split in splits:
        kind = split["split_type"]
        if kind == "OnlineCtr":
            raise UnsupportedModelError(
                f"{name} has CTR splits (OnlineCtr) on categorical features; only float "
                "features and one-hot categorical splits (one_hot_max_size) are supported."
            )
        if kind not in ("FloatFeature", "OneHotFeature"):
            raise UnsupportedModelError(f"{name} has splits of unsupported type {kind!r}.")
    one_hot = {(s["cat_feature_index"], s["value"]) for s in splits
               if s["split_type"] == "OneHotFeature"}
    codes, encoder = _category_codes(model, name, one_hot, n_features, info_cat)

    def node_of(split):
        """(feature, threshold, decision, categories, nan goes to the true side)."""
        if split["split_type"] == "FloatFeature":
            feature = info_float[split["float_feature_index"]]
            nan_true = feature.get("nan_value_treatment", "AsIs") == "AsTrue"
            border = float(np.float32(split["border"]))
            return feature["flat_feature_index"], border, DECISION_LEQ, None, nan_true
        feature = info_cat[split["cat_feature_index"]]
        cats = codes[(split["cat_feature_index"], split["value"])]
        return feature["flat_feature_index"], 0.0, DECISION_CATEGORICAL, cats, False

    read = _oblivious_trees if oblivious else _nonsymmetric_trees
    trees = [read(raw_trees, node_of, scale, n_dim, name)] if raw_trees else []

    params = spec.get("model_info", {}).get("params", {})
    loss = params.get("loss_function", {}).get("type", "")
    info = {
        "allow_nan": True,
        "n_trees_total": len(raw_trees),
        "grow_policy": "SymmetricTree" if oblivious else
        params.get("tree_learner_options", {}).get("grow_policy", "non-symmetric"),
        "loss_function": loss,
        "loss_params": dict(params.get("loss_function", {}).get("params", {})),
        "scale": float(scale),
    }
    if encoder is not None:
        info["encode_rows"] = encoder
    classes = getattr(model, "classes_", None)
    if classes is not None and len(classes):
        info["classes"] = np.asarray(classes)
    best_iteration = model.get_best_iteration()
    if best_iteration is not None:
        # Informative only: predict uses every tree the model keeps
        # (use_best_model=True already cut the model there at fit time).
        info["best_iteration"] = int(best_iteration)
    ids = [None] * n_features
    for f in list(info_float.values()) + list(info_cat.values()):
        ids[f["flat_feature_index"]] = f.get("feature_id") or None
    feature_names = ids if all(ids) else None
    return TreeEnsemble.from_trees(
        trees,
        base_value=bias,
        n_features=n_features,
        x_float32=True,
        model_type=name,
        objective="squared_error" if loss == "RMSE" else loss,
        feature_names=feature_names,
        info=info,
    )


def _export_json(model, pool=None):
    """The model's JSON export (``save_model(format="json")``) as a dict."""
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "model.json")
        try:
            model.save_model(path, format="json", pool=pool)
        except Exception as exc:  # CatBoostError: a model JSON cannot describe
            raise UnsupportedModelError(
                f"{type(model).__name__} cannot be exported to JSON: {exc}"
            ) from None
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)


def _n_features(model, spec):
    """The number of input columns (flat features) the model expects."""
    flat = [f["flat_feature_index"] for group in spec["features_info"].values()
            if isinstance(group, list) for f in group if "flat_feature_index" in f]
    # A copy of a model (pickle, copy.deepcopy, load_model) reports
    # n_features_in_ == 0 although it predicts the same: fall back to its
    # feature names, then to the features the export lists.
    n = getattr(model, "n_features_in_", None)
    if not n:
        n = len(getattr(model, "feature_names_", None) or [])
    return max(int(n), max(flat, default=-1) + 1)


def _iter_splits(tree, oblivious):
    if oblivious:
        yield from tree.get("splits") or []
        return
    stack = [tree]
    while stack:
        node = stack.pop()
        if "split" in node:
            yield node["split"]
            stack.extend((node["left"], node["right"]))


def _category_hashes(model, n_features, cat_columns, strings):
    """``{string: hash}``: CatBoost's 32-bit hashes of category strings, read
    from the model's JSON export with a pool holding them."""
    catboost = import_optional("catboost", "Reading a CatBoost model")
    strings = list(strings)
    if not strings or not cat_columns:
        return {}
    data = np.full((len(strings), n_features), 0.0, dtype=object)
    for column in cat_columns:
        data[:, column] = np.asarray(strings, dtype=object)
    spec = _export_json(model, catboost.Pool(data, cat_features=list(cat_columns)))
    return {entry["value"]: int(entry["hash"]) & 0xFFFFFFFF
            for entry in spec["features_info"].get("cat_features_hash", [])}


def _category_codes(model, name, one_hot, n_features, info_cat):
    """``({(cat_feature_index, hash): array of codes}, encoder)`` for the one-hot splits.

    Integer codes first: CatBoost hashes ``str(code)``, and the codes in
    0..1023 whose hashes are split values are sent left (``encoder`` None).
    Otherwise the categories are numbered by their hashes and rows are
    encoded by a :class:`_HashEncoder`.
    """
    if not one_hot:
        # no split tests a category: rows may still hold strings there
        columns = sorted(f["flat_feature_index"] for f in info_cat.values())
        return {}, (_HashEncoder(model, n_features, columns, {}) if columns else None)
    wanted = {value & 0xFFFFFFFF for _, value in one_hot}
    cat_columns = [f["flat_feature_index"] for f in info_cat.values()]
    for n_codes in _CODE_RANGES:
        hashes = _category_hashes(model, n_features, cat_columns,
                                  [str(k) for k in range(n_codes)])
        by_hash = {}
        for value, h in hashes.items():
            if h in wanted:
                by_hash.setdefault(h, []).append(int(value))
        if wanted <= by_hash.keys():
            codes = {key: np.unique(by_hash[key[1] & 0xFFFFFFFF]) for key in one_hot}
            return codes, None
    # Strings or negative integers: number each feature's split hashes.
    flat = {index: f["flat_feature_index"] for index, f in info_cat.items()}
    split_hashes = {}
    for index, value in one_hot:
        split_hashes.setdefault(flat[index], set()).add(value & 0xFFFFFFFF)
    ordered = {column: np.array(sorted(values), dtype=np.int64)
               for column, values in split_hashes.items()}
    codes = {
        (index, value): np.searchsorted(ordered[flat[index]], value & 0xFFFFFFFF)[None]
        for index, value in one_hot
    }
    return codes, _HashEncoder(model, n_features, sorted(flat.values()), ordered)


class _HashEncoder:
    """Rows with CatBoost categories (strings or integers) as float64 codes.

    The code of a category in column j is the position of its CatBoost hash
    among the split hashes of column j (``hashes[j]``, sorted), or -1 when no
    one-hot split tests it. Integers are hashed as ``str(int)``, as CatBoost
    does; NaN stays NaN. Other columns are read as numbers.
    """

    def __init__(self, model, n_features, cat_columns, hashes):
        self.model = model
        self.n_features = int(n_features)
        self.cat_columns = list(cat_columns)
        self.hashes = dict(hashes)

    def __call__(self, X):
        pd = import_optional("pandas", "A CatBoost model with category features")
        frame = X if hasattr(X, "iloc") and hasattr(X, "columns") else pd.DataFrame(
            np.asarray(X, dtype=object))
        if frame.ndim != 2 or frame.shape[1] != self.n_features:
            return X  # check_rows reports the shape
        out = np.empty(frame.shape, dtype=np.float64)
        categories = {}
        for j in range(self.n_features):
            column = frame.iloc[:, j]
            if j not in self.cat_columns:
                try:
                    out[:, j] = column.to_numpy(dtype=np.float64, na_value=np.nan)
                except (TypeError, ValueError) as exc:
                    raise ValueError(f"X has a non-numeric column {j} ({exc}).") from None
                continue
            categories[j] = [self._category_string(v, j) for v in column.astype(object)]
        strings = sorted({s for j, values in categories.items() if j in self.hashes
                          for s in values if s is not None})
        hashes = _category_hashes(self.model, self.n_features, self.cat_columns, strings)
        for j, values in categories.items():
            known = self.hashes.get(j, np.zeros(0, dtype=np.int64))
            for i, s in enumerate(values):
                if s is None:
                    out[i, j] = np.nan
                    continue
                if not len(known):  # no split tests this feature
                    out[i, j] = -1.0
                    continue
                h = hashes[s]
                k = np.searchsorted(known, h)
                out[i, j] = float(k) if k < len(known) and known[k] == h else -1.0
        return out

    @staticmethod
    def _category_string(value, column):
        """The string CatBoost hashes for a category value (None for missing)."""
        if isinstance(value, (str, bytes)):
            return value.decode("utf-8") if isinstance(value, bytes) else value
        if value is None or (isinstance(value, float) and np.isnan(value)):
            return None
        if isinstance(value, (bool, np.bool_)):
            raise ValueError(f"Column {column}: boolean category {value!r}; CatBoost "
                             "takes categories as integers or strings.")
        if isinstance(value, (int, np.integer)):
            return str(int(value))
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            return str(int(value))
        raise ValueError(
            f"Column {column}: category {value!r} is neither an integer nor a string; "
            "CatBoost takes categories as integers or strings."
        )


def _leaf_values(values, scale, n_dim, n_leaves, name):
    values = np.asarray(values, dtype=np.float64)
    if values.size != n_leaves * n_dim:
        raise UnsupportedModelError(f"{name}: unexpected number of leaf values in a tree.")
    return scale * values.reshape(n_leaves, n_dim)


def _split_nodes(rows, split, false_child, true_child, splits, node_of, n_nodes):
    """The node arrays of ``n_nodes`` nodes, ``rows`` of which apply the splits
    ``splits[split]`` (``node_of`` of each: feature, threshold, decision, category
    set, NaN to the true side), their children given as local indices: float
    splits send the false side left, one-hot ones the true side; NaN takes a
    float split's side of ``node_of`` and a one-hot split's false side (CatBoost
    rejects NaN categories). Returns the arrays and the categories by row."""
    nodes = [node_of(s) for s in splits] or [(0, 0.0, DECISION_LEQ, None, False)]
    feature, threshold, decision, cats, nan_true = zip(*nodes)  # (per split, not per node)
    decision = np.asarray(decision, dtype=np.uint8)[split]
    one_hot = decision == DECISION_CATEGORICAL
    arrays = leaf_arrays(n_nodes)
    arrays["children_left"][rows] = np.where(one_hot, true_child, false_child)
    arrays["children_right"][rows] = np.where(one_hot, false_child, true_child)
    arrays["default_left"][rows] = ~one_hot & ~np.asarray(nan_true, dtype=bool)[split]
    arrays["feature"][rows] = np.asarray(feature, dtype=np.int64)[split]
    arrays["threshold"][rows] = np.asarray(threshold, dtype=np.float64)[split]
    arrays["decision_type"][rows] = decision
    categories = {int(k): cats[i] for k, i in zip(rows[one_hot], split[one_hot])}
    return arrays, categories


def _oblivious_trees(raws, node_of, scale, n_dim, name):
    """Oblivious trees expanded into heap order, the last split at the root, stacked.

    Level l of a tree's heap applies its split ``d - 1 - l``, so a leaf's heap
    position among the leaves equals CatBoost's leaf index ``sum_i bit_i << i``.
    The path-dependent game of an oblivious tree depends on this order; with the
    last split at the root it is the one CatBoost's own ShapValues compute. Node
    k's children are 2k + 1 (false side) and 2k + 2 (true side).
    """
    if any("leaf_weights" not in raw for raw in raws):
        raise UnsupportedModelError(f"{name} has no leaf weights (needed as covers).")
    splits = [raw.get("splits") or [] for raw in raws]
    depth = np.array([len(s) for s in splits])
    n_leaves = 1 << depth
    size = 2 * n_leaves - 1
    tree_start = np.concatenate([[0], np.cumsum(size)])
    first = np.repeat(tree_start[:-1], size)  # each node's tree's first row
    local = np.arange(tree_start[-1]) - first
    internal = np.flatnonzero(local < np.repeat(n_leaves - 1, size))
    level = np.frexp(local[internal] + 1)[1] - 1  # (exact: the bit length of k + 1)
    tree_depth = np.repeat(depth, size)[internal]
    split = np.repeat(np.cumsum(depth) - depth, size)[internal] + tree_depth - 1 - level
    arrays, categories = _split_nodes(
        internal, split, 2 * local[internal] + 1, 2 * local[internal] + 2,
        [s for tree in splits for s in tree], node_of, tree_start[-1])

    leaves = np.flatnonzero(local >= np.repeat(n_leaves - 1, size))
    for raw, count in zip(raws, n_leaves.tolist()):
        if len(raw["leaf_values"]) != count * n_dim:
            raise UnsupportedModelError(f"{name}: unexpected number of leaf values in a tree.")
    value = np.zeros((tree_start[-1], n_dim))
    value[leaves] = _leaf_values([v for raw in raws for v in raw["leaf_values"]], scale, n_dim,
                                 len(leaves), name)
    cover = np.zeros(tree_start[-1])
    cover[leaves] = np.array([w for raw in raws for w in raw["leaf_weights"]], dtype=np.float64)
    # An internal node's cover is the sum of its leaves' weights: summed bottom-up.
    for lev in range(int(depth.max(initial=0)) - 1, -1, -1):
        rows = internal[level == lev]
        cover[rows] = cover[first[rows] + 2 * local[rows] + 1] + cover[first[rows] + 2 * local[rows]
                                                                       + 2]
    return TreeArrays(value=value, cover=cover, categories=categories, tree_start=tree_start,
                      **arrays)


def _nonsymmetric_trees(raws, node_of, scale, n_dim, name):
    """Depthwise / Lossguide trees (JSON nodes, "right" is the split's true side),
    stacked: one walk over the nested nodes numbers them depth-first, numpy
    does the rest."""
    parent, true_side, depth, splits, leaf_rows, values, weights = [], [], [], [], [], [], []
    tree_start = [0]
    for raw in raws:  # (per node: CatBoost's JSON nests the nodes)
        stack = [(raw, -1, False, 0)]
        while stack:
            node, up, is_true, d = stack.pop()
            k = len(parent)
            parent.append(up)
            true_side.append(is_true)
            depth.append(d)
            if "split" in node:
                splits.append(node["split"])
                stack.append((node["right"], k, True, d + 1))
                stack.append((node["left"], k, False, d + 1))
            elif "weight" not in node:
                raise UnsupportedModelError(f"{name} has no leaf weights (needed as covers).")
            else:
                leaf_rows.append(k)
                values.append(node["value"])
                weights.append(node["weight"])
        tree_start.append(len(parent))
    tree_start = np.asarray(tree_start)
    n = int(tree_start[-1])
    parent, true_side, depth = np.asarray(parent), np.asarray(true_side), np.asarray(depth)
    child = np.flatnonzero(parent >= 0)
    true_child, false_child = np.full(n, -1), np.full(n, -1)
    true_child[parent[child[true_side[child]]]] = child[true_side[child]]
    false_child[parent[child[~true_side[child]]]] = child[~true_side[child]]
    internal = np.flatnonzero(true_child >= 0)  # in walk order, as ``splits``
    first = np.repeat(tree_start[:-1], np.diff(tree_start))[internal]
    arrays, categories = _split_nodes(internal, np.arange(len(internal)),
                                      false_child[internal] - first,
                                      true_child[internal] - first, splits, node_of, n)
    value = np.zeros((n, n_dim))
    value[leaf_rows] = _leaf_values(values, scale, n_dim, len(leaf_rows), name)
    cover = np.zeros(n)
    cover[leaf_rows] = np.asarray(weights, dtype=np.float64)
    for d in range(int(depth.max(initial=0)) - 1, -1, -1):  # children first
        rows = internal[depth[internal] == d]
        cover[rows] = cover[true_child[rows]] + cover[false_child[rows]]
    return TreeArrays(value=value, cover=cover, categories=categories, tree_start=tree_start,
                      **arrays)
