"""One name per quantity and the readable repr of the results (issue 24); no
aliases for names never released (issue 29)."""
import pickle
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, make_classification
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.tree import DecisionTreeRegressor

from sklearn_r2shap import ShapleyR2Importance, estimate_cost, r2_decomposition


@pytest.fixture(scope="module")
def regression():
    X, y = load_diabetes(return_X_y=True)
    model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    return model, X, y


@pytest.fixture(scope="module")
def result(regression):
    model, X, y = regression
    return r2_decomposition(model, X, y)


def test_new_names_do_not_warn(result, regression):
    model, X, y = regression
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fresh = r2_decomposition(model, X, y)
        assert fresh.score_name == "r2"
        total = fresh.shares.sum() + fresh.unattributed
        assert abs(total - fresh.score) < 1e-12
        repr(fresh), str(fresh), fresh._repr_html_()


def test_score_holds_the_value(result, regression):
    model, X, y = regression
    assert type(result.score) is float
    assert abs(result.score - model.score(X, y)) < 1e-12  # R^2 of the model
    assert pickle.loads(pickle.dumps(result)).score == result.score


@pytest.mark.parametrize("old", ["importances", "r2", "r2_unattributed"])
def test_decomposition_has_no_aliases(result, old):
    assert not hasattr(result, old)


@pytest.mark.parametrize("old", ["importances_std_", "r2_", "r2_unattributed_", "cv_importances_",
                                 "local_r2"])
def test_selector_has_no_aliases(regression, old):
    model, X, y = regression
    selector = ShapleyR2Importance(DecisionTreeRegressor(max_depth=3, random_state=0)).fit(X, y)
    assert type(selector.score_) is float and selector.score_name_ == "r2"
    np.testing.assert_allclose(selector.feature_importances_.sum() + selector.unattributed_,
                               selector.score_, rtol=0, atol=1e-12)
    assert not hasattr(selector, old)


def test_repr_is_the_shares_table(result):
    text = repr(result)
    assert "array(" not in text
    lines = text.splitlines()
    assert lines[0].startswith("R2Decomposition: exact Shapley shares of the R^2")
    assert lines[1].split() == ["feature", "share", "std.err", "%", "of", "R2"]
    # features by decreasing share, as many as there are
    listed = [line.split()[0] for line in lines[2:2 + len(result.shares)]]
    order = np.argsort(-result.shares, kind="mergesort")
    assert listed == [str(result.feature_names[j]) for j in order]
    values = [float(line.split()[1]) for line in lines[2:2 + len(result.shares)]]
    np.testing.assert_allclose(values, result.shares[order], atol=5e-5)
    assert lines[-1].split()[:2] == ["score", "(R2)"]
    assert abs(float(lines[-1].split()[2]) - result.score) < 5e-5
    html = result._repr_html_()
    assert html.startswith("<div><table>") and "share" in html and "std.err" in html



@pytest.mark.parametrize("unattributed, shown", [(-3e-17, "0.0000"), (2e-17, "0.0000"),
                                                 (-0.0012, "-0.0012"), (0.0451, "0.0451")])
def test_unattributed_rounding_noise_is_shown_without_sign(unattributed, shown):
    """An exact decomposition's unattributed part is zero up to rounding of
    either sign: the table shows it as 0.0000, never -0.0000; a real
    difference keeps its sign."""
    from sklearn_r2shap._report import shares_html, shares_table

    lines = shares_table(["a", "b"], np.array([0.3, 0.2]), None, 0.5 + unattributed,
                         unattributed)
    assert lines[-2].split() == ["unattributed", shown]
    html = shares_html("caption", ["a", "b"], np.array([0.3, 0.2]), None, 0.5 + unattributed,
                       unattributed)
    assert f">{shown}</td>" in html

def test_repr_is_truncated_for_many_features():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 45))
    y = X[:, :5].sum(axis=1) + rng.normal(size=300)
    model = DecisionTreeRegressor(max_depth=8, random_state=0).fit(X, y)
    result = r2_decomposition(model, X, y)
    text = repr(result)
    assert "... 25 more features" in text
    assert len(text.splitlines()) == 1 + 1 + 20 + 1 + 3
    assert len(str(result).splitlines()) > 45  # str shows every feature
    assert "25 more features" in result._repr_html_()
    # the sum line is over all features, not only those listed
    assert abs(float(text.splitlines()[-3].split()[1]) - result.shares.sum()) < 5e-5


def test_classifier_table_names_d2():
    X, y = make_classification(n_samples=200, n_features=4, random_state=0)
    model = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(X, y)
    result = r2_decomposition(model, X, y)
    assert result.score_name == "d2_log_loss"
    text = repr(result)
    assert "% of D2" in text and "score (D2)" in text and "D^2 (log-loss)" in text


def test_cost_estimate_repr(regression):
    model, X, _ = regression
    cost = estimate_cost(model, X)
    text = repr(cost)
    assert text.startswith("CostEstimate: R^2 / D^2 decomposition of 442 rows, 1 trees")
    assert "CostEstimate(" not in text and "np.float64" not in text
    assert [line.split()[0] for line in text.splitlines()[2:4]] == ["exact", "sampled"]
    assert "<table>" in cost._repr_html_()
