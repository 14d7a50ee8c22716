"""Latency per call ("Fast for one row too"): the time to explain a batch of
1, 10, 100, 1,000 and 10,000 rows, sklearn-r2shap against XGBoost,
LightGBM, shap, shapiq, FastTreeSHAP v2 and woodelf.

Models (20 features; 30,000 synthetic rows, the models fitted on the first
20,000, or 5,000 for the forest, the explained rows drawn from the last
10,000, held out):

* ``xgb6``: XGBoost ``XGBRegressor(n_estimators=200, max_depth=6)``;
* ``xgb8``: the same at ``max_depth=8``;
* ``lgbm``: LightGBM ``LGBMRegressor(n_estimators=200, num_leaves=255)``;
* ``rf``: scikit-learn ``RandomForestRegressor(random_state=0)`` (100 fully
  grown trees) on 5,000 rows.

What is timed, for each model, batch size and thread count:

* ours, prepared: ``sklearn_r2shap.TreeExplainer(model, n_jobs=threads)``
  made once, ``explainer.shap_values(X)`` timed; every ratio is against it.
  While the package has no ``TreeExplainer`` (row labelled "fallback"):
  ``to_ensemble(model)`` once, ``shap_values(ensemble, X)`` timed.
* ours, cold: ``shap_values(model, X)``, the conversion of the model
  included.
* XGBoost: ``booster.predict(DMatrix(X, nthread=threads), pred_contribs=True)``
  (and ``pred_interactions=True``), the ``DMatrix`` made inside the timing
  as a user pays it; LightGBM: ``booster_.predict(X, pred_contrib=True,
  num_threads=threads)``.
* shap: ``shap.TreeExplainer(model)`` made once, ``shap_values(X,
  check_additivity=False)`` timed; cold (explainer made inside the timing)
  for one row. On XGBoost and LightGBM models shap calls the library's own
  ``pred_contribs`` / ``pred_contrib`` (so it runs on the library's threads);
  on the random forest it runs its own single-threaded C++ TreeSHAP.
  ``shap-cpp``: shap's C++ TreeSHAP on the XGBoost models' trees (given as
  shap's dict format, see ``bench_local_shap.shap_cpp_explainer``), up to
  1,000 rows; single-threaded.
* shapiq: ``shapiq.TreeExplainer(model, index="SV", max_order=1)`` (and
  ``index="SII", max_order=2`` against our interaction values) made once,
  ``explain(x)`` called for each row (path-dependent shapiq explains one row
  per call, single-threaded), batches up to 100 rows; cold for one row.
* FastTreeSHAP v2 (``fasttreeshap-fixed``, needs numba; ``algorithm="v2"``,
  ``n_jobs=threads``) and woodelf (``WoodelfExplainer(model).shap_values``,
  its model parsed by the warm-up call), where they are installed (else
  skipped with the reason printed). woodelf's path-dependent values cost
  about the same per call on 1 and 100 rows (a fixed cost: 6 s on xgb6
  here): timed on the smallest and the largest batch only, and not on the
  forest (about 2 s per fully grown tree, minutes a call).
* Interaction values (``--no-interactions`` to skip): ours
  ``shap_interaction_values`` against XGBoost ``pred_interactions`` and
  shapiq SII (off-diagonal = SII / 2, diagonal = SV minus the row's
  off-diagonal sum, shap's layout), batches up to ``--interaction-rows``
  (1,000), on ``--interaction-models`` (xgb6 xgb8 lgbm; the forest costs
  about 0.2 s a row, add ``rf`` to have it).

Each thread count runs in a process of its own with ``OMP_NUM_THREADS``,
``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS`` and ``NUMBA_NUM_THREADS`` set to
it, one after the other; the models are fitted once (by the first) and shared
through pickles. A cell: one warm-up call on the batch's first row (lazy
set-up, caches, thread pools; a large batch is not paid for twice), then the
best of ``--repeat`` timed calls, fewer once the cell has used
``--cell-seconds`` (at least one timed call). A method skips (printed) the
batch sizes where a call would take more than ``--max-call-seconds`` (60),
extrapolated from its smaller batches: on a 2-core machine that drops the
largest batches of the slower peers (and of ours) on the forest and on
LightGBM; raise it to have them.
Single-threaded peers (shap's C++, shapiq) are measured in every thread
setting alike and marked "1 thread". Agreement: the max abs difference from
our values on the first timed call, flagged BAD (printed loudly) above 1e-4
times the largest of our values for the XGBoost models and woodelf (float32
leaves and sums) or 1e-6 times it otherwise.

Output: stdout gets, per thread count, the ratios peer time / our prepared
time (above 1: we are faster), the time per call in ms and per row in us;
then the agreement. ``--out FILE.jsonl`` gets one JSON record per cell
(model, peer, mode, kind, rows, threads, seconds, max_abs_diff, versions,
machine, date), appended.

Setup (CPython 3.12: XGBoost 3.3+ and shapiq 1.7+ have no 3.11 wheels; see
/work/shared/PEERS.md)::

    PYENV_VERSION=3.12.1 python3 -m venv /work/venv312
    /work/venv312/bin/pip install numpy scipy scikit-learn "cython>=3" "setuptools>=77" pandas
    /work/venv312/bin/pip install --no-build-isolation --no-deps .
    /work/venv312/bin/pip install "xgboost>=3.4" lightgbm shap shapiq \\
        fasttreeshap-fixed numba woodelf-explainer

Usage (from the checkout root; with the package installed in the venv, or the
checkout on ``PYTHONPATH`` when its 3.12 extensions are built in place)::

    /work/venv312/bin/python benchmarks/bench_latency.py --out latency.jsonl
    /work/venv312/bin/python benchmarks/bench_latency.py --quick
    /work/venv312/bin/python benchmarks/bench_latency.py --models xgb6 \\
        --rows 1 10 100 --threads 1 --peers xgboost shap shapiq
"""
import argparse
import json
import os
import pickle
import platform
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MODELS = ("xgb6", "xgb8", "lgbm", "rf")
PEERS = ("ours-cold", "xgboost", "lightgbm", "shap", "shap-cpp", "shapiq",
         "fasttreeshap", "woodelf")
