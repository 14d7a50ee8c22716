"""
SHAP interaction values of a gradient boosting model (diabetes data)
====================================================================

This example shows which pairs of features interact in a gradient boosting
model of the diabetes data, with a heat map of the mean absolute SHAP
interaction values and a dependence plot of the strongest feature coloured
by its strongest partner.

:func:`sklearn_r2shap.shap_interaction_values` returns, for every row, a
matrix whose off-diagonal entry ``[i, j]`` is half the interaction of
features ``i`` and ``j`` and whose diagonal holds each feature's main
effect; row ``i`` sums to the feature's SHAP value. The example

1. checks that the matrices add up to the SHAP values and the predictions;
2. draws the mean ``|interaction|`` over the patients as a heat map (main
   effects on the diagonal, the pair's total ``2 |Phi_ij|`` off it);
3. plots the SHAP value of the most important feature against its value,
   coloured by the feature it interacts with most, next to the same feature's
   main effect alone.

Run ``python examples/interaction_values.py [--output PATH]`` (``--output``
also saves the figure as a PNG). Needs matplotlib.
"""

import argparse

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.ensemble import HistGradientBoostingRegressor

from sklearn_r2shap import shap_interaction_values, shap_values

parser = argparse.ArgumentParser(description="SHAP interaction values (diabetes data)")
parser.add_argument("--output", default=None, help="also save the figure to this PNG file")
args = parser.parse_args()

# %%
# Interaction values of every patient
# -----------------------------------
# A HistGradientBoosting model of depth 4; the 442 matrices of 11 x 11
# numbers (10 features and the expected value) take 0.4 MB.
data = load_diabetes()
X, y, names = data.data, data.target, list(data.feature_names)
model = HistGradientBoostingRegressor(max_iter=150, max_depth=4, learning_rate=0.05,
                                      random_state=0).fit(X, y)
phi = shap_interaction_values(model, X)
print("shape:", phi.shape)
p = X.shape[1]
print("largest |row sum - SHAP value|:",
      f"{np.max(np.abs(phi.sum(axis=2) - shap_values(model, X))):.1e}")
print("largest |total - prediction|:",
      f"{np.max(np.abs(phi.sum(axis=(1, 2)) - model.predict(X))):.1e}")

# %%
# Mean absolute interaction
# -------------------------
# Off the diagonal, the pair's whole interaction ``Phi_ij + Phi_ji``.
strength = np.abs(phi[:, :p, :p]).mean(axis=0)
pairs = 2 * strength * (1 - np.eye(p))
i, j = np.unravel_index(np.argmax(pairs), pairs.shape)
print(f"strongest pair: {names[i]} x {names[j]} (mean |interaction| {pairs[i, j]:.2f})")
shown = np.where(np.eye(p, dtype=bool), strength, pairs)

fig, (ax_map, ax_dep) = plt.subplots(1, 2, figsize=(12, 5))
image = ax_map.imshow(shown, cmap="viridis")
ax_map.set_xticks(range(p), names, rotation=90)
ax_map.set_yticks(range(p), names)
ax_map.set_title("mean |SHAP interaction| (diagonal: main effects)")
fig.colorbar(image, ax=ax_map, shrink=0.8)

# %%
# Dependence plot coloured by the strongest partner
# -------------------------------------------------
# The SHAP value of the most important feature (dots) against its value, the
# colour the value of its strongest partner; crosses: its main effect alone.
top = int(np.argmax(np.abs(phi[:, :p, :p].sum(axis=2)).mean(axis=0)))
partner = int(np.argmax(pairs[top]))
print(f"most important feature: {names[top]}, strongest partner: {names[partner]}")
dots = ax_dep.scatter(X[:, top], phi[:, top, :p].sum(axis=1), c=X[:, partner], s=12,
                      cmap="coolwarm")
ax_dep.scatter(X[:, top], phi[:, top, top], marker="x", s=10, color="0.4", label="main effect")
ax_dep.set_xlabel(names[top])
ax_dep.set_ylabel(f"SHAP value of {names[top]}")
ax_dep.legend(loc="upper left")
fig.colorbar(dots, ax=ax_dep, shrink=0.8, label=names[partner])
fig.tight_layout()
if args.output:
    fig.savefig(args.output, dpi=100, bbox_inches="tight")
    print("figure saved to", args.output)
plt.show()
