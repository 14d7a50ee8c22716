"""Adapter for XGBoost: ``XGBModel`` wrappers and raw ``xgboost.Booster``.

The model is read from its serialisation, which holds every number XGBoost
predicts with: per tree ``left_children``, ``right_children``,
``split_indices``, ``split_conditions`` (the float32 threshold of an internal
node, the leaf value -- learning rate included -- of a leaf), ``default_left``,
``split_type`` with the category sets, and ``sum_hessian``, the cover
XGBoost's own TreeSHAP uses (doc/local_attributions.rst). The binary form
(``Booster.save_raw("ubj")``, UBJSON) is read rather than the JSON one: its
node arrays are raw float32 and int32 numbers that numpy takes as they are
(200 trees of depth 6: 11 ms to save and read, where XGBoost printed the
JSON in 17 ms and ``json`` parsed it in 28 ms). The covers are the float64
of the decimals the JSON prints (:func:`_printed`), as this adapter read
them from the JSON before.

Layer: models (imports ``_errors`` and ``_ensemble``).
"""
import struct

import numpy as np

from .._errors import UnsupportedModelError, import_optional
from ._ensemble import DECISION_CATEGORICAL, DECISION_LT, TreeArrays, TreeEnsemble

# How XGBoost maps the stored ``base_score`` to the margin space of an
# objective (its ``ProbToMargin``); checked against ``output_margin=True``.
# ``binary:logitraw`` is the identity since XGBoost 1.3; multiclass base
# scores are stored as margins.
_LOGIT_OBJECTIVES = {"binary:logistic", "reg:logistic"}
_LOG_OBJECTIVES = {"count:poisson", "reg:gamma", "reg:tweedie", "survival:cox", "survival:aft"}
_IDENTITY_OBJECTIVES = {
    "reg:squarederror", "reg:linear", "reg:squaredlogerror", "reg:pseudohubererror",
    "reg:absoluteerror", "reg:quantileerror", "binary:logitraw", "binary:hinge",
    "multi:softmax", "multi:softprob", "rank:pairwise", "rank:ndcg", "rank:map",
}


