"""Ctrl-C latency: seconds from SIGINT to KeyboardInterrupt, in every phase.

The case of issue 31, tried as a new user would (default arguments): the
exact R^2 decomposition of a 30-tree RandomForestRegressor (fully grown) on
3,000 rows. A subprocess fits the model, prints "ready" and starts the call;
SIGINT is sent after each of ``--delays`` seconds (one subprocess each, so
every phase of the call is hit: structure, table plans, per-tree table
builds, row kernels), and the time from the signal to the subprocess
catching KeyboardInterrupt is reported (also the CPU time the process still used
in the 0.3 s after, which must stay ~0).

Usage::

    python benchmarks/bench_interrupt.py [--delays 0.05 0.2 0.5 1 2 3 5] [--threads 2]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import time

SCRIPT = r"""
import sys, threading, time
import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn_r2shap import r2_decomposition
rng = np.random.default_rng(0)
X = rng.normal(size=(3000, 10))
y = X[:, 0] + X[:, 1] * X[:, 2] + np.sin(X[:, 3]) + rng.normal(size=3000)
model = RandomForestRegressor(n_estimators=30, random_state=0, n_jobs=1).fit(X, y)
threads = int(sys.argv[1])
print("ready", flush=True)
start = time.monotonic()
try:
    r2_decomposition(model, X, y, algorithm="exact", n_jobs=threads, verbose=0)
except KeyboardInterrupt:
    caught = time.monotonic()
    cpu = time.process_time()
    time.sleep(0.3)
    print(f"interrupted caught={caught:.6f} threads={threading.active_count()} "
          f"busy={time.process_time() - cpu:.3f}",
          flush=True)
    sys.exit(0)
print(f"finished {time.monotonic() - start:.2f}", flush=True)
"""


def one(delay, threads):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, str(threads)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        time.sleep(delay)
        if proc.poll() is not None:
            return {"delay": delay, "finished_before": True}
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline().strip()
        elapsed = time.monotonic() - sent
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    fields = dict(item.split("=") for item in line.split()[1:]) if line.startswith("inter") else {}
    latency = float(fields["caught"]) - sent if fields else elapsed
    return {"delay": delay, "latency": round(latency, 3), "line": line}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--delays", type=float, nargs="+", default=[0.05, 0.2, 0.5, 1, 2, 3, 5])
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    print(f"# load: {os.getloadavg()}")
    rows = [one(d, args.threads) for d in args.delays]
    for row in rows:
        print(json.dumps(row))
    lat = [r["latency"] for r in rows if "latency" in r]
    if lat:
        print(f"# max latency {max(lat):.3f} s over {len(lat)} signals")


if __name__ == "__main__":
    main()
