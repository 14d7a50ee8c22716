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
from sklearn.ensemble import ExtraTreesRegressor, RandomForestRegressor
from sklearn_r2shap import r2_decomposition, shap_values, to_ensemble, treegrad_scores
from sklearn_r2shap._execution import local
from sklearn_r2shap._games import r2 as r2_games

# one kernel call for all rows: Python's own Ctrl-C check between chunks must
# not be what stops the call
r2_games.MAX_BLOCK_ROWS = 1 << 30
local.block_rows_for = lambda *args, **kwargs: 1 << 30

which = sys.argv[1]
rng = np.random.default_rng(0)
X = rng.normal(size=(3000, 8))
y = X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(size=3000)
model = RandomForestRegressor(n_estimators=10, max_leaf_nodes=400, random_state=0).fit(X, y)
big = np.tile(X, (200, 1))
if which == "predict":  # 200 fully grown trees: about 0.3 ms a row
    deep = ExtraTreesRegressor(n_estimators=200, random_state=0, n_jobs=2).fit(X, y)
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
    elif which == "predict":
        from sklearn_r2shap._kernels import _predict
        ensemble = to_ensemble(deep)
        _predict.predict_raw(ensemble, np.ascontiguousarray(np.tile(X, (10, 1))), 2)
except KeyboardInterrupt:
    cpu = time.process_time()
    time.sleep(0.3)
    busy = time.process_time() - cpu
    print(f"interrupted threads={threading.active_count()} busy={busy:.3f}", flush=True)
    sys.exit(0)