def convert(model, missing=None):
    """Translate a fitted XGBoost model into a :class:`TreeEnsemble`.

    Uses exactly the trees the model's default ``predict`` uses: the
    scikit-learn wrappers (``XGBRegressor``, ``XGBClassifier``, ``XGBRanker``,
    ``XGBRF*``) stop at ``best_iteration`` when early stopping set it, while
    ``Booster.predict`` uses every tree even when the booster records a
    ``best_iteration`` (slice it, ``booster[: best_iteration + 1]``, to explain
    the early-stopped model).

    Parameters
    ----------
    model : xgboost.XGBModel or xgboost.Booster
        A fitted model with the ``gbtree`` or ``dart`` booster.
    missing : float, optional
        The value XGBoost reads as missing, kept in ``info["missing"]``. An
        ``XGBModel`` uses its own ``missing`` parameter (its ``predict``
        does); a ``Booster`` does not store it, so pass the ``missing`` of
        the ``DMatrix`` its predictions are made from (default NaN).

    Returns
    -------
    TreeEnsemble
        Thresholds are float32 values compared as ``x < t`` on float32 rows;
        ``base_value`` is the base score in margin space (log-odds for
        ``binary:logistic``, log for Poisson/Gamma/Tweedie/Cox/AFT, one margin
        per class for multiclass); leaf values include DART tree weights.

        Vector-leaf trees (``multi_strategy="multi_output_tree"``) give an
        ensemble with one leaf value per target (``n_values == n_outputs``):
        each tree adds its leaf's vector to every output.

    Raises
    ------
    UnsupportedModelError
        For ``gblinear``, vector-leaf trees whose leaf vectors are not stored
        as expected, and objectives whose base-score link is unknown.
    """
    xgboost = import_optional("xgboost", "Reading an XGBoost model")
    model_type = type(model).__name__
    # An absent entry of a sparse matrix is missing in a DMatrix.
    info = {"allow_nan": True, "sparse_absent": "missing"}
    if isinstance(model, xgboost.Booster):
        booster = model
        n_rounds = None  # Booster.predict: iteration_range=(0, 0) = all trees
        info["missing"] = _check_missing(np.nan if missing is None else missing, model_type)
    elif isinstance(model, xgboost.XGBModel):
        own = _check_missing(np.nan if model.missing is None else model.missing, model_type)
        if missing is not None and not _same_missing(missing, own):
            raise ValueError(
                f"{model_type} has missing={own!r}, which its predict uses; to explain it with "
                f"missing={missing!r}, set the estimator's missing parameter and refit."
            )
        info["missing"] = own
        booster = model.get_booster()
        try:
            n_rounds = model.best_iteration + 1
            info["best_iteration"] = n_rounds - 1
        except AttributeError:
            n_rounds = None
        if hasattr(model, "classes_"):
            info["classes"] = np.asarray(model.classes_)
    else:
        raise UnsupportedModelError(
            f"{model_type} is not a supported XGBoost model: expected an XGBModel "
            "(XGBRegressor, XGBClassifier, ...) or an xgboost.Booster."
        )

    learner = _read_ubjson(booster.save_raw("ubj"))["learner"]
    objective = learner["objective"]["name"]
    params = learner["learner_model_param"]
    n_features = int(params["num_feature"])
    n_outputs = max(int(params.get("num_class", 0)), int(params.get("num_target", 1)), 1)

    gbm = learner["gradient_booster"]
    if gbm["name"] == "dart":
        weights = _printed(gbm["weight_drop"])
        gbm = gbm["gbtree"]
    elif gbm["name"] == "gbtree":
        weights = None
    else:
        raise UnsupportedModelError(
            f"{model_type} uses booster={gbm['name']!r}; only the tree boosters "
            "'gbtree' and 'dart' can be explained."
        )
    forest = gbm["model"]
    if "weight_drop" in forest:  # XGBoost 3.3+: dropout trees saved as 'gbtree'
        weights = _printed(forest["weight_drop"])
    trees = forest["trees"]
    tree_info = np.asarray(forest["tree_info"], dtype=np.int64)
    num_parallel_tree = int(forest["gbtree_model_param"].get("num_parallel_tree", 1))
    indptr = forest.get("iteration_indptr")
    if indptr is None:  # formats before XGBoost 2.0: fixed trees per round
        per_round = num_parallel_tree * n_outputs
        indptr = np.arange(0, len(trees) + 1, per_round)
    indptr = np.asarray(indptr, dtype=np.int64)
    total_rounds = len(indptr) - 1
    if n_rounds is None or n_rounds > total_rounds:
        n_rounds = total_rounds
    n_used = int(indptr[n_rounds])

    arrays = [] if n_used == 0 else [_trees_arrays(
        trees[:n_used], None if weights is None else weights[:n_used], tree_info[:n_used],
        model_type, n_outputs)]

    names = learner.get("feature_names") or None
    types = learner.get("feature_types") or None
    info.update(
        n_trees_total=len(trees),
        n_trees=n_used,
        n_rounds=n_rounds,
        num_parallel_tree=num_parallel_tree,
        booster="dart" if weights is not None else "gbtree",
        base_score=_parse_base_score(params["base_score"]),
    )
    if types is not None:
        info["feature_types"] = list(types)
    power = learner["objective"].get("tweedie_regression_param", {}).get("tweedie_variance_power")
    if power is not None:
        # stored as a float32: the shortest decimal that rounds to it, e.g. 1.3
        info["tweedie_variance_power"] = float(str(np.float32(power)))
    categories = _training_categories(forest, model_type)
    if categories:
        info["category_levels"] = categories
        info["unseen_category"] = "error"  # XGBoost refuses unseen categories
    return TreeEnsemble.from_trees(
        arrays,
        base_value=_base_margin(params["base_score"], objective, n_outputs, model_type),
        n_features=n_features,
        # One round of parallel trees (XGBRF*) is a forest: XGBoost already
        # scales its leaves by 1 / num_parallel_tree.
        averaging=n_rounds == 1 and num_parallel_tree > 1,
        x_float32=True,
        model_type=model_type,
        objective="squared_error" if objective in ("reg:squarederror", "reg:linear") else objective,
        feature_names=names,
        info=info,
    )


def _check_missing(missing, model_type):
    try:
        missing = float(missing)
    except (TypeError, ValueError):
        raise ValueError(f"{model_type}: missing must be a number, got {missing!r}.") from None
    return missing


def _same_missing(a, b):
    a, b = np.float32(a), np.float32(b)
    return bool(a == b or (np.isnan(a) and np.isnan(b)))


