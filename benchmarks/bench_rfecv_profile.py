"""Where one ``ShapleyR2RFECV.fit`` spends its time, beside scikit-learn's ``RFECV``
(issue 33).

Data: diabetes (442 rows, 10 columns) with ``--copies`` row-permuted copies of
its columns (column j % 10, each copy permuted by its own draw of
``default_rng(--seed)``, as ``bench_selection.py`` builds them). Model:
``LGBMRegressor(n_estimators=100, num_leaves=15, learning_rate=0.05,
verbose=-1, n_jobs=1, random_state=0)``. Both selectors get ``step=--step`` and
``cv=KFold(5, shuffle=True, random_state=0)``; ours ``n_jobs=1, verbose=0``.
Run it with ``OMP_NUM_THREADS=1`` (the script sets it before importing NumPy
when it is unset).

Splits of the process's CPU time (``time.process_time``; one thread, so on an
idle machine it is the wall-clock time, and on a shared one it is what stays
comparable; the wall-clock totals are printed too): the functions below are
wrapped (exclusive time: a wrapped call inside another is counted once, in its
own category), everything else of the fit is "Python overhead":

- fit: ``LGBMRegressor.fit`` (both selectors);
- predict: ``LGBMRegressor.predict`` (scoring the held-out rows; RFECV's too);
- read: ``sklearn_r2shap._model._lightgbm.convert`` (model -> TreeEnsemble);
- decompose: ``sklearn_r2shap.decomposition.r2_decomposition`` (every module
  that holds it) less its kernel, split by the rows decomposed: the training
  rows that rank a fold's step (``rank, fold``), all rows in the final
  elimination (``rank, all rows``), held-out rows (``score``: none unless a
  change adds them); its kernel (``R2Terms.__call__``, the exact Q-SHAP
  terms: the per-tree tables and the per-row sums) is ``decompose: kernel``
  for all of them;
- metric: ``r2_score`` of the held-out predictions (ours and RFECV's scorer).

``--rounds`` alternates ours and RFECV (ours first) and reports each round;
the table is of the last round. ``--cprofile`` also prints the top functions
of one more fit of ours under cProfile (by own time and by cumulative time).

    OMP_NUM_THREADS=1 python benchmarks/bench_rfecv_profile.py [--rounds 2] [--cprofile]
"""
import argparse
import os
import sys

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import cProfile  # noqa: E402
import functools  # noqa: E402
import io  # noqa: E402
import platform  # noqa: E402
import pstats  # noqa: E402
import time  # noqa: E402
from collections import defaultdict  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

import numpy as np  # noqa: E402

LGBM = dict(n_estimators=100, num_leaves=15, learning_rate=0.05, verbose=-1, n_jobs=1,
            random_state=0)


def data(copies, seed):
    from sklearn.datasets import load_diabetes

    X, y = load_diabetes(return_X_y=True)
    rng = np.random.default_rng(seed)
    p = X.shape[1]
    noise = np.column_stack([X[rng.permutation(len(X)), j % p] for j in range(copies)])
    return np.hstack([X, noise]), y


def now():
    """(wall, CPU) seconds: the process's CPU time is what a shared, loaded
    machine leaves comparable (one thread: CPU = wall on an idle machine)."""
    return np.array([time.perf_counter(), time.process_time()])


class Clock:
    """Exclusive (wall, CPU) time per category of the wrapped functions."""

    def __init__(self):
        self.seconds = defaultdict(lambda: np.zeros(2))
        self.calls = defaultdict(int)
        self.rows = defaultdict(int)
        self._stack = []  # [category, start, time of the nested wrapped calls]

    def wrap(self, function, category):
        @functools.wraps(function)
        def timed(*args, **kwargs):
            name = category(*args, **kwargs) if callable(category) else category
            self._stack.append([name, now(), np.zeros(2)])
            try:
                return function(*args, **kwargs)
            finally:
                name, start, nested = self._stack.pop()
                took = now() - start
                self.seconds[name] = self.seconds[name] + took - nested
                self.calls[name] += 1
                if self._stack:
                    self._stack[-1][2] = self._stack[-1][2] + took
        timed.__wrapped_original__ = function
        return timed


