"""
Shapley decomposition of R² on the diabetes data, and feature selection
=======================================================================

This example splits a gradient boosting model's R² on the diabetes data into
per-feature shares and selects features with them.

A gradient boosting model of the diabetes data (442 patients, 10 features)
is fitted by :class:`sklearn_r2shap.ShapleyR2Importance`, which splits the
model's R² exactly into one part per feature (Q-SHAP). The example

1. prints the decomposition on the training data (``str(result)`` and
   ``result.to_frame()``) and on held-out data (``decompose``);
2. uses the selector in a :class:`~sklearn.pipeline.Pipeline` in front of a
   ridge regression and prints the pipeline's cross-validated R² against
   the number of features kept, then the cross-fitted importances
   (``cv=5``: each fold's model decomposed on the rows it did not see);
3. draws the bar chart of the decomposition (``result.plot()``).

Run ``python examples/diabetes_r2.py [--output PATH]`` (``--output`` also
saves the chart as a PNG). Needs pandas (``as_frame=True``) and matplotlib.
"""

import argparse

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import KFold, cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_r2shap import ShapleyR2Importance

parser = argparse.ArgumentParser(description="Shapley decomposition of R^2 (diabetes data)")
parser.add_argument("--output", default=None, help="also save the plot to this PNG file")
args = parser.parse_args()

# %%
# Decomposition on the training rows
# -----------------------------------
# The selector fits the model and decomposes its R² on the same rows. In
# sample the shares add up to the model's R² (the unattributed part is ~0).

X, y = load_diabetes(return_X_y=True, as_frame=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
booster = GradientBoostingRegressor(n_estimators=100, max_depth=2, learning_rate=0.05,
                                    random_state=0)

selector = ShapleyR2Importance(booster, threshold="mean").fit(X_train, y_train)
result = selector.decomposition_
print(f"{type(booster).__name__}: R^2 on the {result.n_rows} training rows, "
      f"decomposed by feature ({result.mode} mode)\n")
print(result)
print("\nAs a DataFrame (fraction = share / score):\n")
print(result.to_frame().round(4))
print(f"\nselected (share >= mean = {selector.threshold_:.4f}), by rank: "
      f"{result.to_frame().index[:selector.get_support().sum()].tolist()}")

# %%
# The same fitted model on held-out rows
# --------------------------------------
# R² is lower on rows the model has not seen, and the part no feature
# receives is no longer exactly 0.

held_out = selector.decompose(X_test, y_test)
print(f"Held-out ({held_out.n_rows} rows): model R^2 {held_out.score:.4f}, "
      f"sum of shares {held_out.shares.sum():.4f}, "
      f"unattributed {held_out.unattributed:+.1e}")
print(held_out.to_frame().head(4).round(4))

# %%
# Selection inside a pipeline
# ---------------------------
# The selector keeps the features with the largest shares (``max_features``;
# ``threshold=-inf`` selects on the count only) and a ridge regression is
# fitted on them. 5-fold cross-validated R² of the whole pipeline (the
# importances are recomputed on every training fold) against the number of
# features kept:

folds = KFold(n_splits=5, shuffle=True, random_state=0)
print("Pipeline(ShapleyR2Importance(max_features=k), StandardScaler, RidgeCV):")
print(f"{'k':>3} {'CV R^2':>8}  features kept when fitted on all rows")
for k in (1, 2, 3, 4, 6, 10):
    pipeline = make_pipeline(
        ShapleyR2Importance(booster, threshold=-np.inf, max_features=k),
        StandardScaler(),
        RidgeCV(alphas=np.logspace(-3, 3, 13)),
    )
    score = cross_val_score(pipeline, X, y, cv=folds, scoring="r2").mean()
    kept = pipeline.fit(X, y)[0].get_feature_names_out().tolist()
    print(f"{k:>3} {score:>8.4f}  {kept}")

# %%
# Cross-fitted importances
# ------------------------
# With ``cv=5`` each fold's model is decomposed on the rows it was not
# fitted on, and the held-out rows of the 5 folds are pooled: the standard
# error is the spread of the rows' terms (each scaled to its fold) over
# sqrt(n). A negative value means the feature makes held-out predictions
# worse.

cross_fitted = ShapleyR2Importance(booster, cv=5).fit(X, y)
print("Cross-fitted shares (cv=5), mean over folds +/- standard error:")
order = np.argsort(-cross_fitted.feature_importances_, kind="mergesort")
for j in order:
    print(f"  {X.columns[j]:<4} {cross_fitted.feature_importances_[j]:>7.4f} "
          f"+/- {cross_fitted.std_errors_[j]:.4f}")
support = cross_fitted.get_support()
print(f"held-out model R^2 (mean over folds) {cross_fitted.score_:.4f}; selected, by rank: "
      f"{[X.columns[j] for j in order if support[j]]}")

# %%
# The bar chart
# -------------
# ``result.plot()`` draws the shares, largest on top, with ±1 standard error (over
# the rows) as error bars; the title names the model and its R².

ax = result.plot()
ax.figure.tight_layout()
if args.output:
    ax.figure.savefig(args.output, dpi=120)
    print(f"plot saved to {args.output}")
plt.show()
