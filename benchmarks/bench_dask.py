"""Throughput and worker memory of shap_values on dask, against xgboost.dask.

A 100-tree depth-6 XGBoost regressor (trained in memory on a small sample)
explains ``--rows`` rows of 20 features generated lazily on the workers
(``dask.array.random``, never on the client) by a
``distributed.LocalCluster`` of 2 worker processes with one thread each:

* ours: ``sklearn_r2shap.shap_values(model, X)`` (exact path-dependent
  TreeSHAP values, float64), one task per block;
* theirs: ``xgboost.dask.predict(client, booster, X, pred_contribs=True)``
  (the same values, float32).

Both results are reduced on the workers (column sums), so the client never
holds the n_rows x 21 output; the two sums are compared as a check. Each
worker samples its own resident set size every 50 ms: the peak above the
worker's idle size is reported against the bytes of one block of input and
output, to show that the memory a worker needs is set by the block size, not
by the number of rows.

The R^2 part (``--parts r2``) decomposes the same model's R^2 with
``sklearn_r2shap.r2_decomposition(model, X, y)`` on ``--r2-rows`` rows (y
computed on the workers from X, plus noise), once per block size of
``--r2-chunk-rows``: rows/s and the worker peak RSS above the warm worker
against the block size (one pass over y, one over (X, y), tree-reduced; a
task holds one block and works through it in chunks of rows).

Run ``python benchmarks/bench_dask.py [--rows 10000000] [--chunk-rows 250000]
[--parts shap,r2] [--r2-rows 1000000] [--r2-chunk-rows 50000,200000]
[--r2-algorithm sampled]``.
"""
import argparse
import os
import platform
import time

import numpy as np


def start_rss_sampler(dask_worker):
    """Sample this worker process's RSS every 50 ms; keep the peak."""
    import threading

    import psutil

    process = psutil.Process()
    state = dask_worker._bench_rss = {"peak": process.memory_info().rss, "run": True}

    def sample():
        while state["run"]:
            state["peak"] = max(state["peak"], process.memory_info().rss)
            time.sleep(0.05)

    threading.Thread(target=sample, daemon=True).start()
    return process.memory_info().rss


def reset_rss(dask_worker):
    import psutil

    dask_worker._bench_rss["peak"] = psutil.Process().memory_info().rss
    return dask_worker._bench_rss["peak"]


def peak_rss(dask_worker):
    return dask_worker._bench_rss["peak"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--chunk-rows", type=int, default=250_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--xgboost-rows", type=int, default=None,
                        help="rows for xgboost.dask (the first ones; default --rows, 0 skips)")
    parser.add_argument("--parts", default="shap,r2",
                        help="comma-separated: shap (SHAP values), r2 (R^2 decomposition)")
    parser.add_argument("--r2-rows", type=int, default=1_000_000)
    parser.add_argument("--r2-chunk-rows", default="50000,200000",
                        help="comma-separated block sizes of the R^2 runs")
    parser.add_argument("--r2-algorithm", default="sampled", choices=["exact", "sampled"],
                        help="exact costs about 4x the sampled algorithm for this model "
                             "(cost estimate)")
    args = parser.parse_args(argv)
    parts = set(args.parts.split(","))

    import dask.array as da
    import distributed
    import xgboost as xgb
    import xgboost.dask as dxgb

    import sklearn_r2shap as sr

    rng = np.random.default_rng(0)
    p = args.features
    X_train = rng.normal(size=(20_000, p))
    y_train = (X_train[:, 0] * X_train[:, 1] + np.sin(X_train[:, 2]) + X_train[:, 3:].sum(axis=1)
               + rng.normal(scale=0.1, size=len(X_train)))
    model = xgb.XGBRegressor(n_estimators=args.trees, max_depth=args.depth, learning_rate=0.1,
                             n_jobs=2, random_state=0).fit(X_train, y_train)

    print(f"machine: {platform.node()} {os.cpu_count()} cores, {platform.processor() or ''}")
    print(f"load average before: {os.getloadavg()}")
    print(f"model: XGBRegressor {args.trees} trees depth {args.depth}, {p} features")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=":0", silence_logs=40) as cluster, \
            distributed.Client(cluster) as client:
        client.run(start_rss_sampler)
        X = da.random.RandomState(1).normal(size=(args.rows, p),
                                            chunks=(args.chunk_rows, p))
        booster = model.get_booster()
        # warm up: imports, the model on every worker, xgboost's own set-up
        tiny = da.random.RandomState(2).normal(size=(4000, p), chunks=(1000, p))
        sr.shap_values(model, tiny).sum(axis=0).compute()
        dxgb.predict(client, booster, tiny, pred_contribs=True).sum(axis=0).compute()
        warm = client.run(reset_rss)
        print("worker RSS after warm-up (imports, model): "
              + ", ".join(f"{warm[w] / 2**20:.0f} MiB" for w in sorted(warm)))
        block_in = args.chunk_rows * p * 8
        block_out = args.chunk_rows * (p + 1) * 8
        if "shap" in parts:
            print(f"rows: {args.rows:,} in blocks of {args.chunk_rows:,} "
                  f"({X.npartitions} blocks; one block: {block_in / 2**20:.1f} MiB in, "
                  f"{block_out / 2**20:.1f} MiB out as float64)")
        xgboost_rows = args.rows if args.xgboost_rows is None else args.xgboost_rows
        if "shap" not in parts:
            xgboost_rows = 0
        runs = [("sklearn_r2shap.shap_values", args.rows,
                 lambda: sr.shap_values(model, X).sum(axis=0))] if "shap" in parts else []
        if xgboost_rows:
            X_head = X[:xgboost_rows]
            runs.append(("sklearn_r2shap.shap_values", xgboost_rows,
                         lambda: sr.shap_values(model, X_head).sum(axis=0)))
            runs.append(("xgboost.dask pred_contribs", xgboost_rows,
                         lambda: dxgb.predict(client, booster, X_head, pred_contribs=True)
                         .astype(np.float64).sum(axis=0)))
        results = {}
        for name, n_rows, make in runs:
            if (name, n_rows) in results:
                continue
            before = client.run(reset_rss)
            start = time.perf_counter()
            results[name, n_rows] = make().compute()
            elapsed = time.perf_counter() - start
            peaks = client.run(peak_rss)
            print(f"{name}, {n_rows:,} rows: {elapsed:.1f} s, {n_rows / elapsed:,.0f} rows/s; "
                  "worker peak RSS "
                  + ", ".join(f"{peaks[w] / 2**20:.0f} MiB (+{(peaks[w] - before[w]) / 2**20:.0f}"
                              " over the warm worker)" for w in sorted(peaks)), flush=True)
        if xgboost_rows:
            ours = results["sklearn_r2shap.shap_values", xgboost_rows]
            theirs = results["xgboost.dask pred_contribs", xgboost_rows]
            print(f"column sums agree to {np.abs(ours - theirs).max() / np.abs(ours).max():.1e} "
                  "(relative to the largest; xgboost accumulates in float32)")
        if "r2" in parts:
            bench_r2(client, model, args)
    print(f"load average after: {os.getloadavg()}")


