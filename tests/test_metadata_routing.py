"""Metadata routing (scikit-learn's ``enable_metadata_routing``): the selectors are
routers, as SelectFromModel and RFECV are. They consume ``sample_weight`` themselves
and route ``fit``'s metadata by request to the model's ``fit``, to the splitters'
``split`` (``groups``) and to a scorer (``sample_weight``); with routing off (the
default) the metadata go where they always went.

A tree whose ``fit`` takes a keyword of its own (``extra``) records what it was given,
so that the tests check what reached the model, not what the code says it sends."""
import numpy as np
import pytest
from sklearn import __version__ as _sklearn_version
from sklearn.utils.fixes import parse_version
from sklearn import config_context
from sklearn.linear_model import Ridge
from sklearn.metrics import make_scorer, r2_score
from sklearn.model_selection import GridSearchCV, GroupKFold, KFold
from sklearn.pipeline import Pipeline
from sklearn.tree import DecisionTreeRegressor
from sklearn.utils.metadata_routing import MetadataRouter

from sklearn_r2shap import (
    PiecewiseLinearExplainer,
    ShapleyR2Importance,
    ShapleyR2RFECV,
    TreeGradRanker,
)

try:
    from sklearn.exceptions import UnsetMetadataPassedError
except ImportError:  # scikit-learn < 1.9: kept in the routing module
    from sklearn.utils._metadata_requests import UnsetMetadataPassedError

# (n_rows, extra, has sample_weight) of every fit of an ExtraRegressor
_FITS = []


class ExtraRegressor(DecisionTreeRegressor):
    """A decision tree whose ``fit`` takes ``extra``, which only it accepts; it
    records the number of rows, ``extra`` and whether it got weights."""

    def fit(self, X, y, sample_weight=None, check_input=True, extra=None):
        _FITS.append((len(X), extra, sample_weight is not None))
        return super().fit(X, y, sample_weight=sample_weight, check_input=check_input)


# the package reads scikit-learn models by their module and class names
ExtraRegressor.__module__ = "sklearn.tree._classes"
ExtraRegressor.__name__ = "DecisionTreeRegressor"


