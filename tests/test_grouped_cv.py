"""Cross-validation groups (``fit(X, y, groups=...)``), as scikit-learn's: given to
the splits of ``cv`` (and, in ShapleyR2RFECV, of ``ranking_cv`` inside each
elimination, indexed to its rows), never to the model's ``fit``; not the feature
groups (``feature_groups=``).

The splits are recorded by a wrapping splitter (the groups it was given and the
folds it made) and the rows of every fitted model by a tree that records its
training rows, so that the tests check what was split and fitted, not what the
code says it does."""
import itertools
from contextlib import nullcontext

import numpy as np
import pytest
from sklearn import config_context
from sklearn.model_selection import (
    GridSearchCV,
    GroupKFold,
    GroupShuffleSplit,
    LeaveOneGroupOut,
    ShuffleSplit,
    StratifiedGroupKFold,
    StratifiedShuffleSplit,
    TimeSeriesSplit,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor
from sklearn.utils.metadata_routing import MetadataRequest

from sklearn_r2shap import ShapleyR2Importance, ShapleyR2RFECV, shap_values

N_GROUPS, ROWS_PER_GROUP = 8, 15

# the rows every model was fitted on (row indices into the test's X) and the keyword
# arguments its fit received; the row of every value of the test's X (all distinct),
# module-wide as clones are made from parameters only
_FITS = []
_ROW_OF = {}


# check_input is in the signature of the recording trees' fit, as in their base
# class's (scikit-learn's metadata routing reads the signature)
_UNSET = object()


def _record_fit(X, kwargs):
    _FITS.append((frozenset(_ROW_OF[v] for v in np.asarray(X)[:, 0]), dict(kwargs)))


class RowsSeenRegressor(DecisionTreeRegressor):
    """A decision tree that records the rows it is fitted on (by the value of its
    first column: every value of the test's X is distinct) and its fit's keywords."""

    def fit(self, X, y, sample_weight=None, check_input=_UNSET, **kwargs):
        if check_input is not _UNSET:
            kwargs["check_input"] = check_input
        _record_fit(X, kwargs)
        return super().fit(X, y, sample_weight=sample_weight, **kwargs)


class RowsSeenClassifier(DecisionTreeClassifier):
    """As RowsSeenRegressor, a classifier."""

    def fit(self, X, y, sample_weight=None, check_input=_UNSET, **kwargs):
        if check_input is not _UNSET:
            kwargs["check_input"] = check_input
        _record_fit(X, kwargs)
        return super().fit(X, y, sample_weight=sample_weight, **kwargs)


# the package reads scikit-learn models by their module and class names: these are
# decision trees
RowsSeenRegressor.__module__ = RowsSeenClassifier.__module__ = "sklearn.tree._classes"
RowsSeenRegressor.__name__ = "DecisionTreeRegressor"
RowsSeenClassifier.__name__ = "DecisionTreeClassifier"


class Recording:
    """A splitter that records each call to ``split``: the groups it was given and
    the folds its wrapped splitter made. The records are kept by name in a class
    attribute, so that the copies scikit-learn's ``clone`` makes record too."""

    calls = {}

    def __init__(self, splitter, name):
        self.splitter = splitter
        self.name = name

    def split(self, X, y=None, groups=None):
        splits = [(np.asarray(train), np.asarray(test))
                  for train, test in self.splitter.split(X, y, groups)]
        Recording.calls.setdefault(self.name, []).append(
            (None if groups is None else np.array(groups), splits))
        return iter(splits)

    def get_n_splits(self, X=None, y=None, groups=None):
        return self.splitter.get_n_splits(X, y, groups)

    def get_metadata_routing(self):
        """With metadata routing, it requests ``groups`` for ``split`` as
        scikit-learn's group splitters do."""
        request = MetadataRequest(owner=type(self).__name__)
        request.split.add_request(param="groups", alias=True)
        return request


_names = itertools.count()


def _recording(splitter):
    return Recording(splitter, f"splitter-{next(_names)}")


@pytest.fixture(autouse=True)
def _clear_records():
    _FITS.clear()
    yield
    _FITS.clear()
    _ROW_OF.clear()


def _data(classifier=False, contiguous=False, seed=0):
    """120 rows in 8 groups of 15 (shuffled, or contiguous blocks in time order),
    with a group effect in y, so that a group on both sides of a split leaks."""
    rng = np.random.default_rng(seed)
    n = N_GROUPS * ROWS_PER_GROUP
    X = rng.normal(size=(n, 5))
    groups = np.repeat(np.arange(N_GROUPS), ROWS_PER_GROUP)
    if not contiguous:
        groups = rng.permutation(groups)
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 + rng.normal(size=N_GROUPS)[groups]
         + 0.3 * rng.normal(size=n))
    if classifier:
        y = (y > np.median(y)).astype(int)
    return X, y, groups