def patch(clock, n_rows):
    """Wrap the functions of the categories; returns the undo list."""
    import lightgbm
    import sklearn.metrics

    import sklearn_r2shap
    from sklearn_r2shap import decomposition
    from sklearn_r2shap._model import _lightgbm

    undo = []

    def replace(owner, name, category):
        original = getattr(owner, name)
        setattr(owner, name, clock.wrap(original, category))
        undo.append((owner, name, original))

    replace(lightgbm.LGBMRegressor, "fit", "fit")
    replace(lightgbm.LGBMRegressor, "predict", "predict")
    replace(_lightgbm, "convert", "read")
    from sklearn_r2shap._games import r2 as _r2

    replace(_r2.R2Terms, "__call__", "decompose: kernel (all rows)")

    def rows_kind(model, X, y, *args, **kwargs):
        rows = X.shape[0]
        kind = ("decompose: rank, all rows" if rows == n_rows
                else "decompose: rank, fold" if rows > n_rows // 2 else "decompose: score")
        clock.rows[kind] += rows
        return kind

    original = decomposition.r2_decomposition
    wrapped = clock.wrap(original, rows_kind)
    for module in list(sys.modules.values()):
        if (getattr(module, "__name__", "").startswith("sklearn_r2shap")
                and getattr(module, "r2_decomposition", None) is original):
            setattr(module, "r2_decomposition", wrapped)
            undo.append((module, "r2_decomposition", original))
    r2_score = sklearn.metrics.r2_score
    for module in list(sys.modules.values()):
        name = getattr(module, "__name__", "")
        if ((name.startswith("sklearn_r2shap") or name.startswith("sklearn.feature_selection")
             or name == "sklearn.metrics._regression" or name == "sklearn.metrics")
                and getattr(module, "r2_score", None) is r2_score):
            replace(module, "r2_score", "metric")
    del sklearn_r2shap
    return undo


def unpatch(undo):
    for owner, name, original in reversed(undo):
        setattr(owner, name, original)


def ours(X, y, step, cv):
    import lightgbm

    from sklearn_r2shap import ShapleyR2RFECV

    return ShapleyR2RFECV(lightgbm.LGBMRegressor(**LGBM), step=step, cv=cv, n_jobs=1,
                          verbose=0).fit(X, y)


def theirs(X, y, step, cv):
    import lightgbm
    from sklearn.feature_selection import RFECV

    return RFECV(lightgbm.LGBMRegressor(**LGBM), step=step, cv=cv, n_jobs=1).fit(X, y)


def timed_fit(run, X, y, step, cv):
    clock = Clock()
    undo = patch(clock, len(X))
    try:
        start = now()
        fitted = run(X, y, step, cv)
        total = now() - start
    finally:
        unpatch(undo)
    return fitted, total, clock


ORDER = ["fit", "read", "decompose: kernel (all rows)", "decompose: rank, fold",
         "decompose: rank, all rows", "decompose: score", "predict", "metric"]


def table(results):
    """Markdown table of CPU seconds: calls, s, % per selector (and the wall total)."""
    names = list(results)
    head = ("| part | " + " | ".join(f"{n} calls | {n} CPU s | {n} %" for n in names)
            + " |")
    lines = [head, "|---|" + "---|---|---|" * len(names)]
    categories = [c for c in ORDER if any(c in clock.seconds for _, clock in results.values())]
    for category in categories + ["Python overhead (rest)", "total", "total (wall s)"]:
        cells = []
        for _, (total, clock) in results.items():
            if category == "total (wall s)":
                cells.append(f" | {total[0]:.2f} | ")
                continue
            if category == "total":
                seconds, calls = total[1], ""
            elif category.startswith("Python"):
                seconds, calls = total[1] - sum(v[1] for v in clock.seconds.values()), ""
            else:
                seconds = clock.seconds[category][1] if category in clock.seconds else 0.0
                calls = clock.calls.get(category, 0)
            cells.append(f"{calls} | {seconds:.2f} | {100 * seconds / total[1]:.0f}")
        lines.append(f"| {category} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--step", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--cprofile", action="store_true")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    import lightgbm
    import sklearn
    from sklearn.model_selection import KFold

    import sklearn_r2shap

    X, y = data(args.copies, args.seed)
    cv = KFold(5, shuffle=True, random_state=0)
    print(f"date {datetime.now(timezone.utc).isoformat(timespec='seconds')}, "
          f"{platform.platform()}, {os.cpu_count()} cores, python "
          f"{platform.python_version()}, OMP_NUM_THREADS={os.environ['OMP_NUM_THREADS']}, "
          f"load {os.getloadavg()[0]:.2f}")
    print(f"sklearn_r2shap {sklearn_r2shap.__file__}, scikit-learn {sklearn.__version__}, "
          f"lightgbm {lightgbm.__version__}, numpy {np.__version__}")
    print(f"diabetes + {args.copies} row-permuted copies: {X.shape[0]} x {X.shape[1]}; "
          f"LGBMRegressor({LGBM}); step={args.step}, KFold(5, shuffle=True, random_state=0)")
    ours(X[:60, :5], y[:60], 2, 3)  # warm-up: imports, first calls
    for r in range(args.rounds):
        load = os.getloadavg()[0]
        mine, t_ours, c_ours = timed_fit(ours, X, y, args.step, cv)
        sk, t_sk, c_sk = timed_fit(theirs, X, y, args.step, cv)
        print(f"round {r + 1} (load {load:.2f}): ShapleyR2RFECV {t_ours[1]:.2f} CPU s "
              f"({t_ours[0]:.2f} wall), RFECV {t_sk[1]:.2f} CPU s ({t_sk[0]:.2f} wall), "
              f"ours / RFECV {t_ours[1] / t_sk[1]:.2f} CPU ({t_ours[0] / t_sk[0]:.2f} wall); "
              f"fits {c_ours.calls['fit']} "
              f"vs {c_sk.calls['fit']}; counts scored {len(mine.cv_results_['n_features'])} "
              f"vs {len(sk.cv_results_['n_features'])}; chosen {mine.n_features_} "
              f"vs {sk.n_features_} features", flush=True)
    print()
    print(table({"ShapleyR2RFECV": (t_ours, c_ours), "RFECV": (t_sk, c_sk)}))
    rows = {k: v for k, v in c_ours.rows.items()}
    print(f"\nrows decomposed (ours): {rows}; features in: {X.shape[1]}")
    print(f"ours chose {mine.n_features_} features "
          f"{np.flatnonzero(mine.support_).tolist()}; RFECV chose {sk.n_features_}")
    if args.cprofile:
        profiler = cProfile.Profile()
        profiler.enable()
        ours(X, y, args.step, cv)
        profiler.disable()
        for key in ("tottime", "cumulative"):
            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats(key).print_stats(args.top)
            text = out.getvalue()
            print(f"\ncProfile, one fit of ours, by {key}:\n"
                  + text[text.find("ncalls"):].rstrip())


if __name__ == "__main__":
    main()
