"""R^2 decomposition: sklearn-r2shap's ``r2_decomposition`` against qshap 2.0.0.

qshap (GPL-2.0, https://pypi.org/project/qshap/) is only installed to be
benchmarked against (``pip install qshap==2.0.0``); sklearn-r2shap never
imports it. Both decompose, tree by tree, the same model's R^2 on the same
rows (y = x0 x1 + sin(3 x2) + x3^2 + noise, X standard normal, 20 features).

Threads: we run with ``n_jobs=--threads`` (default 2). qshap's C++ kernel is
single-threaded; its only parallelism is ``rsq(..., ncore=k)``, which splits
the rows over k worker processes. With the default "fork" start method those
workers hang once XGBoost's OpenMP threads have run in the parent, so the
script uses "forkserver". qshap is timed with 1 process and with --threads
processes (each time includes building qshap's ``gazer``, as ours includes
reading the model); the ratio uses the faster of the two. Ratios (qshap time
/ our time) measured in one run are what count on a shared, noisy machine.

Equal threads (``--equal-threads``): ours with one thread against qshap's
single process on the issue's three models (XGBoost depth 6 and depth 8,
LightGBM 255 leaves; 100 trees, --rows rows), each pair of runs back to
back so both see the same machine load; the target ratios (15x, 10x, 10x)
are printed beside the measured ones.

Deep LightGBM (``--deep-lightgbm ROWS``): only the issue's deep case,
LightGBM with 255 leaves, 100 trees and ``min_child_samples=5`` (every tree
has 255 leaves; their leaf-pair tables are 10-60 MB, which the kernel
builds in blocks), fitted on --rows rows and decomposed on the first ROWS of
them by ours on 1 thread and qshap on 1 process, back to back (qshap takes
about 3 s a row there, so ROWS is kept small; both times are linear in the
rows), target 10x.

Then our time alone as the rows (depth 6, 100 trees), the depth (100 trees,
2000 rows) and the number of trees (depth 6, 2000 rows) grow; a size whose
time, extrapolated linearly from the previous size, exceeds --max-seconds is
not run and its extrapolation is printed instead. Usage::

    python benchmarks/bench_r2.py [--threads 2] [--skip-slow] [--no-qshap]
                                  [--no-scaling] [--max-seconds 600] [--quick]
                                  [--equal-threads | --equal-threads-only]
                                  [--deep-lightgbm ROWS]
"""
import argparse
import multiprocessing
import platform
import time
import warnings

import numpy as np

N_FEATURES = 20


def make_data(rng, n_rows):
    X = rng.normal(size=(n_rows, N_FEATURES))
    y = X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + X[:, 3] ** 2 + 0.5 * rng.normal(size=n_rows)
    return X, y


def timed(fn, repeat, budget=10.0):
    """Best of up to ``repeat`` runs; a run longer than ``budget`` s is not repeated."""
    start = time.perf_counter()
    out = fn()
    best = time.perf_counter() - start
    for _ in range(repeat - 1):
        if best > budget:
            break
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best, out


def fit_xgboost(X, y, depth, trees, threads):
    import xgboost as xgb

    return xgb.XGBRegressor(n_estimators=trees, max_depth=depth, learning_rate=0.1,
                            tree_method="hist", n_jobs=threads, random_state=0).fit(X, y)


def fit_lightgbm(X, y, leaves, trees, threads):
    import lightgbm as lgb

    return lgb.LGBMRegressor(n_estimators=trees, num_leaves=leaves, learning_rate=0.1,
                             n_jobs=threads, verbose=-1, random_state=0).fit(X, y)


def leaves_per_tree(model):
    from sklearn_r2shap import to_ensemble

    ensemble = to_ensemble(model)
    return float(np.sum(ensemble.children_left < 0)) / ensemble.n_trees


def ours(model, X, y, threads):
    from sklearn_r2shap import r2_decomposition

    return r2_decomposition(model, X, y, n_jobs=threads, algorithm="exact").shares


def run_qshap(model, X, y, n_proc):
    from qshap import gazer

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(gazer(model).rsq(X, y, ncore=n_proc, progress_bar=False))


def compare(args, X, y):
    xgb_trees, xgb_many_trees, lgb_trees = args.trees
    cases = [  # (name, fit, slow)
        (f"XGBRegressor, max_depth 4, {xgb_trees} trees",
         lambda: fit_xgboost(X, y, 4, xgb_trees, args.threads), False),
        (f"XGBRegressor, max_depth 6, {xgb_trees} trees",
         lambda: fit_xgboost(X, y, 6, xgb_trees, args.threads), False),
        (f"XGBRegressor, max_depth 6, {xgb_many_trees} trees",
         lambda: fit_xgboost(X, y, 6, xgb_many_trees, args.threads), True),
        (f"LGBMRegressor, num_leaves 31, {lgb_trees} trees",
         lambda: fit_lightgbm(X, y, 31, lgb_trees, args.threads), False),
    ]
    rows = []
    for name, fit, slow in cases:
        model = fit()
        ours_t, ours_r2 = timed(lambda: ours(model, X, y, args.threads), args.repeat)
        qshap_t = {}
        diff = np.nan
        if not args.no_qshap and not (slow and args.skip_slow):
            for n_proc in args.qshap_procs:
                qshap_t[n_proc], theirs = timed(lambda: run_qshap(model, X, y, n_proc),
                                                args.repeat)
                diff = np.nanmax([diff, np.max(np.abs(theirs - ours_r2))])
        rows.append((name, leaves_per_tree(model), qshap_t, ours_t, diff))
        print(f"  done: {name}", flush=True)
    return rows