def _training_categories(forest, model_type):
    """``{feature: category values}`` seen in training (XGBoost >= 3.0).

    XGBoost re-codes a pandas category column by value at predict time: the
    code of a value is its position in this list, whatever the order of the
    column's own categories.
    """
    encodings = (forest.get("cats") or {}).get("enc") or []
    categories = {}
    for j, column in enumerate(encodings):
        values = np.asarray(column.get("values", ()))
        if len(values) == 0:
            continue
        if "offsets" in column:  # strings: UTF-8 bytes (stored as int8) cut at the offsets
            if np.any(values < 0):
                # XGBoost (3.2) cuts them at character counts: the strings are lost
                raise UnsupportedModelError(
                    f"{model_type} was fitted on a category column {j} with non-ASCII "
                    "strings, which XGBoost saves truncated; recode them (e.g. as ASCII "
                    "strings or integer codes) and refit.")
            raw = values.astype(np.uint8).tobytes()
            cuts = np.asarray(column["offsets"]).tolist()
            categories[j] = [raw[a:b].decode("utf-8") for a, b in zip(cuts[:-1], cuts[1:])]
        else:  # integers (XGBoost refuses other category values)
            categories[j] = values.tolist()
    return categories


def _parse_base_score(text):
    """The stored base score(s): ``"0.5"``, ``"5E-1"`` or ``"[5E-1,2E-1]"``."""
    return np.asarray([float(v) for v in str(text).strip("[] ").split(",")], dtype=np.float64)


def _base_margin(text, objective, n_outputs, model_type):
    """XGBoost's ``ProbToMargin`` of the stored base score, one value per output."""
    # XGBoost stores base_score as float32.
    score = _parse_base_score(text).astype(np.float32).astype(np.float64)
    if objective in _LOGIT_OBJECTIVES:
        # XGBoost clamps the probability to [1e-6, 1 - 1e-6] and takes its logit in
        # float32 there (a constant label column stores 0 or 1: margins -13.8155, 13.7452)
        edge = (score < np.float32(1e-6)) | (score > np.float32(1.0 - 1e-6))
        clamped = np.clip(score, np.float32(1e-6), np.float32(1.0 - 1e-6)).astype(np.float32)
        one = np.float32(1.0)
        margin = np.where(edge, -np.log(one / clamped - one).astype(np.float64),
                          -np.log(1.0 / np.where(edge, 0.5, score) - 1.0))
    elif objective in _LOG_OBJECTIVES:
        margin = np.log(score)
    elif objective in _IDENTITY_OBJECTIVES:
        margin = score
    else:
        raise UnsupportedModelError(
            f"{model_type} has objective {objective!r}, whose base-score link is not "
            "known to this adapter."
        )
    if len(margin) == 1:
        margin = np.repeat(margin, n_outputs)
    if len(margin) != n_outputs:
        raise UnsupportedModelError(
            f"{model_type}: {len(margin)} base scores for {n_outputs} outputs."
        )
    return margin


def _tree_arrays(tree, weight, output, model_type, n_outputs=1):
    """One XGBoost tree as :class:`TreeArrays`: :func:`_trees_arrays` of ``[tree]``."""
    return _trees_arrays([tree], np.array([weight]), [output], model_type, n_outputs)


