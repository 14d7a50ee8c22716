"""
How many features? A test on held-out shares and the one-standard-error elimination
===================================================================================

This example shows, on the diabetes data with noise columns added, which
features a test on held-out shares of R² selects with the false discoveries
under control, how many features a cross-validated elimination keeps (its
curve and the point the one-standard-error rule chooses), and what the usual
selectors chose on the same kind of data in the project's recorded
benchmark.

The two questions and the two answers:

* *Which features carry signal, with the false ones under control?*
  :class:`~sklearn_r2shap.ShapleyR2Importance` with ``test="fdr"``
  tests H0: share_j <= 0 for each feature on cross-fitted shares (each row
  explained by the fold model that did not see it) and keeps the features
  that Benjamini-Hochberg rejects at level ``alpha``.
* *How many features do I need?* :class:`~sklearn_r2shap.ShapleyR2RFECV`
  eliminates features by their shares inside each fold, scores every step
  on the fold's held-out rows, and keeps the fewest features whose mean
  score is within one standard error of the best.

The noise columns are row-permuted copies of the real ones: the same
distributions, no relation to the target. The table at the end is read from
``benchmarks/results/selection.json``, written by
``benchmarks/bench_selection.py`` (LightGBM, 200 trees, the peers in their
own environments); it is not recomputed here. Run
``python examples/how_many_features.py [--results PATH] [--quick]``
(``--quick``: 3 folds instead of 5, a smoke test). Needs pandas and matplotlib.
"""

import argparse
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from sklearn.datasets import load_diabetes
from sklearn.ensemble import GradientBoostingRegressor

from sklearn_r2shap import ShapleyR2Importance, ShapleyR2RFECV

# sphinx-gallery runs the examples from their folder, without __file__
HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
parser = argparse.ArgumentParser(description="How many features?")
parser.add_argument("--results", default=str(HERE.parent / "benchmarks" / "results"
                                             / "selection.json"),
                    help="the benchmark's recorded results (JSON)")
parser.add_argument("--quick", action="store_true", help="3 folds instead of 5")
args = parser.parse_args()
n_folds = 3 if args.quick else 5

# %%
# The data: 10 real features and 10 row-permuted copies
# -----------------------------------------------------

X, y = load_diabetes(return_X_y=True, as_frame=True)
rng = np.random.default_rng(0)
noise = X.apply(lambda column: column.to_numpy()[rng.permutation(len(X))])
noise.columns = [f"noise_{name}" for name in X.columns]
X = pd.concat([X, noise], axis=1)
model = GradientBoostingRegressor(n_estimators=50, max_depth=2, learning_rate=0.1,
                                  random_state=0)
print(X.shape)

# %%
# Which features carry signal? The test on held-out shares
# --------------------------------------------------------
# Five folds (three with ``--quick``): each row's share terms come from the
# model that did not see it; a feature is kept when Benjamini-Hochberg
# rejects share_j <= 0 at alpha = 0.1. A noise column's held-out share has
# expectation at most zero.

test = ShapleyR2Importance(model, test="fdr", alpha=0.1, cv=n_folds).fit(X, y)
table = pd.DataFrame({"held-out share": test.feature_importances_, "z": test.scores_,
                      "p-value": test.pvalues_, "selected": test.get_support()},
                     index=X.columns).sort_values("p-value")
print(table.head(12).round(4).to_string())
print("selected:", list(test.get_feature_names_out()))
print("noise columns selected:", int(table.loc[noise.columns, "selected"].sum()))

# %%
# How many features? The elimination curve and the one-SE choice
# ---------------------------------------------------------------
# In each fold the features are eliminated by their shares on the fold's
# training rows and every step is scored on its held-out rows; the number
# of features is the fewest within one standard error of the best mean.

elimination = ShapleyR2RFECV(model, cv=n_folds).fit(X, y)
results = elimination.cv_results_
best = int(results["n_features"][np.argmax(results["mean_test_score"])])
print(f"one-SE rule: {elimination.n_features_} features "
      f"{list(elimination.get_feature_names_out())}; best mean score at {best} features")
elimination.plot()
plt.tight_layout()
plt.show()

# %%
# The usual selectors beside ours (recorded benchmark)
# ----------------------------------------------------
# Means over seeds of the benchmark's run on diabetes with 40 row-permuted
# copies and on breast cancer with 30 (70 % of the rows to select, the
# LightGBM model refitted on the kept features and scored on the other
# 30 %). "kept" is real / noise columns; the number of seeds is given since
# the slow peers ran on fewer. ``r2shap_*`` are this package's selectors.

with open(args.results, encoding="utf-8") as handle:
    recorded = json.load(handle)
for name in ("diabetes", "breast_cancer"):
    rows = recorded["summary"].get(name, {})
    metric = "AUC" if recorded["datasets"][name]["task"] == "classification" else "R2"
    frame = pd.DataFrame({
        "seeds": {m: r["seeds"] for m, r in rows.items()},
        "kept (real / noise)": {m: f"{r['tp']:.1f} / {r['fp']:.1f}" for m, r in rows.items()},
        "F1": {m: r["f1"] for m, r in rows.items()},
        f"held-out {metric}": {m: r["score"] for m, r in rows.items()},
        "seconds": {m: r["time"] for m, r in rows.items()},
    }).dropna().sort_values("F1", ascending=False)
    print(f"\n{name} (all features: {np.mean(recorded['all_features_score'][name]):.3f})")
    print(frame.round(3).to_string())
