"""The exact R^2 kernel's two methods on the same trees: leaf-pair tables
(the default) against the pair walk (``method="walk"``, the kernel before
the tables), one thread, same rows and game coefficients.

Models as in ``bench_r2.py --equal-threads-only`` (XGBoost depth 6 and 8,
LightGBM 255 leaves; 100 trees fitted on 2000 rows x 20 features), LightGBM
with 255 leaves and ``min_child_samples=5`` (every tree 255 leaves, tables
of 10-60 MB built in blocks), a random forest of depth 8 on Friedman-1 and
a default random forest (full depth, 10 trees). Times are CPU seconds of
``_qshap.r2_terms`` alone on --rows rows, best of --repeat; the ratio is
measured in one run, the values are compared element by element.

Usage: ``python benchmarks/bench_r2_kernel.py [--rows 200] [--repeat 3] [--only NAME]``
"""
import argparse
import platform
import time
from dataclasses import replace

import numpy as np

from bench_r2 import fit_lightgbm, fit_xgboost, make_data


def main():
    import lightgbm as lgb
    from sklearn.datasets import make_friedman1
    from sklearn.ensemble import RandomForestRegressor

    from sklearn_r2shap._kernels import _qshap
    from sklearn_r2shap._model import to_ensemble
    from sklearn_r2shap._numerics import _gauss_legendre

    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--only", default=None, help="the models whose name contains this")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    X, y = make_data(rng, 2000)
    Xf, yf = make_friedman1(2000, noise=1.0, random_state=0)
    models = [
        ("XGBRegressor, max_depth 6, 100 trees", fit_xgboost(X, y, 6, 100, 1), X),
        ("LGBMRegressor, num_leaves 255, 100 trees", fit_lightgbm(X, y, 255, 100, 1), X),
        ("XGBRegressor, max_depth 8, 100 trees", fit_xgboost(X, y, 8, 100, 1), X),
        ("LGBMRegressor, num_leaves 255, min_child_samples 5, 100 trees",
         lgb.LGBMRegressor(n_estimators=100, num_leaves=255, min_child_samples=5,
                           learning_rate=0.1, n_jobs=1, verbose=-1, random_state=0).fit(X, y),
         X),
        ("RandomForestRegressor(max_depth=8), 20 trees, Friedman-1",
         RandomForestRegressor(20, max_depth=8, random_state=0).fit(Xf, yf), Xf),
        ("RandomForestRegressor(), 10 trees", RandomForestRegressor(10, random_state=0).fit(X, y),
         X),
    ]
    if args.only:
        models = [case for case in models if args.only in case[0]]
    print(f"# {platform.node()} | {platform.machine()} | {args.rows} rows, 1 thread, "
          f"CPU time, best of {args.repeat}")
    print("| model | trees taking tables | tables ms/row | walk ms/row | walk / tables "
          "| max rel diff |")
    print("|---|---|---|---|---|---|")
    for name, model, data in models:
        ens = to_ensemble(model)
        ens = replace(ens, tree_output=np.zeros(ens.n_trees, dtype=np.int64))
        rows = np.ascontiguousarray(data[:args.rows])
        coef = np.random.default_rng(1)
        square = coef.uniform(0.5, 1.5, size=(len(rows), ens.n_trees))
        linear = coef.normal(size=(len(rows), ens.n_trees))
        nodes, weights = _gauss_legendre(ens.n_path_features)
        points, weights = (nodes + 1.0) / 2.0, weights / 2.0
        taken = _qshap._PairTables(ens, ens.n_path_features).by_pairs.mean()
        seconds, values = {}, {}
        for method in ("auto", "walk"):
            best = np.inf
            for _ in range(args.repeat):
                start = time.process_time()
                values[method] = _qshap.r2_terms(ens, rows, square, linear, points, weights, 1,
                                                 method=method)
                best = min(best, time.process_time() - start)
            seconds[method] = best / len(rows)
        diff = np.abs(values["auto"] - values["walk"]).max() / np.abs(values["walk"]).max()
        print(f"| {name} | {taken:.0%} | {seconds['auto'] * 1e3:.2f} "
              f"| {seconds['walk'] * 1e3:.2f} | {seconds['walk'] / seconds['auto']:.2f}x "
              f"| {diff:.1e} |", flush=True)


if __name__ == "__main__":
    main()
