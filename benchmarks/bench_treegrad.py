"""TreeGrad-Shap, TreeGrad and TreeGrad-Ranker: time per row against shap's C++ TreeSHAP.

Two models: one deep scikit-learn tree (``DecisionTreeRegressor`` of depth 20
with ~80k leaves, the size the TreeGrad paper benchmarks) and a 200-tree
XGBoost model of depth 6. Per row:

* TreeGrad-Shap: our ``shap_values`` (Gauss-Legendre quadrature of TreeGrad
  gradients; ``beta_shapley_values(alpha=16, beta=1)`` needs more nodes),
* one TreeGrad gradient ``grad F_x(z)`` (``multilinear_gradient``),
* TreeProb (``probabilistic_values`` with Shapley weights), for comparison,
* shap's C++ TreeSHAP (single-threaded): ``shap.TreeExplainer`` on the
  scikit-learn tree, and on the XGBoost trees given in shap's dict format
  (``bench_local_shap.shap_cpp_explainer``), so that shap runs its own C++
  rather than XGBoost's ``pred_contribs``.

Ours runs on 1 thread for the comparisons with shap's C++ and also on 2.
The models are converted once (``to_ensemble``), as shap's explainer is
built once; the conversion time is reported separately. Then TreeGrad-Ranker
(Adam, T = 100, step 5) scores 1000 rows of the 200-tree model.

For reference, the TreeGrad paper's public pure-Python code took 1.08 s per
row for TreeGrad-Shap on an 83k-leaf depth-20 tree on this machine, and shap's
C++ 23 ms. Usage::

    python benchmarks/bench_treegrad.py [--quick]
"""
import argparse
import os
import platform
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def best_of(fn, repeat):
    times = []
    out = None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def gradient_fn():
    """One TreeGrad gradient at z = 1/2 per row."""
    from sklearn_r2shap.ranking import multilinear_gradient

    return lambda ens, X, n_jobs: multilinear_gradient(ens, X, np.full(X.shape[1], 0.5),
                                                       n_jobs=n_jobs)[0]


def ranker_fn():
    """TreeGrad-Ranker scores (Adam, T = 100, step 5) of every row."""
    from sklearn_r2shap.ranking import treegrad_scores

    return lambda ens, X, n_jobs: treegrad_scores(ens, X, n_iter=100, step_size=5.0,
                                                  optimizer="adam", n_jobs=n_jobs)


def shapley_weights(n):
    from math import comb

    return np.array([1.0 / (n * comb(n - 1, s)) for s in range(n)])


def bench_model(name, model, ensemble, explainer, X_ours, X_shap, repeat, threads):
    """Per-row seconds of every method on one model; rows of (method, threads, s/row, check)."""
    from sklearn_r2shap import beta_shapley_values, shap_values
    from sklearn_r2shap.attributions import probabilistic_values

    gradient = gradient_fn()
    n_ours, n_shap = len(X_ours), len(X_shap)
    rows = []
    shap_t, sv = best_of(lambda: explainer.shap_values(X_shap), 1)
    rows.append((f"shap C++ TreeSHAP ({n_shap} rows)", 1, shap_t / n_shap, None))
    ours = shap_values(ensemble, X_shap, n_jobs=1)
    diff = np.max(np.abs(np.asarray(sv) - ours[:, :-1]))
    for threads_ in (1, threads):
        t, _ = best_of(lambda: shap_values(ensemble, X_ours, n_jobs=threads_), repeat)
        rows.append((f"ours TreeGrad-Shap: shap_values ({n_ours} rows)", threads_, t / n_ours,
                     f"max abs diff from shap {diff:.1e}"))
    t, _ = best_of(lambda: beta_shapley_values(ensemble, X_ours, alpha=16, beta=1, n_jobs=1),
                   repeat)
    rows.append((f"ours beta_shapley_values(16, 1) ({n_ours} rows)", 1, t / n_ours, None))
    for threads_ in (1, threads):
        t, _ = best_of(lambda: gradient(ensemble, X_ours, threads_), repeat)
        rows.append((f"ours one TreeGrad gradient at z = 1/2 ({n_ours} rows)", threads_,
                     t / n_ours, None))
    w = shapley_weights(ensemble.n_features)
    t, tp = best_of(lambda: probabilistic_values(ensemble, X_shap, w, n_jobs=1), 1)
    tp_err = np.max(np.abs(tp - ours)) / np.max(np.abs(ours[:, :-1]))
    rows.append((f"ours TreeProb, Shapley weights ({n_shap} rows)", 1, t / n_shap,
                 f"max rel diff from shap_values {tp_err:.1e}"))
    return [(name,) + r for r in rows]


