"""Local SHAP values: sklearn-r2shap against XGBoost, LightGBM, shap's C++,
FastTreeSHAP v2 and woodelf.

Every peer runs on the same rows with the same number of threads
(``--threads``, default 2); shap's C++ TreeSHAP is single-threaded, so it is
also compared with our kernel on one thread. FastTreeSHAP v2
(``fasttreeshap-fixed``, ``algorithm="v2"``, ``n_jobs`` = threads) and
woodelf-explainer run in their own virtual environments
(``--fasttreeshap-python``, ``--woodelf-python``; see /work/shared/PEERS.md)
on the saved model, in a subprocess with ``OMP_NUM_THREADS`` = threads; their
time is the best of ``--repeat`` calls after a first one (model parsed).
Ratios (peer time / our time) are what count on a shared, noisy machine.
Usage::

    python benchmarks/bench_local_shap.py [--threads 2] [--rows 5000] [--quick]
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

PEER_SCRIPT = r"""
import json, sys, time
import numpy as np
peer, kind, model_path, rows_path, out_path, repeat, threads = sys.argv[1:8]
if kind == "xgboost":
    import xgboost as xgb
    model = xgb.Booster(model_file=model_path)
else:
    import lightgbm as lgb
    model = lgb.Booster(model_file=model_path)
X = np.load(rows_path)
if peer == "fasttreeshap":
    try:
        import fasttreeshap
    except ImportError:  # fasttreeshap-fixed 0.1.5 imports as fasttreeshap_fixed
        import fasttreeshap_fixed as fasttreeshap
    explainer = fasttreeshap.TreeExplainer(model, algorithm="v2", n_jobs=int(threads))
    run = lambda: explainer.shap_values(X, check_additivity=False)
else:
    import pandas as pd
    from woodelf import WoodelfExplainer
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    explainer = WoodelfExplainer(model)
    run = lambda: explainer.shap_values(frame, verbose=False)
values = run()
times = []
for _ in range(int(repeat)):
    start = time.perf_counter()
    values = run()
    times.append(time.perf_counter() - start)
