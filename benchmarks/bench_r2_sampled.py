"""The R^2 decomposition of a model too large for exact values: ``algorithm="auto"``.

A default ``RandomForestRegressor()`` (100 fully grown trees) fitted on 5,000
rows of Friedman-1 (p = 10; 5 informative features, noise 1): the R^2 shares
of 2,000 rows with ``r2_decomposition(..., algorithm="auto")`` on --threads
threads. Prints the cost estimate (exact and sampled), what "auto" chose,
the wall-clock time and the shares with their standard errors (total and
Monte Carlo part).

Then a check on a forest small enough for exact values (--check-trees trees,
max_depth --check-depth): exact against sampled shares, in Monte Carlo
standard errors. Usage::

    python benchmarks/bench_r2_sampled.py [--threads 2] [--rows 2000] [--no-check]
"""
import argparse
import os
import platform
import time
import warnings

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.ensemble import RandomForestRegressor

from sklearn_r2shap import SampledAlgorithmWarning, estimate_cost, r2_decomposition


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--fit-rows", type=int, default=5000)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--check-trees", type=int, default=20)
    parser.add_argument("--check-depth", type=int, default=8)
    parser.add_argument("--no-check", action="store_true")
    args = parser.parse_args()

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} "
          f"{os.getloadavg()[2]:.1f}; {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}")
    X, y = make_friedman1(n_samples=args.fit_rows, noise=1.0, random_state=0)
    start = time.perf_counter()
    model = RandomForestRegressor(n_estimators=args.trees, random_state=0,
                                  n_jobs=args.threads).fit(X, y)
    leaves = np.mean([e.tree_.n_leaves for e in model.estimators_])
    print(f"RandomForestRegressor(n_estimators={args.trees}) on {args.fit_rows} rows: "
          f"{leaves:.0f} leaves per tree, depth up to "
          f"{max(e.tree_.max_depth for e in model.estimators_)}, "
          f"fitted in {time.perf_counter() - start:.1f} s")
    Xd, yd = X[:args.rows], y[:args.rows]
    cost = estimate_cost(model, Xd, n_jobs=args.threads)
    print(cost)

    start, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", SampledAlgorithmWarning)
        result = r2_decomposition(model, Xd, yd, algorithm="auto", n_jobs=args.threads,
                                  random_state=0)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    # on a shared machine the wall time grows with the load; CPU time / threads
    # is the wall time the same work takes on idle cores
    print(f"algorithm='auto' ran {result.algorithm!r} in {elapsed:.1f} s wall, {cpu:.1f} s CPU "
          f"(CPU / {args.threads} threads = {cpu / args.threads:.1f} s; load average now "
          f"{os.getloadavg()[0]:.1f})")
    for w in caught:
        print(f"  warning: {w.message}")
    print(result)
    print("Monte Carlo part of the standard errors:",
          np.array2string(result.mc_std_errors, precision=5)
          if result.mc_std_errors is not None else None)

    if args.no_check:
        return
    small = RandomForestRegressor(n_estimators=args.check_trees, max_depth=args.check_depth,
                                  random_state=0, n_jobs=args.threads).fit(X, y)
    Xc, yc = X[:500], y[:500]
    start = time.perf_counter()
    exact = r2_decomposition(small, Xc, yc, algorithm="exact", n_jobs=args.threads)
    t_exact = time.perf_counter() - start
    start = time.perf_counter()
    est = r2_decomposition(small, Xc, yc, algorithm="sampled", n_jobs=args.threads,
                           random_state=0)
    t_sampled = time.perf_counter() - start
    z = (est.shares - exact.shares) / est.mc_std_errors
    print(f"\ncheck: RandomForestRegressor({args.check_trees} trees, max_depth="
          f"{args.check_depth}), 500 rows: exact {t_exact:.1f} s, sampled {t_sampled:.1f} s")
    print("  exact   ", np.array2string(exact.shares, precision=4))
    print("  sampled ", np.array2string(est.shares, precision=4))
    print("  (sampled - exact) / mc_std_errors", np.array2string(z, precision=2))


if __name__ == "__main__":
    main()
