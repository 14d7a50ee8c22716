"""Parallel efficiency (issue 31): rows/s and speed-up at 1, 2, 4, ... threads.

For local SHAP (path-dependent on XGBoost depth 6 and 8 and LightGBM with 255
leaves, ``min_child_samples=5``; interventional and interaction values on
XGBoost depth 6) and the exact R^2 decomposition (XGBoost depth 6): rows/s
at every thread count up to ``os.cpu_count()``, the speed-up over one
thread and whether the values are bit-identical to one thread's. Models as
in ``../shared/devbench/scale.py``: 200 trees trained on 20,000 rows of 20
features.

For the path-dependent route it also prints, from the plan the package
makes (no timing involved, so it is visible on a 2-core machine):

* ``block_rows``: rows per executor block (fixed by the model's cost per row);
* ``pattern_blocks`` / ``part_blocks``: the row blocks one executor block
  gives the table kernel and the quadrature kernel at each thread count --
  the work units the threads share, so at most this many threads are busy;
* ``table_mb``: the pattern tables kept for the call (8 bytes an entry);
  ``table_bytes_per_row``: what one row reads from them (one table row of
  d numbers per tabulated unit); ``tree_table_kb_max``: the largest one
  tree's tables, the working set a thread streams while its block of rows
  runs that tree (with its scratch, ``scratch_kb``).

Usage::

    python benchmarks/bench_scaling.py [--threads 1 2] [--rows 8000] [--lgb-rows 1500]
        [--tasks shap interventional interactions r2] [--repeat 3] [--json OUT]
"""
import argparse
import json
import math
import os
import pickle
import platform
import subprocess
import sys
import time

import numpy as np


def make(rng, n, p=20):
    X = rng.normal(size=(n, p))
    y = (X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + X[:, 3] ** 2 + 0.5 * X[:, 4]
         + rng.normal(scale=0.5, size=n))
    return X, y


def models(train_rows, trees, threads):
    import lightgbm as lgb
    import xgboost as xgb
    rng = np.random.default_rng(0)
    Xtr, ytr = make(rng, train_rows)
    out = {}
    for depth in (6, 8):
        out[f"xgb_d{depth}"] = xgb.XGBRegressor(
            n_estimators=trees, max_depth=depth, learning_rate=0.1, n_jobs=threads,
            random_state=0).fit(Xtr, ytr)
    out["lgbm_255"] = lgb.LGBMRegressor(
        n_estimators=trees, num_leaves=255, min_child_samples=5, learning_rate=0.05,
        n_jobs=threads, verbose=-1, random_state=0).fit(Xtr, ytr)
    return out


def layout(model, n_rows, thread_counts):
    """The path-dependent route's plan: blocks, tables, bytes per row."""
    from sklearn_r2shap._execution import local
    from sklearn_r2shap._execution.cost import semivalue_seconds
    from sklearn_r2shap._games import semivalues as games
    from sklearn_r2shap._kernels import _semivalues
    from sklearn_r2shap._model import explainable_ensemble
    from sklearn_r2shap._numerics import beta_quadrature

    ensemble = explainable_ensemble(model)
    points, weights = beta_quadrature(1, 1, max(1, int(ensemble.n_path_features)) - 1)
    game = games.SemivalueGame(ensemble, points, weights, n_rows,
                               rule_of=lambda d: beta_quadrature(1, 1, d))
    seconds = game.seconds_per_row()  # what shap_values sizes its blocks by
    block_rows = min(n_rows, local.block_rows_for(seconds))
    structure = game.structure()
    units = structure["units"]
    resident = game.resident()
    routes = np.where(resident > 0, resident, game.routes(block_rows))
    tab = units["dim"] <= routes[units["tree"]]
    entries = units["entries"] * tab
    per_tree = np.bincount(units["tree"], weights=entries, minlength=ensemble.n_trees)
    rows_of = getattr(_semivalues, "pattern_block_rows", None)
    part_rows_of = getattr(_semivalues, "part_block_rows", None)
    out = {
        "trees": int(ensemble.n_trees), "nodes": int(ensemble.n_nodes),
        "quadrature_points": len(points), "block_rows": int(block_rows),
        "estimated_us_per_row": round(seconds * 1e6, 1),
        "upper_estimate_us_per_row": round(semivalue_seconds(ensemble, len(points)) * 1e6, 1),
        "tabulated_trees": int(np.sum(routes > 0)), "resident_trees": int(np.sum(resident > 0)),
        "table_mb": round(float(entries.sum()) * 8 / 2 ** 20, 1),
        "table_bytes_per_row": int(np.sum(units["dim"][tab]) * 8),
        "tree_table_kb_max": round(float(per_tree.max()) * 8 / 1024, 1),
        "scratch_kb": round((ensemble.tree_start[1:] - ensemble.tree_start[:-1]).max()
                            * 64 * 5 / 1024, 1),
    }
    for t in thread_counts:
        pattern_rows = rows_of(block_rows, t) if rows_of else 512
        out[f"pattern_blocks@{t}"] = math.ceil(block_rows / pattern_rows)
        part_rows = part_rows_of(block_rows, t) if part_rows_of else 64
        out[f"part_blocks@{t}"] = math.ceil(block_rows / part_rows)
    return out


