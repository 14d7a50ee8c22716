"""
Interaction shares of R²: which pairs of features explain the score together
============================================================================

This example asks which pairs of features interact in a model, and gives
three answers side by side on data whose interaction is known.

The target is ``y = 20 x0 x1 + 10 x2 + noise`` with six independent features,
uniform on [-1, 1]: ``x0`` and ``x1`` act only through their product (on
average over the other, neither moves y: no main effect), ``x2`` acts
alone, and ``x3``, ``x4``, ``x5`` are noise. A gradient boosting model of
depth 3 is fitted to 3,000 rows, and the pairs are ranked by

(a) :func:`sklearn_r2shap.r2_interactions`: each pair's exact Shapley
    interaction share of the model's R² on the rows, with a standard error;
(b) Friedman's H-statistic, computed below in a few lines of numpy from
    partial dependence on a sample of 200 rows;
(c) the mean absolute SHAP interaction value of the pair over the rows
    (:func:`sklearn_r2shap.shap_interaction_summary`).

All three put (x0, x1) first; only (a) is a share of the score: the main
effects and the pairs' shares add up to R², so "about half of R² is the
interaction of x0 and x1" is a statement the numbers support (and it does
not change with the units of y). The example
times each answer on this run (the benchmark figures are in
``benchmarks/RESULTS.md``) and draws the heatmap of the shares
(``result.plot()``) beside that of mean absolute SHAP interaction values.

Run ``python examples/r2_interactions.py [--output PATH]`` (``--output``
also saves the figure as a PNG). Needs pandas and matplotlib.
"""

import argparse
import time

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.ensemble import GradientBoostingRegressor

from sklearn_r2shap import r2_decomposition, r2_interactions, shap_interaction_summary

parser = argparse.ArgumentParser(description="Interaction shares of R^2 beside the "
                                             "H-statistic and SHAP interaction values")
parser.add_argument("--output", default=None, help="also save the figure to this PNG file")
args = parser.parse_args()

# %%
# Data with a known interaction, and the model
# --------------------------------------------
rng = np.random.default_rng(0)
n_rows, n_features = 3000, 6
X = rng.uniform(-1, 1, size=(n_rows, n_features))
y = 20 * X[:, 0] * X[:, 1] + 10 * X[:, 2] + 2 * rng.normal(size=n_rows)
names = [f"x{j}" for j in range(n_features)]
model = GradientBoostingRegressor(n_estimators=200, max_depth=3, random_state=0).fit(X, y)
print(f"R^2 of the model on its {n_rows} training rows: {model.score(X, y):.4f}")

# %%
# Answer (a): interaction shares of R²
# ------------------------------------
# ``r2_interactions`` splits each feature's share of R² (as
# :func:`~sklearn_r2shap.r2_decomposition` reports it) into a main effect and
# its parts shared with every other feature: the SHAP interaction values of
# the game whose value is the R² of the model that knows a coalition of
# features, summed over the rows. ``result.shares`` is the
# (features x features) matrix ``S``: ``S[j, j]`` is feature j's main effect,
# ``S[j, k] + S[k, j]`` the pair's interaction share (``top_pairs``: with
# its standard error over the rows).
start = time.perf_counter()
result = r2_interactions(model, X, y)
seconds_shares = time.perf_counter() - start
print(result.top_pairs(5).round(4))
print("\nmain effects:", ", ".join(f"{name} {effect:.4f}"
                                    for name, effect in zip(names, result.main_effects)))

# %%
# The shares add up: each row of ``S`` sums to the feature's share of R², and
# the main effects, the pairs and the (here ~0) unattributed part to R².
S = result.shares
start = time.perf_counter()
shares = r2_decomposition(model, X, y).shares
seconds_plain = time.perf_counter() - start
pairs = result.pair_shares()[np.triu_indices(n_features, 1)]
print("largest |row sum of S - share of R^2|:", f"{np.max(np.abs(S.sum(axis=1) - shares)):.1e}")
print(f"main effects {result.main_effects.sum():.4f} + pairs {pairs.sum():.4f} "
      f"+ unattributed {result.unattributed:.1e} = {result.score:.4f} = R^2")

# %%
# Answer (b): Friedman's H-statistic
# ----------------------------------
# With centred partial dependence functions ``PD_j``, ``PD_k`` and ``PD_jk``,
# evaluated at the rows of a sample,
#
# ``H²_jk = sum_i [PD_jk(x_ij, x_ik) - PD_j(x_ij) - PD_k(x_ik)]² / sum_i PD_jk(x_ij, x_ik)²``,
#
# the fraction of the variance of the pair's joint partial dependence that is
# not additive. By brute force each partial dependence at the m sample rows
# averages the model over the m rows with the column(s) set: m² predictions
# per feature and per pair, so the sample is small (m = 200).
start = time.perf_counter()
sample = X[rng.choice(n_rows, size=200, replace=False)]
m = len(sample)


def partial_dependence(columns):
    """Centred PD of ``columns`` at each sample row's own values of them."""
    grid = np.repeat(sample[None], m, axis=0)  # [point, row, feature]
    grid[:, :, columns] = sample[:, None, columns]
    pd_values = model.predict(grid.reshape(-1, n_features)).reshape(m, m).mean(axis=1)
    return pd_values - pd_values.mean()


