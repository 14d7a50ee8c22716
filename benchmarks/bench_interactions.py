"""SHAP interaction values: sklearn-r2shap against XGBoost ``pred_interactions``,
woodelf-explainer and shap's C++ TreeExplainer.

Models: XGBoost 200 trees of depth 6 and LightGBM 200 trees of 31 leaves, on
20 features; 500 rows explained. Every peer gets the same rows and the same
number of threads (``--threads``, also ``OMP_NUM_THREADS`` of woodelf's
process); shap's C++ is single-threaded, so it is compared with our kernel on
one thread. woodelf runs in its own virtual environment (``--woodelf-python``,
see /work/shared/PEERS.md) on the saved model, in a subprocess; its time is
that of a second call on the same explainer (its model already parsed), the
best of ``--repeat``. Ratios (peer time / our time) are what count on a
shared machine. Usage::

    python benchmarks/bench_interactions.py [--threads 2] [--rows 500] [--quick]
        [--woodelf-python /work/peer-venvs/woodelf/bin/python]
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_local_shap import best_of, shap_cpp_explainer  # noqa: E402

WOODELF_SCRIPT = r"""
import json, sys, time
import numpy as np, pandas as pd
kind, model_path, rows_path, out_path, repeat = sys.argv[1:6]
if kind == "xgboost":
    import xgboost as xgb
    model = xgb.Booster(model_file=model_path)
else:
    import lightgbm as lgb
    model = lgb.Booster(model_file=model_path)
from woodelf import WoodelfExplainer
X = np.load(rows_path)
frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
explainer = WoodelfExplainer(model)
start = time.perf_counter()
values = explainer.shap_interaction_values(frame, verbose=False)
first = time.perf_counter() - start
times = []
for _ in range(int(repeat)):
    start = time.perf_counter()
    values = explainer.shap_interaction_values(frame, verbose=False)
    times.append(time.perf_counter() - start)
