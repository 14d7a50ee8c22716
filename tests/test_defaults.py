"""The default model follows the target type (issue 24, item 5)."""
import numpy as np
import pytest
from sklearn.datasets import load_diabetes, make_classification
from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor
from sklearn.model_selection import StratifiedKFold
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

from sklearn_r2shap import ShapleyR2Importance, TreeGradRanker
from sklearn_r2shap._estimators._selector import is_classification_target


@pytest.mark.parametrize("y, expected", [
    (np.array([0, 1, 1, 0]), True),                      # binary integers
    (np.array(["a", "b", "c", "a"], dtype=object), True),  # string labels
    (np.array([True, False, True, False]), True),        # booleans
    (np.array([1, 2, 3, 4, 5, 6]), True),                # integer classes
    (np.array([0.5, 1.5, 2.25, 3.0]), False),            # continuous
    (load_diabetes(return_X_y=True)[1], False),           # whole-number floats
    (None, False),
])
def test_is_classification_target(y, expected):
    assert is_classification_target(y) is expected


def _small_classification(n_classes, labels=None):
    X, y = make_classification(n_samples=120, n_features=5, n_informative=3,
                               n_redundant=0, n_classes=n_classes, random_state=0)
    if labels is not None:
        y = np.asarray(labels, dtype=object)[y]
    return X, y


@pytest.mark.parametrize("n_classes, labels", [(2, None), (3, None), (2, ["no", "yes"])])
def test_shapley_r2_importance_default_classifier(n_classes, labels):
    X, y = _small_classification(n_classes, labels)
    selector = ShapleyR2Importance().fit(X, y)
    assert isinstance(selector.estimator_, HistGradientBoostingClassifier)
    assert selector.score_name_ == "d2_log_loss"
    assert list(selector.estimator_.classes_) == sorted(set(y))


def test_shapley_r2_importance_default_regressor():
    X, y = load_diabetes(return_X_y=True)
    selector = ShapleyR2Importance().fit(X[:150], y[:150])
    assert isinstance(selector.estimator_, HistGradientBoostingRegressor)
    assert selector.score_name_ == "r2"


def test_shapley_r2_importance_default_classifier_cv_is_stratified(monkeypatch):
    X, y = _small_classification(3)
    order = np.argsort(y, kind="stable")
    X, y = X[order], y[order]  # sorted by class: unstratified folds would hold 1-2 classes each
    held_out = []
    split = StratifiedKFold.split

    def recording_split(self, X, y=None, groups=None):
        for train, test in split(self, X, y, groups):
            held_out.append(np.asarray(test))
            yield train, test

    monkeypatch.setattr(StratifiedKFold, "split", recording_split)
    selector = ShapleyR2Importance(cv=3).fit(X, y)
    assert isinstance(selector.estimator_, HistGradientBoostingClassifier)
    assert selector.score_name_ == "d2_log_loss"
    # cv=3 became stratified folds, and those were the folds decomposed
    assert len(held_out) == 3 and selector.cv_shares_.shape[0] == 3
    expected = np.bincount(y) / 3
    for test in held_out:
        np.testing.assert_allclose(np.bincount(y[test], minlength=3), expected, atol=1)


def test_treegrad_ranker_default_model_follows_target():
    X, y = _small_classification(3)
    ranker = TreeGradRanker(n_iter=5).fit(X, y)
    assert isinstance(ranker.estimator_, DecisionTreeClassifier)
    X, y = load_diabetes(return_X_y=True)
    ranker = TreeGradRanker(n_iter=5).fit(X[:100], y[:100])
    assert isinstance(ranker.estimator_, DecisionTreeRegressor)
