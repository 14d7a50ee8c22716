"""Ctrl-C (SIGINT) stops the long nogil kernels with KeyboardInterrupt.

A subprocess starts a call that would run for minutes; the test sends SIGINT
about a second later and measures the time from the signal to the process's
exit (a behavioural bound, not a benchmark). The subprocess also checks that
no computation keeps running afterwards (its CPU time stays flat while it
sleeps) and that no Python thread was left behind.
"""
import os
import signal
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

SCRIPT = r"""
import sys, threading, time
import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn_r2shap import r2_decomposition, shap_values, treegrad_scores
from sklearn_r2shap._execution import local
from sklearn_r2shap._games import r2 as r2_games

# one kernel call for all rows: Python's own Ctrl-C check between chunks must
# not be what stops the call
r2_games._CHUNK_ROWS = 1 << 30
local.block_rows_for = lambda *args, **kwargs: 1 << 30

which = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.normal(size=(3000, 8))
y = X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(size=3000)
model = RandomForestRegressor(n_estimators=10, max_leaf_nodes=400, random_state=0).fit(X, y)
big = np.tile(X, (200, 1))
print("ready", flush=True)
try:
    if which == "r2-exact":
        r2_decomposition(model, X, y, algorithm="exact", n_jobs=2)
    elif which == "r2-sampled":
        r2_decomposition(model, big, np.tile(y, 200), algorithm="sampled", n_permutations=16,
                         n_jobs=2)
    elif which == "shap":
        shap_values(model, big, n_jobs=2)
    elif which == "ranker":
        treegrad_scores(model, big, n_iter=1000, n_jobs=2)
except KeyboardInterrupt:
    cpu = time.process_time()
    time.sleep(0.3)
    busy = time.process_time() - cpu
    print(f"interrupted threads={threading.active_count()} busy={busy:.3f}", flush=True)
    sys.exit(0)
print("finished", flush=True)
sys.exit(1)
"""


@pytest.mark.parametrize("which", ["r2-exact", "r2-sampled", "shap", "ranker"])
def test_sigint_stops_kernel(which):
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT, which], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # the kernel is running
        assert proc.poll() is None, proc.stderr.read()
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline().strip()
        elapsed = time.monotonic() - sent
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert line.startswith("interrupted"), (line, proc.stderr.read())
    assert elapsed < 2.0, elapsed
    fields = dict(item.split("=") for item in line.split()[1:])
    assert fields["threads"] == "1"
    assert float(fields["busy"]) < 0.1
    assert proc.returncode == 0


# Issue 31: as a new user would call it (default blocks, nothing patched), the
# exact R^2 decomposition of a 30-tree random forest on 3,000 rows; SIGINT is
# sent in different phases (model reading and table plans, the first trees'
# table builds, the row kernels). The child stamps the monotonic clock when
# KeyboardInterrupt reaches it, so the delay excludes pipe and exit time; it
# then checks that nothing runs on and that a new call gives the values of a
# call made before the interrupt (no state left half-built).
USER_SCRIPT = r"""
import sys, threading, time
import numpy as np
from sklearn.ensemble import RandomForestRegressor
from sklearn_r2shap import r2_decomposition

rng = np.random.default_rng(0)
X = rng.normal(size=(3000, 10))
y = X[:, 0] + X[:, 1] * X[:, 2] + np.sin(X[:, 3]) + rng.normal(size=3000)
model = RandomForestRegressor(n_estimators=30, random_state=0, n_jobs=1).fit(X, y)
before = r2_decomposition(model, X[:2], y[:2], algorithm="exact", n_jobs=2, verbose=0)
print("ready", flush=True)
try:
    r2_decomposition(model, X, y, algorithm="exact", n_jobs=2, verbose=0)
except KeyboardInterrupt:
    caught = time.monotonic()
    cpu = time.process_time()
    time.sleep(0.3)
    busy = time.process_time() - cpu
    after = r2_decomposition(model, X[:2], y[:2], algorithm="exact", n_jobs=2, verbose=0)
    same = bool(np.array_equal(before.shares, after.shares))
    print(f"interrupted caught={caught:.6f} threads={threading.active_count()} busy={busy:.3f} "
          f"same={same}", flush=True)
    sys.exit(0)
print("finished", flush=True)
sys.exit(1)
"""


@pytest.mark.parametrize("after", [0.2, 1.0, 2.5])
def test_sigint_delay_exact_r2_as_a_user_calls_it(after):
    proc = subprocess.Popen([sys.executable, "-c", USER_SCRIPT], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        time.sleep(after)
        assert proc.poll() is None, proc.stderr.read()
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        line = proc.stdout.readline().strip()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert line.startswith("interrupted"), (line, proc.stderr.read())
    fields = dict(item.split("=") for item in line.split()[1:])
    delay = float(fields["caught"]) - sent
    # goal 1 s (issue 31); generous for a machine shared by several busy processes
    assert delay < 2.5, delay
    assert fields["threads"] == "1"
    assert float(fields["busy"]) < 0.1
    assert fields["same"] == "True"
    assert proc.returncode == 0