def lazy_target(X, seed):
    """y of the training rule, computed on the workers from X's blocks, plus noise."""
    import dask.array as da

    noise = da.random.RandomState(seed).normal(scale=0.1, size=X.shape[0], chunks=X.chunks[0])
    return X[:, 0] * X[:, 1] + da.sin(X[:, 2]) + X[:, 3:].sum(axis=1) + noise


def bench_r2(client, model, args):
    """rows/s and worker peak RSS growth of r2_decomposition on dask, per block size."""
    import dask.array as da

    import sklearn_r2shap as sr

    p = args.features
    tiny = da.random.RandomState(2).normal(size=(4000, p), chunks=(1000, p))
    sr.r2_decomposition(model, tiny, lazy_target(tiny, 4), algorithm=args.r2_algorithm,
                        random_state=0)  # warm up
    cost = sr.estimate_cost(model, np.zeros((1, p)), n_jobs=1)
    print(f"R^2 decomposition ({args.r2_algorithm}) of {args.r2_rows:,} rows; estimated "
          f"seconds per row on one thread: exact {cost.exact_seconds:.2e}, sampled "
          f"{cost.sampled_seconds:.2e}")
    for chunk_rows in (int(c) for c in args.r2_chunk_rows.split(",")):
        X = da.random.RandomState(1).normal(size=(args.r2_rows, p), chunks=(chunk_rows, p))
        y = lazy_target(X, 3)
        before = client.run(reset_rss)
        start = time.perf_counter()
        result = sr.r2_decomposition(model, X, y, algorithm=args.r2_algorithm, random_state=0)
        elapsed = time.perf_counter() - start
        peaks = client.run(peak_rss)
        block = chunk_rows * (p + 1) * 8
        print(f"r2_decomposition, blocks of {chunk_rows:,} rows ({X.npartitions} blocks, "
              f"{block / 2**20:.1f} MiB of X and y each): {elapsed:.1f} s, "
              f"{args.r2_rows / elapsed:,.0f} rows/s; worker peak RSS "
              + ", ".join(f"{peaks[w] / 2**20:.0f} MiB (+{(peaks[w] - before[w]) / 2**20:.0f}"
                          " over the warm worker)" for w in sorted(peaks))
              + f"; R^2 {result.score:.4f}, sum of shares {result.shares.sum():.4f}",
              flush=True)


if __name__ == "__main__":
    main()
