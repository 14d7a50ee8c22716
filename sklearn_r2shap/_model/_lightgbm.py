"""LightGBM adapter: ``LGBMModel`` estimators and ``lightgbm.Booster``.

The trees are read from ``Booster.model_to_string()`` (arrays of numbers per
tree, 2-3x faster to read than the JSON dump), or from ``Booster.dump_model()``
when a tree has categorical splits or linear leaves or the model has pandas
category columns. Both print thresholds and leaf values at full double
precision, and the two readings give the same ensemble (tested). Routing
follows LightGBM's ``Tree::NumericalDecision`` and ``Tree::CategoricalDecision``
(``include/LightGBM/tree.h``), which compare the float64 feature value with
the float64 threshold:

* ``missing_type == "NaN"``: NaN goes to the default child;
* ``missing_type == "None"``: NaN is replaced by 0.0, so it goes wherever 0.0
  goes (the dumped ``default_left`` is not used by LightGBM);
* ``missing_type == "Zero"``: zero and NaN go to the default child
  (``DECISION_LEQ_ZERO_MISSING``);
* categorical (``decision_type == "=="``): NaN and negative values go right,
  ``int(x)`` in the ``"a||b||c"`` set goes left.

Two corner cases the shared kernels route differently (see the xfail tests):
LightGBM truncates a categorical value toward zero, so x in (-1, 0) is
category 0, and its zero test is ``|x| <= 1e-35f`` (float32, i.e.
1.0000000180025095e-35).

Covers are ``internal_count`` / ``leaf_count``, what LightGBM's TreeSHAP
(``pred_contrib``) uses. Leaf values already include the learning rate; the
first tree holds the average (``boost_from_average``), so the base value is 0.
An ``init_score`` given to ``Dataset`` or ``fit`` is not part of the model:
LightGBM's own ``predict`` leaves it out, and so does the ensemble.
``boosting="rf"`` (``average_output``): ``predict`` and ``predict_proba``
apply the link to the *mean* of the trees, so leaves are scaled by 1/T;
LightGBM's ``predict(raw_score=True)`` and ``pred_contrib`` return the
unscaled sum. A model fitted on a DataFrame with ``category`` columns
encodes them by the category lists kept in ``info["pandas_categorical"]``.

Layer: models (imports ``_errors`` and ``_ensemble``).
"""
import numpy as np

from .._errors import UnsupportedModelError, import_optional
from ._ensemble import (
    DECISION_CATEGORICAL,
    DECISION_LEQ,
    DECISION_LEQ_ZERO_MISSING,
    TreeArrays,
    TreeEnsemble,
    leaf_arrays,
)

_SQUARED_ERROR = {
    "regression", "regression_l2", "l2", "mean_squared_error", "mse",
    "l2_root", "root_mean_squared_error", "rmse",
}