np.save(out_path, np.asarray(values, dtype=np.float64))
print(json.dumps({"first": first, "best": min(times)}))
"""


def run_woodelf(args, kind, model_path, X_explain, tmp):
    if not args.woodelf_python or not os.path.exists(args.woodelf_python):
        return None
    rows_path = os.path.join(tmp, "rows.npy")
    out_path = os.path.join(tmp, "woodelf.npy")
    np.save(rows_path, X_explain)
    env = dict(os.environ, **{name: str(args.threads) for name in (
        "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")})
    done = subprocess.run([args.woodelf_python, "-c", WOODELF_SCRIPT, kind, model_path, rows_path,
                           out_path, str(args.repeat)], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        print(f"woodelf failed on {kind}:\n{done.stderr[-2000:]}", file=sys.stderr)
        return None
    times = json.loads(done.stdout.strip().splitlines()[-1])
    return times["best"], np.load(out_path)


def bench_xgboost(args, X, y, X_explain, tmp):
    import xgboost as xgb

    from sklearn_r2shap import shap_interaction_values, to_ensemble

    model = xgb.XGBRegressor(n_estimators=args.trees, max_depth=6, learning_rate=0.1,
                             n_jobs=args.threads, tree_method="hist", random_state=0)
    model.fit(X, y)
    booster = model.get_booster()
    ours_t, ours = best_of(
        lambda: shap_interaction_values(model, X_explain, n_jobs=args.threads), args.repeat)
    ours1_t, _ = best_of(lambda: shap_interaction_values(model, X_explain, n_jobs=1), args.repeat)
    dmat = xgb.DMatrix(X_explain, nthread=args.threads)
    xgb_t, theirs = best_of(lambda: booster.predict(dmat, pred_interactions=True), 1)
    label = f"XGBoost, {args.trees} trees, depth 6"
    rows = [(f"{label}: XGBoost pred_interactions", xgb_t, ours_t, args.threads,
             np.max(np.abs(theirs - ours)))]
    path = os.path.join(tmp, "xgb.json")
    booster.save_model(path)
    woodelf = run_woodelf(args, "xgboost", path, X_explain, tmp)
    if woodelf is not None:
        rows.append((f"{label}: woodelf", woodelf[0], ours_t, args.threads,
                     np.max(np.abs(woodelf[1] - ours[:, :-1, :-1]))))
    if not args.no_shap:
        explainer = shap_cpp_explainer(to_ensemble(model))
        n_shap = min(len(X_explain), args.shap_rows)
        shap_t, sv = best_of(lambda: explainer.shap_interaction_values(X_explain[:n_shap]), 1)
        rows.append((f"{label}: shap C++ (1 thread, {n_shap} rows, time scaled)",
                     shap_t * len(X_explain) / n_shap, ours1_t, 1,
                     np.max(np.abs(sv - ours[:n_shap, :-1, :-1]))))
    return rows


def bench_lightgbm(args, X, y, X_explain, tmp):
    import lightgbm as lgb

    from sklearn_r2shap import shap_interaction_values

    model = lgb.LGBMRegressor(n_estimators=args.trees, num_leaves=31, learning_rate=0.1,
                              n_jobs=args.threads, verbose=-1, random_state=0)
    model.fit(X, y)
    ours_t, ours = best_of(
        lambda: shap_interaction_values(model, X_explain, n_jobs=args.threads), args.repeat)
    ours1_t, _ = best_of(lambda: shap_interaction_values(model, X_explain, n_jobs=1), args.repeat)
    label = f"LightGBM, {args.trees} trees, 31 leaves"
    rows = []
    path = os.path.join(tmp, "lgb.txt")
    model.booster_.save_model(path)
    woodelf = run_woodelf(args, "lightgbm", path, X_explain, tmp)
    if woodelf is not None:
        rows.append((f"{label}: woodelf", woodelf[0], ours_t, args.threads,
                     np.max(np.abs(woodelf[1] - ours[:, :-1, :-1]))))
    if not args.no_shap:
        import shap

        explainer = shap.TreeExplainer(model)
        n_shap = min(len(X_explain), args.shap_rows)
        shap_t, sv = best_of(lambda: explainer.shap_interaction_values(X_explain[:n_shap]), 1)
        rows.append((f"{label}: shap C++ (1 thread, {n_shap} rows, time scaled)",
                     shap_t * len(X_explain) / n_shap, ours1_t, 1,
                     np.max(np.abs(sv - ours[:n_shap, :-1, :-1]))))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=500)
    parser.add_argument("--train-rows", type=int, default=20000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shap-rows", type=int, default=100,
                        help="rows given to shap's slower single-threaded C++ (time scaled)")
    parser.add_argument("--no-shap", action="store_true")
    parser.add_argument("--woodelf-python", default="/work/peer-venvs/woodelf/bin/python")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.train_rows, args.trees, args.repeat, args.shap_rows = 50, 2000, 10, 1, 20

    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.train_rows, args.features))
    y = X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + X[:, 3] ** 2 + 0.5 * rng.normal(size=len(X))
    X_explain = rng.normal(size=(args.rows, args.features))

    with tempfile.TemporaryDirectory() as tmp:
        rows = bench_xgboost(args, X, y, X_explain, tmp)
        rows += bench_lightgbm(args, X, y, X_explain, tmp)

    load = os.getloadavg()
    print(f"# {platform.node()} | {platform.processor() or platform.machine()} | "
          f"{os.cpu_count()} cores | load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} | "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | {args.rows} rows explained, "
          f"{args.features} features")
    print("| model: peer | threads | peer s | ours s | peer / ours | max abs diff |")
    print("|---|---|---|---|---|---|")
    for name, peer_t, ours_t, threads, diff in rows:
        print(f"| {name} | {threads} | {peer_t:.3f} | {ours_t:.3f} | {peer_t / ours_t:.1f}x "
              f"| {diff:.1e} |")


if __name__ == "__main__":
    main()
