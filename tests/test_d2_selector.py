"""ShapleyR2Importance on classifiers: D^2 shares in selectors, Pipelines and CV."""
import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.ensemble import (
    HistGradientBoostingClassifier,
    RandomForestClassifier,
)
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import d2_brier_score, d2_log_loss_score
from sklearn.model_selection import GridSearchCV, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.utils.class_weight import compute_sample_weight
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_r2shap import ShapleyR2Importance, UnsupportedModelError, r2_decomposition


def expected_failures(estimator):
    """Checks the wrapped classifier itself fails: we cannot do better than it."""
    return {
        "check_sample_weight_equivalence_on_dense_data": (
            "scikit-learn lists the same expected failure for the wrapped classifier "
            "(HistGradientBoostingClassifier: node counts ignore weights; "
            "RandomForestClassifier: bootstrap samples rows, not weights)."
        ),
        "check_sample_weight_equivalence_on_sparse_data": (
            "as on dense data: RandomForestClassifier's bootstrap samples rows, not weights."
        ),
    }


# An unseeded forest is random, so fit_transform and fit().transform differ; the
# checks' set_random_state reaches only the selector's own parameters.
@parametrize_with_checks([ShapleyR2Importance(HistGradientBoostingClassifier()),
                          ShapleyR2Importance(RandomForestClassifier(n_estimators=5,
                                                                     random_state=0))],
                         expected_failed_checks=expected_failures)
def test_sklearn_compatible_with_classifiers(estimator, check):
    check(estimator)


@pytest.fixture(scope="module")
def cancer():
    X, y = load_breast_cancer(return_X_y=True, as_frame=True)
    labels = np.where(y == 1, "benign", "malignant")
    return X.iloc[:300, :6], labels[:300]


def test_string_labels_and_auto_method(cancer):
    X, y = cancer
    selector = ShapleyR2Importance(
        HistGradientBoostingClassifier(max_iter=15, random_state=0), max_features=3,
        threshold=-np.inf).fit(X, y)
    assert selector.method_ == "qshap" and selector.score_name_ == "d2_log_loss"
    model = selector.estimator_
    expected = d2_log_loss_score(y, model.predict_proba(X))
    assert selector.score_ == pytest.approx(expected, abs=1e-10)
    assert selector.feature_importances_.sum() + selector.unattributed_ == pytest.approx(
        selector.score_, abs=1e-12)
    assert selector.transform(X).shape == (len(y), 3)
    assert "D^2 (log-loss)" in str(selector.decomposition_)


def test_forest_brier_and_class_weights(cancer):
    X, y = cancer
    w = compute_sample_weight("balanced", y)
    selector = ShapleyR2Importance(RandomForestClassifier(5, max_depth=3, random_state=0))
    selector.fit(X, y, sample_weight=w)
    assert selector.score_name_ == "d2_brier"
    proba = selector.estimator_.predict_proba(X)[:, 1]
    expected = d2_brier_score(y, proba, sample_weight=w, pos_label="malignant")
    assert selector.score_ == pytest.approx(expected, abs=1e-10)
    plain = r2_decomposition(selector.estimator_, X, y)
    assert np.abs(plain.shares - selector.feature_importances_).max() > 1e-4


def test_cv_uses_stratified_folds(cancer):
    X, y = cancer
    selector = ShapleyR2Importance(HistGradientBoostingClassifier(max_iter=10, random_state=0),
                                   cv=3).fit(X, y)
    assert selector.cv_shares_.shape == (3, X.shape[1])
    # the same folds as StratifiedKFold(3): recompute fold 0 by hand
    train, test = next(StratifiedKFold(3).split(X, y))
    model = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(X.iloc[train],
                                                                             y[train])
    fold = r2_decomposition(model, X.iloc[test], y[test])
    np.testing.assert_allclose(selector.cv_shares_[0], fold.shares, atol=1e-12)


def test_pipeline_and_grid_search_multiclass():
    X, y = load_wine(return_X_y=True)
    pipe = make_pipeline(
        ShapleyR2Importance(RandomForestClassifier(4, max_depth=2, random_state=0),
                            threshold=-np.inf),
        LogisticRegression(max_iter=200))
    search = GridSearchCV(pipe, {"shapleyr2importance__max_features": [2, 5]}, cv=2)
    search.fit(X, y)
    assert search.best_params_["shapleyr2importance__max_features"] in (2, 5)
    step = search.best_estimator_[0]
    assert step.score_name_ == "d2_brier"
    assert step.transform(X).shape[1] == search.best_params_["shapleyr2importance__max_features"]


def test_unsupported_classifier_says_what_was_tried(cancer):
    X, y = cancer
    with pytest.raises(UnsupportedModelError, match="tried the exact") as error:
        ShapleyR2Importance(LogisticRegression()).fit(X, y)
    assert "shapFlex" in str(error.value) and "permutation_importance" in str(error.value)
