"""
Feature shares of a classifier's D^2 (breast cancer, wine)
==========================================================

This example splits a classifier's D^2 into exact per-feature shares, sets
them beside permutation importance, and selects features with them.

R^2 has a generalisation that scikit-learn already names, D^2 = 1 - L(model) /
L(best constant) (``d2_log_loss_score``, ``d2_brier_score``). This example
splits it into exact per-feature Shapley shares with
:func:`sklearn_r2shap.r2_decomposition` and :class:`sklearn_r2shap.ShapleyR2Importance`:

1. a boosted classifier of the breast-cancer data: its log-loss D^2 on
   held-out rows, split by feature (second-order games, the remainder shown
   as "unattributed"), with standard errors;
2. the same score's permutation importance (``sklearn.inspection``) next to
   the shares: both measure what a feature contributes to the log-loss, the
   shares add up to the model's D^2, the permutation drops do not, and they
   rank correlated features differently (shown below);
3. feature selection in a :class:`~sklearn.pipeline.Pipeline` with
   cross-fitted shares (``cv=5``, stratified folds) in front of a logistic
   regression, cross-validated against the number of features kept;
4. a random forest of the wine data (3 classes): its Brier D^2 split
   exactly, one squared-error game per class.

Run ``python examples/d2_classifiers.py [--quick]``. Needs pandas and matplotlib.
This page shows the ``--quick`` run (20 trees, 3 permutation repeats, 3 folds).
"""
import argparse

import matplotlib.pyplot as plt

import numpy as np
from sklearn.datasets import load_breast_cancer, load_wine
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier
from sklearn.inspection import permutation_importance
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import d2_brier_score, d2_log_loss_score, make_scorer
from sklearn.model_selection import cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_r2shap import ShapleyR2Importance, r2_decomposition


parser = argparse.ArgumentParser(description="D^2 shares of classifiers")
parser.add_argument("--quick", action="store_true", help="fewer trees and repeats")
args = parser.parse_args()
n_iter = 20 if args.quick else 100
n_repeats = 3 if args.quick else 10

# %%
# 1. Log-loss D^2 of a boosted classifier, split by feature
# ---------------------------------------------------------
X, y = load_breast_cancer(return_X_y=True, as_frame=True)
y = np.where(y == 1, "benign", "malignant")  # string labels work as they are
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, stratify=y,
                                                    random_state=0)
model = HistGradientBoostingClassifier(max_iter=n_iter, learning_rate=0.1, max_depth=3,
                                       random_state=0).fit(X_train, y_train)
result = r2_decomposition(model, X_test, y_test)
print(f"{type(model).__name__} on {result.n_rows} held-out rows: "
      f"{result.score_label} = {result.score:.4f}")
print(f"scikit-learn's d2_log_loss_score: "
      f"{d2_log_loss_score(y_test, model.predict_proba(X_test)):.4f}\n")
print(result.to_frame().head(8).round(4))
print(f"\nsum of shares {result.shares.sum():.4f} + unattributed "
      f"{result.unattributed:.4f} = D^2 {result.score:.4f}")

# %%
# 2. Permutation importance of the same score
# -------------------------------------------
# The drop in D^2 when a column is shuffled. It is sampled, and the drops
# need not add up to anything.
scorer = make_scorer(d2_log_loss_score, response_method="predict_proba")
permuted = permutation_importance(model, X_test, y_test, scoring=scorer,
                                  n_repeats=n_repeats, random_state=0)
frame = result.to_frame(sort=False)
frame["permutation"] = permuted.importances_mean
frame = frame.sort_values("share", ascending=False)
print("\nShapley share of D^2 vs permutation drop of D^2 (top 8):")
print(frame[["share", "std_error", "permutation"]].head(8).round(4))
ranks = frame[["share", "permutation"]].rank().corr().iloc[0, 1]
print(f"rank correlation over all {len(frame)} features: {ranks:.2f}; "
      f"sum of permutation drops {frame['permutation'].sum():.4f} vs D^2 {result.score:.4f}")

