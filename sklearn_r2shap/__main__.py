"""``python -m sklearn_r2shap``: decompose the R^2 of a gradient boosting model
of the diabetes data shipped with scikit-learn into exact per-feature shares
(Q-SHAP), in sample and cross-fitted on held-out folds.

Needs only the package's own dependencies (NumPy, SciPy, scikit-learn): the
data are read as arrays, not as a pandas DataFrame.

Layer: the package root (a command-line demonstration of the public API).
"""
import argparse
import sys
import time

import numpy as np


def _table(names, values, errors, r2, width=12):
    lines = [f"{'feature':<{width}} {'R2_j':>9} {'std.err':>9} {'share':>7}"]
    for j in np.argsort(-values, kind="mergesort"):
        lines.append(f"{names[j]:<{width}} {values[j]:>9.4f} {errors[j]:>9.4f} "
                     f"{values[j] / r2:>7.1%}")
    lines.append(f"{'sum':<{width}} {values.sum():>9.4f}")
    lines.append(f"{'unattributed':<{width}} {r2 - values.sum():>9.4f}")
    lines.append(f"{'model R2':<{width}} {r2:>9.4f}")
    return "\n".join(lines)


def main(argv=None):
    from sklearn.datasets import load_diabetes
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.model_selection import KFold

    from . import ShapleyR2Importance

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
    print(f"GradientBoostingRegressor({args.n_estimators} trees, depth {args.max_depth}) on the "
          f"diabetes data: {X.shape[0]} rows, {X.shape[1]} features.")
    print("R2_j is feature j's exact Shapley share of the model's R^2 (Q-SHAP); the shares "
          "and the\nunattributed part add up to the model's R^2 = 1 - SS(y - f(X)) / "
          "SS(y - mean(y)).\n")

    start = time.perf_counter()
    selector = ShapleyR2Importance(model, n_jobs=args.n_jobs).fit(X, y)
    seconds = time.perf_counter() - start
    result = selector.decomposition_
    print(f"1. In sample: fitted on all {X.shape[0]} rows and decomposed on the same rows "
          f"({seconds:.2f} s)")
    print(_table(names, result.importances, result.std_errors, result.r2))
    print("std.err: standard error of R2_j over the rows (rows treated as independent).\n"
          "share: R2_j / model R2.")

    cv = KFold(args.folds, shuffle=True, random_state=0)
    crossed = ShapleyR2Importance(model, cv=cv, n_jobs=args.n_jobs).fit(X, y)
    print(f"\n2. Cross-fitted ({args.folds} folds): each fold's model is fitted on the other "
          f"folds and\n   decomposed on the held-out fold; values are the mean over the "
          f"{args.folds} folds")
    print(_table(names, crossed.feature_importances_, crossed.importances_std_, crossed.r2_))
    print(f"std.err: standard deviation of the {args.folds} fold values / sqrt({args.folds}).\n"
          "share: R2_j / model R2 (the mean held-out R^2).\n"
          "In sample the model has seen the rows it is scored on and is partly fitted to "
          "their noise;\ncross-fitted R^2 is measured on held-out rows only: lower, an "
          "estimate for new data.\nA negative R2_j means the feature makes the held-out fit "
          "worse (its splits fit noise).\nThe unattributed part is not exactly 0 on held-out "
          "rows: the trees' means there differ from\nthe mean of y (constant terms no "
          "feature receives).")

    order = np.argsort(-crossed.feature_importances_, kind="mergesort")
    support = crossed.get_support()
    selected = [names[j] for j in order if support[j]]
    print(f"\nselected, by rank (cross-fitted R2_j >= their mean, {crossed.threshold_:.4f}): "
          f"{', '.join(selected)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