def equal_threads(args, X, y):
    """Ours on 1 thread against qshap on 1 process, interleaved per model."""
    cases = [  # (name, fit, target ratio)
        ("XGBRegressor, max_depth 6, 100 trees", lambda: fit_xgboost(X, y, 6, 100, 1), 15.0),
        ("LGBMRegressor, num_leaves 255, 100 trees", lambda: fit_lightgbm(X, y, 255, 100, 1),
         10.0),
        ("XGBRegressor, max_depth 8, 100 trees", lambda: fit_xgboost(X, y, 8, 100, 1), 10.0),
    ]
    if args.quick:
        cases = [("XGBRegressor, max_depth 6, 10 trees", lambda: fit_xgboost(X, y, 6, 10, 1),
                  15.0)]
    from sklearn_r2shap import to_ensemble

    rows = []
    for name, fit, target in cases:
        model = fit()
        ours_t, ours_r2 = timed(lambda: ours(model, X, y, 1), 1)
        qshap_t, theirs = timed(lambda: run_qshap(model, X, y, 1), 1)
        rows.append((name, leaves_per_tree(model), to_ensemble(model).n_path_features, ours_t,
                     qshap_t, target, float(np.max(np.abs(theirs - ours_r2)))))
        print(f"  done: {name}", flush=True)
    return rows


def deep_lightgbm(args, X, y):
    """Ours on 1 thread against qshap on 1 process, LightGBM 255 leaves with
    min_child_samples=5, on the first args.deep_lightgbm rows."""
    import lightgbm as lgb
    from sklearn_r2shap import to_ensemble

    model = lgb.LGBMRegressor(n_estimators=100, num_leaves=255, min_child_samples=5,
                              learning_rate=0.1, n_jobs=1, verbose=-1,
                              random_state=0).fit(X, y)
    rows, target = X[:args.deep_lightgbm], y[:args.deep_lightgbm]
    ours_t, ours_r2 = timed(lambda: ours(model, rows, target, 1), 1)
    qshap_t, theirs = timed(lambda: run_qshap(model, rows, target, 1), 1)
    name = "LGBMRegressor, num_leaves 255, min_child_samples 5, 100 trees"
    return [(name, leaves_per_tree(model), to_ensemble(model).n_path_features, ours_t, qshap_t,
             10.0, float(np.max(np.abs(theirs - ours_r2))))]


def grow(sizes, run, max_seconds):
    """[(size, seconds, extrapolated)], stopping the measurements once the
    linear extrapolation from the last measured size exceeds max_seconds."""
    out = []
    for size in sizes:
        if out:
            last_size, last_t, _ = out[-1]
            estimate = last_t * size / last_size
            if out[-1][2] or estimate > max_seconds:
                out.append((size, estimate, True))
                continue
        out.append((size, run(size), False))
        print(f"  done: {size}", flush=True)
    return out


def scaling(args, X, y):
    rng = np.random.default_rng(1)
    model = fit_xgboost(X, y, 6, args.trees[0], args.threads)

    def by_rows(n_rows):
        X_new, y_new = make_data(rng, n_rows)
        return timed(lambda: ours(model, X_new, y_new, args.threads), args.repeat)[0]

    rows = grow(args.scale_rows, by_rows, args.max_seconds)
    depths = []
    for depth in args.scale_depths:
        m = fit_xgboost(X, y, depth, args.trees[0], args.threads)
        depths.append((depth, leaves_per_tree(m),
                       timed(lambda: ours(m, X, y, args.threads), args.repeat)[0]))
        print(f"  done: depth {depth}", flush=True)
    trees = []
    for n_trees in args.scale_trees:
        m = fit_xgboost(X, y, 6, n_trees, args.threads)
        trees.append((n_trees, timed(lambda: ours(m, X, y, args.threads), args.repeat)[0]))
        print(f"  done: {n_trees} trees", flush=True)
    return rows, depths, trees


