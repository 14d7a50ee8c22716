"""explain() and Explanation: shap's layout, checked against shap's TreeExplainer."""

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_diabetes, load_iris
from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler
from sklearn.tree import DecisionTreeRegressor

import sklearn_r2shap
from sklearn_r2shap import Explanation, explain, shap_values

shap = pytest.importorskip("shap")


@pytest.fixture(scope="module")
def regression():
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    model = GradientBoostingRegressor(n_estimators=20, max_depth=3, random_state=0).fit(X, y)
    return model, X.iloc[:60]


@pytest.fixture(scope="module")
def multiclass():
    X, y = load_iris(return_X_y=True, as_frame=True)
    model = RandomForestClassifier(n_estimators=6, max_depth=4, random_state=0).fit(X, y)
    return model, X.iloc[::3]


def test_explain_is_the_package_function():
    assert sklearn_r2shap.explain is explain and callable(explain)
    # the array functions live in their own module
    from sklearn_r2shap import attributions

    assert attributions.shap_values is shap_values


def _assert_matches_shap(ours, theirs, atol):
    assert ours.values.shape == theirs.values.shape
    assert np.shape(ours.base_values) == np.shape(theirs.base_values)
    np.testing.assert_allclose(ours.values, theirs.values, atol=atol)
    np.testing.assert_allclose(ours.base_values, theirs.base_values, atol=atol)
    np.testing.assert_array_equal(ours.data, theirs.data)


def test_to_shap_matches_tree_explainer_regression(regression):
    model, X = regression
    ours = explain(model, X).to_shap()
    theirs = shap.TreeExplainer(model)(X)
    assert isinstance(ours, shap.Explanation)
    _assert_matches_shap(ours, theirs, atol=1e-8)
    assert ours.feature_names == theirs.feature_names == list(X.columns)


def test_to_shap_matches_tree_explainer_multiclass(multiclass):
    model, X = multiclass
    e = explain(model, X)
    ours, theirs = e.to_shap(), shap.TreeExplainer(model)(X)
    assert ours.values.shape == (len(X), 4, 3)
    _assert_matches_shap(ours, theirs, atol=1e-10)
    assert ours.feature_names == list(X.columns)
    assert list(e.output_names) == list(model.classes_)
    # values + base values are the class probabilities
    np.testing.assert_allclose(e.values.sum(axis=1) + e.base_values, model.predict_proba(X),
                               atol=1e-12)


def test_to_shap_matches_tree_explainer_xgboost_multiclass():
    xgboost = pytest.importorskip("xgboost")
    # shap 0.49 cannot parse the vector base_score XGBoost 3.1 writes
    pytest.importorskip("shap", minversion="0.51")
    X, y = load_iris(return_X_y=True, as_frame=True)
    model = xgboost.XGBClassifier(n_estimators=8, max_depth=3).fit(X, y)
    ours = explain(model, X.iloc[:30]).to_shap()
    theirs = shap.TreeExplainer(model)(X.iloc[:30])
    _assert_matches_shap(ours, theirs, atol=2e-5)


def test_shap_plots_take_it(regression, multiclass):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    model, X = regression
    e = explain(model, X)
    shap.plots.beeswarm(e.to_shap(), show=False)
    plt.close("all")
    shap.plots.waterfall(e[0].to_shap(), show=False)
    plt.close("all")
    shap.plots.scatter(e[:, "bmi"].to_shap(), show=False)
    plt.close("all")
    model, X = multiclass
    shap.plots.beeswarm(explain(model, X)[:, :, 1].to_shap(), show=False)
    plt.close("all")


def test_indexing(regression, multiclass):
    model, X = regression
    e = explain(model, X)
    names = list(X.columns)
    j = names.index("bmi")
    np.testing.assert_array_equal(e[3].values, e.values[3])
    assert e[3].base_values == e.base_values[3] and e[3].row_index == X.index[3]
    np.testing.assert_array_equal(e[:5].values, e.values[:5])
    assert len(e[:5]) == 5 and list(e[:5].row_index) == list(X.index[:5])
    np.testing.assert_array_equal(e["bmi"].values, e.values[:, j])
    np.testing.assert_array_equal(e[:, "bmi"].data, X["bmi"].to_numpy())
    two = e[:, ["s5", "bmi"]]
    np.testing.assert_array_equal(two.values, e.values[:, [names.index("s5"), j]])
    assert list(two.feature_names) == ["s5", "bmi"]
    assert float(e[2, "bmi"].values) == e.values[2, j]
    with pytest.raises(KeyError, match="no feature named 'nope'"):
        e[:, "nope"]
    with pytest.raises(IndexError):
        e[0, 0, 0]
    model, X = multiclass
    m = explain(model, X)
    np.testing.assert_array_equal(m[:, :, 2].values, m.values[:, :, 2])
    np.testing.assert_array_equal(m[:, :, 2].base_values, m.base_values[:, 2])
    assert m[:, :, 2].output_names == model.classes_[2]
    np.testing.assert_array_equal(m[4, "sepal width (cm)"].values, m.values[4, 1])