def _trees_arrays(trees, weights, outputs, model_type, n_outputs=1):
    """XGBoost trees (dicts of node arrays) stacked in one :class:`TreeArrays`.

    Leaf values are multiplied by the tree's weight (``weights``: one per tree,
    None for 1). A vector-leaf tree (``size_leaf_vector > 1``,
    ``multi_strategy="multi_output_tree"``) stores its leaves' vectors in
    ``base_weights``, one run of ``size_leaf_vector`` float32 values per node
    (its ``split_conditions`` of leaves hold no value); it gives ``value`` of
    shape (n_nodes, n_outputs).
    """
    sizes = np.array([len(tree["left_children"]) for tree in trees])
    tree_start = np.concatenate([[0], np.cumsum(sizes)])

    def joined(key, dtype):
        return np.concatenate([np.asarray(tree[key], dtype=dtype) for tree in trees])

    left = joined("left_children", np.int64)
    right = joined("right_children", np.int64)
    n = len(left)
    leaf = left < 0
    # float32 thresholds and leaf values (as the JSON's shortest decimals read back)
    condition = joined("split_conditions", np.float32).astype(np.float64)
    default_left = joined("default_left", bool)
    split_type = (joined("split_type", np.int64) if all("split_type" in tree for tree in trees)
                  else np.zeros(n, dtype=np.int64))
    categorical = (split_type == 1) & ~leaf
    if np.any((split_type != 0) & (split_type != 1) & ~leaf):
        raise UnsupportedModelError(f"{model_type} has a split type other than numeric "
                                    "or categorical.")

    # XGBoost sends the categories listed at a node to the RIGHT child, and any
    # other value (unlisted, negative or too large) to the left; the kernels send
    # the set left and negatives right, so the children are swapped.
    categories = _categories(trees, tree_start)
    left, right = np.where(categorical, right, left), np.where(categorical, left, right)
    default_left = np.where(categorical, ~default_left, default_left)

    weight = np.repeat(np.ones(len(trees)) if weights is None else weights, sizes)
    size_leaf_vector = {int(tree.get("tree_param", {}).get("size_leaf_vector", 1) or 1)
                        for tree in trees}
    if len(size_leaf_vector) > 1:
        raise UnsupportedModelError(
            f"{model_type} mixes vector-leaf and one-output trees; it cannot be explained.")
    size_leaf_vector = size_leaf_vector.pop()
    if size_leaf_vector > 1:
        _check_leaf_vectors(trees, size_leaf_vector, model_type, n_outputs)
        vectors = joined("base_weights", np.float32).astype(np.float64)
        vectors = vectors.reshape(n, size_leaf_vector)
        value = np.where(leaf[:, None], vectors * weight[:, None], 0.0)
    else:
        value = np.where(leaf, condition * weight, 0.0).reshape(n, 1)
    arrays = TreeArrays(
        children_left=left,
        children_right=np.where(leaf, -1, right),
        default_left=default_left,
        feature=np.where(leaf, -1, joined("split_indices", np.int64)),
        threshold=np.where(leaf | categorical, 0.0, condition),
        decision_type=np.where(categorical, DECISION_CATEGORICAL, DECISION_LT).astype(np.uint8),
        cover=_printed(joined("sum_hessian", np.float32)),
        value=value,
        categories=categories,
        output=np.asarray(outputs, dtype=np.int64),
        tree_start=tree_start,
    )
    pruned = np.array([int(tree.get("tree_param", {}).get("num_deleted", 0)) > 0
                       for tree in trees])
    if np.any(pruned):
        arrays = _drop_unreachable(arrays, np.repeat(pruned, sizes))
    return arrays


def _check_leaf_vectors(trees, size_leaf_vector, model_type, n_outputs):
    """Refuse vector-leaf trees saved without covers or with leaf vectors of
    another size than expected."""
    for tree in trees:
        if "sum_hessian" not in tree:  # XGBoost before 3.2
            raise UnsupportedModelError(
                f"{model_type} has vector-leaf trees (multi_strategy='multi_output_tree') "
                "saved without their hessian sums, the covers of the path-dependent game "
                "(XGBoost before 3.2); refit with xgboost>=3.2, or with "
                "multi_strategy='one_output_per_tree'."
            )
        n, size = len(tree["left_children"]), len(tree.get("base_weights", ()))
        if size_leaf_vector != n_outputs or size != n * size_leaf_vector:
            raise UnsupportedModelError(
                f"{model_type} has vector-leaf trees (multi_strategy='multi_output_tree') "
                f"whose leaf vectors are not stored as expected ({size} base weights "
                f"for {n} nodes of {size_leaf_vector} values, {n_outputs} outputs); refit with "
                "multi_strategy='one_output_per_tree' to explain it."
            )


def _categories(trees, tree_start):
    """``{row: categories}`` of the stacked trees' categorical nodes: a tree lists
    its nodes, and where each one's run of ``categories`` starts and its size."""
    listed = [len(tree.get("categories_nodes", ())) for tree in trees]
    if not any(listed):
        return {}

    def joined(key):
        return np.concatenate([np.asarray(tree.get(key, ()), dtype=np.int64) for tree in trees])

    stored = [len(tree.get("categories", ())) for tree in trees]
    nodes = joined("categories_nodes") + np.repeat(tree_start[:-1], listed)
    starts = joined("categories_segments") + np.repeat(np.cumsum(stored) - stored, listed)
    sizes = joined("categories_sizes")
    values = joined("categories")
    return {int(node): values[start:start + size]  # (the categorical nodes only)
            for node, start, size in zip(nodes.tolist(), starts.tolist(), sizes.tolist())}