def deep_tree(args):
    from sklearn.tree import DecisionTreeRegressor

    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.deep_train_rows, args.deep_features)).astype(np.float32)
    y = (X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + X[:, 3] ** 2 + X[:, 4:10].sum(axis=1)
         + 0.5 * rng.normal(size=len(X)))
    start = time.perf_counter()
    model = DecisionTreeRegressor(max_depth=args.deep_depth, min_samples_leaf=1,
                                  random_state=0).fit(X, y)
    fit_t = time.perf_counter() - start
    X_explain = rng.normal(size=(max(args.deep_rows, args.shap_rows), args.deep_features))
    X_explain = X_explain.astype(np.float32).astype(np.float64)
    return model, X_explain, fit_t


def xgboost_model(args):
    import xgboost as xgb

    rng = np.random.default_rng(1)
    X = rng.normal(size=(args.train_rows, args.features))
    y = X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + X[:, 3] ** 2 + 0.5 * rng.normal(size=len(X))
    model = xgb.XGBRegressor(n_estimators=args.trees, max_depth=6, learning_rate=0.1,
                             n_jobs=args.threads, tree_method="hist", random_state=0)
    model.fit(X, y)
    X_explain = rng.normal(size=(max(args.rows, args.ranker_rows), args.features))
    return model, X_explain.astype(np.float32).astype(np.float64)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=1000,
                        help="rows timed for ours on the XGBoost model")
    parser.add_argument("--deep-rows", type=int, default=300,
                        help="rows timed for ours on the deep tree")
    parser.add_argument("--shap-rows", type=int, default=200,
                        help="rows given to shap's C++ (and to TreeProb)")
    parser.add_argument("--deep-train-rows", type=int, default=170_000)
    parser.add_argument("--deep-features", type=int, default=40)
    parser.add_argument("--deep-depth", type=int, default=20)
    parser.add_argument("--train-rows", type=int, default=20_000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--trees", type=int, default=200)
    parser.add_argument("--ranker-rows", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.shap_rows, args.deep_train_rows, args.trees = 100, 20, 20_000, 20
        args.deep_rows = 50
        args.ranker_rows, args.repeat, args.train_rows = 100, 1, 2000

    import shap
    import sklearn
    import xgboost

    import sklearn_r2shap
    from bench_local_shap import shap_cpp_explainer
    from sklearn_r2shap import to_ensemble

    results, notes = [], []

    model, X_explain, fit_t = deep_tree(args)
    start = time.perf_counter()
    ensemble = to_ensemble(model)
    convert_t = time.perf_counter() - start
    name = (f"DecisionTreeRegressor depth {model.get_depth()}, {model.get_n_leaves()} leaves, "
            f"{args.deep_features} features")
    notes.append(f"{name}: fitted on {args.deep_train_rows} rows in {fit_t:.1f} s; "
                 f"to_ensemble {convert_t * 1e3:.0f} ms")
    results += bench_model(name, model, ensemble, shap.TreeExplainer(model),
                           X_explain[:args.deep_rows], X_explain[:args.shap_rows], args.repeat,
                           args.threads)

    model, X_explain = xgboost_model(args)
    start = time.perf_counter()
    ensemble = to_ensemble(model)
    convert_t = time.perf_counter() - start
    name = f"XGBoost {args.trees} trees depth 6, {args.features} features"
    notes.append(f"{name}: to_ensemble {convert_t * 1e3:.0f} ms; "
                 f"{int(np.sum(ensemble.children_left < 0))} leaves in all")
    results += bench_model(name, model, ensemble, shap_cpp_explainer(ensemble),
                           X_explain[:args.rows], X_explain[:args.shap_rows], args.repeat,
                           args.threads)

    ranker = ranker_fn()
    X_rank = X_explain[:args.ranker_rows]
    ranker_rows = []
    for threads_ in (1, args.threads):
        t, _ = best_of(lambda: ranker(ensemble, X_rank, threads_), 1)
        ranker_rows.append((threads_, t))

    print(f"# {platform.node()} | {platform.machine()} | python {platform.python_version()} | "
          f"sklearn-r2shap {sklearn_r2shap.__version__}, shap {shap.__version__}, "
          f"xgboost {xgboost.__version__}, scikit-learn {sklearn.__version__}")
    for note in notes:
        print(f"# {note}")
    print()
    print("| model | method | threads | ms / row | shap C++ / this | check |")
    print("|---|---|---|---|---|---|")
    shap_per_row = {}
    for model_name, method, threads_, per_row, check in results:
        if method.startswith("shap C++"):
            shap_per_row[model_name] = per_row
        ratio = shap_per_row[model_name] / per_row
        print(f"| {model_name} | {method} | {threads_} | {per_row * 1e3:.3f} | {ratio:.1f}x | "
              f"{check or ''} |")
    print()
    print("| TreeGrad-Ranker (Adam, T = 100, step 5) | threads | seconds | ms / row |")
    print("|---|---|---|---|")
    for threads_, t in ranker_rows:
        print(f"| {len(X_rank)} rows of the {args.trees}-tree XGBoost model | {threads_} | "
              f"{t:.2f} | {t / len(X_rank) * 1e3:.2f} |")


if __name__ == "__main__":
    main()