single = [partial_dependence([j]) for j in range(n_features)]
h2 = np.zeros((n_features, n_features))
for j in range(n_features):
    for k in range(j + 1, n_features):
        joint = partial_dependence([j, k])
        h2[j, k] = h2[k, j] = np.sum((joint - single[j] - single[k]) ** 2) / np.sum(joint ** 2)
seconds_h = time.perf_counter() - start

# %%
# Answer (c): mean absolute SHAP interaction value
# ------------------------------------------------
# ``shap_interaction_summary`` averages ``|Phi_jk|`` over the rows without
# keeping the (rows x features x features) array; a pair's interaction in a
# row is ``Phi_jk + Phi_kj = 2 Phi_jk``. These are in units of y: how much the
# pair moves each row's prediction, not how much of y it explains.
start = time.perf_counter()
summary = shap_interaction_summary(model, X)
seconds_shap = time.perf_counter() - start
mean_abs = 2 * summary.mean_abs[:n_features, :n_features]

# %%
# Three answers side by side
# --------------------------
# Every pair, sorted by its share of R². The share column and the main
# effects add up to R²; the H² column are fractions of a different quantity
# for every pair (each pair's own partial dependence), and mean absolute
# SHAP interaction is a size of prediction changes, in units of y.
j, k = np.triu_indices(n_features, 1)
table = pd.DataFrame({
    "share of R^2": result.pair_shares()[j, k],
    "std.err": 2 * result.std_errors[j, k],
    "H^2 (200 rows)": h2[j, k],
    "mean |SHAP int.|": mean_abs[j, k],
}, index=[f"{names[a]} x {names[b]}" for a, b in zip(j, k)])
table = table.sort_values("share of R^2", ascending=False)
print(table.round(4).to_string())
print("\ntop pair by each:",
      {column: table[column].idxmax() for column in
       ("share of R^2", "H^2 (200 rows)", "mean |SHAP int.|")})
noise = [f"{a} x {b}" for a in ("x3", "x4") for b in ("x4", "x5") if a < b]
both = ("x0 x x2", "x1 x x2")
print("H^2 of the pairs of noise features x3, x4, x5:",
      ", ".join(f"{table.loc[pair, 'H^2 (200 rows)']:.4f}" for pair in noise),
      "(their shares of R^2:",
      ", ".join(f"{table.loc[pair, 'share of R^2']:.4f}" for pair in noise) + ")")
print("H^2 of x0 x x2 and x1 x x2:",
      ", ".join(f"{table.loc[pair, 'H^2 (200 rows)']:.4f}" for pair in both),
      "(their shares of R^2:",
      ", ".join(f"{table.loc[pair, 'share of R^2']:.4f}" for pair in both) + ")")

# %%
# What the three numbers mean
# ---------------------------
# Only the first column is a share of the score. Its entries, plus the main
# effects, add up to the model's R²: the interaction of x0 and x1 holds about
# half of it and x2's main effect most of the rest, while x0 and x1 have
# almost no main effect (y does not depend on either alone). The pairs of
# noise features get shares of a few ten-thousandths, with standard errors:
# in sample the model fits a little noise with them.
#
# The H-statistic also puts (x0, x1) first, with H² near 1 (its partial
# dependence is all interaction), but it is not a share of anything common
# to the pairs: each H² divides by that pair's own partial dependence, so
# pairs of noise features, whose joint effect is tiny, get a larger H² than
# (x0, x2) and (x1, x2), whose shares of R² are more than ten times theirs (the
# lines printed above); the column does not add up to anything. It is also
# approximate (estimated on a sample, and in general from partial dependence
# at combinations of values the data may not contain) and quadratic in the
# rows of that sample.
#
# Mean absolute SHAP interaction ranks the pairs by how much they move the
# prediction, in units of y (in other units of y it scales with them; a
# share of R² does not), whether or not that movement fits y; its
# absolute values do not add up to the prediction, let alone to R².
#
# Time of this run
# ----------------
# Measured with ``time.perf_counter`` on this build's machine and load (the
# benchmark figures are in ``benchmarks/RESULTS.md``). ``r2_interactions``
# costs a few times the plain decomposition of the shares; the H-statistic's
# cost grows with the square of its sample and the number of pairs.
print("time of this run, in seconds:")
for label, seconds in [(f"r2_interactions, {n_rows} rows", seconds_shares),
                       (f"r2_decomposition, {n_rows} rows (shares only)", seconds_plain),
                       (f"H-statistic, {m} rows, {len(j)} pairs", seconds_h),
                       (f"shap_interaction_summary, {n_rows} rows", seconds_shap)]:
    print(f"  {label + ':':<46}{seconds:6.2f}")

# %%
# Heatmaps
# --------
# ``result.plot()`` draws the main effects on the diagonal and the pairs'
# whole shares of R² off it (in both cells of a pair); beside it,
# ``summary.plot()`` draws mean ``|Phi_jk|``, half of a pair's interaction in
# each cell, and the mean absolute main effects on the diagonal, in units
# of y.
fig, (ax_shares, ax_shap) = plt.subplots(1, 2, figsize=(12, 5))
result.plot(ax=ax_shares)
summary.plot(ax=ax_shap)
fig.tight_layout()
if args.output:
    fig.savefig(args.output, dpi=100, bbox_inches="tight")
    print("figure saved to", args.output)
plt.show()
