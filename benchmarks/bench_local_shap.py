"""Local SHAP values: sklearn-r2shap against XGBoost, LightGBM and shap's C++.

Every peer runs in the same process, on the same rows, with the same number
of threads (``--threads``, default 2); shap's C++ TreeSHAP is single-threaded,
so it is also compared with our kernel on one thread. Ratios (peer time /
our time) are what count on a shared, noisy machine. Usage::

    python benchmarks/bench_local_shap.py [--threads 2] [--rows 5000] [--quick]
"""
import argparse
import platform
import time

import numpy as np


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
             np.max(np.abs(theirs - ours)))]


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

    print(f"# {platform.node()} | {platform.processor() or platform.machine()} | "
          f"{args.rows} rows explained, {args.trees} trees, {args.features} features")
    print(f"| peer | threads | peer s | ours s | peer / ours | max abs diff |")
    print(f"|---|---|---|---|---|---|")
    for name, peer_t, ours_t, threads, diff in rows:
        print(f"| {name} | {threads} | {peer_t:.3f} | {ours_t:.3f} | {peer_t / ours_t:.1f}x | {diff:.1e} |")


if __name__ == "__main__":
    main()