# %%
# Why the two disagree: correlated features
# -----------------------------------------
# Many of the 30 breast-cancer features measure the same thing (radius,
# perimeter and area of the same nuclei, their "mean" and "worst" values).
# A Shapley share averages what a feature adds over every coalition of the
# others, including those where its correlated twin is absent, so twins
# split the signal they carry together. The permutation drop of one column
# is what it adds while its twin is still in place: little, as the twin
# carries the same signal. Permuting the twins *together* (the same row
# shuffle for both) removes the shared signal, and its drop is far larger
# than the sum of the single drops.
def joint_drop(columns, repeats):
    """Mean drop of D^2 when ``columns`` are shuffled together (one row order)."""
    base = d2_log_loss_score(y_test, model.predict_proba(X_test))
    rng = np.random.default_rng(0)
    drops = []
    for _ in range(repeats):
        shuffled = X_test.copy()
        order = rng.permutation(len(X_test))
        shuffled[columns] = X_test[columns].to_numpy()[order]
        drops.append(base - d2_log_loss_score(y_test, model.predict_proba(shuffled)))
    return float(np.mean(drops))


gap = (frame["share"] - frame["permutation"]).sort_values(ascending=False)
feature = gap.index[0]  # the largest share the permutation drop does not see
correlation = X_test.corr()[feature].drop(feature)
twin = correlation.abs().idxmax()
pair = [feature, twin]
print(f"\nLargest share not seen by permutation: {feature!r}; its most correlated "
      f"feature: {twin!r} (r = {correlation[twin]:.2f})")
print(frame.loc[pair, ["share", "permutation"]].round(4))
print(f"sum of their shares {frame.loc[pair, 'share'].sum():.4f}; sum of their single "
      f"permutation drops {frame.loc[pair, 'permutation'].sum():.4f}; drop when both are "
      f"shuffled together {joint_drop(pair, n_repeats):.4f}")

# %%
# 3. Selection in a Pipeline with cross-fitted shares
# ---------------------------------------------------
# ``cv=5`` fits the classifier on each training fold (stratified) and
# splits D^2 on the rows it did not see.
n_folds = 3 if args.quick else 5
print(f"\nPipeline: ShapleyR2Importance(cv={n_folds}) -> logistic regression, "
      f"{n_folds}-fold accuracy by features kept")
for k in (2, 5) if args.quick else (2, 5, 10):
    pipe = make_pipeline(
        ShapleyR2Importance(HistGradientBoostingClassifier(max_iter=n_iter // 2,
                                                           random_state=0),
                            cv=n_folds, max_features=k, threshold=-np.inf),
        StandardScaler(), LogisticRegression(max_iter=1000))
    scores = cross_val_score(pipe, X, y, cv=n_folds)
    print(f"  {k:2d} features: accuracy {scores.mean():.3f} +- {scores.std():.3f}")
selector = ShapleyR2Importance(HistGradientBoostingClassifier(max_iter=n_iter // 2,
                                                             random_state=0),
                               cv=n_folds, max_features=5, threshold=-np.inf).fit(X, y)
print(f"kept on all rows: {selector.get_feature_names_out().tolist()}")

# %%
# 4. Brier D^2 of a random forest, three classes
# ----------------------------------------------
# A forest averages leaf probabilities, so the Brier score is quadratic in
# its trees and the split is exact (symmetric mode, as for regression forests).
X, y = load_wine(return_X_y=True, as_frame=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.4, stratify=y,
                                                    random_state=0)
forest = RandomForestClassifier(n_estimators=20 if args.quick else 100, max_depth=4,
                                random_state=0).fit(X_train, y_train)
brier = r2_decomposition(forest, X_test, y_test)
print(f"\n{type(forest).__name__} on wine ({brier.n_rows} held-out rows, "
      f"{brier.mode} mode)")
print(brier)
print(f"scikit-learn's d2_brier_score: "
      f"{d2_brier_score(y_test, forest.predict_proba(X_test)):.4f}")

# %%
# The shares with standard errors
# --------------------------------
result.plot(max_features=10)
plt.tight_layout()
plt.show()
