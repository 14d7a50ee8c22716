"""Recursive feature elimination by R^2 / D^2 shares, cross-validated, one-SE rule.

:class:`ShapleyR2RFECV` has the interface of
:class:`sklearn.feature_selection.RFECV`. Each fold runs its own elimination
on its training rows only and scores every step on its held-out rows
(documentation page "Feature selection", one-standard-error rule), the number of features
is chosen from the folds' curves, then one elimination on all rows chooses
which features.

Layer: estimators. Imports the public functions, ``_selector``, ``_stats`` and the
layers below; never imported by a public function.
"""
import time
from copy import deepcopy
from numbers import Integral, Real

import numpy as np
from sklearn.base import _fit_context, is_classifier
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.metrics import (
    check_scoring,
    d2_brier_score,
    d2_log_loss_score,
    d2_tweedie_score,
    r2_score,
)
from sklearn.model_selection import (
    GroupShuffleSplit,
    ShuffleSplit,
    StratifiedShuffleSplit,
    check_cv,
)
from sklearn.utils import _safe_indexing, check_random_state, get_tags
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import Interval, RealNotInt, StrOptions
from sklearn.utils.metadata_routing import (
    UNUSED,
    MethodMapping,
    _routing_enabled,
    process_routing,
)
from sklearn.utils.multiclass import type_of_target
from sklearn.utils.validation import _check_method_params, _num_samples, check_is_fitted

from .. import _groups
from .._errors import import_optional
from .._execution.cost import DEFAULT_EXACT_BUDGET
from ._selector import BaseTreeSelector, _unfrozen
from ._stats import choose_n_features
from .importance import ShapleyR2Importance

__all__ = ["ShapleyR2RFECV"]


def _estimator_has(method):
    """For ``available_if``: the refitted model (or, before fit, the given one) has it."""

    def check(self):
        if hasattr(self, "estimator_"):
            return hasattr(self.estimator_, method)
        estimator = self.estimator if self.estimator is not None else self._default_estimator()
        return hasattr(estimator, method)

    return check


class _Path:
    """One elimination: the counts it visited, their scores and subsets, the order
    (of features, or of groups: the units eliminated)."""

    def __init__(self, n_features):
        self.counts, self.scores, self.subsets = [], [], []
        self.eliminated = []  # batches of removed features, each best first
        self.scored_like = None  # the (score name, power) of its steps, once one is fitted
        self.n_features = n_features

    def order(self, last):
        """Every feature, best first: ``last`` (the final subset, best first), then
        the batches removed, the last removed first."""
        return np.concatenate([np.asarray(last, dtype=np.intp)]
                              + [np.asarray(b, dtype=np.intp) for b in self.eliminated[::-1]])

    def ranking(self):
        """RFE's ranking: 1 for the features kept, i + 1 for those removed i steps before
        the end (features removed together share a rank)."""
        ranking = np.ones(self.n_features, dtype=np.intp)
        for i, batch in enumerate(self.eliminated[::-1]):
            ranking[np.asarray(batch, dtype=np.intp)] = i + 2
        return ranking


class _Rows:
    """The rows an elimination fits on or a step is scored on: X, y, the weights of
    the scores, the model's fit parameters and weights (``_route_fit``) and the
    scorer's parameters, all of these rows."""

    def __init__(self, X, y, weight, model_params, model_weight, score_params):
        self.X, self.y, self.weight = X, y, weight
        self.model_params, self.model_weight = model_params, model_weight
        self.score_params = score_params

    def subset(self, index, score_params=None):
        """The rows ``index`` of these (fit parameters of one value per row indexed)."""
        model_params, model_weight = BaseTreeSelector._rows_of(
            self.X, self.model_params, self.model_weight, index)
        return _Rows(_safe_indexing(self.X, index), _safe_indexing(self.y, index),
                     None if self.weight is None else _safe_indexing(self.weight, index),
                     model_params, model_weight, {} if score_params is None else score_params)


class _Scored:
    """A step fitted only to be scored: its model, and the score name and Tweedie
    power (``_loss_name``) of an earlier step of the same elimination (the same
    model on the same rows' target: the same loss)."""

    def __init__(self, model, loss_name):
        self.estimator_ = model
        self.score_name_, self.power = loss_name


def _loss_name(step):
    """(score name, Tweedie power or None) of a fitted step."""
    if isinstance(step, _Scored):
        return step.score_name_, step.power
    return step.score_name_, step.decomposition_.power


