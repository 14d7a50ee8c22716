"""
Exact SHAP values of a LightGBM model with linear leaves
========================================================

This example computes exact SHAP values of a LightGBM model with linear
leaves and checks that they add up to its predictions.

Friedman's regression problem #1 (``sklearn.datasets.make_friedman1``: ten
uniform features, of which x0..x4 matter: ``10 sin(pi x0 x1) + 20 (x2 - 0.5)^2
+ 10 x3 + 5 x4`` plus noise) is fitted twice with LightGBM: with ordinary
constant leaves and with linear leaves (``linear_tree=True``). The example
shows

1. the held-out R² of both models (with small trees, linear leaves fit the
   linear terms x3 and x4 that constant leaves approximate by steps);
2. the SHAP summary of both, mean \\|SHAP\\| per feature on the held-out rows:
   :func:`sklearn_r2shap.shap_values` for the constant-leaf model,
   :class:`~sklearn_r2shap.PiecewiseLinearExplainer` (covers and leaf means
   from the training data) for the linear-leaf one;
3. the check that the values add up: the largest difference between the
   SHAP values plus the expected value and LightGBM's own raw prediction,
   for both models.

LightGBM's own ``pred_contrib`` is not an alternative here: for a model
with linear leaves it raises "Predicting SHAP feature contributions is not
implemented for linear trees" (the test suite checks that it still does).

Run ``python examples/piecewise_linear_lightgbm.py [--quick]``. Needs
LightGBM and matplotlib.
"""

import argparse

import lightgbm as lgb
import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

from sklearn_r2shap import PiecewiseLinearExplainer, shap_values

parser = argparse.ArgumentParser(description="SHAP values of LightGBM linear trees")
parser.add_argument("--quick", action="store_true", help="fewer rows and trees")
args = parser.parse_args()

# %%
# Two LightGBM models: constant and linear leaves
# -----------------------------------------------
# Small trees (4 leaves): linear leaves fit the linear terms x3, x4 that
# constant leaves approximate by steps. ``n_jobs=1``: on data this small,
# LightGBM's threads only wait for each other.

n_samples, n_trees = (1000, 50) if args.quick else (4000, 100)
X, y = make_friedman1(n_samples=n_samples, n_features=10, noise=1.0, random_state=0)
names = [f"x{j}" for j in range(X.shape[1])]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

params = dict(n_estimators=n_trees, learning_rate=0.1, num_leaves=4, min_child_samples=20,
              n_jobs=1, verbose=-1, random_state=0)
constant = lgb.LGBMRegressor(**params).fit(X_train, y_train)
linear = lgb.LGBMRegressor(linear_tree=True, **params).fit(X_train, y_train)

print("Held-out R^2")
print(f"   constant leaves: {r2_score(y_test, constant.predict(X_test)):.4f}")
print(f"   linear leaves:   {r2_score(y_test, linear.predict(X_test)):.4f}")

# %%
# SHAP values of the held-out rows
# --------------------------------
# The piecewise-linear game needs the covers and each leaf's feature means:
# the explainer computes them from the data it is fitted on, the training
# data.

phi_constant = shap_values(constant, X_test)
explainer = PiecewiseLinearExplainer(linear, prefit=True).fit(X_train)
phi_linear = explainer.shap_values(X_test)

print("Mean |SHAP| on the held-out rows (raw output units)")
summary_constant = np.abs(phi_constant[:, :-1]).mean(axis=0)
summary_linear = np.abs(phi_linear[:, :-1]).mean(axis=0)
print(f"   {'feature':<8} {'constant':>10} {'linear':>10}")
order = np.argsort(-summary_linear, kind="mergesort")
for j in order:
    print(f"   {names[j]:<8} {summary_constant[j]:>10.4f} {summary_linear[j]:>10.4f}")
print(f"   {'expected':<8} {phi_constant[0, -1]:>10.4f} {phi_linear[0, -1]:>10.4f}")
noise = slice(5, 10)
print(f"   share of the noise features x5..x9: "
      f"{summary_constant[noise].sum() / summary_constant.sum():.1%} (constant), "
      f"{summary_linear[noise].sum() / summary_linear.sum():.1%} (linear)")

# %%
# Additivity
# ----------
# For every row, the SHAP values plus the expected value equal LightGBM's
# raw prediction, for the linear-leaf model as for the constant-leaf one.

raw_constant = constant.predict(X_test, raw_score=True)
raw_linear = linear.predict(X_test, raw_score=True)
error_constant = np.max(np.abs(phi_constant.sum(axis=1) - raw_constant))
error_linear = np.max(np.abs(phi_linear.sum(axis=1) - raw_linear))
print("Additivity: max |sum of SHAP values + expected value - raw prediction|")
print(f"   constant leaves: {error_constant:.2e}")
print(f"   linear leaves:   {error_linear:.2e}")
assert error_constant < 1e-9 and error_linear < 1e-9

# %%
# Mean \|SHAP\| per feature
# -------------------------
# Both models find the five features that matter; the linear leaves give
# the linear terms x3 and x4 their slope instead of a staircase.

fig, ax = plt.subplots(figsize=(6, 3.6))
positions = np.arange(len(order))[::-1]
ax.barh(positions + 0.2, summary_constant[order], height=0.4, label="constant leaves")
ax.barh(positions - 0.2, summary_linear[order], height=0.4, label="linear leaves")
ax.set_yticks(positions)
ax.set_yticklabels([names[j] for j in order])
ax.set_xlabel("mean |SHAP value| on held-out rows")
ax.set_title(f"LGBMRegressor ({n_trees} trees of 4 leaves), Friedman #1")
ax.legend()
fig.tight_layout()
plt.show()