def _drop_unreachable(tree, pruned):
    """Remove the slots of nodes deleted by pruning (``num_deleted > 0``): the nodes
    of ``pruned`` trees that their root does not reach, all trees at once."""
    starts = tree.tree_start
    base = np.repeat(starts[:-1], np.diff(starts))
    internal = tree.children_left >= 0
    left = np.where(internal, tree.children_left + base, -1)
    right = np.where(internal, tree.children_right + base, -1)
    keep = ~pruned
    frontier = starts[:-1]
    while len(frontier):
        keep[frontier] = True
        frontier = frontier[left[frontier] >= 0]
        frontier = np.concatenate([left[frontier], right[frontier]])
    # kept node k becomes row new_row[k]; its local index subtracts its tree's first row
    new_row = np.cumsum(keep) - 1
    new_start = np.concatenate([[0], np.cumsum(keep)[starts[1:] - 1]])
    local = new_row - np.repeat(new_start[:-1], np.diff(starts))

    def renumber(children):
        return np.where(children >= 0, local[np.maximum(children, 0)], -1)[keep]

    return TreeArrays(
        children_left=renumber(left),
        children_right=renumber(right),
        default_left=tree.default_left[keep],
        feature=tree.feature[keep],
        threshold=tree.threshold[keep],
        decision_type=tree.decision_type[keep],
        cover=tree.cover[keep],
        value=tree.value[keep],
        categories={int(new_row[k]): v for k, v in tree.categories.items() if keep[k]},
        output=tree.output,
        tree_start=new_start,
    )


def _printed(values):
    """The float64 of the decimal the JSON model prints for each float32 in ``values``.

    XGBoost prints the shortest decimal that reads back as the float32 (Ryu);
    so does numpy's float32 repr, and both read back as the same float64
    (tests/test_adapter_xgboost.py checks float32 of every exponent). Integers
    below 2**24 are their own shortest decimal: only other values go through
    the strings (about 1 microsecond each).
    """
    values = np.asarray(values, dtype=np.float32)
    out = values.astype(np.float64)
    other = np.flatnonzero((out != np.round(out)) | (np.abs(out) >= 2.0**24))
    if len(other):
        out[other] = values[other].astype(str).astype(np.float64)
    return out


# UBJSON (Booster.save_raw("ubj")): each value is a one-byte type marker and its
# bytes, numbers big-endian. Number markers -> (struct reader, numpy dtype).
_UBJ_NUMBERS = {
    ord(marker): (struct.Struct(">" + code).unpack_from, np.dtype(">" + code))
    for marker, code in (("i", "b"), ("U", "B"), ("I", "h"), ("l", "i"), ("L", "q"),
                         ("d", "f"), ("D", "d"))
}
_UBJ_CONSTANTS = {ord("T"): True, ord("F"): False, ord("Z"): None}


def _read_ubjson(data):
    """A UBJSON document as Python objects, as ``json.loads`` reads the same model
    saved as JSON, except that arrays of one number type (``[$d#...``: XGBoost
    writes every node array so) are read-only numpy arrays."""
    data = bytes(data)
    return _ubj_value(data, 1, data[0])[0]


def _ubj_value(data, pos, marker):
    """The value of type ``marker`` starting at ``pos``, and the position after it."""
    number = _UBJ_NUMBERS.get(marker)
    if number is not None:
        return number[0](data, pos)[0], pos + number[1].itemsize
    if marker == 0x53 or marker == 0x48:  # S: a string; H: a number written as one
        size, pos = _ubj_value(data, pos + 1, data[pos])
        return data[pos:pos + size].decode("utf-8"), pos + size
    if marker == 0x5B or marker == 0x7B:  # [: an array; {: an object
        return _ubj_container(data, pos, 0x5D if marker == 0x5B else 0x7D)
    if marker == 0x43:  # C: a character
        return chr(data[pos]), pos + 1
    if marker in _UBJ_CONSTANTS:
        return _UBJ_CONSTANTS[marker], pos
    raise ValueError(f"unknown UBJSON marker {chr(marker)!r} at byte {pos - 1}")


def _ubj_container(data, pos, end):
    """The array (``end`` is ]) or object (``end`` is }) whose content starts at ``pos``."""
    kind = count = None
    if data[pos] == 0x24:  # $: one type for all values (a count follows)
        kind, pos = data[pos + 1], pos + 2
    if data[pos] == 0x23:  # #: the number of values (then no closing marker)
        count, pos = _ubj_value(data, pos + 2, data[pos + 1])
    if end == 0x5D and kind in _UBJ_NUMBERS:  # numbers of one type: a numpy view
        dtype = _UBJ_NUMBERS[kind][1]
        return np.frombuffer(data, dtype, count, pos), pos + count * dtype.itemsize
    keys, values = [], []
    while len(values) != count if count is not None else data[pos] != end:
        if end == 0x7D:  # a key: a string without its marker
            size, pos = _ubj_value(data, pos + 1, data[pos])
            keys.append(data[pos:pos + size].decode("utf-8"))
            pos += size
        marker = kind
        if marker is None:
            marker, pos = data[pos], pos + 1
        value, pos = _ubj_value(data, pos, marker)
        values.append(value)
    if count is None:
        pos += 1  # the closing marker
    return (dict(zip(keys, values)) if end == 0x7D else values), pos
