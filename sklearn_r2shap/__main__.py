"""``python -m sklearn_r2shap``: decompose the R^2 of a gradient boosting model
of the diabetes data shipped with scikit-learn into exact per-feature shares
(Q-SHAP), in sample and cross-fitted on held-out folds."""
import argparse
import sys
import time


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

    X, y = load_diabetes(return_X_y=True, as_frame=True)
    model = GradientBoostingRegressor(n_estimators=args.n_estimators, max_depth=args.max_depth,
                                      learning_rate=0.05, random_state=0)
    print(f"GradientBoostingRegressor({args.n_estimators} trees, depth {args.max_depth}) on the "
          f"diabetes data: {X.shape[0]} rows, {X.shape[1]} features\n")

    start = time.perf_counter()
    selector = ShapleyR2Importance(model, n_jobs=args.n_jobs).fit(X, y)
    seconds = time.perf_counter() - start
    print(f"In sample (fit and decomposition in {seconds:.2f} s): R2_j with standard errors")
    print(selector.decomposition_)

    cv = KFold(args.folds, shuffle=True, random_state=0)
    crossed = ShapleyR2Importance(model, cv=cv, n_jobs=args.n_jobs).fit(X, y)
    print(f"\nCross-fitted ({args.folds} folds: fit on the training folds, decompose on the "
          "held-out fold, average)")
    order = crossed.feature_importances_.argsort()[::-1]
    print(f"{'feature':<12} {'R2_j':>9} {'std.err':>9}")
    for j in order:
        print(f"{X.columns[j]:<12} {crossed.feature_importances_[j]:>9.4f} "
              f"{crossed.importances_std_[j]:>9.4f}")
    print(f"{'sum':<12} {crossed.feature_importances_.sum():>9.4f}")
    print(f"{'unattributed':<12} {crossed.r2_unattributed_:>9.4f}")
    print(f"{'model R2':<12} {crossed.r2_:>9.4f}")
    print(f"\nselected (R2_j >= mean): {', '.join(crossed.get_feature_names_out())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