DISTRIBUTIONS = ("numpy", "scikit-learn", "xgboost", "lightgbm", "shap", "shapiq",
                 "fasttreeshap-fixed", "woodelf-explainer", "numba")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                    "NUMBA_NUM_THREADS")
FEATURES, N_ROWS, N_TRAIN, N_TRAIN_RF = 20, 30_000, 20_000, 5_000


@dataclass
class Method:
    """One way of computing values, timed on batches of rows."""
    peer: str                        # the label in the tables
    mode: str                        # "prepared", "cold" or "native"
    run: Callable                    # X -> (n, p) values or (n, p, p) interaction values
    kind: str = "values"             # or "interactions"
    max_rows: Optional[int] = None   # larger batches skipped (slow peers)
    single_threaded: bool = False    # runs on one thread whatever the setting
    float32: bool = False            # computes in float32 (looser agreement)
    fixed_cost: bool = False         # about the same time a call at any batch size:
                                     # timed on the smallest and largest only


class Skip(Exception):
    """A peer that cannot run here (not installed, fails); the message says why."""


# ----------------------------------------------------------------------------
# data and models


def make_data():
    """30,000 rows: pairwise and smooth effects in the first features, a linear
    term in every feature (so that the trees split on all of them)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_ROWS, FEATURES))
    y = (X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + X[:, 3] ** 2 + X[:, 4] * X[:, 5]
         + X @ rng.uniform(-0.5, 0.5, size=FEATURES) + 0.5 * rng.normal(size=N_ROWS))
    return X, y


def fit(name, X, y, trees, threads):
    if name in ("xgb6", "xgb8"):
        import xgboost

        return xgboost.XGBRegressor(n_estimators=trees, max_depth=int(name[3:]),
                                    n_jobs=threads, random_state=0).fit(X[:N_TRAIN], y[:N_TRAIN])
    if name == "lgbm":
        import lightgbm

        return lightgbm.LGBMRegressor(n_estimators=trees, num_leaves=255, n_jobs=threads,
                                      random_state=0, verbose=-1).fit(X[:N_TRAIN], y[:N_TRAIN])
    from sklearn.ensemble import RandomForestRegressor

    return RandomForestRegressor(n_estimators=trees // 2, random_state=0,
                                 n_jobs=threads).fit(X[:N_TRAIN_RF], y[:N_TRAIN_RF])


def load_model(name, args, X, y, threads):
    """The model, fitted by the first thread setting and pickled for the next
    ones (the same trees in every setting); set to run on ``threads``."""
    path = os.path.join(args.workdir, f"{name}.pkl")
    if os.path.exists(path):
        with open(path, "rb") as handle:
            model = pickle.load(handle)
    else:
        model = fit(name, X, y, args.trees, threads)
        with open(path, "wb") as handle:
            pickle.dump(model, handle)
    model.set_params(n_jobs=threads)
    if name.startswith("xgb"):
        model.get_booster().set_param({"nthread": threads})
    return model


# ----------------------------------------------------------------------------
# methods: one function per peer, each returns the Methods that apply to the model


def ours(name, model, threads, args):
    """Our prepared explainer (the reference of every ratio) and our cold call."""
    import sklearn_r2shap

    if hasattr(sklearn_r2shap, "TreeExplainer"):
        explainer = sklearn_r2shap.TreeExplainer(model, n_jobs=threads, verbose=0)
        label, values, interactions = ("ours TreeExplainer", explainer.shap_values,
                                       explainer.shap_interaction_values)
    else:
        ensemble = sklearn_r2shap.to_ensemble(model)
        label = "ours fallback (to_ensemble + shap_values)"

        def values(X):
            return sklearn_r2shap.shap_values(ensemble, X, n_jobs=threads, verbose=0)[:, :-1]

        def interactions(X):
            return sklearn_r2shap.shap_interaction_values(
                ensemble, X, n_jobs=threads, verbose=0)[:, :-1, :-1]

    methods = [Method(label, "prepared", values),
               Method(label, "prepared", interactions, "interactions", args.interaction_rows)]
    if "ours-cold" in args.peers:
        methods.append(Method("ours shap_values(model, X)", "cold", lambda X: (
            sklearn_r2shap.shap_values(model, X, n_jobs=threads, verbose=0)[:, :-1])))
    return methods


def peer_xgboost(name, model, threads, args):
    if not name.startswith("xgb"):
        return []
    import xgboost

    booster = model.get_booster()

    def contribs(X, **what):
        out = booster.predict(xgboost.DMatrix(X, nthread=threads), **what)
        return out[:, :-1, :-1] if what.get("pred_interactions") else out[:, :-1]

    return [Method("XGBoost pred_contribs", "native", lambda X: contribs(X, pred_contribs=True),
                   float32=True),
            Method("XGBoost pred_interactions", "native",
                   lambda X: contribs(X, pred_interactions=True), "interactions",
                   args.interaction_rows, float32=True)]


def peer_lightgbm(name, model, threads, args):
    if name != "lgbm":
        return []
    return [Method("LightGBM pred_contrib", "native", lambda X: model.booster_.predict(
        X, pred_contrib=True, num_threads=threads)[:, :-1])]


def peer_shap(name, model, threads, args):
    import shap

    own_cpp = name == "rf"   # else shap calls XGBoost's / LightGBM's own TreeSHAP
    label = "shap TreeExplainer" + (" (C++, 1 thread)" if own_cpp else
                                    " (calls XGBoost)" if name.startswith("xgb")
                                    else " (calls LightGBM)")
    explainer = shap.TreeExplainer(model)
    return [Method(label, "prepared",
                   lambda X: explainer.shap_values(X, check_additivity=False),
                   single_threaded=own_cpp),
            Method(label, "cold", lambda X: shap.TreeExplainer(model).shap_values(
                X, check_additivity=False), max_rows=1, single_threaded=own_cpp)]


def peer_shap_cpp(name, model, threads, args):
    """shap's own C++ TreeSHAP on the XGBoost trees (shap would call XGBoost)."""
    if not name.startswith("xgb"):
        return []
    from bench_local_shap import shap_cpp_explainer
    from sklearn_r2shap import to_ensemble

    explainer = shap_cpp_explainer(to_ensemble(model))
    return [Method("shap C++ TreeSHAP (1 thread)", "prepared",
                   lambda X: explainer.shap_values(X, check_additivity=False),
                   max_rows=1000, single_threaded=True)]