print("finished", flush=True)
sys.exit(1)
"""


@pytest.mark.parametrize("which", ["r2-exact", "r2-sampled", "shap", "ranker", "predict"])
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


# --------------------------------------------------------------------------
# Every public function: progress with verbose=1, KeyboardInterrupt between blocks


def _public_calls():
    """name -> f(verbose) calling a public function on 30 rows (several blocks)."""
    import numpy as np
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    import sklearn_r2shap as sr
    from sklearn_r2shap.attributions import probabilistic_values
    from sklearn_r2shap.interventional import interventional_values
    from sklearn_r2shap.metrics import insertion_deletion

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 4))
    y = X[:, 0] + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=60)
    model = GradientBoostingRegressor(n_estimators=5, max_depth=3, random_state=0).fit(X, y)
    pipeline = make_pipeline(StandardScaler(), model).fit(X, y)
    rows, background = X[:30], X[30:]
    ranking = np.argsort(-np.abs(rows), axis=1, kind="stable")
    shapley = [0.25, 1 / 12, 1 / 12, 0.25]
    return {
        "shap_values": lambda v: sr.shap_values(model, rows, verbose=v),
        "shap_values(groups)": lambda v: sr.shap_values(model, rows, feature_groups={"a": [0, 1]},
                                                        verbose=v),
        "shap_values(background)": lambda v: sr.shap_values(model, rows, background=background,
                                                            verbose=v),
        "shap_values(pipeline)": lambda v: sr.shap_values(pipeline, rows, verbose=v),
        "banzhaf_values": lambda v: sr.banzhaf_values(model, rows, q=0.3, verbose=v),
        "beta_shapley_values": lambda v: sr.beta_shapley_values(model, rows, alpha=4, verbose=v),
        "probabilistic_values": lambda v: probabilistic_values(model, rows, shapley, verbose=v),
        "saabas_values": lambda v: sr.saabas_values(model, rows, verbose=v),
        "predict_raw": lambda v: sr.predict_raw(model, rows, verbose=v),
        "shap_interaction_values": lambda v: sr.shap_interaction_values(model, rows, verbose=v),
        "shap_interaction_summary": lambda v: sr.shap_interaction_summary(
            model, rows, sample_weight=np.arange(30.0), verbose=v).mean_abs,
        "interventional_values": lambda v: interventional_values(model, rows, background,
                                                                 verbose=v),
        "explain": lambda v: sr.explain(model, rows, interactions=True, verbose=v).values,
        # (the exact algorithm shares each tree's tables over at least a few
        # hundred rows: one block here; the sampled one takes the blocks given)
        "r2_decomposition": lambda v: sr.r2_decomposition(
            model, rows, y[:30], algorithm="sampled", random_state=0, verbose=v).shares,
        "r2_interactions": lambda v: sr.r2_interactions(
            model, rows, y[:30], sample_weight=np.arange(30.0), verbose=v).shares,
        "treegrad_scores": lambda v: sr.treegrad_scores(model, rows, n_iter=5, verbose=v),
        "multilinear_gradient": lambda v: sr.multilinear_gradient(model, rows, np.full(4, 0.3),
                                                                  verbose=v),
        "insertion_deletion": lambda v: insertion_deletion(model, rows, ranking,
                                                           verbose=v).insertion,
        "piecewise_shap_values": lambda v: sr.piecewise_shap_values(
            model, rows, background=background, verbose=v),
        "piecewise_predict": lambda v: sr.piecewise_predict(model, rows, verbose=v),
        "shapflex_decomposition": lambda v: sr.shapflex_decomposition(
            model, rows, y[:30], verbose=v).shares,
    }


PUBLIC_CALLS = list(_public_calls()) if sys.platform != "win32" else []

#: The public functions (``sklearn_r2shap.__all__`` and ``metrics.__all__``)
#: that run no block of rows: reading a model, counting a cost, building an
#: ensemble from arrays, the expected value of the trees.
NO_ROW_WORK = {"to_ensemble", "estimate_cost", "expected_value", "piecewise_ensemble"}


def test_public_calls_cover_every_public_function():
    """Every public function that works over rows is one of the cases below
    (a new public function fails here until it is added)."""
    import inspect

    import sklearn_r2shap as sr

    functions = {name for module in (sr, sr.metrics) for name in module.__all__
                 if inspect.isfunction(getattr(module, name))}
    covered = {name.partition("(")[0] for name in PUBLIC_CALLS}
    assert NO_ROW_WORK <= functions
    assert functions - NO_ROW_WORK - covered == set()
    assert covered - functions == {"interventional_values"}  # the game of background=


def _as_arrays(result):
    import numpy as np

    return [np.asarray(part) for part in (result if isinstance(result, tuple) else (result,))]


@pytest.mark.parametrize("name", PUBLIC_CALLS)
def test_every_public_function_shows_progress_and_stops_between_blocks(name, monkeypatch,
                                                                       capsys):
    """verbose=1 shows the executor's progress; a KeyboardInterrupt raised inside
    the second block leaves at once (no third block runs), the progress is
    closed, and the next call gives the values of an uninterrupted one."""
    import numpy as np

    from sklearn_r2shap._execution import local

    monkeypatch.setattr(local, "block_rows_for", lambda *args, **kwargs: 7)  # 5 blocks
    call = _public_calls()[name]
    want = _as_arrays(call(0))
    assert capsys.readouterr().err == ""  # verbose=0 is silent

    bars = []

    class Recorded(local.Progress):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            bars.append(self)

    monkeypatch.setattr(local, "Progress", Recorded)
    got = _as_arrays(call(1))
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    assert bars and all(bar.verbose and bar.closed for bar in bars)
    assert any(bar.done == bar.total == 30 for bar in bars)
    assert "row" in capsys.readouterr().err  # the bar (tqdm) or its lines

    blocks = []
    originals = {executor: getattr(local, executor)
                 for executor in ("map_blocks", "reduce_blocks")}
    for executor, original in originals.items():

        def interrupted(function, *args, _original=original, **kwargs):
            def block(*block_args, **block_kwargs):
                blocks.append(1)
                if len(blocks) == 2:  # as a kernel does on SIGINT
                    raise KeyboardInterrupt
                return function(*block_args, **block_kwargs)
            return _original(block, *args, **kwargs)

        monkeypatch.setattr(local, executor, interrupted)
    bars.clear()
    with pytest.raises(KeyboardInterrupt):
        call(1)
    assert len(blocks) == 2  # nothing ran after the interrupt
    assert bars and all(bar.closed for bar in bars)
    for executor, original in originals.items():  # the same blocks, uninterrupted
        monkeypatch.setattr(local, executor, original)
    again = _as_arrays(call(0))
    for a, b in zip(again, want):
        np.testing.assert_array_equal(a, b)


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