np.save(out_path, np.asarray(values, dtype=np.float64))
print(json.dumps({"best": min(times)}))
"""


def run_peer(args, peer, kind, booster, X_explain):
    """(seconds, values) of ``peer`` in its own venv on the saved model, or None."""
    python = getattr(args, f"{peer}_python")
    if not python or not os.path.exists(python):
        return None
    with tempfile.TemporaryDirectory() as tmp:
        model_path = os.path.join(tmp, "model.json" if kind == "xgboost" else "model.txt")
        booster.save_model(model_path)
        rows_path, out_path = os.path.join(tmp, "rows.npy"), os.path.join(tmp, "out.npy")
        np.save(rows_path, X_explain)
        env = dict(os.environ, **{name: str(args.threads) for name in (
            "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")})
        done = subprocess.run([python, "-c", PEER_SCRIPT, peer, kind, model_path, rows_path,
                               out_path, str(args.repeat), str(args.threads)],
                              env=env, capture_output=True, text=True)
        if done.returncode != 0:
            print(f"{peer} failed on {kind}:\n{done.stderr[-2000:]}", file=sys.stderr)
            return None
        return json.loads(done.stdout.strip().splitlines()[-1])["best"], np.load(out_path)


def peer_rows(args, kind, booster, X_explain, ours, ours_t, label):
    rows = []
    for peer, name in (("fasttreeshap", "FastTreeSHAP v2"), ("woodelf", "woodelf")):
        result = run_peer(args, peer, kind, booster, X_explain)
        if result is not None:
            rows.append((f"{name}, {label}", result[0], ours_t, args.threads,
                         np.max(np.abs(result[1].reshape(len(X_explain), -1)[:, :ours.shape[1] - 1]
                                       - ours[:, :-1]))))
    return rows


def best_of(fn, repeat):
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def shap_cpp_explainer(ensemble):
    """shap's TreeExplainer on the same trees, given as shap's dict format, so
    that shap runs its own C++ TreeSHAP (for XGBoost models shap would
    otherwise call XGBoost's pred_contribs)."""
    import shap

    trees = []
    for t in range(ensemble.n_trees):
        nodes = ensemble.tree_nodes(t)
        start = nodes[0]
        left = ensemble.children_left[nodes]
        right = ensemble.children_right[nodes]
        trees.append({
            "children_left": np.where(left < 0, -1, left - start),
            "children_right": np.where(right < 0, -1, right - start),
            "children_default": ensemble.default_child[nodes] - start,
            "features": np.where(left < 0, -2, ensemble.feature[nodes]),
            # shap's C++ compares x <= t; XGBoost's x < t: use the largest
            # float32 below t so that float32 rows route the same way.
            "thresholds": np.nextafter(ensemble.threshold[nodes].astype(np.float32),
                                       np.float32(-np.inf)).astype(np.float64),
            "values": ensemble.value[nodes],
            "node_sample_weight": ensemble.cover[nodes],
        })
    return shap.TreeExplainer({"trees": trees, "base_offset": float(ensemble.base_value[0])})


def bench_xgboost(args, depth, X, y, X_explain):
    import xgboost as xgb

    from sklearn_r2shap import shap_values, to_ensemble

    model = xgb.XGBRegressor(n_estimators=args.trees, max_depth=depth, learning_rate=0.1,
                             n_jobs=args.threads, tree_method="hist", random_state=0)
    model.fit(X, y)
    booster = model.get_booster()
    dmat = xgb.DMatrix(X_explain, nthread=args.threads)
    ours_t, ours = best_of(lambda: shap_values(model, X_explain, n_jobs=args.threads), args.repeat)
    ours1_t, _ = best_of(lambda: shap_values(model, X_explain, n_jobs=1), args.repeat)
    xgb_t, theirs = best_of(lambda: booster.predict(dmat, pred_contribs=True), args.repeat)
    rows = [(f"XGBoost pred_contribs, depth {depth}", xgb_t, ours_t, args.threads,
             np.max(np.abs(theirs - ours)))]
    rows += peer_rows(args, "xgboost", booster, X_explain, ours, ours_t, f"XGBoost depth {depth}")
    if not args.no_shap:
        explainer = shap_cpp_explainer(to_ensemble(model))
        n_shap = min(len(X_explain), args.shap_rows)
        shap_t, sv = best_of(lambda: explainer.shap_values(X_explain[:n_shap]), 1)
        rows.append((f"shap C++ TreeSHAP, depth {depth} (1 thread, {n_shap} rows)",
                     shap_t * len(X_explain) / n_shap, ours1_t, 1,
                     np.max(np.abs(sv - ours[:n_shap, :-1]))))
    return rows


def bench_lightgbm(args, X, y, X_explain):
    import lightgbm as lgb

    from sklearn_r2shap import shap_values

    model = lgb.LGBMRegressor(n_estimators=args.trees, num_leaves=255, learning_rate=0.1,
                              n_jobs=args.threads, verbose=-1, random_state=0)
    model.fit(X, y)
    ours_t, ours = best_of(lambda: shap_values(model, X_explain, n_jobs=args.threads), args.repeat)
    lgb_t, theirs = best_of(
        lambda: model.booster_.predict(X_explain, pred_contrib=True, num_threads=args.threads),
        args.repeat)
    return [("LightGBM pred_contrib, num_leaves 255", lgb_t, ours_t, args.threads,
             np.max(np.abs(theirs - ours)))] + peer_rows(
        args, "lightgbm", model.booster_, X_explain, ours, ours_t, "LightGBM num_leaves 255")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--train-rows", type=int, default=20000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shap-rows", type=int, default=1000,
                        help="rows given to shap's slower single-threaded C++ (time scaled)")
    parser.add_argument("--no-shap", action="store_true")
    parser.add_argument("--fasttreeshap-python",
                        default="/work/peer-venvs/fasttreeshap/bin/python")
    parser.add_argument("--woodelf-python", default="/work/peer-venvs/woodelf/bin/python")
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.train_rows, args.trees, args.repeat, args.shap_rows = 300, 2000, 20, 1, 100

    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.train_rows, args.features))
    y = X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + X[:, 3] ** 2 + 0.5 * rng.normal(size=len(X))
    X_explain = rng.normal(size=(args.rows, args.features))

    rows = []
    for depth in (6, 8):
        rows += bench_xgboost(args, depth, X, y, X_explain)
    rows += bench_lightgbm(args, X, y, X_explain)

    load = os.getloadavg()
    print(f"# {platform.node()} | {platform.processor() or platform.machine()} | "
          f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} | "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} | "
          f"{args.rows} rows explained, {args.trees} trees, {args.features} features")
    print(f"| peer | threads | peer s | ours s | peer / ours | max abs diff |")
    print(f"|---|---|---|---|---|---|")
    for name, peer_t, ours_t, threads, diff in rows:
        print(f"| {name} | {threads} | {peer_t:.3f} | {ours_t:.3f} | {peer_t / ours_t:.1f}x | {diff:.1e} |")


if __name__ == "__main__":
    main()