@pytest.fixture(autouse=True)
def _clear():
    _FITS.clear()
    yield
    _FITS.clear()


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    y = 2 * X[:, 0] + X[:, 1] ** 2 + 0.3 * rng.normal(size=n)
    weight = rng.uniform(0.2, 2.0, size=n)
    groups = rng.permutation(np.repeat(np.arange(8), n // 8))
    return X, y, weight, groups


def _model():
    return ExtraRegressor(max_depth=3, random_state=0)


def _selectors(model):
    return {
        "importance": ShapleyR2Importance(model, cv=3, n_jobs=1),
        "rfecv": ShapleyR2RFECV(model, cv=3, n_jobs=1),
        "ranker": TreeGradRanker(model, n_iter=5, n_jobs=1),
        "piecewise": PiecewiseLinearExplainer(model, n_jobs=1),
    }


@pytest.mark.parametrize("kind", ["importance", "rfecv", "ranker", "piecewise"])
def test_the_selectors_are_routers(kind):
    selector = _selectors(_model())[kind]
    routing = selector.get_metadata_routing()
    assert isinstance(routing, MetadataRouter)
    assert routing.owner == type(selector).__name__
    described = routing._serialize()
    assert "estimator" in described
    assert ("splitter" in described) == (kind in ("importance", "rfecv"))
    # the selector consumes sample_weight itself (its scores' weights), not groups
    assert set(described["$self_request"]["fit"]) == {"sample_weight"}
    assert "scorer" in ShapleyR2RFECV(_model(), scoring="r2").get_metadata_routing()._serialize()
    assert "scorer" not in ShapleyR2RFECV(_model()).get_metadata_routing()._serialize()


@pytest.mark.parametrize("kind", ["importance", "rfecv", "ranker", "piecewise"])
def test_a_fit_parameter_only_the_model_accepts_reaches_it(kind):
    X, y, _, _ = _data()
    per_row = np.arange(len(y))  # one value per row: indexed like the rows of each fit
    with config_context(enable_metadata_routing=True):
        selector = _selectors(_model().set_fit_request(extra=True))[kind]
        selector.fit(X, y, extra=per_row)
    assert _FITS
    for n_rows, extra, weighted in _FITS:
        assert extra is not None and len(extra) == n_rows
        assert not weighted
    if kind in ("importance", "rfecv"):  # fold fits on fewer rows, and one on all rows
        assert {n for n, _, _ in _FITS} > {len(y)}
    assert any(np.array_equal(extra, per_row) for _, extra, _ in _FITS)


@pytest.mark.parametrize("kind", ["importance", "rfecv", "ranker", "piecewise"])
def test_unrequested_metadata_raise(kind):
    X, y, weight, _ = _data()
    with config_context(enable_metadata_routing=True):
        selector = _selectors(_model())[kind]  # the model requests nothing
        with pytest.raises(UnsetMetadataPassedError, match="extra"):
            selector.fit(X, y, extra="tag")
        # in a Pipeline, the selector's own sample_weight must be requested too
        pipe = Pipeline([("select", selector), ("ridge", Ridge().set_fit_request(
            sample_weight=True))])
        with pytest.raises(UnsetMetadataPassedError, match="sample_weight"):
            pipe.fit(X, y, sample_weight=weight)
    assert not _FITS


def test_weights_reach_only_those_that_requested_them():
    """sample_weight given to the selector weighs its decomposition; the model is fitted
    with them only if it requested them (a model that says nothing raises, as
    everywhere in scikit-learn)."""
    X, y, weight, _ = _data()
    with config_context(enable_metadata_routing=True):
        with pytest.raises(UnsetMetadataPassedError, match="sample_weight"):
            ShapleyR2Importance(_model(), n_jobs=1).fit(X, y, weight)
        unweighted_model = ShapleyR2Importance(
            _model().set_fit_request(sample_weight=False), n_jobs=1).fit(X, y, weight)
        weighted_model = ShapleyR2Importance(
            _model().set_fit_request(sample_weight=True), n_jobs=1).fit(X, y, weight)
    assert [w for _, _, w in _FITS] == [False, True]
    # the same numbers as a model fitted (unweighted / weighted) and decomposed weighted
    for selector, model_weight in [(unweighted_model, None), (weighted_model, weight)]:
        fitted = DecisionTreeRegressor(max_depth=3, random_state=0).fit(
            X, y, sample_weight=model_weight)
        reference = ShapleyR2Importance(fitted, prefit=True, n_jobs=1).fit(X, y, weight)
        np.testing.assert_array_equal(selector.feature_importances_,
                                      reference.feature_importances_)
    assert not np.array_equal(unweighted_model.feature_importances_,
                              weighted_model.feature_importances_)


@pytest.mark.parametrize("kind", ["importance", "rfecv", "ranker"])
def test_routing_off_keeps_todays_paths(kind):
    """Without routing, sample_weight and the fit parameters go to the model's fit (no
    request needed) and groups to the splits; with routing on and everything
    requested, the numbers are the same."""
    X, y, weight, groups = _data()
    cv = GroupKFold(3)
    make = {"importance": lambda m: ShapleyR2Importance(m, cv=cv, n_jobs=1),
            "rfecv": lambda m: ShapleyR2RFECV(m, cv=cv, n_jobs=1),
            "ranker": lambda m: TreeGradRanker(m, n_iter=5, n_jobs=1)}[kind]
    kwargs = {} if kind == "ranker" else {"groups": groups}
    off = make(_model()).fit(X, y, weight, extra="off", **kwargs)
    assert _FITS and all(extra == "off" and weighted for _, extra, weighted in _FITS)
    _FITS.clear()
    with config_context(enable_metadata_routing=True):
        on = make(_model().set_fit_request(sample_weight=True, extra=True)).fit(
            X, y, weight, extra="on", **kwargs)
    assert _FITS and all(extra == "on" and weighted for _, extra, weighted in _FITS)
    np.testing.assert_array_equal(off.feature_importances_, on.feature_importances_)
    np.testing.assert_array_equal(off.get_support(), on.get_support())


def test_rfecv_routes_weights_to_a_scorer_that_requested_them():
    """The weighted R^2 scorer, requesting sample_weight, scores as the default score
    (the weighted held-out R^2); without the request it is unweighted."""
    X, y, weight, _ = _data()
    cv = KFold(3, shuffle=True, random_state=0)
    default = ShapleyR2RFECV(_model(), cv=cv, n_jobs=1).fit(X, y, weight)
    with config_context(enable_metadata_routing=True):
        weighted = ShapleyR2RFECV(
            _model().set_fit_request(sample_weight=True), cv=cv, n_jobs=1,
            scoring=make_scorer(r2_score).set_score_request(sample_weight=True)).fit(X, y, weight)
        unweighted = ShapleyR2RFECV(
            _model().set_fit_request(sample_weight=True), cv=cv, n_jobs=1,
            scoring=make_scorer(r2_score).set_score_request(sample_weight=False)).fit(
                X, y, weight)
    np.testing.assert_allclose(weighted.cv_results_["mean_test_score"],
                               default.cv_results_["mean_test_score"], rtol=0, atol=1e-12)
    assert not np.allclose(unweighted.cv_results_["mean_test_score"],
                           default.cv_results_["mean_test_score"])


@pytest.mark.skipif(
    parse_version(_sklearn_version) < parse_version("1.9"),
    reason="scikit-learn 1.8.0's GridSearchCV refuses a fit parameter that only a model "
           "inside a Pipeline step's router requests (TypeError: not routed); 1.9 routes it")
def test_pipeline_in_grid_search_with_weights_and_groups():
    """A Pipeline with our selector inside a GridSearchCV: the outer folds and the
    selector's cv are split by group, the weights reach the selector, its model and the
    final step, and ``extra`` reaches the selector's model only."""
    X, y, weight, groups = _data(n=160)
    with config_context(enable_metadata_routing=True):
        selector = ShapleyR2Importance(
            _model().set_fit_request(sample_weight=True, extra=True), test="fpr", alpha=0.2,
            cv=GroupKFold(2), n_jobs=1).set_fit_request(sample_weight=True)
        ridge = Ridge().set_fit_request(sample_weight=True).set_score_request(
            sample_weight=True)
        pipe = Pipeline([("select", selector), ("ridge", ridge)])
        search = GridSearchCV(pipe, {"select__alpha": [0.2, 0.5]}, cv=GroupKFold(2),
                              error_score="raise")
        search.fit(X, y, sample_weight=weight, groups=groups, extra="tag")
        # without groups, the selector's GroupKFold has none: scikit-learn's error
        with pytest.raises(ValueError, match="'groups' parameter should not be None"):
            GridSearchCV(pipe, {"select__alpha": [0.2]}, cv=3, error_score="raise").fit(
                X, y, sample_weight=weight, extra="tag")
    _FITS.clear()
    assert search.best_estimator_.named_steps["select"].cv_shares_.shape[0] == 2
    # the refitted selector, on all rows, fitted as it would be outside the search
    best = search.best_estimator_.named_steps["select"]
    with config_context(enable_metadata_routing=True):
        alone = ShapleyR2Importance(
            _model().set_fit_request(sample_weight=True, extra=True), test="fpr",
            alpha=best.alpha, cv=GroupKFold(2), n_jobs=1).fit(
                X, y, weight, groups=groups, extra="tag")
    assert all(extra == "tag" and weighted for _, extra, weighted in _FITS)
    np.testing.assert_array_equal(best.feature_importances_, alone.feature_importances_)
    np.testing.assert_array_equal(best.pvalues_, alone.pvalues_)


def test_rfecv_score_routes_to_the_model():
    X, y, weight, _ = _data()
    selector = ShapleyR2RFECV(DecisionTreeRegressor(max_depth=3, random_state=0), cv=3,
                              n_jobs=1).fit(X, y)
    plain = selector.score(X, y, sample_weight=weight)  # routing off: passed through
    model = selector.estimator_
    assert plain == model.score(selector.transform(X), y, sample_weight=weight)
    with config_context(enable_metadata_routing=True):
        selector.estimator.set_score_request(sample_weight=True)
        assert selector.score(X, y, sample_weight=weight) == plain
        selector.estimator.set_score_request(sample_weight=False)
        assert selector.score(X, y) == model.score(selector.transform(X), y)
        with pytest.raises(TypeError, match="not routed to any object"):
            selector.score(X, y, sample_weight=weight)


def test_a_pipelines_last_step_gets_the_weights_it_requested():
    """A Pipeline routes the weights to the steps that requested them; a
    HistGradientBoosting last step fitted with them is explained with weighted
    covers, as without routing (the same numbers)."""
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y, weight, _ = _data()

    def pipeline(hgb_request=None):
        hgb = HistGradientBoostingRegressor(max_iter=10, random_state=0)
        if hgb_request is not None:
            hgb.set_fit_request(sample_weight=hgb_request)
            return make_pipeline(StandardScaler().set_fit_request(sample_weight=False), hgb)
        return make_pipeline(StandardScaler(), hgb)

    off = ShapleyR2Importance(pipeline(), n_jobs=1).fit(X, y, weight)
    with config_context(enable_metadata_routing=True):
        on = ShapleyR2Importance(pipeline(True), n_jobs=1).fit(X, y, weight)
        unweighted = ShapleyR2Importance(pipeline(False), n_jobs=1).fit(X, y, weight)
    np.testing.assert_array_equal(off.feature_importances_, on.feature_importances_)
    assert on._data_covers is not None and unweighted._data_covers is None
    assert not np.array_equal(on.feature_importances_, unweighted.feature_importances_)