def _model(X, classifier=False):
    cls = RowsSeenClassifier if classifier else RowsSeenRegressor
    _ROW_OF.clear()
    _ROW_OF.update({v: i for i, row in enumerate(X) for v in row})
    assert len(_ROW_OF) == X.size
    return cls(max_depth=3, random_state=0)


def _check_folds(groups, splits):
    """No group is on both sides of a fold."""
    assert splits
    for train, test in splits:
        assert len(train) and len(test)
        assert not set(groups[train]) & set(groups[test]), "a group on both sides"


def _whole_groups(groups, rows):
    rows = np.fromiter(rows, dtype=np.intp)
    inside = set(groups[rows])
    outside = set(groups[np.setdiff1d(np.arange(len(groups)), rows)])
    return not inside & outside


def _check_fits(groups):
    """Every model was fitted on whole groups (all of a group's rows or none), and
    never given ``groups``."""
    assert _FITS
    for rows, kwargs in _FITS:
        assert "groups" not in kwargs
        assert _whole_groups(groups, rows), "a model was fitted on part of a group"


SPLITTERS = {
    "GroupKFold": (lambda: GroupKFold(3), 3),
    "StratifiedGroupKFold": (lambda: StratifiedGroupKFold(3), 3),
    "TimeSeriesSplit": (lambda: TimeSeriesSplit(3), 3),
    "LeaveOneGroupOut": (lambda: LeaveOneGroupOut(), N_GROUPS),
}


@pytest.mark.parametrize("kind", ["importance", "rfecv"])
@pytest.mark.parametrize("name", list(SPLITTERS))
def test_the_folds_are_split_by_group(name, kind):
    classifier = name == "StratifiedGroupKFold"
    time_ordered = name == "TimeSeriesSplit"
    # TimeSeriesSplit ignores groups (scikit-learn warns): contiguous groups whose
    # blocks its folds do not cut (15 rows each, folds of 30)
    X, y, groups = _data(classifier, contiguous=time_ordered)
    make, n_splits = SPLITTERS[name]
    splitter = _recording(make())
    model = _model(X, classifier)
    if kind == "importance":
        selector = ShapleyR2Importance(model, test="fdr", cv=splitter, n_jobs=1)
    else:
        selector = ShapleyR2RFECV(model, cv=splitter, n_jobs=1)
    warns = (pytest.warns(UserWarning, match="groups parameter is ignored by TimeSeriesSplit")
             if time_ordered else nullcontext())
    with warns:
        selector.fit(X, y, groups=groups)
    ((given, splits),) = Recording.calls[splitter.name]
    np.testing.assert_array_equal(given, groups)  # groups reached split
    assert len(splits) == n_splits
    _check_folds(groups, splits)
    if time_ordered:
        assert all(train.max() < test.min() for train, test in splits)
    # the models were fitted on the folds' training rows, or on all rows: never on
    # a held-out row of their fold
    fitted = {rows for rows, _ in _FITS}
    trains = {frozenset(train.tolist()) for train, _ in splits}
    assert trains <= fitted
    assert fitted <= trains | {frozenset(range(len(y)))}
    _check_fits(groups)
    if kind == "importance":
        assert selector.cv_shares_.shape[0] == n_splits
        assert selector.decomposition_.local.shape[0] == len(y)
    else:
        folds = [key for key in selector.cv_results_ if key.endswith("_test_score")
                 and key.startswith("split")]
        assert len(folds) == n_splits


