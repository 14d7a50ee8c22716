"""scikit-learn adapter: trees, forests, GradientBoosting, HistGradientBoosting.

``DecisionTree*``, ``ExtraTree*``, forests and ``GradientBoosting*`` store
``sklearn.tree.Tree`` objects: a row goes left when
``float32(x) <= threshold`` (float64 threshold, hence ``x_float32=True``), NaN
follows ``missing_go_to_left``, and the cover is ``weighted_n_node_samples``
(what shap's TreeExplainer and sklearn's partial dependence use;
doc/local_attributions.rst). Raw outputs: ``predict`` for regressors,
``predict_proba`` for tree and forest classifiers (one value per class in
every leaf), the margin ``decision_function`` for gradient boosting.

``HistGradientBoosting*`` predictors compare float64 values with
``num_threshold`` and use the node ``count`` as cover; that count ignores
``sample_weight`` (``info["covers"] == "unweighted_count"``), and
:meth:`TreeEnsemble.with_data_covers` replaces it by the weighted count of
the training rows when they are known. Their leaf values
already include the learning rate (``TreeGrower._apply_shrinkage``). With
categorical features the model first re-encodes X by an ``OrdinalEncoder``
inside a ``ColumnTransformer`` that moves categorical columns first; split
features and category codes are mapped back to the input columns and raw
category values here.

Layer: models (imports ``_errors`` and ``_ensemble``).
"""
import numpy as np
from sklearn.base import is_classifier
from sklearn.dummy import DummyClassifier, DummyRegressor
from sklearn.ensemble import (
    ExtraTreesClassifier,
    ExtraTreesRegressor,
    GradientBoostingClassifier,
    GradientBoostingRegressor,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    IsolationForest,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted

from .._errors import UnsupportedModelError
from ._ensemble import DECISION_CATEGORICAL, DECISION_LEQ, TreeArrays, TreeEnsemble


def _model_kinds():
    """(classes, converter) pairs; ExtraTree* subclass DecisionTree*."""
    return (
        ((HistGradientBoostingRegressor, HistGradientBoostingClassifier),
         _convert_hist_gradient_boosting),
        ((GradientBoostingRegressor, GradientBoostingClassifier), _convert_gradient_boosting),
        ((RandomForestRegressor, RandomForestClassifier, ExtraTreesRegressor,
          ExtraTreesClassifier, DecisionTreeRegressor, DecisionTreeClassifier),
         _convert_forest),
        ((IsolationForest,), _convert_isolation_forest),
    )


def is_tree_model(model):
    """Whether ``model`` is one of the scikit-learn tree models ``convert`` reads."""
    return any(isinstance(model, classes) for classes, _ in _model_kinds())


def convert(model):
    """Translate a fitted scikit-learn tree model into a :class:`TreeEnsemble`.

    Parameters
    ----------
    model : estimator
        A fitted ``DecisionTreeRegressor``, ``DecisionTreeClassifier``,
        ``ExtraTreeRegressor``, ``ExtraTreeClassifier``,
        ``RandomForestRegressor``, ``RandomForestClassifier``,
        ``ExtraTreesRegressor``, ``ExtraTreesClassifier``,
        ``GradientBoostingRegressor``, ``GradientBoostingClassifier``,
        ``HistGradientBoostingRegressor``, ``HistGradientBoostingClassifier``
        or ``IsolationForest`` (its output: the mean path length).

    Returns
    -------
    TreeEnsemble

    Raises
    ------
    UnsupportedModelError
        For any other scikit-learn estimator, multi-output classifiers,
        gradient boosting with a non-constant ``init`` estimator, and
        HistGradientBoosting categories that are not non-negative integers.
    sklearn.exceptions.NotFittedError
        If the model is not fitted.
    """
    for classes, adapter in _model_kinds():
        if isinstance(model, classes):
            check_is_fitted(model)
            return adapter(model)
    raise UnsupportedModelError(
        f"{type(model).__name__} is not a supported scikit-learn model: expected a "
        "decision tree, extra tree, random forest, extra trees, gradient boosting or "
        "histogram gradient boosting regressor or classifier, or an IsolationForest."
    )


def _allow_nan(estimator):
    """Whether ``estimator.predict`` accepts NaN (its own input tag)."""
    return bool(get_tags(estimator).input_tags.allow_nan)


def _stacked(trees, name):
    """One field of several ``sklearn.tree.Tree`` objects, concatenated."""
    return np.concatenate([getattr(tree, name) for tree in trees])


def _tree_arrays(trees, value, output=0):
    """The ``sklearn.tree.Tree`` objects ``trees`` stacked in one TreeArrays, with
    ``value`` the leaf values of all their nodes (and ``output`` one per tree)."""
    sizes = [tree.node_count for tree in trees]
    tree_start = np.concatenate([[0], np.cumsum(sizes)])
    # A tree's fields are strided views of one array of node records: copied
    # tree by tree, all fields at once, the records are read from memory once
    # (field by field over all trees, they were read once per field).
    fields = {"children_left": np.int64, "children_right": np.int64,
              "missing_go_to_left": bool, "feature": np.int64, "threshold": np.float64,
              "weighted_n_node_samples": np.float64}
    stacked = {name: np.empty(tree_start[-1], dtype=dtype) for name, dtype in fields.items()}
    for tree, start, stop in zip(trees, tree_start[:-1], tree_start[1:]):
        for name, array in stacked.items():
            array[start:stop] = getattr(tree, name)
    return TreeArrays(
        children_left=stacked["children_left"],
        children_right=stacked["children_right"],
        default_left=stacked["missing_go_to_left"],
        feature=stacked["feature"],
        threshold=stacked["threshold"],
        decision_type=np.full(tree_start[-1], DECISION_LEQ, dtype=np.uint8),
        cover=stacked["weighted_n_node_samples"],
        value=value,
        output=output,
        tree_start=tree_start,
    )


def _criterion_objective(criterion):
    # "friedman_mse" fits the node mean by least squares like "squared_error";
    # it only scores candidate splits differently (sklearn 1.9 deprecates it and
    # already stores "squared_error" for trees).
    return "squared_error" if criterion in ("squared_error", "friedman_mse") else str(criterion)


def _classifier_leaf_values(value):
    """Leaf class probabilities exactly as ``predict_proba`` of a tree forms them
    from its ``tree_.value[:, 0, :]`` (node rows of any trees)."""
    value = value.astype(np.float64, copy=False)
    total = value.sum(axis=1, keepdims=True)
    return value / np.where(total == 0.0, 1.0, total)


def _ensemble(model, trees, info, **kwargs):
    """The TreeEnsemble of a scikit-learn model's trees (one stacked TreeArrays):
    what every converter reads the same way (the width, the class name, the
    feature names, the number of trees and a classifier's classes) added to
    ``info`` and ``kwargs`` (base value, averaging, ``x_float32``, objective)."""
    info = {**info, "n_trees_total": len(trees.tree_start) - 1}
    if hasattr(model, "classes_"):
        info["classes"] = model.classes_
    return TreeEnsemble.from_trees(
        [trees], n_features=model.n_features_in_, model_type=type(model).__name__,
        feature_names=getattr(model, "feature_names_in_", None), info=info, **kwargs)


def _convert_forest(model):
    """A single tree (weight 1) or an averaging forest (weight 1/T)."""
    name = type(model).__name__
    estimators = list(getattr(model, "estimators_", [model]))
    averaging = hasattr(model, "estimators_")
    if model.n_outputs_ > 1 and is_classifier(model):
        raise UnsupportedModelError(
            f"{name} is a multi-output classifier ({model.n_outputs_} outputs); its "
            "predict_proba is a list of per-output arrays, which is not supported."
        )
    weight = 1.0 / len(estimators)
    trees = [estimator.tree_ for estimator in estimators]
    if is_classifier(model):
        for tree in trees:
            if tree.value.shape[2] != model.n_classes_:
                raise UnsupportedModelError(
                    f"{name}: a tree has {tree.value.shape[2]} classes, the model "
                    f"{model.n_classes_}."
                )
        value = _classifier_leaf_values(np.concatenate([tree.value[:, 0, :] for tree in trees]))
    else:
        value = np.concatenate([tree.value[:, :, 0] for tree in trees], dtype=np.float64)
    trees = _tree_arrays(trees, value * weight)
    info = {
        # Forests validate X with the tags of their first tree.
        "allow_nan": _allow_nan(estimators[0]),
        "float32_overflow": "error",  # predict validates X as float32
    }
    n_outputs = model.n_classes_ if is_classifier(model) else model.n_outputs_
    return _ensemble(model, trees, info, base_value=np.zeros(n_outputs), averaging=averaging,
                     x_float32=True, objective=_criterion_objective(model.criterion))


def _convert_gradient_boosting(model):
    """GradientBoosting: constant init plus learning_rate times each stage's trees."""
    name = type(model).__name__
    init = model.init_
    constant = (
        (isinstance(init, str) and init == "zero")
        or isinstance(init, DummyRegressor)
        or (isinstance(init, DummyClassifier) and init.strategy != "stratified")
    )
    if not constant:
        raise UnsupportedModelError(
            f"{name} has init estimator {init!r}, whose prediction depends on X (or is "
            "random); only init='zero' or a DummyRegressor / DummyClassifier (not "
            "strategy='stratified') gives the constant base value a tree ensemble needs."
        )
    # The init prediction is the same for every row: read it from the model.
    base_value = model._raw_predict_init(np.zeros((1, model.n_features_in_)))[0]
    n_stages = model.n_estimators_
    learning_rate = float(model.learning_rate)
    stages = model.estimators_[:n_stages]
    trees = [estimator.tree_ for stage in stages for estimator in stage]
    value = np.concatenate([tree.value[:, 0, :1] for tree in trees]) * learning_rate
    trees = _tree_arrays(trees, value, output=np.tile(np.arange(stages.shape[1]), n_stages))
    info = {
        "allow_nan": _allow_nan(model),
        "float32_overflow": "error",
        "n_estimators": n_stages,
        "learning_rate": learning_rate,
    }
    return _ensemble(model, trees, info, base_value=base_value, averaging=False,
                     x_float32=True, objective=_criterion_objective(model.loss))


def _hist_columns(model):
    """Input column and raw category values of each column HGB's predictors see.

    Returns ``(column, categories)``: ``column[j]`` is the input column of
    predictor feature ``j``; ``categories[j]`` maps ordinal code -> raw integer
    category for a categorical feature (``None`` otherwise).
    """
    name = type(model).__name__
    n_features = model.n_features_in_
    preprocessor = getattr(model, "_preprocessor", None)
    if preprocessor is None:
        return np.arange(n_features), [None] * n_features
    column = np.full(n_features, -1, dtype=np.int64)
    for part, _, columns in preprocessor.transformers_:
        positions = np.arange(n_features)[preprocessor.output_indices_[part]]
        if len(positions):
            column[positions] = np.arange(n_features)[np.asarray(columns)]
    if np.any(column < 0):
        raise UnsupportedModelError(f"{name}: could not map the preprocessed columns back.")
    categories = [None] * n_features
    encoder = preprocessor.named_transformers_["encoder"]
    start = preprocessor.output_indices_["encoder"].start
    for j, values in enumerate(encoder.categories_):
        try:
            values = np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            values = np.array([np.inf])
        values = values[~np.isnan(values)]  # NaN is not a category (last, if present)
        if not np.all((values >= 0) & (values < 2**31) & (values == np.floor(values))):
            raise UnsupportedModelError(
                f"{name}: categorical feature {column[start + j]} has categories that are "
                "not non-negative integer codes; encode them as integers 0, 1, 2, ... first."
            )
        categories[start + j] = values.astype(np.int64)
    return column, categories


def _hist_trees(predictors, outputs, column, categories):
    """HGB's ``TreePredictor`` objects stacked in one TreeArrays.

    HGB sends a categorical value to the missing-value side when it is NaN,
    negative or not a known category; known categories outside the left bitset
    go right. The kernels send NaN to ``default_child`` and negative or
    unlisted categories right, so when the missing side is left the children
    are swapped and the listed set is the complement among known categories.
    """
    nodes = np.concatenate([predictor.nodes for predictor in predictors])
    tree_start = np.concatenate([[0], np.cumsum([len(p.nodes) for p in predictors])])
    leaf = nodes["is_leaf"].astype(bool)
    left = np.where(leaf, -1, nodes["left"].astype(np.int64))
    right = np.where(leaf, -1, nodes["right"].astype(np.int64))
    default_left = nodes["missing_go_to_left"].astype(bool) & ~leaf
    categorical = nodes["is_categorical"].astype(bool) & ~leaf
    decision = np.where(categorical, DECISION_CATEGORICAL, DECISION_LEQ).astype(np.uint8)
    feature = np.where(leaf, 0, nodes["feature_idx"])
    sets = {}
    for k in np.flatnonzero(categorical):  # (categorical nodes only)
        predictor = predictors[np.searchsorted(tree_start, k, side="right") - 1]
        known = categories[feature[k]]
        words = predictor.raw_left_cat_bitsets[nodes["bitset_idx"][k]]
        codes = np.arange(len(known))
        goes_left = ((words[codes // 32] >> (codes % 32).astype(np.uint32)) & 1) == 1
        if default_left[k]:
            left[k], right[k] = right[k], left[k]
            default_left[k] = False
            goes_left = ~goes_left
        sets[int(k)] = known[goes_left]
    return TreeArrays(
        children_left=left,
        children_right=right,
        default_left=default_left,
        feature=column[feature],
        threshold=nodes["num_threshold"],
        decision_type=decision,
        cover=nodes["count"].astype(np.float64),
        value=nodes["value"].reshape(-1, 1),
        categories=sets,
        output=outputs,
        tree_start=tree_start,
    )


def _convert_hist_gradient_boosting(model):
    """HistGradientBoosting: ``_baseline_prediction`` plus every predictor's leaves."""
    column, categories = _hist_columns(model)
    predictors = [predictor for iteration in model._predictors for predictor in iteration]
    outputs = [k for iteration in model._predictors for k in range(len(iteration))]
    trees = _hist_trees(predictors, outputs, column, categories)
    loss = model.loss if isinstance(model.loss, str) else type(model.loss).__name__
    info = {
        "allow_nan": _allow_nan(model),
        "n_iter": model.n_iter_,
        "categorical_features": [int(column[j]) for j, c in enumerate(categories)
                                 if c is not None],
        "category_cast": "integer",
        # node counts ignore sample_weight (TreeEnsemble.with_data_covers)
        "covers": "unweighted_count",
    }
    return _ensemble(model, trees, info, base_value=np.ravel(model._baseline_prediction),
                     averaging=False, x_float32=False, objective=loss)


def _average_path_length(n):
    """c(n) of Liu, Ting and Zhou (2008), eq. 1: the mean path length of an
    unsuccessful search in a binary search tree of n points,
    2 H(n - 1) - 2 (n - 1) / n with H(i) ~ ln(i) + Euler's constant; c(2) = 1,
    c(n) = 0 for n <= 1 (scikit-learn's ``_average_path_length``)."""
    n = np.asarray(n, dtype=np.float64)
    out = np.zeros_like(n)
    out[n == 2] = 1.0
    big = n > 2
    out[big] = 2.0 * (np.log(n[big] - 1.0) + np.euler_gamma) - 2.0 * (n[big] - 1.0) / n[big]
    return out


def _node_depths(trees):
    """Depth of every node of stacked trees (TreeArrays, root 0), level by level
    for all trees at once."""
    base = np.repeat(trees.tree_start[:-1], np.diff(trees.tree_start))
    internal = trees.children_left >= 0
    left = np.where(internal, trees.children_left + base, -1)
    right = np.where(internal, trees.children_right + base, -1)
    depth = np.zeros(len(left), dtype=np.int64)
    level, d = trees.tree_start[:-1], 0
    while len(level):
        depth[level] = d
        level = level[left[level] >= 0]
        level, d = np.concatenate([left[level], right[level]]), d + 1
    return depth


def _convert_isolation_forest(model):
    """IsolationForest: the mean path length, the output shap's TreeExplainer explains.

    A row's path length in one tree is the depth of the leaf it reaches plus
    c(n), n the training rows of that leaf (the unbuilt subtree's expected
    depth, Liu et al. 2008); the forest's raw output is the mean over trees
    (``score_samples = -2 ** (-output / c(max_samples))``). Each tree sees
    the columns ``estimators_features_`` of X (``max_features``), mapped back
    here; covers are ``weighted_n_node_samples``.
    """
    weight = 1.0 / len(model.estimators_)
    trees = [estimator.tree_ for estimator in model.estimators_]
    arrays = _tree_arrays(trees, None)
    leaf = arrays.children_left < 0
    value = np.where(leaf, _node_depths(arrays) + _average_path_length(
        _stacked(trees, "n_node_samples")), 0.0)
    arrays.value = value[:, None] * weight
    # Each tree's feature j is column columns[j] of X: one table of all trees' columns.
    columns = [np.asarray(c) for c in model.estimators_features_]
    first = np.concatenate([[0], np.cumsum([len(c) for c in columns])])[:-1]
    offset = np.repeat(first, np.diff(arrays.tree_start))
    arrays.feature = np.where(leaf, arrays.feature,
                              np.concatenate(columns)[offset + np.maximum(arrays.feature, 0)])
    info = {
        "allow_nan": _allow_nan(model.estimators_[0]),
        "float32_overflow": "error",  # score_samples validates X as float32
        "output": "mean path length (depth + c(leaf size)), averaged over trees",
        "max_samples": int(model.max_samples_),
    }
    return _ensemble(model, arrays, info, base_value=np.zeros(1), averaging=True,
                     x_float32=True, objective="isolation_path_length")