def test_to_frame(regression, multiclass):
    model, X = regression
    e = explain(model, X)
    wide = e.to_frame(layout="wide")
    assert list(wide.columns) == list(X.columns) and list(wide.index) == list(X.index)
    np.testing.assert_array_equal(wide.to_numpy(), e.values)
    long = e.to_frame()
    assert list(long.columns) == ["row", "feature", "value", "data", "base_value"]
    assert len(long) == e.values.size
    back = long.pivot(index="row", columns="feature", values="value")[list(X.columns)]
    np.testing.assert_array_equal(back.loc[X.index].to_numpy(), e.values)
    np.testing.assert_array_equal(
        long.pivot(index="row", columns="feature", values="data")[list(X.columns)]
        .loc[X.index].to_numpy(), X.to_numpy())
    model, X = multiclass
    m = explain(model, X)
    long = m.to_frame()
    assert len(long) == m.values.size and "output" in long.columns
    sub = long[(long.output == 1) & (long.feature == "petal width (cm)")]
    np.testing.assert_array_equal(sub.value.to_numpy(), m.values[:, 3, 1])
    np.testing.assert_array_equal(sub.base_value.to_numpy(), m.base_values[:, 1])
    wide = m.to_frame("wide")
    np.testing.assert_array_equal(wide[(2, "sepal length (cm)")].to_numpy(), m.values[:, 0, 2])
    with pytest.raises(ValueError, match="layout must be 'long' or 'wide', got 'tall'"):
        m.to_frame("tall")
    with pytest.raises(TypeError, match="kind"):  # the old name is gone, no alias
        m.to_frame(kind="wide")


def test_repr(regression, multiclass):
    model, X = regression
    text = repr(explain(model, X))
    assert text.startswith("Explanation(path-dependent SHAP values: 60 rows x 10 features)")
    top = X.columns[np.argmax(np.abs(explain(model, X).values).mean(axis=0))]
    assert f"mean |value|: {top} " in text
    assert "feature: bmi" in repr(explain(model, X)[:, "bmi"])
    text = repr(explain(*multiclass))
    assert "x 3 outputs" in text and "outputs: 0, 1, 2" in text


def test_explain_pipeline_names_and_values():
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"a": rng.normal(size=200),
                      "colour": rng.choice(["red", "green", "blue"], size=200)})
    y = X["a"] + (X["colour"] == "red")
    pipeline = Pipeline([
        ("columns", ColumnTransformer([("cat", OneHotEncoder(sparse_output=False), ["colour"]),
                                       ("num", StandardScaler(), ["a"])])),
        ("tree", DecisionTreeRegressor(max_depth=3, random_state=0)),
    ]).fit(X, y)
    e = explain(pipeline, X.iloc[:30])
    Xt = pipeline[:-1].transform(X.iloc[:30])
    phi = shap_values(pipeline[-1], Xt)
    np.testing.assert_array_equal(e.values, phi[:, :-1])
    np.testing.assert_array_equal(e.base_values, phi[:, -1])
    np.testing.assert_array_equal(e.data, Xt)
    assert list(e.feature_names) == list(pipeline[:-1].get_feature_names_out())
    np.testing.assert_allclose(e.values.sum(axis=1) + e.base_values,
                               pipeline.predict(X.iloc[:30]), atol=1e-12)


def test_explain_binary_boosted_single_output():
    X, y = load_iris(return_X_y=True)
    from sklearn.ensemble import HistGradientBoostingClassifier

    model = HistGradientBoostingClassifier(max_iter=5, random_state=0).fit(X, y == 0)
    e = explain(model, X[:10])
    assert e.values.shape == (10, 4) and e.output_names is None
    assert list(e.feature_names) == ["x0", "x1", "x2", "x3"]
    np.testing.assert_allclose(e.values.sum(axis=1) + e.base_values,
                               model.decision_function(X[:10]), atol=1e-12)


def test_background_interactions_groups(regression):
    model, X = regression
    from sklearn_r2shap import shap_interaction_values

    e = explain(model, X.iloc[:10], background=X.iloc[10:40])
    phi = shap_values(model, X.iloc[:10], background=X.iloc[10:40])
    np.testing.assert_array_equal(e.values, phi[:, :-1])
    assert e.description == "interventional SHAP values"
    e = explain(model, X.iloc[:10], interactions=True)
    full = shap_interaction_values(model, X.iloc[:10])
    np.testing.assert_array_equal(e.interaction_values, full[:, :-1, :-1])
    np.testing.assert_allclose(e.interaction_values.sum(axis=2), e.values, atol=1e-9)
    e = explain(model, X.iloc[:10], feature_groups={"g": ["bmi", "s5"]})
    phi = shap_values(model, X.iloc[:10], feature_groups={"g": ["bmi", "s5"]})
    np.testing.assert_array_equal(e.values, phi[:, :-1])
    assert list(e.feature_names) == ["g"] + [n for n in X.columns if n not in ("bmi", "s5")]
    assert e.data is None  # a group has no single feature value
    with pytest.raises(ValueError, match="cannot be combined"):
        explain(model, X.iloc[:10], feature_groups={"g": ["bmi"]}, interactions=True)


def test_explanation_from_arrays_checks_shapes():
    e = Explanation(np.zeros((3, 2)), np.ones(3))
    assert list(e.feature_names) == ["x0", "x1"]
    with pytest.raises(ValueError, match="base_values"):
        Explanation(np.zeros((3, 2)), np.ones(2))
    with pytest.raises(ValueError, match="values must have shape"):
        Explanation(np.zeros(3), np.ones(3))
