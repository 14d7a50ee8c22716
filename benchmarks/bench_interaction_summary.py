"""Interaction summaries at any size (issue 32, part 2): peak memory and time of
``shap_interaction_summary`` on many rows, against the full array of
``shap_interaction_values`` (measured on a sample, extrapolated for all rows).

Each measurement runs in a fresh process; its peak resident memory during the
call is ``VmHWM`` after the call, the high-water mark reset to ``VmRSS`` just
before it (``/proc/self/clear_refs``; Linux). The model: XGBoost regressor, 100 trees of depth 4
(``--trees``, ``--depth``) on 20,000 training rows of ``--features`` columns,
with pairwise interactions in y.

    python benchmarks/bench_interaction_summary.py --rows 1000000 --features 100 --threads 2
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import time

import numpy as np


def make(n, p, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)).astype(np.float32)
    y = X[:, 0] * X[:, 1] + X[:, 2] * X[:, 3] + X[:, 4] + 0.3 * rng.normal(size=n)
    return X, y


def rows_of(n, p, block=100_000):
    """X in blocks generated on the fly would not be an array: the summary
    takes X as a float32 array (400 MB for 1,000,000 x 100)."""
    return np.concatenate([make(min(block, n - s), p, 1000 + s // block)[0]
                           for s in range(0, n, block)])


def child(args):
    import pickle

    from sklearn_r2shap import shap_interaction_summary, shap_interaction_values

    with open(args.model, "rb") as fh:
        model = pickle.load(fh)
    X = rows_of(args.rows, args.features)
    with open("/proc/self/clear_refs", "w") as fh:  # Linux: VmHWM := VmRSS
        fh.write("5")
    base = status_mb("VmRSS")
    start = time.perf_counter()
    if args.child == "summary":
        summary = shap_interaction_summary(model, X, n_jobs=args.threads, verbose=0)
        check = float(summary.mean_abs[0, 1])
    else:
        phi = shap_interaction_values(model, X, n_jobs=args.threads, verbose=0)
        check = float(np.abs(phi[:, 0, 1]).mean())
    seconds = time.perf_counter() - start
    peak = status_mb("VmHWM")
    x_mb = X.nbytes / 2 ** 20
    print(json.dumps({"what": args.child, "rows": args.rows, "features": args.features,
                      "threads": args.threads, "seconds": round(seconds, 2),
                      "rows_per_s": round(args.rows / seconds, 1),
                      "rss_before_call_mb": round(base, 1), "peak_rss_mb": round(peak, 1),
                      "peak_of_call_mb": round(peak - base, 1), "x_mb": round(x_mb, 1),
                      # the kernels read float64 rows: a float32 X is copied once
                      "beyond_float64_rows_mb": round(peak - base - 2 * x_mb, 1),
                      "check": check}), flush=True)


def status_mb(field):
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{field} not in /proc/self/status")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--sample-rows", type=int, default=5000)
    parser.add_argument("--features", type=int, default=100)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default="/tmp/bench_interaction_summary_model.pkl")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)

    import pickle

    import xgboost

    from sklearn_r2shap._execution.local import BLOCK_BYTES, BLOCK_SECONDS

    print(json.dumps({"machine": platform.machine(), "cpus": os.cpu_count(),
                      "load": os.getloadavg(), "xgboost": xgboost.__version__,
                      "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                      "block_bytes": BLOCK_BYTES,
                      "block_seconds": BLOCK_SECONDS}), flush=True)
    X, y = make(20_000, args.features, 0)
    model = xgboost.XGBRegressor(n_estimators=args.trees, max_depth=args.depth,
                                 n_jobs=args.threads).fit(X, y)
    with open(args.model, "wb") as fh:
        pickle.dump(model, fh)
    runs = [("full", args.sample_rows), ("summary", args.sample_rows), ("summary", args.rows)]
    results = {}
    for what, n in runs:
        out = subprocess.run([sys.executable, __file__, "--child", what, "--rows", str(n),
                              "--features", str(args.features), "--threads",
                              str(args.threads), "--model", args.model],
                             capture_output=True, text=True)
        if out.returncode != 0:
            print(out.stderr[-2000:], file=sys.stderr)
            raise SystemExit(out.returncode)
        row = json.loads(out.stdout.strip().splitlines()[-1])
        row["load"] = os.getloadavg()[0]
        results[(what, n)] = row
        print(json.dumps(row), flush=True)
    full = results[("full", args.sample_rows)]
    width = args.features + 1
    print(json.dumps({
        "full_array_for_all_rows_gb": round(args.rows * width * width * 8 / 2 ** 30, 1),
        "summary_vs_full_time_on_sample": round(
            results[("summary", args.sample_rows)]["seconds"] / full["seconds"], 2),
    }), flush=True)


if __name__ == "__main__":
    main()
