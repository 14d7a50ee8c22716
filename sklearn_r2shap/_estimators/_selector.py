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

import numpy as np
from sklearn.base import BaseEstimator, MetaEstimatorMixin, clone
from sklearn.feature_selection import SelectorMixin
from sklearn.frozen import FrozenEstimator
from sklearn.utils.validation import _check_feature_names, _check_n_features, check_is_fitted
from sklearn.utils import get_tags
from sklearn.utils.multiclass import type_of_target

from .._execution.local import check_verbose
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


class BaseTreeSelector(MetaEstimatorMixin, SelectorMixin, BaseEstimator):
    """Base class: fit or take a tree model, score features, select them.

    Subclasses define ``_default_estimator(y=None)`` (the model fitted when
    ``estimator`` is None: a classifier for a classification target, see
    :func:`is_classification_target`) and
    ``_fit_importances(X, y, sample_weight)``, which sets
    ``feature_importances_`` (and any other fitted attribute) from
    ``self.estimator_``.
    """

    def _default_estimator(self, y=None):
        raise NotImplementedError

    def _fit_importances(self, X, y, sample_weight):
        raise NotImplementedError

    def _check_params(self):
        if not isinstance(self.prefit, (bool, np.bool_)):
            raise ValueError(f"prefit must be True or False, got {self.prefit!r}.")
        check_verbose(self.verbose)

    def _step_line(self, message, since=None):
        """With ``verbose >= 2``, one line per step (an RFECV step, a CV fold, a
        stage of ``fit``), with the seconds since ``since`` (a ``perf_counter``)."""
        verbose = check_verbose(self.verbose)
        if isinstance(verbose, str) or verbose < 2:
            return
        took = "" if since is None else f" ({time.perf_counter() - since:.2f} s)"
        print(f"[{type(self).__name__}] {message}{took}", flush=True)

    def _fit_estimator(self, X, y, sample_weight=None, **fit_params):
        """Set ``estimator_``: the given fitted model, or a fitted clone."""
        estimator = self.estimator if self.estimator is not None else self._default_estimator(y)
        model, frozen = _unfrozen(estimator)
        if self.prefit or frozen:
            check_is_fitted(model)
            self._data_covers = None  # a prefit model keeps its library's covers
            return model
        estimator = clone(estimator)
        if sample_weight is not None:
            # a Pipeline takes the weights of its final step as <step>__sample_weight
            key = (f"{estimator.steps[-1][0]}__sample_weight" if is_pipeline(estimator)
                   else "sample_weight")
            fit_params = dict(fit_params, **{key: sample_weight})
        fitted = estimator.fit(X, **fit_params) if y is None else estimator.fit(X, y, **fit_params)
        self._record_data_covers(fitted, X, sample_weight)
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