def peer_shapiq(name, model, threads, args):
    import shapiq

    def sv(explainer):
        return lambda X: np.array([explainer.explain(x).get_n_order_values(1) for x in X])

    def sii(explainer):
        def run(X):
            out = np.empty((len(X), X.shape[1], X.shape[1]))
            for i, x in enumerate(X):
                values = explainer.explain(x)
                half = values.get_n_order_values(2) / 2   # shap's layout: SII split in two
                np.fill_diagonal(half, 0.0)
                np.fill_diagonal(half, values.get_n_order_values(1) - half.sum(axis=1))
                out[i] = half
            return out
        return run

    def explainer(index, order):
        return shapiq.TreeExplainer(model=model, index=index, max_order=order)

    max_rows = min(100, args.interaction_rows)
    return [Method("shapiq SV (1 thread)", "prepared", sv(explainer("SV", 1)), max_rows=100,
                   single_threaded=True),
            Method("shapiq SV (1 thread)", "cold", lambda X: sv(explainer("SV", 1))(X),
                   max_rows=1, single_threaded=True),
            Method("shapiq SII (1 thread)", "prepared", sii(explainer("SII", 2)),
                   "interactions", max_rows=max_rows, single_threaded=True)]


def peer_fasttreeshap(name, model, threads, args):
    try:
        import fasttreeshap
    except ImportError:
        try:  # fasttreeshap-fixed 0.1.5 imports as fasttreeshap_fixed
            import fasttreeshap_fixed as fasttreeshap
        except ImportError as error:
            raise Skip(f"fasttreeshap-fixed not importable: {error}") from error
    explainer = fasttreeshap.TreeExplainer(model, algorithm="v2", n_jobs=threads)
    return [Method("FastTreeSHAP v2", "prepared",
                   lambda X: explainer.shap_values(X, check_additivity=False))]