def convert(model):
    """Translate a fitted LightGBM model into a :class:`TreeEnsemble`.

    Parameters
    ----------
    model : lightgbm.LGBMModel or lightgbm.Booster
        ``LGBMRegressor``, ``LGBMClassifier`` (binary or multiclass),
        ``LGBMRanker`` or a ``Booster``.

    Returns
    -------
    TreeEnsemble
        Raw (margin) space: log-odds for binary, one margin per class for
        multiclass. Only the trees ``predict`` uses by default are kept
        (``best_iteration`` after early stopping). Linear leaves
        (``linear_tree=True``) are stored as ``linear_terms``.

    Raises
    ------
    UnsupportedModelError
        If ``model`` is not a LightGBM model, or a tree has a split the
        ensemble cannot represent.
    """
    lightgbm = import_optional("lightgbm", "Reading a LightGBM model")
    model_type = type(model).__name__
    if isinstance(model, lightgbm.LGBMModel):
        booster = model.booster_  # raises LightGBM's NotFittedError if unfitted
        feature_names = getattr(model, "feature_names_in_", None)
        info = {"classes": model.classes_} if hasattr(model, "classes_") else {}
    elif isinstance(model, lightgbm.Booster):
        booster = model
        names = booster.feature_name()
        # LightGBM names unnamed columns Column_0, Column_1, ...
        auto = [f"Column_{i}" for i in range(len(names))]
        feature_names = None if list(names) == auto else names
        info = {}
    else:
        raise UnsupportedModelError(
            f"{model_type} is not supported: expected a fitted LightGBM estimator "
            "(LGBMRegressor, LGBMClassifier, LGBMRanker) or a lightgbm.Booster."
        )

    best_iteration = booster.best_iteration
    # Booster.predict(num_iteration=None) uses best_iteration when it is set (> 0).
    num_iteration = best_iteration if best_iteration > 0 else -1
    dump = _read_text(booster.model_to_string(num_iteration=num_iteration), model_type)
    if dump is None:  # categorical splits or linear leaves: the JSON dump
        dump = booster.dump_model(num_iteration=num_iteration)
        dump["trees"] = [t["tree_structure"] for t in dump["tree_info"]]
    n_per_iteration = int(dump["num_tree_per_iteration"])
    n_features = int(dump["max_feature_idx"]) + 1
    averaging = bool(dump.get("average_output", False))
    n_trees = len(dump["trees"])
    # rf mode: GBDT::Predict divides the sum by the number of iterations used
    # before the link function (predict(raw_score=True) and pred_contrib do not).
    scale = 1.0 / (n_trees // n_per_iteration) if averaging and n_trees else 1.0

    outputs = np.arange(n_trees) % n_per_iteration
    if "text" in dump:  # all trees' numbers parsed at once
        trees = [_numeric_trees([_numeric_tree(t, k) for t, k in zip(dump["trees"], outputs)],
                                scale, model_type)] if n_trees else []
    else:
        trees = [_convert_tree(t, k, scale, model_type) for t, k in zip(dump["trees"], outputs)]
    objective_string = dump.get("objective")
    objective = _objective(objective_string)
    if objective == "tweedie":  # not in the objective string; 1.5 is LightGBM's default
        info["tweedie_variance_power"] = float(booster.params.get("tweedie_variance_power", 1.5))
    info.update(
        allow_nan=True,
        n_trees_total=booster.num_trees(),
        n_trees_used=n_trees,
        best_iteration=best_iteration if best_iteration > 0 else None,
        objective_string=objective_string,
        categorical_features=sorted({
            int(f) for t in trees for f in t.feature[t.decision_type == DECISION_CATEGORICAL]
        }),
        pandas_categorical=dump.get("pandas_categorical"),
        category_cast="truncate",
        # LightGBM stores feature names with spaces replaced by "_"
        feature_name_rule="lightgbm",
    )
    return TreeEnsemble.from_trees(
        trees,
        base_value=np.zeros(n_per_iteration),
        n_features=n_features,
        averaging=averaging,
        x_float32=False,
        model_type=model_type,
        objective=objective,
        feature_names=feature_names,
        info=info,
    )


def _objective(objective_string):
    """The ensemble's ``objective`` from LightGBM's objective string.

    ``"squared_error"`` only when ``predict`` returns the raw sum of the trees
    on the squared-error scale. ``reg_sqrt=True`` (printed ``"regression
    sqrt"``) fits the trees to ``sign(y) sqrt(|y|)`` and ``predict`` squares
    the raw score back (``RegressionL2loss::ConvertOutput``): the raw score is
    not the prediction, so it is reported as ``"regression_sqrt"``.
    """
    if objective_string is None:
        return "custom"
    tokens = objective_string.split()
    if tokens[0] in _SQUARED_ERROR:
        return "regression_sqrt" if "sqrt" in tokens[1:] else "squared_error"
    return tokens[0]


# LightGBM's Tree::decision_type_ bits (include/LightGBM/tree.h): categorical,
# default left, and the missing type (0 None, 1 Zero, 2 NaN) in bits 2-3.
_CATEGORICAL_BIT, _DEFAULT_LEFT_BIT = 1, 2
_MISSING_NONE, _MISSING_ZERO, _MISSING_NAN = 0, 1, 2


def _read_text(text, model_type):
    """The header and the trees of ``model_to_string``, or None when a tree has
    categorical splits or linear leaves (those are read from the JSON dump).

    A tree is its ``key=value`` lines as a dict of strings; the arrays hold the
    numbers at full double precision, as the JSON dump prints them.
    """
    head, _, body = text.partition("\nTree=")
    body = body.partition("end of trees")[0]
    header = {}
    for line in head.splitlines():
        key, sep, value = line.partition("=")
        header[key.strip()] = value if sep else True
    dump = {"text": True, "num_tree_per_iteration": header["num_tree_per_iteration"],
            "max_feature_idx": header["max_feature_idx"],
            "average_output": "average_output" in header, "objective": header.get("objective")}
    trees = []
    for block in body.split("\nTree=") if body.strip() else []:
        tree = dict(line.split("=", 1) for line in block.splitlines()[1:] if "=" in line)
        if tree.get("num_cat", "0") != "0" or tree.get("is_linear", "0") != "0":
            return None
        trees.append(tree)
    dump["trees"] = trees
    _, found, tail = text.rpartition("\npandas_categorical:")
    if found and tail.partition("\n")[0].strip() != "null":
        return None  # category columns: their lists come from the JSON dump
    return dump


def _numeric_tree(tree, output):
    """One tree of ``model_to_string`` (its ``key=value`` texts) to be read with all
    others by :func:`_numeric_trees`: ``(number of leaves, output, texts)``."""
    n_leaves = int(tree["num_leaves"])
    if n_leaves == 1 and not tree.get("leaf_count", "").strip():
        # not written: irrelevant for a one-leaf tree
        tree = {**tree, "leaf_count": "0"}
    return n_leaves, int(output), tree


def _numeric_trees(trees, scale, model_type):
    """Trees of ``model_to_string`` without categorical splits or linear leaves
    (:func:`_numeric_tree`), stacked in one TreeArrays.

    Each array's numbers are parsed for all trees at once. LightGBM numbers the
    internal nodes 0..n-2 (root 0) and the leaves ~0..~(n-1) in its child arrays;
    here leaf k of a tree becomes its node n_internal + k.
    """
    n_leaves = np.array([n for n, _, _ in trees])
    n_internal = n_leaves - 1
    tree_start = np.concatenate([[0], np.cumsum(n_internal + n_leaves)])
    texts = [text for _, _, text in trees]

    def numbers(key, dtype, count):
        # LightGBM prints doubles at full precision: read back exactly as float() does
        joined = " ".join([text.get(key, "") for text in texts]).strip()
        # (np.fromstring reads one number from an empty text)
        values = np.fromstring(joined, dtype=dtype, sep=" ") if joined else np.zeros(0, dtype)
        if len(values) != count.sum():
            raise UnsupportedModelError(f"{model_type}: the model string has {len(values)} "
                                        f"values of {key} for {count.sum()} nodes.")
        return values

    def rows(first, count):  # each tree's rows first[t] .. first[t] + count[t] - 1
        return np.repeat(first, count) + np.arange(count.sum()) - np.repeat(
            np.cumsum(count) - count, count)

    internal = rows(tree_start[:-1], n_internal)
    leaves = rows(tree_start[:-1] + n_internal, n_leaves)
    decision = numbers("decision_type", np.int64, n_internal)
    if np.any(decision & _CATEGORICAL_BIT):  # num_cat=0 promised none
        raise UnsupportedModelError(
            f"{model_type}: a categorical split in a tree without categories.")
    missing = (decision >> 2) & 3
    if np.any(missing > _MISSING_NAN):
        raise UnsupportedModelError(
            f"{model_type}: unsupported missing_type {int(missing.max())} in a LightGBM split.")
    threshold = numbers("threshold", np.float64, n_internal)
    n = int(tree_start[-1])
    arrays = TreeArrays(
        **leaf_arrays(n),
        cover=np.zeros(n),
        value=np.zeros((n, 1)),
        output=np.array([output for _, output, _ in trees]),
        tree_start=tree_start,
    )
    first_leaf = np.repeat(n_internal, n_internal)
    for name, key in (("children_left", "left_child"), ("children_right", "right_child")):
        child = numbers(key, np.int64, n_internal)
        getattr(arrays, name)[internal] = np.where(child < 0, first_leaf + ~child, child)
    # missing "None": NaN is read as 0.0 (the stored default_left is not used)
    arrays.default_left[internal] = np.where(missing == _MISSING_NONE, 0.0 <= threshold,
                                             (decision & _DEFAULT_LEFT_BIT) != 0)
    arrays.feature[internal] = numbers("split_feature", np.int64, n_internal)
    arrays.threshold[internal] = threshold
    arrays.decision_type[internal] = np.where(missing == _MISSING_ZERO,
                                              DECISION_LEQ_ZERO_MISSING, DECISION_LEQ)
    # (counts are integers: parsed 4x faster as such, then exact as float64)
    arrays.cover[internal] = numbers("internal_count", np.int64, n_internal)
    arrays.cover[leaves] = numbers("leaf_count", np.int64, n_leaves)
    arrays.value[leaves, 0] = scale * numbers("leaf_value", np.float64, n_leaves)
    return arrays


def _convert_tree(root, output, scale, model_type):
    """One ``tree_structure`` dict as :class:`TreeArrays` (pre-order numbering)."""
    nodes, children_left, children_right = [], [], []
    stack = [(root, None)]  # (node, slot in the parent's child list to fill)
    while stack:
        node, slot = stack.pop()
        index = len(nodes)
        if slot is not None:
            slot[0][slot[1]] = index
        nodes.append(node)
        children_left.append(-1)
        children_right.append(-1)
        if "split_index" in node:
            stack.append((node["right_child"], (children_right, index)))
            stack.append((node["left_child"], (children_left, index)))

    n = len(nodes)
    default_left = np.zeros(n, dtype=bool)
    feature = np.zeros(n, dtype=np.int64)
    threshold = np.zeros(n)
    decision_type = np.full(n, DECISION_LEQ, dtype=np.uint8)
    cover = np.zeros(n)
    value = np.zeros((n, 1))
    categories = {}
    fallback = np.zeros((n, 1))
    linear_terms = {}

    for k, node in enumerate(nodes):
        if "split_index" not in node:
            cover[k] = node.get("leaf_count", 0)  # irrelevant for a one-leaf tree
            value[k] = fallback[k] = scale * node["leaf_value"]
            if "leaf_const" in node:
                # linear_tree: LightGBM predicts leaf_const + leaf_coeff @ x, or
                # leaf_value when one of the leaf's features is NaN (Tree::Predict).
                value[k] = scale * node["leaf_const"]
                linear_terms[k] = (
                    np.asarray(node["leaf_features"], dtype=np.int64),
                    scale * np.asarray(node["leaf_coeff"], dtype=np.float64),
                )
            continue
        feature[k] = node["split_feature"]
        cover[k] = node["internal_count"]
        kind, missing = node["decision_type"], node["missing_type"]
        if kind == "==":
            decision_type[k] = DECISION_CATEGORICAL
            categories[k] = np.array(str(node["threshold"]).split("||"), dtype=np.int64)
            default_left[k] = False  # NaN is always routed right
        elif kind == "<=":
            threshold[k] = float(node["threshold"])
            if missing == "NaN":
                default_left[k] = node["default_left"]
            elif missing == "Zero":
                decision_type[k] = DECISION_LEQ_ZERO_MISSING
                default_left[k] = node["default_left"]
            elif missing == "None":
                default_left[k] = 0.0 <= threshold[k]  # NaN is read as 0.0
            else:
                raise UnsupportedModelError(
                    f"{model_type}: unsupported missing_type {missing!r} in a LightGBM split."
                )
        else:
            raise UnsupportedModelError(
                f"{model_type}: unsupported decision_type {kind!r} in a LightGBM split."
            )

    return TreeArrays(
        children_left=np.asarray(children_left, dtype=np.int64),
        children_right=np.asarray(children_right, dtype=np.int64),
        default_left=default_left,
        feature=feature,
        threshold=threshold,
        decision_type=decision_type,
        cover=cover,
        value=value,
        categories=categories,
        output=output,
        linear_terms=linear_terms or None,
        fallback_value=fallback if linear_terms else None,
    )
