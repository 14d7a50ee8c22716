"""Adapter for XGBoost: ``XGBModel`` wrappers and raw ``xgboost.Booster``.

The model is read from its JSON serialisation (``Booster.save_raw("json")``),
which holds every number XGBoost predicts with: per tree ``left_children``,
``right_children``, ``split_indices``, ``split_conditions`` (the float32
threshold of an internal node, the leaf value -- learning rate included -- of
a leaf), ``default_left``, ``split_type`` with the category sets, and
``sum_hessian``, the cover XGBoost's own TreeSHAP uses (doc/local_attributions.rst).

Layer: models (imports ``_errors`` and ``_ensemble``).
"""
import json

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

    learner = json.loads(bytes(booster.save_raw("json")))["learner"]
    objective = learner["objective"]["name"]
    params = learner["learner_model_param"]
    n_features = int(params["num_feature"])
    n_outputs = max(int(params.get("num_class", 0)), int(params.get("num_target", 1)), 1)

    gbm = learner["gradient_booster"]
    if gbm["name"] == "dart":
        weights = np.asarray(gbm["weight_drop"], dtype=np.float64)
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
        weights = np.asarray(forest["weight_drop"], dtype=np.float64)
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

    arrays = [
        _tree_arrays(trees[t], 1.0 if weights is None else weights[t], int(tree_info[t]),
                     model_type, n_outputs)
        for t in range(n_used)
    ]
    widths = {a.value.shape[1] for a in arrays}
    if len(widths) > 1:
        raise UnsupportedModelError(
            f"{model_type} mixes vector-leaf and one-output trees; it cannot be explained.")

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
    categories = _training_categories(forest)
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


def _training_categories(forest):
    """``{feature: category values}`` seen in training (XGBoost >= 3.0).

    XGBoost re-codes a pandas category column by value at predict time: the
    code of a value is its position in this list, whatever the order of the
    column's own categories.
    """
    encodings = (forest.get("cats") or {}).get("enc") or []
    categories = {}
    for j, column in enumerate(encodings):
        values = column.get("values") or []
        if not values:
            continue
        if "offsets" in column:  # strings: UTF-8 bytes cut at the offsets
            raw, cuts = bytes(values), column["offsets"]
            categories[j] = [raw[a:b].decode("utf-8") for a, b in zip(cuts[:-1], cuts[1:])]
        else:
            categories[j] = list(values)
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
    """One XGBoost tree as :class:`TreeArrays` (leaf values times ``weight``).

    A vector-leaf tree (``size_leaf_vector > 1``, ``multi_strategy=
    "multi_output_tree"``) stores its leaves' vectors in ``base_weights``, one
    run of ``size_leaf_vector`` float32 values per node (its ``split_conditions``
    of leaves hold no value); it gives ``value`` of shape (n_nodes, n_outputs).
    """
    param = tree.get("tree_param", {})
    size_leaf_vector = int(param.get("size_leaf_vector", 1) or 1)
    left = np.asarray(tree["left_children"], dtype=np.int64)
    right = np.asarray(tree["right_children"], dtype=np.int64)
    n = len(left)
    leaf = left < 0
    # JSON holds the shortest decimal of each float32: round back to it.
    condition = np.asarray(tree["split_conditions"], dtype=np.float32).astype(np.float64)
    default_left = np.asarray(tree["default_left"], dtype=bool)
    split_type = np.asarray(tree.get("split_type", np.zeros(n)), dtype=np.int64)
    categorical = (split_type == 1) & ~leaf
    if np.any((split_type != 0) & (split_type != 1) & ~leaf):
        raise UnsupportedModelError(f"{model_type} has a split type other than numeric "
                                    "or categorical.")

    # XGBoost sends the categories listed at a node to the RIGHT child, and any
    # other value (unlisted, negative or too large) to the left; the kernels send
    # the set left and negatives right, so the children are swapped.
    categories = {}
    stored = np.asarray(tree.get("categories", []), dtype=np.int64)
    for node, start, size in zip(tree.get("categories_nodes", []),
                                 tree.get("categories_segments", []),
                                 tree.get("categories_sizes", [])):
        categories[int(node)] = stored[int(start): int(start) + int(size)]
    for node in np.flatnonzero(categorical):
        categories.setdefault(int(node), np.zeros(0, dtype=np.int64))
    left, right = np.where(categorical, right, left), np.where(categorical, left, right)
    default_left = np.where(categorical, ~default_left, default_left)

    if size_leaf_vector > 1:
        if "sum_hessian" not in tree:  # XGBoost before 3.2
            raise UnsupportedModelError(
                f"{model_type} has vector-leaf trees (multi_strategy='multi_output_tree') "
                "saved without their hessian sums, the covers of the path-dependent game "
                "(XGBoost before 3.2); refit with xgboost>=3.2, or with "
                "multi_strategy='one_output_per_tree'."
            )
        vectors = np.asarray(tree.get("base_weights", []), dtype=np.float32)
        if size_leaf_vector != n_outputs or vectors.size != n * size_leaf_vector:
            raise UnsupportedModelError(
                f"{model_type} has vector-leaf trees (multi_strategy='multi_output_tree') "
                f"whose leaf vectors are not stored as expected ({vectors.size} base weights "
                f"for {n} nodes of {size_leaf_vector} values, {n_outputs} outputs); refit with "
                "multi_strategy='one_output_per_tree' to explain it."
            )
        vectors = vectors.astype(np.float64).reshape(n, size_leaf_vector)
        value = np.where(leaf[:, None], vectors * weight, 0.0)
    else:
        value = np.where(leaf, condition * weight, 0.0).reshape(n, 1)
    arrays = TreeArrays(
        children_left=left,
        children_right=np.where(leaf, -1, right),
        default_left=default_left,
        feature=np.where(leaf, -1, np.asarray(tree["split_indices"], dtype=np.int64)),
        threshold=np.where(leaf | categorical, 0.0, condition),
        decision_type=np.where(categorical, DECISION_CATEGORICAL, DECISION_LT).astype(np.uint8),
        cover=np.asarray(tree["sum_hessian"], dtype=np.float64),
        value=value,
        categories=categories,
        output=output,
    )
    if int(param.get("num_deleted", 0)) > 0:
        arrays = _drop_unreachable(arrays)
    return arrays


def _drop_unreachable(tree):
    """Remove the slots of nodes deleted by pruning (``num_deleted > 0``)."""
    left, right = tree.children_left, tree.children_right
    keep = np.zeros(len(left), dtype=bool)
    frontier = np.zeros(1, dtype=np.int64)
    while len(frontier):
        keep[frontier] = True
        internal = frontier[left[frontier] >= 0]
        frontier = np.concatenate([left[internal], right[internal]])
    new_index = np.cumsum(keep) - 1

    def renumber(children):
        return np.where(children >= 0, new_index[np.maximum(children, 0)], -1)[keep]

    return TreeArrays(
        children_left=renumber(left),
        children_right=renumber(right),
        default_left=tree.default_left[keep],
        feature=tree.feature[keep],
        threshold=tree.threshold[keep],
        decision_type=tree.decision_type[keep],
        cover=tree.cover[keep],
        value=tree.value[keep],
        categories={int(new_index[k]): v for k, v in tree.categories.items() if keep[k]},
        output=tree.output,
    )
