"""``python -m sklearn_r2shap``: decompose the R^2 of a gradient boosting model
of the diabetes data shipped with scikit-learn into exact per-feature shares
with standard errors, in sample and cross-fitted on held-out folds.

Needs only the package's own dependencies (NumPy, SciPy, scikit-learn): the
data are read as arrays, not as a pandas DataFrame.

Layer: the package root (a command-line demonstration of the public API).
"""
import argparse
import sys
import time

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.model_selection import KFold

from ._estimators import ShapleyR2Importance
from ._report import shares_table


def _table(names, shares, errors, score):
    return "\n".join(shares_table(names, shares, errors, score, score - float(np.sum(shares))))


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m sklearn_r2shap", description=__doc__)
    parser.add_argument("--n-estimators", type=int, default=100)
    parser.add_argument("--max-depth", type=int, default=3)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--n-jobs", type=int, default=None)
    args = parser.parse_args(argv)

    data = load_diabetes()
    X, y, names = data.data, data.target, list(data.feature_names)
    model = GradientBoostingRegressor(n_estimators=args.n_estimators, max_depth=args.max_depth,
                                      learning_rate=0.05, random_state=0)
    print(f"GradientBoostingRegressor(n_estimators={args.n_estimators}, "
          f"max_depth={args.max_depth}, learning_rate=0.05, random_state=0)\non the diabetes "
          f"data: {X.shape[0]} rows, {X.shape[1]} features.")
    print("A feature's share is its exact Shapley share of the model's score, here "
          "R2 = 1 - SS(y - f(X)) / SS(y - mean(y));\nthe shares and the unattributed part "
          "add up to the score.\n")

    start = time.perf_counter()
    selector = ShapleyR2Importance(model, n_jobs=args.n_jobs).fit(X, y)
    seconds = time.perf_counter() - start
    result = selector.decomposition_
    print(f"1. In sample: fitted on all {X.shape[0]} rows and decomposed on the same rows "
          f"({seconds:.2f} s)")
    print(_table(names, result.shares, result.std_errors, float(result.score)))
    print("std.err: standard error of the share over the rows (rows treated as independent).\n"
          "% of R2: share / score.")

    cv = KFold(args.folds, shuffle=True, random_state=0)
    crossed = ShapleyR2Importance(model, cv=cv, n_jobs=args.n_jobs).fit(X, y)
    n_rows = X.shape[0]
    print(f"\n2. Cross-fitted ({args.folds} folds): each fold's model is fitted on the other "
          f"folds and\n   decomposed on the held-out fold; values pool the held-out rows of "
          f"the {args.folds} folds\n   (the folds' values weighted by their numbers of rows)")
    print(_table(names, crossed.feature_importances_, crossed.std_errors_, float(crossed.score_)))
    print(f"std.err: standard deviation over the {n_rows} held-out rows of each row's term "
          f"(its part of\n  the share, scaled to its fold) / sqrt({n_rows}).\n"
          "% of R2: share / score (the held-out R2 of the folds, weighted by their rows).\n"
          "In sample the model has seen the rows it is scored on and is partly fitted to "
          "their noise;\ncross-fitted R^2 is measured on held-out rows only: lower, an "
          "estimate for new data.\nA negative share means the feature makes the held-out fit "
          "worse (its splits fit noise).\nThe unattributed part is not exactly 0 on held-out "
          "rows: the trees' means there differ from\nthe mean of y (constant terms no "
          "feature receives).")

    order = np.argsort(-crossed.feature_importances_, kind="mergesort")
    support = crossed.get_support()
    selected = [names[j] for j in order if support[j]]
    print(f"\nselected, by rank (cross-fitted share >= their mean, {crossed.threshold_:.4f}): "
          f"{', '.join(selected)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
