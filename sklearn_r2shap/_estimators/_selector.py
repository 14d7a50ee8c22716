"""The SelectFromModel-style behaviour shared by the three estimators.

A subclass fits (or takes) a tree model, computes ``feature_importances_`` in
``_fit_importances`` and inherits everything else: fitting a clone or using
a prefit / :class:`~sklearn.frozen.FrozenEstimator` model, feature-name and
width bookkeeping, the threshold and ``max_features`` rules of
:class:`~sklearn.feature_selection.SelectFromModel`, and ``transform``,
``get_support``, ``get_feature_names_out``, ``inverse_transform`` and
``set_output`` from :class:`~sklearn.feature_selection.SelectorMixin`.

Layer: estimators (the base of the selectors); imports ``_pipeline``, ``_model``,
``_execution`` and below.
"""
import numbers
import time
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.feature_selection import SelectorMixin
from sklearn.frozen import FrozenEstimator
from sklearn.utils import Bunch, _safe_indexing, check_array, get_tags
from sklearn.utils._param_validation import HasMethods, Interval, StrOptions
from sklearn.utils.metadata_routing import (
    MetadataRouter,
    MethodMapping,
    _routing_enabled,
    get_routing_for_object,
    process_routing,
)
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import (
    _check_feature_names,
    _check_method_params,
    _check_n_features,
    check_is_fitted,
)

from .._execution.local import check_verbose
from .._validation import n_rows_features
from .._model import is_tree_model, to_ensemble
from .._pipeline import ends_in_tree_model, has_transformers, is_pipeline, transform, unwrap

__all__ = ["BaseTreeSelector"]


def _unfrozen(estimator):
    """(model, is_frozen): a FrozenEstimator's fitted model is used as is."""
    if isinstance(estimator, FrozenEstimator):
        return estimator.estimator, True
    return estimator, False


#: Scores closer than this, relative to the largest absolute score, count as equal
#: when compared with the threshold (the relative tolerance of :func:`math.isclose`).
TIE_RELATIVE_TOLERANCE = 1e-9


def selected_by_threshold(scores, threshold):
    """``scores >= threshold``, with a tie at the threshold decided by no rounding.

    Importances that are equal in exact arithmetic (symmetric features) come out
    of floating-point sums a few units in the last place apart, and a threshold
    derived from them ("mean", "median") lands among them. A score within
    ``TIE_RELATIVE_TOLERANCE`` times the largest absolute score of the threshold
    is at the threshold, hence kept: equal importances are kept or dropped
    together, whatever the column order, the data's scale or the BLAS.
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0 or not np.isfinite(threshold):
        return scores >= threshold
    tolerance = TIE_RELATIVE_TOLERANCE * float(np.max(np.abs(scores)))
    return scores >= threshold - tolerance


def is_classification_target(y):
    """Whether a default model for ``y`` is a classifier (by ``type_of_target``).

    "binary" and "multiclass" targets are classification targets, except
    floating-point ones: ``type_of_target`` calls a float target whose values
    are whole numbers (the diabetes target) "multiclass", and a float target
    is a regression target here. None (no target) is not.
    """
    if y is None:
        return False

    kind = type_of_target(y, input_name="y")
    dtype = getattr(y, "dtype", None)
    if dtype is None:
        dtype = np.asarray(y).dtype
    is_float = getattr(dtype, "kind", "O") == "f"
    return kind in ("binary", "multiclass") and not is_float


def _threshold_value(threshold, scores):
    """SelectFromModel's threshold rules: None -> "mean", "median", "k*mean", float."""
    if threshold is None:
        threshold = "mean"
    if isinstance(threshold, str):
        scale = 1.0
        reference = threshold.strip()
        if "*" in reference:
            scale_text, reference = reference.split("*")
            try:
                scale = float(scale_text.strip())
            except ValueError:
                raise ValueError(f"Unknown threshold {threshold!r}: the factor is not a number.")
            reference = reference.strip()
        if reference == "mean":
            return scale * float(np.mean(scores))
        if reference == "median":
            return scale * float(np.median(scores))
        raise ValueError(
            f"Unknown threshold {threshold!r}: expected 'mean', 'median', 'k*mean', "
            "'k*median' or a number."
        )
    if isinstance(threshold, numbers.Real) and not isinstance(threshold, bool):
        return float(threshold)
    raise ValueError(f"threshold must be a string, a number or None, got {threshold!r}.")


