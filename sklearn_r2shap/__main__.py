"""``python -m sklearn_r2shap``: explain a gradient boosting model of the
diabetes data shipped with scikit-learn and print a table of mean |SHAP|."""
import argparse
import sys
import time

import numpy as np


def main(argv=None):
    from sklearn.datasets import load_diabetes
    from sklearn.ensemble import GradientBoostingRegressor

    from . import shap_values

    parser = argparse.ArgumentParser(prog="python -m sklearn_r2shap", description=__doc__)
    parser.add_argument("--n-estimators", type=int, default=200)
    parser.add_argument("--max-depth", type=int, default=3)
    parser.add_argument("--n-jobs", type=int, default=None)
    args = parser.parse_args(argv)

    data = load_diabetes()
    X, y, names = data.data, data.target, data.feature_names
    model = GradientBoostingRegressor(
        n_estimators=args.n_estimators, max_depth=args.max_depth, random_state=0
    ).fit(X, y)
    start = time.perf_counter()
    phi = shap_values(model, X, n_jobs=args.n_jobs)
    seconds = time.perf_counter() - start
    additivity = np.max(np.abs(phi.sum(axis=1) - model.predict(X)))

    print(f"GradientBoostingRegressor({args.n_estimators} trees, depth {args.max_depth}) "
          f"on the diabetes data: {X.shape[0]} rows, {X.shape[1]} features")
    print(f"exact path-dependent SHAP values in {seconds:.3f} s; "
          f"max |sum(SHAP) - prediction| = {additivity:.2e}")
    print(f"expected value (base): {phi[0, -1]:.3f}\n")
    importance = np.abs(phi[:, :-1]).mean(axis=0)
    order = np.argsort(-importance)
    print(f"{'feature':<10}{'mean |SHAP|':>14}{'share':>9}")
    for j in order:
        print(f"{names[j]:<10}{importance[j]:>14.3f}{importance[j] / importance.sum():>9.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
