"""D^2 decomposition of classifiers: the same per-tree cost as the R^2 kernel.

For each classifier the script times ``r2_decomposition`` twice on the same
rows: on the classifier (its D^2, second-order or Brier games) and on its
*regression twin*, the very same trees read as one squared-error regressor
(``objective="squared_error"``, one output). Both run the same Q-SHAP
kernel over the same trees; the ratio classifier / twin is the cost of the
D^2 bookkeeping (derivatives per row and tree, the softmax loop, per-class
trees). It also times an ``XGBRegressor`` of the same shape fitted to a
continuous target, for scale (ms per row).

Models (X standard normal, 20 features): binary ``XGBClassifier`` (depth
--depth, --trees rounds), 3-class ``XGBClassifier`` (3 trees per round) and
binary ``RandomForestClassifier`` (Brier, symmetric mode). Usage::

    python benchmarks/bench_d2.py [--rows 2000] [--trees 100] [--depth 6] [--threads 2]
"""
import argparse
import os
import platform
import time
from dataclasses import replace

import numpy as np


def timed(fn, repeat=3):
    best = np.inf
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def twin(ensemble):
    """The trees the D^2 decomposition runs the kernel on, as one squared-error output
    (vector leaves split per output; binary Brier: class 1 only)."""
    outputs = [1] if ensemble.n_values == 2 else None
    single = ensemble.per_output(outputs) if ensemble.n_values > 1 else ensemble
    return replace(single, objective="squared_error", model_type="regression twin",
                   tree_output=np.zeros(single.n_trees, dtype=np.int64),
                   base_value=np.zeros(1), averaging=single.averaging)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()

    import sklearn
    import xgboost as xgb
    from sklearn.ensemble import RandomForestClassifier

    from sklearn_r2shap import r2_decomposition, to_ensemble

    rng = np.random.default_rng(0)
    X = rng.normal(size=(args.rows, 20))
    signal = X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) + X[:, 3] ** 2
    y_reg = signal + 0.5 * rng.normal(size=args.rows)
    y_bin = (signal + rng.normal(size=args.rows) > np.median(signal)).astype(int)
    y_three = np.digitize(signal + rng.normal(size=args.rows),
                          np.quantile(signal, [1 / 3, 2 / 3]))
    common = dict(n_estimators=args.trees, max_depth=args.depth, learning_rate=0.1,
                  tree_method="hist", n_jobs=args.threads, random_state=0)
    models = {
        "XGBClassifier binary": (xgb.XGBClassifier(**common).fit(X, y_bin), y_bin),
        "XGBClassifier 3 classes": (xgb.XGBClassifier(**common).fit(X, y_three), y_three),
        "RandomForestClassifier binary": (
            RandomForestClassifier(n_estimators=args.trees, max_depth=args.depth,
                                   n_jobs=args.threads, random_state=0).fit(X, y_bin), y_bin),
    }
    regressor = xgb.XGBRegressor(**common).fit(X, y_reg)

    print(f"# {platform.platform()}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, python {platform.python_version()}, "
          f"scikit-learn {sklearn.__version__}, xgboost {xgb.__version__}")
    print(f"# load average before: {os.getloadavg()}")
    print(f"# {args.rows} rows, 20 features, depth {args.depth}, {args.trees} rounds, "
          f"{args.threads} threads; best of 3")
    t_reg = timed(lambda: r2_decomposition(regressor, X, y_reg, n_jobs=args.threads))
    ens = to_ensemble(regressor)
    leaves = np.sum(ens.children_left < 0) / ens.n_trees
    print(f"XGBRegressor (R^2), {ens.n_trees} trees, {leaves:.1f} leaves/tree: "
          f"{1e3 * t_reg / args.rows:.3f} ms/row, "
          f"{1e6 * t_reg / args.rows / ens.n_trees:.2f} us per row and tree")
    print()
    print("| model | score | trees | leaves/tree | D^2: ms/row | twin R^2: ms/row | "
          "ratio D^2 / twin |")
    print("|---|---|---|---|---|---|---|")
    for name, (model, y) in models.items():
        result = r2_decomposition(model, X, y, n_jobs=args.threads)
        t_d2 = timed(lambda: r2_decomposition(model, X, y, n_jobs=args.threads))
        regression = twin(to_ensemble(model))
        target = regression.value[regression.children_left < 0].mean() + rng.normal(
            size=args.rows)  # any continuous target: the kernel work does not depend on it
        t_twin = timed(lambda: r2_decomposition(regression, X, target, n_jobs=args.threads))
        leaves = np.sum(regression.children_left < 0) / regression.n_trees
        print(f"| {name} | {result.score} ({result.mode}) | {regression.n_trees} | "
              f"{leaves:.1f} | {1e3 * t_d2 / args.rows:.3f} | {1e3 * t_twin / args.rows:.3f} | "
              f"{t_d2 / t_twin:.2f} |")
    print(f"\n# load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