def _model_weight(estimator, params):
    """The row weights ``params`` (a model's routed fit parameters) give the model
    whose trees are explained: its ``sample_weight``, or for a Pipeline its last
    step's (as the Pipeline routes them); None if it gets none."""
    if not params:
        return None
    model = _unfrozen(estimator)[0]
    if is_pipeline(model):
        name, last = model.steps[-1]
        if last is None or (isinstance(last, str) and last == "passthrough"):
            return None
        routed = get_routing_for_object(model).route_params(caller="fit", params=params)
        return routed[name].fit.get("sample_weight")
    return params.get("sample_weight")


class BaseTreeSelector(MetaEstimatorMixin, SelectorMixin, BaseEstimator):
    """Base class: fit or take a tree model, score features, select them.

    Subclasses define ``_default_estimator(y=None)`` (the model fitted when
    ``estimator`` is None: a classifier for a classification target, see
    :func:`is_classification_target`) and
    ``_fit_importances(X, y, sample_weight)``, which sets
    ``feature_importances_`` (and any other fitted attribute) from
    ``self.estimator_``.

    Parameters are declared once, in ``_parameter_constraints`` (scikit-learn's
    ``_param_validation``), and checked by ``fit``'s ``_fit_context``; only what
    depends on another parameter or on the data is checked in ``fit``.

    Metadata routing (scikit-learn's ``enable_metadata_routing``): a selector is
    a router, as :class:`~sklearn.feature_selection.SelectFromModel` is. It
    consumes ``sample_weight`` itself (the weights of its scores) and routes
    ``fit``'s metadata to the model's ``fit`` (and, where a subclass
    cross-validates or scores, to the splitter's ``split`` and the scorer),
    each by request (:meth:`get_metadata_routing`, :meth:`_route_fit`).
    """

    _parameter_constraints: dict = {
        "estimator": [None, HasMethods(["fit"])],
        "prefit": ["boolean"],
        "threshold": [None, str, Interval(Real, None, None, closed="both")],
        "max_features": [None, Interval(Integral, 0, None, closed="left"), callable],
        "n_jobs": [None, Integral],
        "verbose": [None, StrOptions({"auto"}), "verbose"],
    }

    #: The methods whose metadata go to the same method of the model.
    _routed_methods = ("fit",)

    def _default_estimator(self, y=None):
        raise NotImplementedError

    def _fit_importances(self, X, y, sample_weight):
        raise NotImplementedError

    def _step_line(self, message, since=None):
        """With ``verbose >= 2``, one line per step (an RFECV step, a CV fold, a
        stage of ``fit``), with the seconds since ``since`` (a ``perf_counter``)."""
        verbose = check_verbose(self.verbose)
        if isinstance(verbose, str) or verbose < 2:
            return
        took = "" if since is None else f" ({time.perf_counter() - since:.2f} s)"
        print(f"[{type(self).__name__}] {message}{took}", flush=True)

    # ------------------------------------------------------------------
    # the inputs of fit, checked once

    def _check_fit_input(self, X, y, sample_weight=None, *, y_required=True,
                         allow_nan=None, accept_sparse=("csr", "csc"), ensure_min_samples=1,
                         convert=True):
        """X, y and ``sample_weight`` of ``fit``, checked once; records
        ``n_features_in_`` and ``feature_names_in_``.

        X must be 2-D (the package's message for 1-D rows), finite, or NaN
        where ``allow_nan`` (default: the tags) allows it. With ``convert``, an
        array-like X comes back as the checked array and y as an array (a
        DataFrame stays one, for a Pipeline's column transformers), and
        ``sample_weight`` as an array.
        """
        if y is None and y_required:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        if allow_nan is None:
            allow_nan = self.__sklearn_tags__().input_tags.allow_nan
        n_rows_features(X)
        checked = check_array(X, ensure_all_finite="allow-nan" if allow_nan else True,
                              dtype=None, ensure_min_samples=ensure_min_samples,
                              accept_sparse=accept_sparse)
        self._record_input(X)
        if not convert:
            return X, y, sample_weight
        if not hasattr(X, "iloc"):  # array-likes: indexable by fold, and by the SHAP sources
            X = checked
            if y is not None:
                y = np.asarray(y)
        if sample_weight is not None:
            sample_weight = np.asarray(sample_weight)
        return X, y, sample_weight

    # ------------------------------------------------------------------
    # metadata routing

    def _routing_estimator(self):
        """The model whose ``fit`` gets routed metadata (the default one if None)."""
        return self.estimator if self.estimator is not None else self._default_estimator()

    def _add_routes(self, router):
        """A subclass adds its splitters and scorers to ``router``."""

    def get_metadata_routing(self):
        """Get the metadata routing of this object.

        A selector consumes ``sample_weight`` itself (``set_fit_request``) and
        routes ``fit``'s other metadata by request: to the model's ``fit``, and
        where it cross-validates or scores, to the splitter's ``split``
        (``groups``) and to the scorer (``sample_weight``): scikit-learn's
        metadata routing, and the documentation page "Feature selection",
        "Metadata routing".

        Returns
        -------
        routing : MetadataRouter
            A :class:`~sklearn.utils.metadata_routing.MetadataRouter` encapsulating
            routing information.
        """
        router = MetadataRouter(owner=type(self).__name__).add_self_request(self)
        estimator = self._routing_estimator()
        if estimator is not None:
            mapping = MethodMapping()
            for method in self._routed_methods:
                mapping.add(caller=method, callee=method)
            router.add(estimator=estimator, method_mapping=mapping)
        self._add_routes(router)
        return router

    def _route_fit(self, sample_weight, fit_params, groups=None):
        """Where ``fit``'s metadata goes: ``(model_params, model_weight, routed)``.

        ``model_params``: the keyword arguments of the model's ``fit``;
        ``model_weight``: the row weights they give the explained model (for
        its covers, ``_record_data_covers``); ``routed``: a Bunch with
        ``split`` (keyword arguments of ``cv.split``), ``ranking_split`` (of
        ``ranking_cv``'s) and ``score`` (of the scorer).

        With metadata routing enabled, each piece goes where it was requested
        (``process_routing``): the model gets ``sample_weight`` only if it
        requested it. Without it (the default), as always: ``fit_params`` and
        ``sample_weight`` go to the model's ``fit`` (a Pipeline's as
        ``<last step>__sample_weight``), ``groups`` to the splits, nothing to
        the scorer.
        """
        estimator = self._routing_estimator()
        if _routing_enabled():
            given = {key: value for key, value in dict(
                fit_params, sample_weight=sample_weight, groups=groups).items()
                if value is not None}
            routed = process_routing(self, "fit", **given)
            model_params = dict(routed.estimator.fit) if "estimator" in routed else {}
            weight = _model_weight(estimator, model_params)
            routes = Bunch(
                split=dict(routed.splitter.split) if "splitter" in routed else {},
                ranking_split=(dict(routed.ranking_splitter.split)
                               if "ranking_splitter" in routed else {}),
                score=dict(routed.scorer.score) if "scorer" in routed else {})
            return model_params, weight, routes
        model_params = dict(fit_params)
        if sample_weight is not None:
            # a Pipeline takes the weights of its final step as <step>__sample_weight
            key = (f"{estimator.steps[-1][0]}__sample_weight" if is_pipeline(estimator)
                   else "sample_weight")
            model_params[key] = sample_weight
        return model_params, sample_weight, Bunch(
            split={"groups": groups}, ranking_split={"groups": groups}, score={})

    @staticmethod
    def _rows_of(X, model_params, model_weight, rows):
        """The model's fit parameters and weights of the rows ``rows`` of X (fit
        parameters of X's length are indexed, as scikit-learn's cross-validation
        indexes them; others pass unchanged)."""
        params = _check_method_params(X, params=model_params, indices=rows)
        weight = None if model_weight is None else _safe_indexing(model_weight, rows)
        return params, weight

    def _fit_estimator(self, X, y, model_params=None, model_weight=None):
        """Set ``estimator_``: the given fitted model, or a clone fitted with
        ``model_params`` (``_route_fit``), whose weights are ``model_weight``."""
        estimator = self.estimator if self.estimator is not None else self._default_estimator(y)
        model, frozen = _unfrozen(estimator)
        if self.prefit or frozen:
            check_is_fitted(model)
            self._data_covers = None  # a prefit model keeps its library's covers
            return model
        estimator = clone(estimator)
        model_params = {} if model_params is None else model_params
        fitted = (estimator.fit(X, **model_params) if y is None
                  else estimator.fit(X, y, **model_params))
        self._record_data_covers(fitted, X, model_weight)
        return fitted

    def _record_data_covers(self, model, X, sample_weight):
        """Weighted covers for a model whose own covers ignore sample weights.

        HistGradientBoosting stores unweighted node counts. When the selector
        fits such a model with ``sample_weight`` it has the training rows, so
        the ensemble it explains gets covers that are the weighted numbers of
        training rows reaching each node (:meth:`TreeEnsemble.with_data_covers`);
        :meth:`_tree_ensemble` returns it for that model. A prefit model keeps
        its library's covers.
        """
        self._data_covers = None
        if sample_weight is None:
            return

        if ends_in_tree_model(model):  # the covers of the last step on its own rows
            model, X, _ = unwrap(model, X)

        # only scikit-learn's HistGradientBoosting needs it: spare other conversions
        if not (type(model).__module__.startswith("sklearn") and is_tree_model(model)):
            return
        ensemble = to_ensemble(model)
        if ensemble.info.get("covers") == "unweighted_count":
            self._data_covers = (model, ensemble.with_data_covers(X, sample_weight))

    def _tree_ensemble(self, model):
        """The TreeEnsemble to explain ``model`` with (see ``_record_data_covers``)."""
        recorded = getattr(self, "_data_covers", None)
        if recorded is not None and recorded[0] is model:
            return recorded[1]
        memo = getattr(self, "_ensemble_memo", None)  # open during ``fit`` only
        if memo is None:
            return to_ensemble(model)
        if memo.get("model") is not model:  # one model at a time: memory stays bounded
            memo.update(model=model, ensemble=to_ensemble(model))
        return memo["ensemble"]

    def _converting_once(self, fit):
        """Run ``fit()`` with each fitted model converted to a TreeEnsemble once.

        Within one ``fit`` a model is not changed after it is fitted, so its
        conversion (which for LightGBM and XGBoost parses the library's model
        dump) is reused by every decomposition of it; the memo is dropped when
        ``fit`` returns, so a model refitted in place later is read again.
        """
        self._ensemble_memo = {}
        try:
            return fit()
        finally:
            self.__dict__.pop("_ensemble_memo", None)

    def _explained_model(self, model, X):
        """``(model, X, names)`` the importances are computed on: for a Pipeline, its
        last step, X through the steps before it and their output names
        (``_pipeline.unwrap``); otherwise the arguments and None. Records the
        features the importances refer to (``explained_feature_names_``)."""
        model_out, X_out, names = unwrap(model, X)
        self._transformed_features = has_transformers(model)
        self._explained_names = names
        return model_out, X_out, names

    def _explained_rows(self, X):
        """Rows as the explained model sees them (through a Pipeline's steps)."""
        return transform(self.estimator_, X) if has_transformers(self.estimator_) else X

    def _record_explained_features(self):
        """``explained_feature_names_``: the features ``feature_importances_`` refer
        to -- the input columns, or the columns a Pipeline's steps give its
        last step. Selecting input columns (transform, get_support) is then
        defined only when those are the input columns one to one (same number,
        same names in the same order, e.g. a scaler or an imputer)."""
        n_importances = len(self.feature_importances_)
        if getattr(self, "feature_names_in_", None) is not None:
            inputs = np.asarray(self.feature_names_in_, dtype=object)
        else:
            inputs = np.asarray([f"x{j}" for j in range(self.n_features_in_)], dtype=object)
        names = getattr(self, "_explained_names", None)
        if getattr(self, "feature_groups", None) is not None:
            # feature groups (ShapleyR2Importance(feature_groups=...)): whole groups are selected
            self.explained_feature_names_ = np.asarray(names, dtype=object)
            self._selects_inputs = getattr(self, "_group_columns", None) is not None
            return
        if not getattr(self, "_transformed_features", False):
            self.explained_feature_names_ = inputs
            self._selects_inputs = True
            return
        if names is None:
            names = np.asarray([f"x{j}" for j in range(n_importances)], dtype=object)
        self.explained_feature_names_ = np.asarray(names, dtype=object)
        self._selects_inputs = (len(names) == len(inputs)
                                and bool(np.all(self.explained_feature_names_ == inputs)))

    def _record_input(self, X):
        """n_features_in_ and feature_names_in_ as scikit-learn sets them."""
        _check_feature_names(self, X, reset=True)
        _check_n_features(self, X, reset=True)

    def _validate_max_features(self, X):
        if self.max_features is None:
            return None
        n_features = len(self.feature_importances_)  # features, or groups
        max_features = self.max_features(X) if callable(self.max_features) else self.max_features
        if (not isinstance(max_features, numbers.Integral) or isinstance(max_features, bool)
                or not 0 <= max_features <= n_features):
            raise ValueError(
                f"max_features must be an integer in [0, {n_features}] or a callable "
                f"returning one, got {max_features!r}."
            )
        return int(max_features)

    def _set_threshold(self, X):
        self._record_explained_features()
        self.max_features_ = self._validate_max_features(X)
        self.threshold_ = _threshold_value(self.threshold, self.feature_importances_)

    def _threshold_mask(self):
        """The features the threshold keeps (before ``max_features``)."""
        return selected_by_threshold(self.feature_importances_, self.threshold_)

    def _get_support_mask(self):
        check_is_fitted(self, "feature_importances_")
        if not getattr(self, "_selects_inputs", True):
            names = self.explained_feature_names_
            shown = ", ".join(repr(str(n)) for n in names[:4]) + (", ..." if len(names) > 4 else "")
            raise ValueError(
                f"{type(self).__name__} explains the last step of a Pipeline: its "
                f"feature_importances_ refer to the {len(names)} columns the Pipeline's steps "
                f"make ({shown}; explained_feature_names_), not to its {self.n_features_in_} "
                "input columns, so it cannot select input columns (transform, get_support, "
                "get_feature_names_out). Read feature_importances_ with "
                "explained_feature_names_, pass feature_groups='input' (ShapleyR2Importance) to "
                "score and select input columns, or select the transformed columns by putting "
                "the selector inside the Pipeline, before the model."
            )
        scores = np.asarray(self.feature_importances_)
        mask = self._threshold_mask()
        if self.max_features_ is not None:
            top = np.zeros_like(mask)
            top[np.argsort(-scores, kind="mergesort")[: self.max_features_]] = True
            mask &= top
        groups = getattr(self, "_group_columns", None)
        if groups is not None:  # a selected group keeps all its input columns
            columns = np.zeros(self.n_features_in_, dtype=bool)
            for selected, members in zip(mask, groups):
                columns[members] = selected
            return columns
        return mask

    def _estimator_accepts_sparse(self):
        """Whether the (default) estimator fits on scipy.sparse X, by its tags."""
        estimator = self.estimator if self.estimator is not None else self._default_estimator()
        try:
            return bool(get_tags(_unfrozen(estimator)[0]).input_tags.sparse)
        except Exception:  # a model outside scikit-learn's tag system
            return False

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # the tree kernels route NaN; other models accept it if they say so
        tags.input_tags.allow_nan = True
        if self.estimator is not None:
            try:
                tags.input_tags.allow_nan = get_tags(_unfrozen(self.estimator)[0]).input_tags.allow_nan
            except Exception:  # a model outside scikit-learn's tag system
                pass
        return tags