def peer_woodelf(name, model, threads, args):
    """woodelf's path-dependent values cost about the same per call on 1 and 100
    rows (6 s on xgb6, 2 s per fully grown forest tree here): timed on the
    smallest and the largest batch only, not on the forest."""
    if name == "rf":
        raise Skip("about 2 s per fully grown tree and call (minutes a call on 100 trees)")
    try:
        import pandas as pd
        from woodelf import WoodelfExplainer
    except ImportError as error:
        raise Skip(f"woodelf-explainer not importable: {error}") from error
    columns = [f"f{j}" for j in range(FEATURES)]
    explainer = WoodelfExplainer(model)   # parses the model at the first (warm-up) call
    return [Method("woodelf", "prepared", lambda X: explainer.shap_values(
        pd.DataFrame(X, columns=columns), verbose=False), float32=True, fixed_cost=True)]


PEER_FUNCTIONS = {"xgboost": peer_xgboost, "lightgbm": peer_lightgbm, "shap": peer_shap,
                  "shap-cpp": peer_shap_cpp, "shapiq": peer_shapiq,
                  "fasttreeshap": peer_fasttreeshap, "woodelf": peer_woodelf}


# ----------------------------------------------------------------------------
# timing and agreement


def time_cell(run, X, repeat, cell_seconds):
    """(best seconds, timed calls, values of the first timed call). The warm-up
    call explains the first row only (lazy set-up, caches, thread pools): a
    large batch is not paid for twice."""
    run(X[:1])
    times, values, start = [], None, time.perf_counter()
    for _ in range(repeat):
        tic = time.perf_counter()
        out = run(X)
        times.append(time.perf_counter() - tic)
        if values is None:
            values = np.asarray(out, dtype=np.float64)
        if time.perf_counter() - start >= cell_seconds:
            break
    return min(times), len(times), values


