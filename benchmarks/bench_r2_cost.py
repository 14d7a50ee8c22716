"""``estimate_cost`` against the time ``r2_decomposition`` takes.

For each model, the estimate of both algorithms (``estimate_cost(model, X,
n_jobs=--threads)``) and the wall-clock time of ``r2_decomposition`` with
``algorithm="exact"`` and ``"sampled"`` on the same rows and threads (best
of --repeat); the ratio estimate / measured should be within a factor of
2 (on a machine shared with other work, the wall clock counts their time too:
the CPU time of the process divided by the threads is printed beside it,
and the ratio to it is what a quiet machine would show). Then the choice of ``algorithm="auto"`` (exact when the exact estimate is
at most ``exact_budget``, 120 s by default) against the choice the measured
exact time would give.

Models (20 standard normal features, bench_r2's target): LightGBM with 255
leaves, 100 trees, ``min_child_samples=5`` (2,000 rows; every tree takes
blocked leaf-pair tables), XGBoost depth 6 with 100 trees (2,000 rows), a
random forest of depth 8 with 100 trees (2,000 rows), and a default random
forest (full depth, about 1,300 leaves per tree), 20 trees, on --deep-rows
rows (its exact decomposition of 2,000 rows would take hours, which is why
"auto" samples it).

Usage: ``python benchmarks/bench_r2_cost.py [--threads 2] [--repeat 2]
[--rows 2000] [--deep-rows 32] [--only NAME]``
"""
import argparse
import os
import platform
import time
import warnings

import numpy as np

from bench_r2 import fit_lightgbm, fit_xgboost, make_data


def models(args, X, y):
    import lightgbm as lgb
    from sklearn.ensemble import RandomForestRegressor

    threads = args.threads
    yield ("LGBMRegressor, num_leaves 255, min_child_samples 5, 100 trees", args.rows,
           lambda: lgb.LGBMRegressor(n_estimators=100, num_leaves=255, min_child_samples=5,
                                     learning_rate=0.1, n_jobs=threads, verbose=-1,
                                     random_state=0).fit(X, y))
    yield ("XGBRegressor, max_depth 6, 100 trees", args.rows,
           lambda: fit_xgboost(X, y, 6, 100, threads))
    yield ("RandomForestRegressor(max_depth=8), 100 trees", args.rows,
           lambda: RandomForestRegressor(100, max_depth=8, n_jobs=threads,
                                         random_state=0).fit(X, y))
    yield ("RandomForestRegressor(), 20 trees (full depth)", args.deep_rows,
           lambda: RandomForestRegressor(20, n_jobs=threads, random_state=0).fit(X, y))


def timed(fn, repeat):
    """Best wall-clock seconds and best CPU seconds (all threads of this process)."""
    wall = cpu = np.inf
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - start)
        cpu = min(cpu, time.process_time() - start_cpu)
    return wall, cpu


def main():
    from sklearn_r2shap import estimate_cost, r2_decomposition, to_ensemble
    from sklearn_r2shap._execution.cost import DEFAULT_EXACT_BUDGET

    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--deep-rows", type=int, default=32)
    parser.add_argument("--only", default=None, help="run the models whose name contains this")
    args = parser.parse_args()
    X, y = make_data(np.random.default_rng(0), args.rows)
    fit_lightgbm(X[:200], y[:200], 7, 2, 1)  # imports, not timed
    print(f"# {platform.node()} | {platform.machine()} | {args.threads} threads | "
          f"load average {os.getloadavg()[0]:.1f} at the start")
    print("| model | rows | leaves / tree | exact: estimate s | wall s | CPU s / threads "
          "| ratio (wall, CPU) | sampled: estimate s | wall s | CPU s / threads "
          "| ratio (wall, CPU) | auto (estimate) | auto (measured) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name, n_rows, fit in models(args, X, y):
        if args.only and args.only not in name:
            continue
        model = fit()
        rows, target = X[:n_rows], y[:n_rows]
        ens = to_ensemble(model)
        leaves = float(np.sum(np.asarray(ens.children_left) < 0)) / ens.n_trees
        cost = estimate_cost(model, rows, n_jobs=args.threads)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exact = timed(lambda: r2_decomposition(model, rows, target, algorithm="exact",
                                                   n_jobs=args.threads), args.repeat)
            sampled = timed(lambda: r2_decomposition(model, rows, target, algorithm="sampled",
                                                     n_jobs=args.threads, random_state=0),
                            args.repeat)
        by_estimate = "exact" if cost.exact_seconds <= DEFAULT_EXACT_BUDGET else "sampled"
        by_time = "exact" if exact[0] <= DEFAULT_EXACT_BUDGET else "sampled"
        cells = []
        for estimate, (wall, cpu) in ((cost.exact_seconds, exact),
                                      (cost.sampled_seconds, sampled)):
            per_thread = cpu / args.threads
            cells.append(f"{estimate:.2f} | {wall:.2f} | {per_thread:.2f} "
                         f"| {estimate / wall:.2f}, {estimate / per_thread:.2f}")
        print(f"| {name} | {n_rows} | {leaves:.0f} | {cells[0]} | {cells[1]} | {by_estimate} "
              f"| {by_time} |", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