class ShapleyR2RFECV(BaseTreeSelector):
    """Recursive feature elimination by shares of R^2 / D^2, with the number of
    features chosen by cross-validation (one-standard-error rule by default).

    The interface of :class:`sklearn.feature_selection.RFECV`. In each fold
    of ``cv`` an elimination runs on the fold's training rows only: fit the
    model on the remaining features, rank them by their shares of the
    model's R^2 (or D^2) on those training rows (:func:`r2_decomposition`;
    or, with ``ranking_test_size``, by held-out shares of one inner split of
    the training rows, or with ``ranking_cv`` by shares cross-fitted inside
    them), and remove all
    features with a negative share at once, else the ``step`` lowest.
    Every step is scored on the fold's held-out rows, which never helped
    choose the features removed before it. The number of features is
    chosen from the folds' curves (``selection_rule``), then one
    elimination on all rows chooses which features, and the model is refitted
    on them.

    With ``scoring=None`` a step's score on a fold is the held-out R^2 (or
    D^2) of the fold model, which its held-out decomposition splits into
    shares and an unattributed part; it is computed from the predictions
    (``r2_score``, ``d2_brier_score``, ``d2_log_loss_score``,
    ``d2_tweedie_score``), so a step costs one fit and one decomposition
    (of the training rows, to rank) per fold; a fold's last count, and a
    count it skipped, are only fitted and scored.

    Parameters
    ----------
    estimator : tree regressor or classifier, default=None
        A model whose R^2 or D^2 :func:`r2_decomposition` decomposes
        exactly (scikit-learn trees, forests and (Hist)GradientBoosting,
        XGBoost, LightGBM, CatBoost). None uses
        ``HistGradientBoostingRegressor(random_state=0)``. A fitted clone is
        made for every step; a :class:`~sklearn.frozen.FrozenEstimator`
        cannot be refitted on subsets and is refused.
    step : int or float, default=1
        Features removed per step when no share is negative: an int >= 1, or
        a fraction in (0, 1) of the features that remain (rounded down, at
        least 1), as probatus' ``ShapRFECV`` reads it (RFECV's float step is a
        fixed fraction of the initial number): the last steps remove single
        features, so a column's correlated rival takes over its credit
        before the next removal. When some shares are negative, all those features go at
        once (at least the step), never below ``min_features_to_select``.
    min_features_to_select : int, default=1
        The fewest features scored.
    cv : int, cross-validation generator or iterable, default=5
        Folds (stratified for classifiers, as ``check_cv`` gives them).
    scoring : str, callable or None, default=None
        None: the held-out R^2 / D^2 of the decomposition (the score that
        the shares split). Otherwise a scikit-learn scorer (as in RFECV),
        computed on the held-out rows.
    selection_rule : {"one_se", "best"}, default="one_se"
        "one_se": the fewest features whose mean score is at least the best
        mean score minus its standard error sd / sqrt(K) over the K folds
        (ddof=1). "best": the best mean score (the fewest features among
        equal means), as RFECV.
    ranking_cv : None, int, cross-validation generator or iterable, \
            default=None
        How each step ranks the features, inside the rows it eliminates on
        (a fold's training rows, or all rows for the final elimination):

        - None (and no ``ranking_test_size``): by the shares of the model's
          R^2 / D^2 on the rows it was fitted on (in-sample).
        - An int >= 2 or a splitter: by shares cross-fitted inside the rows
          (:class:`ShapleyR2Importance` with this ``cv``, the held-out folds
          pooled), which costs that many more fits per step.

        The step's score on the fold's held-out rows is in every case that
        of the model fitted on all the fold's training rows. Which is right
        when: documentation page "Feature selection", "Ranking inside the
        folds" (measured in ``benchmarks/RESULTS.md``, "Default ranking").
    ranking_test_size : float in (0, 1) or None, default=None
        Rank each step by held-out shares of one inner split instead
        (``ranking_cv`` must then be None). This fraction of the rows is
        held out (:class:`~sklearn.model_selection.ShuffleSplit`,
        stratified for a classifier as ``check_cv`` stratifies, seeded by
        ``random_state``; the same inner rows at every step of an
        elimination), the model is fitted on the others and its R^2 / D^2
        is decomposed on the held-out part, rows it did not see, so that a
        noise column's share is centred at or below 0 and many leave at
        once as negative shares. One more fit per step, and the
        decomposition of fewer rows. The split is of rows: a row of integer
        weight k is not the same as k repeated rows. With ``groups`` given
        to ``fit``, it is of the groups instead
        (:class:`~sklearn.model_selection.GroupShuffleSplit`, this fraction
        of the groups held out, not stratified): no group has rows on both
        sides.
    n_jobs : int, default=None
        Threads of the decomposition kernel (None: all cores). Folds run
        one after the other.
    verbose : "auto" or int, default="auto"
        As everywhere in the package: "auto" shows a progress bar when the
        cost estimate says the work is long, 0 nothing, 1 a progress bar
        always, 2 also one line per step (each fitted step and fold; the progress is that
        of each step's :class:`ShapleyR2Importance`).
    algorithm : {"auto", "exact", "sampled"}, default="auto"
        The decomposition's algorithm (see :func:`r2_decomposition`).
    exact_budget : float, default=120.0
        Seconds the exact algorithm may be expected to take under
        ``algorithm="auto"``.
    random_state : int, RandomState instance or None, default=None
        Seeds the sampled algorithm and, with ``ranking_test_size``, the
        inner splits (one draw per elimination: the folds' in turn, then
        the one on all rows). An int gives the same selection at every fit
        and for any ``n_jobs``; None a different inner split at each fit.
    feature_groups : mapping, default=None
        Feature groups eliminated whole: a mapping of group name to input
        columns (names or indices; a column in at most one group, every
        other column a group of its own, after the groups). Each step ranks
        the groups by their exact Shapley shares of R^2 / D^2, the groups
        as players (:class:`ShapleyR2Importance` with ``feature_groups``;
        not the sums of the members' shares), and removes whole groups:
        ``step`` and ``min_features_to_select`` count groups, the rows of
        ``cv_results_`` are counts of groups (``"n_feature_groups"``), and
        the columns of a group are kept or dropped together. Every group a
        column of its own gives the selection without feature groups. (The
        cross-validation groups of the rows are ``fit``'s ``groups``.)

    Attributes
    ----------
    n_features_ : int
        The number of features selected (with ``feature_groups``: of
        columns, the selected groups' columns together).
    n_feature_groups_ : int
        The number of players selected, the count chosen from
        ``cv_results_["n_feature_groups"]``: with ``feature_groups`` the
        number of groups, else ``n_features_``.
    selected_feature_groups_ : ndarray of object
        With ``feature_groups`` only: the names of the selected groups, in
        the order of ``feature_importances_``.
    support_ : ndarray of shape (`n_features_in_`,)
        The mask of the selected features (with ``feature_groups``: all the
        columns of a selected group).
    ranking_ : ndarray of shape (`n_features_in_`,)
        1 for the selected features; i + 1 for those removed i steps before
        the end of the elimination on all rows (the columns of a group share
        its rank).
    estimator_ : estimator
        The model refitted on all rows and the selected features.
    feature_importances_ : ndarray of shape (`n_features_`,) or (`n_feature_groups_`,)
        The selected features' (or groups') shares of ``estimator_``'s R^2 /
        D^2 on all rows (in-sample; with ``ranking_test_size``: the held-out
        shares of the model fitted on the inner training rows, on the inner
        held-out rows; with ``ranking_cv``: cross-fitted).
    decomposition_ : R2Decomposition
        Their decomposition (with ``ranking_cv``: of the held-out rows, pooled
        over the inner folds; with ``ranking_test_size``: of the inner
        held-out rows).
    cv_results_ : dict of ndarrays
        RFECV's keys, each row a count of players (features, or with
        ``feature_groups`` groups), ascending: ``n_feature_groups`` (the
        count), ``n_features`` (the number of input columns at that count:
        the count itself without ``feature_groups``; with them, the columns
        of that many best groups of the elimination on all rows, as the
        folds' groups differ), ``mean_test_score``, ``std_test_score``
        (ddof=0, as RFECV),
        ``split{k}_test_score``, ``split{k}_support`` (shape (n_counts,
        `n_features_in_`): the features of fold k's elimination at each
        count) and ``split{k}_ranking`` (same shape: RFE's ranking at that
        count, 1 for the fold's features, i + 1 for a feature removed i counts
        above it), so that the folds' eliminations can be compared. A count
        that a fold's elimination skipped (several negative shares removed at
        once) is scored on that fold with its best features by its own
        ranking. The keys are the same whatever the options; with
        ``feature_groups``, ``split{k}_support`` / ``split{k}_ranking`` are
        per column (a group's columns together; fold k's number of columns
        at each count is ``split{k}_support.sum(axis=1)``).
    score_name_ : str
        What the scores are: "r2", "d2_brier", "d2_log_loss", "d2_tweedie"
        (``scoring=None``) or the scorer's name.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X has feature names that are all strings.

    See Also
    --------
    ShapleyR2Importance : selection by a test of each feature's held-out share.
    sklearn.feature_selection.RFECV : the same procedure with any importance.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.datasets import make_friedman1
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import ShapleyR2RFECV
    >>> X, y = make_friedman1(n_samples=300, n_features=8, random_state=0)
    >>> selector = ShapleyR2RFECV(DecisionTreeRegressor(max_depth=4, random_state=0),
    ...                           cv=3).fit(X, y)
    >>> selector.n_features_, np.flatnonzero(selector.support_).tolist()
    (4, [0, 1, 3, 4])
    >>> selector.cv_results_["n_features"].tolist()
    [1, 2, 3, 4, 5, 6, 7, 8]
    >>> bool(np.array_equal(selector.cv_results_["n_feature_groups"],
    ...                     selector.cv_results_["n_features"]))
    True
    >>> selector.transform(X).shape
    (300, 4)

    Groups are kept or dropped whole (columns 5-7 are noise; columns 3 and 4
    are groups of their own):

    >>> feature_groups = {"a": [0, 5], "b": [1, 6], "c": [2, 7]}
    >>> grouped = ShapleyR2RFECV(DecisionTreeRegressor(max_depth=4, random_state=0),
    ...                          cv=3, feature_groups=feature_groups).fit(X, y)
    >>> grouped.n_feature_groups_, grouped.selected_feature_groups_.tolist()
    (4, ['a', 'b', 'x3', 'x4'])
    >>> grouped.n_features_, grouped.ranking_.tolist()
    (6, [1, 1, 2, 1, 1, 1, 1, 2])
    >>> grouped.cv_results_["n_feature_groups"].tolist()
    [1, 2, 3, 4, 5]
    >>> grouped.cv_results_["n_features"].tolist()
    [1, 3, 5, 6, 8]

    Rows in groups (here 30 subjects of 10 rows each) are split by group with
    ``fit``'s ``groups``, as in :class:`~sklearn.feature_selection.RFECV`:

    >>> from sklearn.model_selection import GroupKFold
    >>> subjects = np.repeat(np.arange(30), 10)
    >>> by_subject = ShapleyR2RFECV(DecisionTreeRegressor(max_depth=4, random_state=0),
    ...                             cv=GroupKFold(3)).fit(X, y, groups=subjects)
    >>> by_subject.n_features_
    4
    """

    _parameter_constraints: dict = {
        "estimator": BaseTreeSelector._parameter_constraints["estimator"],
        "step": [Interval(Integral, 1, None, closed="left"),
                 Interval(RealNotInt, 0, 1, closed="neither")],
        "min_features_to_select": [Interval(Integral, 1, None, closed="left")],
        "cv": ["cv_object"],
        "scoring": [None, str, callable],
        "selection_rule": [StrOptions({"one_se", "best"})],
        "ranking_cv": ["cv_object"],
        "ranking_test_size": [None, Interval(RealNotInt, 0, 1, closed="neither")],
        "n_jobs": BaseTreeSelector._parameter_constraints["n_jobs"],
        "verbose": BaseTreeSelector._parameter_constraints["verbose"],
        "algorithm": [StrOptions({"auto", "exact", "sampled"})],
        "exact_budget": [Interval(Real, 0, None, closed="left")],
        "random_state": ["random_state"],
        # checked with the feature groups of the functions (``_groups``)
        "feature_groups": "no_validation",
    }
    # groups go to the splitters (by their request), never to the selector itself
    __metadata_request__fit = {"groups": UNUSED}
    _routed_methods = ("fit", "score")

    def __init__(self, estimator=None, *, step=1, min_features_to_select=1, cv=5,
                 scoring=None, selection_rule="one_se", ranking_cv=None,
                 ranking_test_size=None, n_jobs=None,
                 verbose="auto", algorithm="auto", exact_budget=DEFAULT_EXACT_BUDGET,
                 random_state=None, feature_groups=None):
        self.estimator = estimator
        self.step = step
        self.min_features_to_select = min_features_to_select
        self.cv = cv
        self.scoring = scoring
        self.selection_rule = selection_rule
        self.ranking_cv = ranking_cv
        self.ranking_test_size = ranking_test_size
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.algorithm = algorithm
        self.exact_budget = exact_budget
        self.random_state = random_state
        self.feature_groups = feature_groups

    def _default_estimator(self):
        return HistGradientBoostingRegressor(random_state=0)

    def _check_estimator_refittable(self):
        estimator = self.estimator if self.estimator is not None else self._default_estimator()
        if _unfrozen(estimator)[1]:
            raise ValueError(f"{type(self).__name__} refits the model on subsets of the "
                             "features: pass the unfitted model, not a FrozenEstimator.")

    def _add_routes(self, router):
        router.add(splitter=check_cv(self.cv),
                   method_mapping=MethodMapping().add(caller="fit", callee="split"))
        if self.ranking_cv is not None or self.ranking_test_size is not None:
            # ranking_test_size: one split of the groups when groups reach it
            # (``_ranking_splits``)
            ranking_cv = (check_cv(self.ranking_cv) if self.ranking_test_size is None else
                          GroupShuffleSplit(n_splits=1, test_size=self.ranking_test_size))
            router.add(ranking_splitter=ranking_cv,
                       method_mapping=MethodMapping().add(caller="fit", callee="split"))
        if self.scoring is not None:
            router.add(scorer=check_scoring(self._routing_estimator(), self.scoring),
                       method_mapping=MethodMapping().add(caller="fit", callee="score"))

    def _ranking_splits(self, y, classifier, grouped=False):
        """The ranking ``cv`` of each elimination, in turn: a generator.

        Without ``ranking_test_size``: ``ranking_cv`` (None, an int or a splitter)
        for every elimination. With it: one shuffled inner split per elimination (each outer fold's, then
        the one on all rows; the same inner rows at every step of an elimination)
        holding out that fraction of its rows, stratified for a classifier of a
        class target (as ``check_cv`` stratifies), each seeded by a draw from
        ``random_state``: the splits depend on nothing else (not ``n_jobs``).
        ``grouped`` (cross-validation ``groups`` given to ``fit``): the
        split is a :class:`~sklearn.model_selection.GroupShuffleSplit` holding
        out that fraction of the groups (not stratified), so that no group has
        rows on both sides; the seeds are the same draws.
        """
        if self.ranking_test_size is None:
            while True:
                yield self.ranking_cv
        rng = check_random_state(self.random_state)
        stratify = classifier and type_of_target(y) in ("binary", "multiclass")
        splitter = (GroupShuffleSplit if grouped else
                    StratifiedShuffleSplit if stratify else ShuffleSplit)
        while True:
            yield splitter(n_splits=1, test_size=float(self.ranking_test_size),
                           random_state=int(rng.randint(np.iinfo(np.int32).max)))

    def _importance(self, feature_groups=None, ranking_cv=None):
        """The decomposition of one step: ShapleyR2Importance fits and ranks, with
        ``ranking_cv`` its ``cv`` (None: in-sample shares)."""
        return ShapleyR2Importance(
            self.estimator, method="qshap", threshold=-np.inf, cv=ranking_cv,
            n_jobs=self.n_jobs, verbose=self.verbose, algorithm=self.algorithm,
            exact_budget=self.exact_budget, random_state=self.random_state,
            feature_groups=feature_groups)

    def _resolve_groups(self):
        """The units eliminated: None (the features), or with ``feature_groups`` the input
        columns of every group (``_groups.resolve_groups``) and the groups' names."""
        if self.feature_groups is None:
            return None, None
        if isinstance(self.feature_groups, str):
            raise ValueError(
                f"feature_groups={self.feature_groups!r}: {type(self).__name__} refits its "
                "model on subsets of the input columns, so its feature groups are sets of "
                "input columns: pass a mapping of group name to input columns (names or "
                "indices).")
        player, names = _groups.resolve_groups(
            self.feature_groups, self.n_features_in_, getattr(self, "feature_names_in_", None))
        if len(set(map(str, names))) != len(names):
            raise ValueError(f"feature_groups: the group names and the names of the columns "
                             f"in no group must differ, got {names}.")
        return [np.flatnonzero(player == k) for k in range(len(names))], names

    def _columns(self, units):
        """The input columns of the units (features or groups), ascending."""
        units = np.asarray(units, dtype=np.intp)
        if self._members is None:
            return np.sort(units)
        if len(units) == 0:
            return np.zeros(0, dtype=np.intp)
        return np.sort(np.concatenate([self._members[u] for u in units]))

    def _fit_step(self, rows, features, scored_like=None, ranking_cv=None, groups=None):
        """ShapleyR2Importance fitted on the columns of the units ``features`` of
        ``rows`` (a ``_Rows``; features ascending), ranking with ``ranking_cv`` (one
        of ``_ranking_splits``), whose splits are given ``groups`` (the
        cross-validation groups of the rows); with feature groups, its shares are
        those of the groups. The rows were checked by ``fit``: the step is fitted
        without checking them again.

        ``scored_like``: the ``_loss_name`` of a step fitted before on the same
        rows, which this one shares. Then only the model is fitted, for a
        score on held-out rows where no ranking is needed (a fold's last step, a
        count skipped by a batch of negative shares): no decomposition, and no
        reading of the model (``_Scored``).
        """
        columns = self._columns(features)
        X, y, weight = rows.X, rows.y, rows.weight
        if scored_like is not None:
            since = time.perf_counter()
            model = self._importance()._fit_estimator(
                _safe_indexing(X, columns, axis=1), y, rows.model_params, rows.model_weight)
            self._step_line(f"fitted on {len(features)} "
                            f"{'features' if self._members is None else 'groups'} "
                            "(scored only)", since)
            return _Scored(model, scored_like)
        players = None
        if self._members is not None:  # the groups as players, in the order of `features`
            position = np.empty(self.n_features_in_, dtype=np.intp)
            position[columns] = np.arange(len(columns))
            players = {self._group_names[u]: position[self._members[u]].tolist()
                       for u in features}
        since = time.perf_counter()
        try:
            step = self._importance(players, ranking_cv)
            X_step = _safe_indexing(X, columns, axis=1)
            step._record_input(X_step)
            step._converting_once(lambda: step._fit(
                X_step, y, weight, {"groups": groups}, rows.model_params, rows.model_weight))
        except ValueError as error:
            if self.ranking_test_size is None:
                raise
            # e.g. a constant y on a few held-out rows: say which rows
            of = "of its groups" if isinstance(ranking_cv, GroupShuffleSplit) else "of them"
            raise ValueError(
                f"ranking_test_size={self.ranking_test_size!r}: the inner split of "
                f"{_num_samples(y)} rows holds out {ranking_cv.test_size:g} {of} to rank "
                f"on, and ranking failed: {error} Use a larger ranking_test_size, or "
                "None.") from error
        self._step_line("fitted on " + (f"{len(features)} features" if players is None else
                                        f"{len(features)} groups ({len(columns)} columns)"),
                        since)
        return step

    def _score(self, step, held_out, features):
        """The score of a fitted step on held-out rows (a ``_Rows``)."""
        X, y, weight = held_out.X, held_out.y, held_out.weight
        X = _safe_indexing(X, self._columns(features), axis=1)
        model = step.estimator_
        if self.scoring is not None:
            return float(check_scoring(model, self.scoring)(model, X, y, **held_out.score_params))
        # the R^2 / D^2 the held-out decomposition would give (its shares plus the
        # unattributed part), from the predictions alone; scikit-learn's convention
        # (0, or 1 for a perfect fit) when the held-out y is constant
        if step.score_name_ == "r2":
            return float(r2_score(y, model.predict(X), sample_weight=weight))
        if step.score_name_ == "d2_tweedie":
            return float(d2_tweedie_score(y, model.predict(X), sample_weight=weight,
                                          power=_loss_name(step)[1]))
        proba = model.predict_proba(X)
        if step.score_name_ == "d2_brier":
            if proba.shape[1] == 2:
                return float(d2_brier_score(y, proba[:, 1], sample_weight=weight,
                                                    pos_label=model.classes_[1]))
            return float(d2_brier_score(y, proba, sample_weight=weight,
                                                labels=model.classes_))
        return float(d2_log_loss_score(y, proba, sample_weight=weight,
                                               labels=model.classes_))

    def _n_removed(self, n_remaining):
        """Features (or groups) a step removes when no share is negative: ``step``, or
        the fraction ``step`` of the ``n_remaining`` (at least 1)."""
        if self.step >= 1:
            return int(self.step)
        return max(1, int(self.step * n_remaining))

    def _eliminate(self, rows, stop, held_out=None, ranking_cv=None, groups=None):
        """Eliminate on ``rows`` (a ``_Rows``) down to ``stop`` features; score each
        step on ``held_out`` (a ``_Rows``).

        ``ranking_cv``: the ranking ``cv`` of every step (one of ``_ranking_splits``),
        whose splits are given ``groups`` (the cross-validation groups of these rows).

        Returns the _Path, the last step's fitted ShapleyR2Importance and its
        features, best first. With ``held_out`` (a fold), the last step is only
        fitted and scored (``_Scored``: nothing ranks it, as the skipped counts
        above it take all its features), its features in column order, and the
        path keeps the steps' ``_loss_name`` (``path.scored_like``) for the counts
        the fold skipped.
        """
        n_units = self.n_features_in_ if self._members is None else len(self._members)
        path = _Path(n_units)
        features = np.arange(n_units)
        fitted = None
        while True:
            if held_out is not None and len(features) <= stop and fitted is not None:
                fitted = self._fit_step(rows, features, scored_like=path.scored_like)
                path.counts.append(len(features))
                path.scores.append(self._score(fitted, held_out, features))
                path.subsets.append(features.copy())
                return path, fitted, features
            fitted = self._fit_step(rows, features, ranking_cv=ranking_cv, groups=groups)
            path.scored_like = _loss_name(fitted)
            shares = np.asarray(fitted.feature_importances_)
            # best first; equal shares: the lower column first (RFE's stable order)
            best_first = np.argsort(-shares, kind="mergesort")
            if held_out is not None:
                path.counts.append(len(features))
                path.scores.append(self._score(fitted, held_out, features))
                path.subsets.append(features.copy())
            if len(features) <= stop:
                return path, fitted, features[best_first]
            n_remove = min(max(int(np.sum(shares < 0)), self._n_removed(len(features))),
                           len(features) - stop)
            path.eliminated.append(features[best_first[len(features) - n_remove:]])
            features = np.sort(features[best_first[:len(features) - n_remove]])

    @_fit_context(prefer_skip_nested_validation=False)  # the estimator is not validated
    def fit(self, X, y, sample_weight=None, *, groups=None, **params):
        """Choose the number of features by cross-validation, then the features.

        Parameters
        ----------
        X : array-like or DataFrame of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
            Used in the decompositions and the default score, and passed to the
            model's ``fit``; with metadata routing enabled, to the model only if
            it requested it (``model.set_fit_request(sample_weight=True)``), to
            a ``scoring`` scorer only if it requested it
            (``scorer.set_score_request(sample_weight=True)``), and to this
            selector if a meta-estimator routes it here
            (``set_fit_request(sample_weight=True)``).
        groups : array-like of shape (n_samples,), default=None
            Group labels of the rows for the cross-validation splits, as in
            :class:`~sklearn.feature_selection.RFECV`: given to ``cv.split``
            (e.g. :class:`~sklearn.model_selection.GroupKFold`), and to the
            splits of ``ranking_cv`` inside each elimination, indexed to the
            rows it eliminates on (a fold's training rows, then all rows).
            ``ranking_test_size`` then holds out that fraction of the groups
            (:class:`~sklearn.model_selection.GroupShuffleSplit`), so that
            rows ranked on never share a group with the rows the model was
            fitted on. Splitters that take no groups ignore them (scikit-learn
            warns), as does an int ``cv`` or ``ranking_cv`` ((Stratified)KFold:
            pass a group splitter). Never passed to the model's ``fit``. Not
            the feature groups (``feature_groups``). With metadata routing
            enabled, routed to ``cv``'s and ``ranking_cv``'s ``split`` by their
            requests (a group splitter requests them by default;
            ``ranking_test_size``'s split always does).
        **params : dict
            Passed to every ``fit`` of the model (on subsets of the columns, so
            not one that names columns; indexed like the rows when they have one
            value per row). With metadata routing enabled, routed by request:
            to the model's ``fit`` what it requested
            (``model.set_fit_request(...)``); an unrequested one raises
            scikit-learn's error.

        Returns
        -------
        self : ShapleyR2RFECV
        """
        self._check_estimator_refittable()
        if self.ranking_cv is not None and self.ranking_test_size is not None:
            raise ValueError(
                f"ranking_cv={self.ranking_cv!r} and ranking_test_size="
                f"{self.ranking_test_size!r}: each says how a step ranks the features "
                "(cross-fitted shares, or held-out shares of one inner split): give one.")
        X, y, sample_weight = self._check_fit_input(X, y, sample_weight, ensure_min_samples=2)
        if groups is not None:
            groups = np.asarray(groups)
            if _num_samples(groups) != _num_samples(y):
                raise ValueError(f"groups has {_num_samples(groups)} labels for "
                                 f"{_num_samples(y)} rows.")
        model_params, model_weight, routed = self._route_fit(sample_weight, params, groups)
        ranking_groups = routed.ranking_split.get("groups")
        self._members, self._group_names = self._resolve_groups()
        # of an earlier fit with feature groups
        self.__dict__.pop("selected_feature_groups_", None)
        n_features = self.n_features_in_
        n_units = n_features if self._members is None else len(self._members)
        stop = min(self.min_features_to_select, n_units)
        estimator = self.estimator if self.estimator is not None else self._default_estimator()
        cv = check_cv(self.cv, y, classifier=is_classifier(estimator))
        # the ranking cv of each elimination: the folds' in turn, then the one on all rows
        ranking_splits = self._ranking_splits(y, is_classifier(estimator),
                                              grouped=ranking_groups is not None)
        everything = _Rows(X, y, sample_weight, model_params, model_weight, {})

        folds = []
        for fold, (train, test) in enumerate(cv.split(X, y, **routed.split)):
            since = time.perf_counter()
            train_rows = everything.subset(train)
            held_out = everything.subset(test, score_params=_check_method_params(
                X, params=routed.score, indices=test))
            path, _, last = self._eliminate(
                train_rows, stop, held_out, ranking_cv=next(ranking_splits),
                groups=None if ranking_groups is None else _safe_indexing(ranking_groups, train))
            folds.append((path, path.order(last), train_rows, held_out))
            self._step_line(f"fold {fold + 1}: eliminated on {len(train)} rows, scored on "
                            f"{len(test)} held-out rows", since)
        counts = np.unique(np.concatenate([path.counts for path, *_ in folds]))
        scores = np.empty((len(counts), len(folds)))
        supports = np.zeros((len(folds), len(counts), n_features), dtype=bool)
        for k, (path, order, train_rows, held_out) in enumerate(folds):
            visited = dict(zip(path.counts, zip(path.scores, path.subsets)))
            for c, count in enumerate(counts):
                if count in visited:
                    scores[c, k], subset = visited[count]
                else:  # skipped by a batch of negative shares: its best `count` features
                    subset = np.sort(order[:count])
                    fitted = self._fit_step(train_rows, subset, scored_like=path.scored_like)
                    scores[c, k] = self._score(fitted, held_out, subset)
                supports[k, c, self._columns(subset)] = True
        chosen = choose_n_features(counts, scores, self.selection_rule)
        n_chosen = int(counts[chosen])
        # kept (private) to rerun this elimination down to another count
        self._final_ranking_cv = next(ranking_splits)
        path, final, last = self._eliminate(everything, n_chosen,
                                            ranking_cv=self._final_ranking_cv,
                                            groups=ranking_groups)
        self.support_ = np.zeros(n_features, dtype=bool)
        self.support_[self._columns(last)] = True
        self.n_features_ = int(self.support_.sum())
        self.n_feature_groups_ = n_chosen
        self.ranking_ = path.ranking()
        # the input columns at every count: the best units of the elimination on all
        # rows (the subset it kept at a count it visited; below the chosen count, the
        # best of its last step's ranking)
        order = path.order(last)
        n_columns = np.array([len(self._columns(order[:count])) for count in counts])
        if self._members is not None:  # per column: a group's columns share its rank
            self.selected_feature_groups_ = np.asarray(
                [self._group_names[u] for u in np.sort(last)], dtype=object)
            ranking = np.empty(n_features, dtype=np.intp)
            for u, members in enumerate(self._members):
                ranking[members] = self.ranking_[u]
            self.ranking_ = ranking
        self.estimator_ = final.estimator_
        self.feature_importances_ = np.asarray(final.feature_importances_)
        self.decomposition_ = final.decomposition_
        self.score_name_ = final.score_name_ if self.scoring is None else str(self.scoring)
        # RFE's ranking at each count (scikit-learn's step_ranking_): 1 for the fold's
        # features at that count, else 1 + the number of counts from it upwards at
        # which the feature was already gone (the subsets are nested)
        rankings = 1 + np.cumsum(~supports[:, ::-1], axis=1)[:, ::-1]
        self.cv_results_ = {
            "mean_test_score": scores.mean(axis=1),
            "std_test_score": scores.std(axis=1),
            **{f"split{k}_test_score": scores[:, k] for k in range(len(folds))},
            **{f"split{k}_ranking": rankings[k] for k in range(len(folds))},
            **{f"split{k}_support": supports[k] for k in range(len(folds))},
            "n_features": n_columns,
            "n_feature_groups": counts,
        }
        return self

    def _get_support_mask(self):
        check_is_fitted(self, "support_")
        return self.support_

    def predict(self, X):
        """The refitted model's predictions on the selected features of X."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict(self.transform(X))

    def score(self, X, y, **score_params):
        """The refitted model's ``score`` on the selected features of X.

        ``score_params`` go to the model's ``score``; with metadata routing
        enabled, those it requested (``model.set_score_request(...)``).
        """
        check_is_fitted(self, "estimator_")
        if _routing_enabled():
            score_params = process_routing(self, "score", **score_params).estimator.score
        return self.estimator_.score(self.transform(X), y, **score_params)

    @available_if(_estimator_has("predict_proba"))
    def predict_proba(self, X):
        """The refitted classifier's class probabilities on the selected features of X."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict_proba(self.transform(X))

    @available_if(_estimator_has("predict_log_proba"))
    def predict_log_proba(self, X):
        """The refitted classifier's log-probabilities on the selected features of X."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.predict_log_proba(self.transform(X))

    @available_if(_estimator_has("decision_function"))
    def decision_function(self, X):
        """The refitted classifier's decision function on the selected features of X."""
        check_is_fitted(self, "estimator_")
        return self.estimator_.decision_function(self.transform(X))

    def plot(self, ax=None):
        """The cross-validated curve: mean score +/- one standard error, the chosen count.

        Error bars are sd / sqrt(K) over the K folds (ddof=1), the
        standard error the one-SE rule uses; the dashed line is the best
        mean minus its standard error.

        Returns
        -------
        matplotlib Axes
        """
        check_is_fitted(self, "cv_results_")
        plt = import_optional("matplotlib.pyplot", "Plotting")
        if ax is None:
            ax = plt.figure().gca()
        results = self.cv_results_
        unit = "features" if self._members is None else "feature groups"
        counts = results["n_feature_groups"]
        n_chosen = self.n_feature_groups_
        folds = np.array([results[key] for key in results
                          if key.startswith("split") and key.endswith("_test_score")])
        mean = folds.mean(axis=0)
        se = (folds.std(axis=0, ddof=1) / np.sqrt(len(folds)) if len(folds) > 1
              else np.zeros_like(mean))
        ax.errorbar(counts, mean, yerr=se, marker="o", markersize=3, capsize=2,
                    label="mean over folds \u00b1 1 s.e.")
        best = int(np.argmax(mean))
        ax.axhline(mean[best] - se[best], color="grey", linestyle="--", linewidth=1,
                   label="best - 1 s.e.")
        chosen = int(np.flatnonzero(counts == n_chosen)[0])
        ax.plot(counts[chosen], mean[chosen], "o", color="C3", markersize=9,
                fillstyle="none", markeredgewidth=2,
                label=f"chosen: {n_chosen} {unit} ({self.selection_rule})")
        label = {"r2": "R$^2$", "d2_brier": "D$^2$ (Brier)", "d2_log_loss": "D$^2$ (log-loss)",
                 "d2_tweedie": "D$^2$ (Tweedie)"}.get(self.score_name_, self.score_name_)
        ax.set_xlabel(f"number of {unit}")
        ax.set_ylabel(f"held-out {label}")
        ax.set_title(f"{type(self).__name__}: {len(folds)}-fold curve")
        ax.legend(loc="lower right")
        return ax

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # a selector first (its estimator_type stays a transformer's), whose
        # predict_proba answers as its classifier's does
        estimator = self.estimator if self.estimator is not None else self._default_estimator()
        tags.classifier_tags = deepcopy(get_tags(estimator).classifier_tags)
        tags.input_tags.sparse = self._estimator_accepts_sparse()
        tags.target_tags.required = True
        return tags