def predicted_seconds(method, history, rows):
    """A call's time on ``rows`` extrapolated from the method's (rows, seconds)
    on smaller batches: the slope of the last two (a fixed cost per call is not
    scaled), or proportional to the rows after one (the same for a method
    with a fixed cost)."""
    if not history:
        return 0.0
    (n1, t1) = history[-1]
    if method.fixed_cost:
        return t1
    slope = (t1 - history[-2][1]) / (n1 - history[-2][0]) if len(history) > 1 else t1 / n1
    return t1 + max(slope, 0.0) * (rows - n1)


def tolerance(name, method, reference):
    """Largest acceptable difference, relative to the largest of our values:
    XGBoost keeps leaves and sums in float32, and so does woodelf."""
    loose = method.float32 or name.startswith("xgb")
    return (1e-4 if loose else 1e-6) * max(1.0, float(np.abs(reference).max()))


def environment():
    from importlib import metadata

    import sklearn_r2shap

    versions = {"python": platform.python_version(),
                "sklearn_r2shap": getattr(sklearn_r2shap, "__version__", "?"),
                "sklearn_r2shap_path": os.path.dirname(sklearn_r2shap.__file__)}
    for dist in DISTRIBUTIONS:
        try:
            versions[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            versions[dist] = None
    try:
        root = os.path.dirname(os.path.dirname(os.path.abspath(sklearn_r2shap.__file__)))
        versions["sklearn_r2shap_commit"] = subprocess.run(
            ["git", "-C", root, "describe", "--always", "--dirty"],
            capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        versions["sklearn_r2shap_commit"] = None
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle
                       if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    machine = {"processor": platform.processor(), "cpu_model": cpu, "nproc": os.cpu_count(),
               "node": platform.node()}
    return versions, machine


def methods_for(name, model, threads, args):
    """Ours first (the reference), then every requested peer that applies."""
    methods = ours(name, model, threads, args)
    for peer in args.peers:
        if peer not in PEER_FUNCTIONS:
            continue
        try:
            methods += PEER_FUNCTIONS[peer](name, model, threads, args)
        except Skip as why:
            print(f"[skip] {peer} on {name}: {why}", flush=True)
        except Exception as error:   # a peer that breaks is reported, not fatal
            print(f"[skip] {peer} on {name}: {type(error).__name__}: {error}", flush=True)
    return methods


def wanted(name, method, rows, history, args):
    """Whether ``method`` runs on a batch of ``rows`` (printed when it would be too slow)."""
    if method.max_rows is not None and rows > method.max_rows:
        return False
    if method.fixed_cost and rows not in (min(args.rows), max(args.rows)):
        return False
    guess = predicted_seconds(method, history, rows)
    if guess > args.max_call_seconds:
        print(f"[skip] {name} {method.kind} {method.peer} [{method.mode}] {rows} rows: about "
              f"{guess:.0f} s a call (--max-call-seconds {args.max_call_seconds:g})",
              flush=True)
        return False
    return True


def measure(name, kind, methods, X_held, threads, args, context):
    """Records of one model and kind: every batch size, ours first on each."""
    history = {id(m): [] for m in methods}
    for rows in args.rows:
        X, reference = X_held[:rows], None
        for method in methods:
            if reference is None and method is not methods[0]:
                break   # ours not measured on this batch: nothing to compare with
            if not wanted(name, method, rows, history[id(method)], args):
                continue
            try:
                seconds, calls, values = time_cell(method.run, X, args.repeat,
                                                   args.cell_seconds)
            except Exception as error:
                print(f"[fail] {name} {kind} {method.peer} [{method.mode}] {rows} rows: "
                      f"{type(error).__name__}: {error}", flush=True)
                continue
            history[id(method)].append((rows, seconds))
            reference = values if reference is None else reference
            diff = float(np.max(np.abs(values.reshape(reference.shape) - reference)))
            scale = float(np.abs(reference).max())
            bad = not diff <= tolerance(name, method, reference)
            print(f"{name:5s} {threads}t {kind:12s} {rows:6d} rows  {method.peer} "
                  f"[{method.mode}]: {1e3 * seconds:10.3f} ms ({calls} calls)  "
                  f"max abs diff {diff:.1e}", flush=True)
            if bad:
                print(f"!!!!! BAD AGREEMENT: {name} {kind} {method.peer} [{method.mode}] "
                      f"{rows} rows: max abs diff {diff:.3e} (values up to {scale:.3g}) !!!!!",
                      flush=True)
            yield dict(model=name, peer=method.peer, mode=method.mode, kind=kind, rows=rows,
                       threads=threads, peer_threads=1 if method.single_threaded else threads,
                       seconds=seconds, seconds_per_row=seconds / rows, timed_calls=calls,
                       max_abs_diff=diff, max_abs_value=scale,
                       agreement="BAD" if bad else "ok", trees=args.trees,
                       load=os.getloadavg()[0],
                       date=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **context)


def child(args):
    """One thread setting: every model, method and batch size; records to a file."""
    threads = args.child
    versions, machine = environment()
    context = {"versions": versions, "machine": machine}
    X, y = make_data()
    kinds = ("values",) if args.no_interactions else ("values", "interactions")
    with open(os.path.join(args.workdir, f"records-{threads}.jsonl"), "w") as out:
        for name in args.models:
            model = load_model(name, args, X, y, threads)
            try:
                methods = methods_for(name, model, threads, args)
            except Exception as error:   # ours failed: loudly, then the next model
                print(f"!!!!! ours failed on {name}: {type(error).__name__}: {error} !!!!!",
                      flush=True)
                continue
            for kind in kinds:
                if kind == "interactions" and name not in args.interaction_models:
                    continue
                for record in measure(name, kind, [m for m in methods if m.kind == kind],
                                      X[N_TRAIN:], threads, args, context):
                    out.write(json.dumps(record) + "\n")
                    out.flush()


# ----------------------------------------------------------------------------
# the parent: one process per thread setting, then the tables


def table(records, threads, rows, cell, title):
    """Markdown table: a row per (model, kind, peer, mode), a column per batch size."""
    keys = []
    for r in records:
        key = (r["model"], r["kind"], r["peer"], r["mode"])
        if r["threads"] == threads and key not in keys:
            keys.append(key)
    lines = [f"\n{title}\n", "| model | kind | peer | mode | " + " | ".join(
        f"{n:,}" for n in rows) + " |", "|---|---|---|---|" + "---|" * len(rows)]
    for key in keys:
        cells = []
        for n in rows:
            found = [r for r in records if (r["model"], r["kind"], r["peer"], r["mode"]) == key
                     and r["threads"] == threads and r["rows"] == n]
            text = cell(found[0], records) if found else ""
            cells.append(text + (" BAD" if found and found[0]["agreement"] == "BAD" else ""))
        if any(cells):
            lines.append("| " + " | ".join(key) + " | " + " | ".join(cells) + " |")
    print("\n".join(lines))


def ours_prepared(record, records):
    for r in records:
        if (r["model"], r["kind"], r["rows"], r["threads"]) == (
                record["model"], record["kind"], record["rows"], record["threads"]) \
                and r["peer"].startswith("ours") and r["mode"] == "prepared":
            return r
    return None


def ratio_cell(record, records):
    ours_record = ours_prepared(record, records)
    if ours_record is None or ours_record is record:
        return ""
    return f"{record['seconds'] / ours_record['seconds']:.2f}"


def report(records, args):
    first = records[0]
    print(f"\n# bench_latency | {first['machine']['cpu_model']} | nproc "
          f"{first['machine']['nproc']} | {first['date']} | trees {args.trees} | "
          f"python {first['versions']['python']} | sklearn_r2shap at "
          f"{first['versions']['sklearn_r2shap_path']}, commit "
          f"{first['versions']['sklearn_r2shap_commit'] or 'unknown'} | "
          + ", ".join(f"{k} {v}" for k, v in first["versions"].items()
                      if k not in ("python", "sklearn_r2shap_commit", "sklearn_r2shap_path")
                      and v))
    for threads in args.threads:
        print(f"\n## {threads} thread{'s' if threads > 1 else ''}")
        table(records, threads, args.rows, ratio_cell,
              f"Peer time / our prepared time, {threads} thread(s) (above 1: we are faster; "
              "peers marked '1 thread' run single-threaded in every setting)")
        table(records, threads, args.rows, lambda r, _: f"{1e3 * r['seconds']:.3f}",
              f"Time per call, ms, {threads} thread(s)")
        table(records, threads, args.rows, lambda r, _: f"{1e6 * r['seconds_per_row']:.1f}",
              f"Time per row, us, {threads} thread(s)")
    print("\n## Agreement with our values (max abs diff over batches and threads)\n")
    print("| model | kind | peer | mode | max abs diff | largest value | agreement |")
    print("|---|---|---|---|---|---|---|")
    seen = {}
    for r in records:
        key = (r["model"], r["kind"], r["peer"], r["mode"])
        if not r["peer"].startswith("ours") or r["mode"] != "prepared":
            old = seen.get(key)
            if old is None or r["max_abs_diff"] > old["max_abs_diff"] or r["agreement"] == "BAD":
                seen[key] = r
    for key, r in seen.items():
        print(f"| {' | '.join(key)} | {r['max_abs_diff']:.1e} | {r['max_abs_value']:.3g} | "
              f"{r['agreement']} |")
    bad = [r for r in records if r["agreement"] == "BAD"]
    if bad:
        print(f"\n!!!!! {len(bad)} cells with BAD agreement (see the table above) !!!!!")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=MODELS, default=list(MODELS))
    parser.add_argument("--rows", nargs="+", type=int, default=None,
                        help="batch sizes (default 1 10 100 1000 10000; --quick: 1 10)")
    parser.add_argument("--threads", nargs="+", type=int, default=None,
                        help="thread settings, one process each (default 1 2; --quick: 1)")
    parser.add_argument("--peers", nargs="+", choices=PEERS, default=list(PEERS))
    parser.add_argument("--trees", type=int, default=200,
                        help="boosting rounds (the forest gets half: 100)")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--cell-seconds", type=float, default=2.0,
                        help="stop repeating a cell once it has used this long")
    parser.add_argument("--max-call-seconds", type=float, default=60.0,
                        help="skip a batch size where a call would take longer "
                             "(extrapolated from the smaller batches)")
    parser.add_argument("--no-interactions", action="store_true")
    parser.add_argument("--interaction-rows", type=int, default=1000,
                        help="largest batch for interaction values")
    parser.add_argument("--interaction-models", nargs="+", choices=MODELS,
                        default=["xgb6", "xgb8", "lgbm"],
                        help="rf: about 0.2 s a row for ours and shapiq, so not by default")
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 20 trees (10 in the forest), rows 1 10 and one "
                             "thread unless given, at most 2 timed calls of 0.5 s a cell")
    parser.add_argument("--out", default=None, help="JSON lines, one record per cell")
    parser.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.trees, args.rows, args.threads = 20, args.rows or [1, 10], args.threads or [1]
        args.repeat, args.cell_seconds = min(args.repeat, 2), min(args.cell_seconds, 0.5)
    args.rows = args.rows or [1, 10, 100, 1000, 10_000]
    args.threads = args.threads or [1, 2]
    if args.child is not None:
        warnings.filterwarnings("ignore")
        return child(args)

    records = []
    with tempfile.TemporaryDirectory(prefix="bench_latency_") as workdir:
        for threads in args.threads:   # one setting at a time, each in its own process
            env = dict(os.environ, **{name: str(threads) for name in THREAD_VARIABLES})
            print(f"# {threads} thread(s)", flush=True)
            done = subprocess.run([sys.executable, os.path.abspath(__file__), *sys.argv[1:],
                                   "--child", str(threads), "--workdir", workdir], env=env)
            path = os.path.join(workdir, f"records-{threads}.jsonl")
            if os.path.exists(path):
                with open(path) as handle:
                    records += [json.loads(line) for line in handle]
            if done.returncode != 0:
                print(f"!!!!! the {threads}-thread run failed (exit {done.returncode}) !!!!!")
    if args.out:
        with open(args.out, "a") as handle:   # appends: several runs, one file
            handle.writelines(json.dumps(r) + "\n" for r in records)
    if records:
        report(records, args)


if __name__ == "__main__":
    main()