def test_rfecv_ranking_cv_splits_get_the_groups_of_the_rows_they_split():
    """ranking_cv's splits inside each elimination are given the groups of the rows
    it eliminates on: a fold's training rows, then all rows; with feature groups."""
    X, y, groups = _data()
    outer, inner = _recording(GroupKFold(3)), _recording(GroupKFold(2))
    selector = ShapleyR2RFECV(_model(X), cv=outer, ranking_cv=inner, n_jobs=1,
                              feature_groups={"a": [0, 2], "b": [3, 4]})
    selector.fit(X, y, groups=groups)
    ((_, outer_splits),) = Recording.calls[outer.name]
    _check_folds(groups, outer_splits)
    rows_of = [groups[train] for train, _ in outer_splits] + [groups]
    eliminations = set()
    for given, splits in Recording.calls[inner.name]:
        assert given is not None
        match = [k for k, want in enumerate(rows_of)
                 if len(want) == len(given) and np.array_equal(want, given)]
        assert len(match) == 1
        eliminations.add(match[0])
        _check_folds(given, splits)
    assert eliminations == set(range(len(rows_of)))  # every fold's, and the final one
    # the inner models too were fitted on whole groups
    inner_fits = {rows for rows, _ in _FITS} - {frozenset(t.tolist()) for t, _ in outer_splits}
    assert len(inner_fits) > 1
    _check_fits(groups)
    assert set(selector.cv_results_) >= {"n_features", "n_feature_groups"}


@pytest.mark.parametrize("classifier", [False, True])
def test_rfecv_ranking_test_size_holds_out_whole_groups(classifier):
    X, y, groups = _data(classifier)
    selector = ShapleyR2RFECV(_model(X, classifier), cv=GroupKFold(3), ranking_test_size=0.3,
                              random_state=0, n_jobs=1).fit(X, y, groups=groups)
    assert isinstance(selector._final_ranking_cv, GroupShuffleSplit)
    n_outer = len({rows for rows, _ in _FITS})
    assert n_outer > 3 + 1  # inner fits beside the folds' and all rows'
    _check_fits(groups)
    # without groups: splits of rows, which cut groups (so the check above can fail)
    _FITS.clear()
    plain = ShapleyR2RFECV(_model(X, classifier), cv=3, ranking_test_size=0.3, random_state=0,
                           n_jobs=1).fit(X, y)
    assert type(plain._final_ranking_cv) is (StratifiedShuffleSplit if classifier
                                             else ShuffleSplit)
    assert not all(_whole_groups(groups, rows) for rows, _ in _FITS)


@pytest.mark.parametrize("with_groups", [False, True])
def test_importance_test_needs_folds_it_is_given(with_groups):
    """test='fdr' with cv=None does not choose folds for the user (with or without
    groups): it asks for cv, and nothing is fitted; a group splitter given as cv
    cross-fits by group."""
    X, y, groups = _data()
    kwargs = {"groups": groups} if with_groups else {}
    with pytest.raises(ValueError, match=r"test='fdr' tests held-out shares: pass cv"):
        ShapleyR2Importance(_model(X), test="fdr", n_jobs=1).fit(X, y, **kwargs)
    assert not _FITS
    selector = ShapleyR2Importance(_model(X), test="fdr", cv=GroupKFold(5), n_jobs=1)
    selector.fit(X, y, groups=groups)
    assert selector.cv_shares_.shape[0] == 5
    assert len({rows for rows, _ in _FITS}) == 5 + 1
    _check_fits(groups)


@pytest.mark.parametrize("kind", ["importance", "rfecv"])
def test_grid_search_routes_groups_to_its_folds_and_the_estimators(kind):
    """GridSearchCV(..., cv=GroupKFold).fit(X, y, groups=g) with metadata routing:
    its own folds and the estimator's cv are both split by group; the estimator's cv
    gets the groups of the outer training rows."""
    X, y, groups = _data()
    inner = _recording(GroupKFold(2))
    with config_context(enable_metadata_routing=True):
        if kind == "importance":
            estimator = ShapleyR2Importance(_model(X), test="fdr", cv=inner, n_jobs=1)
            # a selector without score: the held-out R^2 of its model, any score will do
            grid, scoring = {"alpha": [0.05, 0.2]}, (
                lambda selector, X_, y_: selector.decompose(X_, y_).score)
        else:
            estimator = ShapleyR2RFECV(_model(X), cv=inner, n_jobs=1)
            grid, scoring = {"step": [1, 2]}, None
        # the groups reach the estimator's cv by the splitter's request (a router: the
        # estimator itself requests nothing)
        search = GridSearchCV(estimator, grid, cv=GroupKFold(3), scoring=scoring)
        search.fit(X, y, groups=groups)
    outer = list(GroupKFold(3).split(X, y, groups))
    _check_folds(groups, outer)
    calls = Recording.calls[inner.name]
    assert len(calls) == 2 * 3 + 1  # 2 candidates x 3 folds, then the refit on all rows
    counts = [0] * (len(outer) + 1)
    for given, splits in calls:
        candidates = [groups[train] for train, _ in outer] + [groups]
        (k,) = [k for k, want in enumerate(candidates)
                if len(want) == len(given) and np.array_equal(want, given)]
        counts[k] += 1
        _check_folds(given, splits)
    assert counts == [2, 2, 2, 1]
    _check_fits(groups)
    assert search.best_estimator_.get_support().shape == (X.shape[1],)


