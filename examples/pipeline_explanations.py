"""
Explaining a Pipeline with categorical columns, per original column
===================================================================

This example explains a scikit-learn :class:`~sklearn.pipeline.Pipeline` -- a
:class:`~sklearn.compose.ColumnTransformer` that one-hot encodes two
categorical columns and scales the others, then a gradient boosting model --
exactly, and reports its R^2 shares and SHAP values per original column.

The diabetes data ships with scikit-learn; its ``sex`` column becomes the
categories "female" / "male" and ``age`` a categorical age band, as they would
arrive in a real table. Three steps:

1. :func:`sklearn_r2shap.r2_decomposition` of the Pipeline on held-out rows:
   the shares of its last step's R^2, one per transformed column (each one-hot
   column its own share);
2. the same with ``feature_groups="input"``: the exact Shapley shares of the game whose
   players are the original columns (every one-hot column of "age band"
   together), not sums of the one-hot shares;
3. :func:`sklearn_r2shap.explain` with ``feature_groups="input"``: per-row SHAP values
   per original column, drawn as a beeswarm with matplotlib;
   ``shap.plots.beeswarm(e.to_shap())`` draws shap's own when shap is installed.

Run ``python examples/pipeline_explanations.py``. Needs pandas and matplotlib.
"""
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.compose import ColumnTransformer
from sklearn.datasets import load_diabetes
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from sklearn_r2shap import explain, r2_decomposition

# %%
# A table with categorical columns
# --------------------------------
data = load_diabetes(as_frame=True)
X = data.frame.drop(columns="target")
y = data.target.to_numpy()
X["sex"] = np.where(X["sex"] > 0, "male", "female")
X["age band"] = pd.cut(X.pop("age"), 4, labels=["youngest", "younger", "older", "oldest"]
                       ).astype(str)
categorical = ["sex", "age band"]
numeric = [c for c in X.columns if c not in categorical]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, random_state=0)

pipeline = Pipeline([
    ("columns", ColumnTransformer([("cat", OneHotEncoder(), categorical),
                                   ("num", StandardScaler(), numeric)])),
    ("model", HistGradientBoostingRegressor(max_iter=60, learning_rate=0.1, max_depth=3,
                                            random_state=0)),
]).fit(X_train, y_train)

# %%
# 1. R^2 shares of the transformed columns
# ----------------------------------------
# The Pipeline's steps transform the held-out rows once; the shares are those
# of its last step, on the columns named by ``get_feature_names_out``.
per_column = r2_decomposition(pipeline, X_test, y_test)
print(f"held-out R^2 = {per_column.score:.3f}, unattributed {per_column.unattributed:+.2e}")
print(pd.Series(per_column.shares, per_column.feature_names).round(4).to_string(), "\n")

# %%
# 2. R^2 shares of the original columns
# -------------------------------------
# ``feature_groups="input"`` maps every transformed column back to the input column it
# came from. The share of "age band" is the Shapley value of the game in which
# its four one-hot columns join or leave together.
per_input = r2_decomposition(pipeline, X_test, y_test, feature_groups="input")
shares = pd.DataFrame({"share": per_input.shares, "std error": per_input.std_errors},
                      index=per_input.feature_names).sort_values("share")
one_hot_sum = {c: per_column.shares[[n.startswith(f"cat__{c}_")
                                          for n in per_column.feature_names]].sum()
               for c in categorical}
print(shares.round(4).to_string())
for c in categorical:
    print(f"{c}: group share {shares.loc[c, 'share']:.4f}, "
          f"sum of its one-hot shares {one_hot_sum[c]:.4f}")

fig, ax = plt.subplots(figsize=(6, 4))
ax.barh(shares.index, shares["share"], xerr=2 * shares["std error"], color="tab:blue")
ax.axvline(0, color="black", lw=0.8)
ax.set_xlabel("share of the held-out R$^2$ (± 2 standard errors)")
ax.set_title(f"Pipeline R$^2$ = {per_input.score:.3f}, per original column")
fig.tight_layout()

# %%
# 3. SHAP values per original column
# ----------------------------------
# :func:`explain` returns an :class:`~sklearn_r2shap.Explanation` in shap's
# layout; with ``feature_groups="input"`` its ``data`` are the original columns (the
# categories as strings). A beeswarm drawn with matplotlib, colour = the
# column's value (category codes for the categorical columns).
e = explain(pipeline, X_test, feature_groups="input")
print(e)

order = np.argsort(np.abs(e.values).mean(axis=0))
rng = np.random.default_rng(0)
fig, ax = plt.subplots(figsize=(6, 4.5))
for position, j in enumerate(order):
    column = e.data[:, j]
    if column.dtype == object and isinstance(column[0], str):
        colour = pd.Series(column).astype("category").cat.codes.to_numpy(dtype=float)
    else:
        colour = column.astype(float)
    span = np.ptp(colour) or 1.0
    ax.scatter(e.values[:, j], position + rng.uniform(-0.3, 0.3, len(column)), s=8,
               c=(colour - colour.min()) / span, cmap="coolwarm")
ax.set_yticks(range(len(order)), [e.feature_names[j] for j in order])
ax.axvline(0, color="black", lw=0.8)
ax.set_xlabel("SHAP value (disease progression units)")
ax.set_title("SHAP values per original column (blue: low, red: high)")
fig.tight_layout()

# %%
# With shap installed, its own plots take the same values:
#
# .. code-block:: python
#
#     import shap
#     shap.plots.beeswarm(e.to_shap())
#     shap.plots.waterfall(e[0].to_shap())
plt.show()