def timed(f, repeat):
    best, value = math.inf, None
    for _ in range(repeat):
        start = time.perf_counter()
        value = f()
        best = min(best, time.perf_counter() - start)
    return best, value


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cpus = os.cpu_count() or 1
    default_threads = sorted({1, cpus} | {2 ** k for k in range(1, 8) if 2 ** k <= cpus})
    parser.add_argument("--threads", type=int, nargs="+", default=default_threads)
    parser.add_argument("--rows", type=int, default=8000)
    parser.add_argument("--lgb-rows", type=int, default=1500)
    parser.add_argument("--r2-rows", type=int, default=1000)
    parser.add_argument("--train-rows", type=int, default=20000)
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--tasks", nargs="+", default=["shap", "interventional", "interactions",
                                                       "r2"])
    parser.add_argument("--models", nargs="+", default=["xgb_d6", "xgb_d8", "lgbm_255"])
    parser.add_argument("--json", default=None)
    parser.add_argument("--model-cache", default=None,
                        help="pickle of the trained models (written if absent)")
    parser.add_argument("--pair", action="store_true",
                        help="also run each 1-thread call in two processes at once: the "
                             "throughput the machine gives two independent copies bounds "
                             "what any 2-thread kernel can reach here (shared cores, caches, "
                             "memory)")
    parser.add_argument("--worker-start-at", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.pair and not args.model_cache:
        parser.error("--pair needs --model-cache (the two processes read the same models)")

    from sklearn_r2shap import r2_decomposition, shap_interaction_values, shap_values
    import sklearn_r2shap

    print(json.dumps({"machine": platform.processor() or platform.machine(), "cpus": cpus,
                      "load": os.getloadavg(), "package": os.path.dirname(sklearn_r2shap.__file__),
                      "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}), flush=True)
    if args.model_cache and os.path.exists(args.model_cache):
        with open(args.model_cache, "rb") as fh:
            fitted = pickle.load(fh)
    else:
        fitted = models(args.train_rows, args.trees, max(args.threads))
        if args.model_cache:
            with open(args.model_cache, "wb") as fh:
                pickle.dump(fitted, fh)
    rng = np.random.default_rng(1)
    X, y = make(rng, max(args.rows, args.lgb_rows, args.r2_rows))
    background = make(np.random.default_rng(2), 100)[0]
    results = []

    def pair(task, name, n_rows, t1):
        """Two processes timing the same 1-thread call at once."""
        start_at = time.time() + 15.0  # after both have imported and read the models
        command = [sys.executable, os.path.abspath(__file__), "--threads", "1",
                   "--rows", str(args.rows), "--lgb-rows", str(args.lgb_rows),
                   "--r2-rows", str(args.r2_rows), "--repeat", str(args.repeat),
                   "--tasks", task, "--models", name, "--model-cache", args.model_cache,
                   "--worker-start-at", str(start_at)]
        children = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                                     env=dict(os.environ, OMP_NUM_THREADS="1"))
                    for _ in range(2)]
        seconds = []
        for child in children:
            out, _ = child.communicate()
            rows = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
            seconds += [r["seconds"] for r in rows if r.get("task") == task]
        row = {"task": task + "_pair", "model": name, "rows": n_rows,
               "seconds_each": seconds,
               "two_process_bound": round(2 * t1 / max(seconds), 2)}
        results.append(row)
        print(json.dumps(row), flush=True)

    def scaling(task, name, n_rows, run):
        ref, t1 = None, None
        if args.worker_start_at is not None:
            run(1)  # warm: the same state as the parent's first timed call
            time.sleep(max(0.0, args.worker_start_at - time.time()))
        for t in args.threads:
            seconds, value = timed(lambda: np.asarray(run(t)), args.repeat)
            if ref is None:
                ref, t1 = value, seconds
            row = {"task": task, "model": name, "threads": t, "rows": n_rows,
                   "seconds": round(seconds, 4), "rows_per_s": round(n_rows / seconds, 1),
                   "speedup": round(t1 / seconds, 2),
                   "same_bits": bool(np.array_equal(ref, value)), "load": os.getloadavg()[0]}
            results.append(row)
            print(json.dumps(row), flush=True)
        if args.pair:
            pair(task, name, n_rows, t1)

    for name in args.models:
        model = fitted[name]
        n = args.lgb_rows if name.startswith("lgbm") else args.rows
        rows = X[:n]
        if "shap" in args.tasks:
            if args.worker_start_at is None:
                plan = layout(model, n, args.threads)
                results.append({"task": "plan", "model": name, **plan})
                print(json.dumps(results[-1]), flush=True)
            scaling("shap", name, n, lambda t: shap_values(model, rows, n_jobs=t, verbose=0))
        if name == "xgb_d6":
            if "interventional" in args.tasks:
                few = X[:n // 4]
                scaling("interventional", name, len(few), lambda t: shap_values(
                    model, few, background=background, n_jobs=t, verbose=0))
            if "interactions" in args.tasks:
                few = X[:n // 16]
                scaling("interactions", name, len(few),
                        lambda t: shap_interaction_values(model, few, n_jobs=t))
            if "r2" in args.tasks:
                rr, yy = X[:args.r2_rows], y[:args.r2_rows]
                scaling("r2", name, len(rr), lambda t: r2_decomposition(
                    model, rr, yy, algorithm="exact", n_jobs=t, verbose=0).shares)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
