"""ShapleyR2RFECV: rank by in-sample shares (ranking_cv=None) or by shares
cross-fitted inside each fold's training rows (ranking_cv=3)?

Two kinds of data, the same seeds for both variants:
- null: y independent of X (n rows x p columns, standard normal);
- friedman: make_friedman1 with 5 relevant columns and p - 5 noise columns.
Per variant: the number of features chosen, the chosen step's
cross-validated R^2 against the same features refitted on all rows and
scored on 5,000 fresh rows (the optimism: mean difference and its standard
error over seeds), on friedman the true-positive rate and false discovery
proportion, and the time (one thread everywhere).

    PYTHONPATH=. python benchmarks/bench_rfecv_ranking.py --seeds 12
"""
import argparse
import time

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.model_selection import KFold

from sklearn_r2shap import ShapleyR2RFECV


def data(kind, seed, n, p):
    rng = np.random.default_rng(seed)
    if kind == "null":
        return rng.normal(size=(n, p)), rng.normal(size=n)
    X, y = make_friedman1(n_samples=n, n_features=p, noise=1.0, random_state=seed)
    return X, y


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=12)
    parser.add_argument("--rows", type=int, default=300)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--data", nargs="+", default=["null", "friedman"],
                        choices=["null", "friedman"])
    parser.add_argument("--first-seed", type=int, default=0)
    args = parser.parse_args()
    model = HistGradientBoostingRegressor(max_iter=40, max_leaf_nodes=8, min_samples_leaf=10,
                                          random_state=0)
    print(f"HistGradientBoostingRegressor(max_iter=40, max_leaf_nodes=8, min_samples_leaf=10), "
          f"{args.rows} x {args.features}, cv=5, step=1, one_se, {args.seeds} seeds")
    for kind in args.data:
        for ranking_cv in (None, 3):
            chosen, diffs, tpr, fdp, seconds = [], [], [], [], 0.0
            for seed in range(args.first_seed, args.first_seed + args.seeds):
                X, y = data(kind, seed, args.rows, args.features)
                start = time.perf_counter()
                selector = ShapleyR2RFECV(model, cv=KFold(5, shuffle=True, random_state=seed),
                                          ranking_cv=ranking_cv, n_jobs=1).fit(X, y)
                seconds += time.perf_counter() - start
                at = selector.cv_results_["n_features"] == selector.n_features_
                cv_score = float(selector.cv_results_["mean_test_score"][at][0])
                X_new, y_new = data(kind, 10_000 + seed, 5000, args.features)
                fresh = selector.estimator_.score(X_new[:, selector.support_], y_new)
                diffs.append(cv_score - fresh)
                chosen.append(selector.n_features_)
                if kind == "friedman":
                    kept = np.flatnonzero(selector.support_)
                    tpr.append(np.mean(np.isin(np.arange(5), kept)))
                    fdp.append(np.mean(kept >= 5))
            diffs = np.array(diffs)
            line = (f"{kind:8s} ranking_cv={str(ranking_cv):4s} features {np.mean(chosen):5.2f} "
                    f"(min {min(chosen)}, max {max(chosen)})  cv - fresh R^2 "
                    f"{diffs.mean():+.4f} +/- {diffs.std(ddof=1) / np.sqrt(len(diffs)):.4f}  ")
            if kind == "friedman":
                line += f"TPR {np.mean(tpr):.3f} FDP {np.mean(fdp):.3f}  "
            print(line + f"time {seconds / args.seeds:.2f} s/fit", flush=True)


if __name__ == "__main__":
    main()