def versions():
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for name in ("sklearn-r2shap", "qshap", "xgboost-cpu", "xgboost", "lightgbm", "numpy"):
        try:
            out.append(f"{name} {version(name)}")
        except PackageNotFoundError:
            pass
    return ", ".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3,
                        help="best of this many runs for runs under 10 s")
    parser.add_argument("--skip-slow", action="store_true",
                        help="do not run qshap on the 500-tree case (6 minutes with 1 process and "
                             "3 with 2 on the reference machine)")
    parser.add_argument("--no-qshap", action="store_true")
    parser.add_argument("--no-scaling", action="store_true")
    parser.add_argument("--max-seconds", type=float, default=600.0,
                        help="extrapolate instead of running a row count expected to take longer")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    parser.add_argument("--equal-threads", action="store_true",
                        help="also compare ours on 1 thread with qshap on 1 process")
    parser.add_argument("--equal-threads-only", action="store_true",
                        help="only that comparison")
    parser.add_argument("--deep-lightgbm", type=int, default=0, metavar="ROWS",
                        help="only the deep LightGBM case (min_child_samples=5) on ROWS rows, "
                             "ours on 1 thread against qshap on 1 process")
    args = parser.parse_args()
    args.trees = (100, 500, 200)
    args.qshap_procs = (1, args.threads) if args.threads > 1 else (1,)
    args.scale_rows = (10_000, 100_000, 1_000_000)
    args.scale_depths = (2, 4, 6, 8, 10)
    args.scale_trees = (50, 100, 200, 400)
    if args.quick:
        args.rows, args.trees, args.repeat, args.qshap_procs = 300, (10, 20, 10), 1, (1,)
        args.scale_rows, args.scale_depths, args.scale_trees = (1000, 3000), (2, 4), (5, 10)
    multiprocessing.set_start_method("forkserver", force=True)

    X, y = make_data(np.random.default_rng(0), args.rows)
    # warm-up: imports, qshap's numba set-up and our kernels' first call are not timed
    tiny = fit_xgboost(X[:100], y[:100], 2, 2, args.threads)
    ours(tiny, X[:100], y[:100], args.threads)
    if not args.no_qshap:
        run_qshap(tiny, X[:100], y[:100], 1)
    if args.equal_threads or args.equal_threads_only or args.deep_lightgbm:
        even = deep_lightgbm(args, X, y) if args.deep_lightgbm else equal_threads(args, X, y)
        decomposed = args.deep_lightgbm or args.rows
        print(f"# {platform.node()} | {platform.processor() or platform.machine()} | "
              f"fitted on {args.rows} rows, decomposed on {decomposed}, {N_FEATURES} features, "
              f"learning rate 0.1 | {versions()}")
        print("| model | leaves / tree | path features | ours s (1 thread) | qshap s (1 proc) "
              "| qshap / ours | target | max abs diff R2_j |")
        print("|---|---|---|---|---|---|---|---|")
        for name, leaves, m, ours_t, qshap_t, target, diff in even:
            print(f"| {name} | {leaves:.1f} | {m} | {ours_t:.2f} | {qshap_t:.2f} "
                  f"| {qshap_t / ours_t:.1f}x | {target:.0f}x | {diff:.1e} |")
        if args.equal_threads_only or args.deep_lightgbm:
            return
        print()
    rows = compare(args, X, y)
    if not args.no_scaling:
        by_rows, by_depth, by_trees = scaling(args, X, y)

    print(f"# {platform.node()} | {platform.processor() or platform.machine()} | "
          f"{args.rows} rows, {N_FEATURES} features, learning rate 0.1 | {versions()}")
    procs = " | ".join(f"qshap s ({k} proc{'s' if k > 1 else ''})" for k in args.qshap_procs)
    print(f"| model | leaves / tree | {procs} | ours s ({args.threads} threads) "
          f"| qshap / ours | max abs diff R2_j |")
    print("|---|---|" + "---|" * len(args.qshap_procs) + "---|---|---|")
    for name, leaves, qshap_t, ours_t, diff in rows:
        cells = " | ".join(f"{qshap_t[k]:.3f}" if k in qshap_t else "skipped"
                           for k in args.qshap_procs)
        ratio = f"{min(qshap_t.values()) / ours_t:.1f}x" if qshap_t else "-"
        diff = "-" if np.isnan(diff) else f"{diff:.1e}"
        print(f"| {name} | {leaves:.1f} | {cells} | {ours_t:.3f} | {ratio} | {diff} |")
    if args.no_scaling:
        return
    print()
    print(f"Ours, XGBRegressor max_depth 6, {args.trees[0]} trees (fitted on {args.rows} rows), "
          f"{args.threads} threads, as the rows grow:")
    print("| rows | ours s | ms per 1000 rows |")
    print("|---|---|---|")
    for n_rows, seconds, extrapolated in by_rows:
        mark = " (extrapolated, not run)" if extrapolated else ""
        print(f"| {n_rows} | {seconds:.1f}{mark} | {1e6 * seconds / n_rows:.0f} |")
    print()
    print(f"Ours, XGBRegressor {args.trees[0]} trees, {args.rows} rows, as the depth grows:")
    print("| max_depth | leaves / tree | ours s |")
    print("|---|---|---|")
    for depth, leaves, seconds in by_depth:
        print(f"| {depth} | {leaves:.1f} | {seconds:.3f} |")
    print()
    print(f"Ours, XGBRegressor max_depth 6, {args.rows} rows, as the trees grow:")
    print("| trees | ours s | ms per tree |")
    print("|---|---|---|")
    for n_trees, seconds in by_trees:
        print(f"| {n_trees} | {seconds:.3f} | {1e3 * seconds / n_trees:.1f} |")


if __name__ == "__main__":
    main()