def test_groups_never_reach_the_model():
    X, y, groups = _data()
    # DecisionTreeRegressor.fit has no groups parameter: it would raise TypeError
    tree = DecisionTreeRegressor(max_depth=3, random_state=0)
    ShapleyR2Importance(tree, test="fdr", cv=GroupKFold(3)).fit(X, y, groups=groups)
    ShapleyR2RFECV(tree, cv=GroupKFold(3), n_jobs=1).fit(X, y, groups=groups)
    # without cross-validation the groups are accepted and ignored
    with_groups = ShapleyR2Importance(_model(X)).fit(X, y, groups=groups)
    without = ShapleyR2Importance(_model(X)).fit(X, y)
    np.testing.assert_array_equal(with_groups.feature_importances_,
                                  without.feature_importances_)
    fitted = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    prefit = ShapleyR2Importance(fitted, prefit=True).fit(X, y, groups=groups)
    np.testing.assert_array_equal(prefit.feature_importances_, without.feature_importances_)
    # other fit parameters still reach the model
    ShapleyR2Importance(_model(X)).fit(X, y, groups=groups, check_input=True)
    assert _FITS[-1][1] == {"check_input": True}
    _check_fits(groups)


def test_unknown_keywords_and_bad_groups_raise():
    X, y, groups = _data()
    tree = DecisionTreeRegressor(max_depth=3, random_state=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        ShapleyR2RFECV(tree, cv=GroupKFold(3)).fit(X, y, groups=groups, foo=1)
    with pytest.raises(TypeError, match="foo"):  # sent to the model's fit, which refuses it
        ShapleyR2Importance(tree, cv=GroupKFold(3)).fit(X, y, groups=groups, foo=1)
    with pytest.raises(ValueError, match="groups has 10 labels for 120 rows"):
        ShapleyR2RFECV(tree, cv=GroupKFold(3)).fit(X, y, groups=groups[:10])
    with pytest.raises(ValueError, match="groups has 10 labels for 120 rows"):
        ShapleyR2Importance(tree, cv=GroupKFold(3)).fit(X, y, groups=groups[:10])
    # a group splitter without groups: scikit-learn's error
    with pytest.raises(ValueError, match="'groups' parameter should not be None"):
        ShapleyR2RFECV(tree, cv=GroupKFold(3)).fit(X, y)


def test_feature_groups_is_the_name_of_the_feature_groups():
    X, y, groups = _data()
    tree = DecisionTreeRegressor(max_depth=3, random_state=0)
    fitted = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    with pytest.raises(ValueError, match="feature_groups must be a mapping or 'input', "
                                         "got 'inputs'"):
        ShapleyR2Importance(tree, feature_groups="inputs").fit(X, y, groups=groups)
    with pytest.raises(TypeError, match="feature_groups must be a mapping of group name"):
        shap_values(fitted, X[:3], feature_groups=[[0, 1]])
    with pytest.raises(ValueError, match="feature_groups='input': ShapleyR2RFECV refits"):
        ShapleyR2RFECV(tree, feature_groups="input").fit(X, y)
    # the old name is gone everywhere (no alias): groups= is not a feature mapping
    with pytest.raises(TypeError, match="groups"):
        shap_values(fitted, X[:3], groups={"a": [0, 1]})
    with pytest.raises(TypeError, match="groups"):
        ShapleyR2Importance(tree, groups={"a": [0, 1]})
    with pytest.raises(TypeError, match="groups"):
        ShapleyR2RFECV(tree, groups={"a": [0, 1]})
    # both at once: feature groups as players, cross-validation groups for the folds
    selector = ShapleyR2Importance(_model(X), test="fdr", cv=GroupKFold(3), n_jobs=1,
                                   feature_groups={"a": [0, 2]}).fit(X, y, groups=groups)
    assert list(selector.decomposition_.feature_names) == ["a", "x1", "x3", "x4"]
    _check_fits(groups)
