"""SHAP values of piecewise-linear trees: against brute force and against
the constant-leaf kernel on the same tree structure.

1. Brute force: the game evaluated on all 2^p coalitions (numpy, vectorised
   over rows), for LightGBM ``linear_tree`` models on p = 6..12 features.
   Exponential in p; ours is not.
2. The same LightGBM ``linear_tree`` models (type-2 trees: a leaf is linear
   in the numerical features of its path) against
   :func:`sklearn_r2shap.shap_values` on the *same trees with the linear
   terms removed* and the same covers: the cost of the linear leaves. Both
   the default routes (pattern tables for many rows) and the per-row
   quadrature kernels alone are timed.

Every line also prints the largest additivity error of our values against
LightGBM's ``predict(raw_score=True)`` (and, for brute force, the largest
difference between the two). Usage::

    python benchmarks/bench_piecewise.py [--threads 2] [--rows 5000] [--quick]
"""
import argparse
import dataclasses
import math
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


def data(n, p, seed=0):
    """Friedman-1-like: a few strong linear and interaction effects."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(size=(n, p))
    y = (10 * np.sin(np.pi * X[:, 0] * X[:, 1]) + 20 * (X[:, 2] - 0.5) ** 2 + 10 * X[:, 3]
         + 5 * X[:, 4] + rng.normal(size=n))
    return X, y


def brute_force(game, X):
    """Shapley values of the piecewise-linear game by enumerating coalitions.

    Numeric splits, no NaN (the benchmark's data). The game: per tree, node
    weights top-down (follow x where the split feature is in S, else the
    cover ratio), leaf value c_l + sum_{k in S} a_lk (x_k - mu_lk).
    """
    ens = game.ensemble
    n, p = X.shape
    internal = np.flatnonzero(ens.children_left >= 0)
    goes_left = np.zeros((ens.n_nodes, n), dtype=bool)
    goes_left[internal] = (X[:, ens.feature[internal]] <= ens.threshold[internal]).T
    leaves = np.flatnonzero(ens.children_left < 0)
    # per leaf: the linear part as a (p, n) matrix of a_lk (x_k - mu_lk)
    linear = {}
    for leaf in leaves:
        lo, hi = game.linear_start[leaf], game.linear_start[leaf + 1]
        if hi > lo:
            terms = np.zeros((p, n))
            for e in range(lo, hi):
                k = game.linear_feature[e]
                terms[k] += game.linear_coef[e] * (X[:, k] - game.linear_mean[e])
            linear[leaf] = terms
    order = np.arange(ens.n_nodes)  # preorder: parents first
    values = np.zeros((1 << p, n))
    for mask in range(1 << p):
        in_s = np.array([(mask >> j) & 1 for j in range(p)], dtype=bool)
        weight = np.ones((ens.n_nodes, n))
        for k in order:
            parent = ens.parent[k]
            if parent < 0:
                continue
            if in_s[ens.feature[parent]]:
                left = ens.children_left[parent] == k
                weight[k] = weight[parent] * (goes_left[parent] == left)
            else:
                weight[k] = weight[parent] * game.cover_ratio[k]
        total = np.full(n, float(ens.base_value[0]))
        for leaf in leaves:
            value = game.leaf_const[leaf, 0] + (linear[leaf][in_s].sum(axis=0)
                                                if leaf in linear else 0.0)
            total += weight[leaf] * value
        values[mask] = total
    phi = np.zeros((n, p + 1))
    sizes = np.array([bin(mask).count("1") for mask in range(1 << p)])
    for i in range(p):
        for mask in range(1 << p):
            if (mask >> i) & 1:
                continue
            s = sizes[mask]
            w = math.factorial(s) * math.factorial(p - 1 - s) / math.factorial(p)
            phi[:, i] += w * (values[mask | (1 << i)] - values[mask])
    phi[:, -1] = values[0]
    return phi


def bench_brute_force(args):
    import lightgbm as lgb

    from sklearn_r2shap import piecewise

    rows = []
    for p in args.brute_features:
        X, y = data(2000, p)
        model = lgb.LGBMRegressor(linear_tree=True, n_estimators=20, num_leaves=8,
                                  n_jobs=args.threads, verbose=-1, random_state=0).fit(X, y)
        X_explain = X[:args.brute_rows]
        ours_t, ours = best_of(lambda: piecewise.piecewise_shap_values(
            model, X_explain, background=X, n_jobs=args.threads), args.repeat)
        game = piecewise._build_game(piecewise.to_ensemble(model), X, None, args.threads)
        brute_t, brute = best_of(lambda: brute_force(game, X_explain), 1)
        raw = model.booster_.predict(X_explain, raw_score=True)
        rows.append((f"brute force 2^{p}, p = {p}, 20 trees, 8 leaves, {len(X_explain)} rows",
                     brute_t, ours_t, np.max(np.abs(brute - ours)),
                     np.max(np.abs(ours.sum(axis=1) - raw))))
    return rows


def bench_constant(args):
    import lightgbm as lgb

    from sklearn_r2shap import piecewise, to_ensemble
    from sklearn_r2shap._games import piecewise as piecewise_games
    from sklearn_r2shap.attributions import semivalues

    X, y = data(args.train_rows, args.features)
    X_explain = data(args.rows, args.features, seed=1)[0]
    rows = []
    for leaves in args.leaves:
        model = lgb.LGBMRegressor(linear_tree=True, n_estimators=args.trees, num_leaves=leaves,
                                  n_jobs=args.threads, verbose=-1, random_state=0).fit(X, y)
        ensemble = to_ensemble(model)
        game = piecewise._build_game(ensemble, X, None, args.threads)
        # the same trees without their linear terms, with the same covers
        constant = dataclasses.replace(
            ensemble, linear_start=None, linear_feature=None, linear_coef=None,
            linear_fallback=None, cover=game.cover, cover_ratio=game.cover_ratio)
        raw = model.booster_.predict(X_explain, raw_score=True)
        entries = len(ensemble.linear_coef) / max(1, int(ensemble.is_leaf.sum()))
        label = (f"num_leaves {leaves} (max depth {ensemble.max_depth}, "
                 f"{ensemble.n_path_features} path features, {entries:.1f} linear terms/leaf)")
        for route in (None, "quadrature"):
            game.tables = None  # the table layout is part of the timed work
            ours_t, ours = best_of(lambda: piecewise_games.game_values(
                game, X_explain, route=route, n_threads=args.threads), args.repeat)
            const_t, _ = best_of(lambda: semivalues(constant, X_explain, n_jobs=args.threads,
                                                    verbose=0, route=route), args.repeat)
            rows.append((label, "default (tables)" if route is None else "quadrature only",
                         ours_t, const_t, np.max(np.abs(ours.sum(axis=1) - raw))))
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, default=5000)
    parser.add_argument("--train-rows", type=int, default=20000)
    parser.add_argument("--features", type=int, default=10)
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = parser.parse_args()
    args.leaves = (15, 31, 63)
    args.brute_features = (6, 8, 10, 12)
    args.brute_rows = 20
    if args.quick:
        args.rows, args.train_rows, args.trees, args.repeat = 300, 2000, 10, 1
        args.leaves, args.brute_features, args.brute_rows = (15,), (6, 8), 5

    print(f"# {platform.node()} | {platform.processor() or platform.machine()} | "
          f"{args.threads} threads | LightGBM linear_tree regressors")
    print()
    print("| brute force | brute s | ours s | brute / ours | max abs diff | max additivity error |")
    print("|---|---|---|---|---|---|")
    for name, brute_t, ours_t, diff, additivity in bench_brute_force(args):
        print(f"| {name} | {brute_t:.3f} | {ours_t:.4f} | {brute_t / ours_t:.0f}x | "
              f"{diff:.1e} | {additivity:.1e} |")
    print()
    print(f"{args.rows} rows explained, {args.trees} trees, {args.features} features, "
          f"trained on {args.train_rows} rows")
    print()
    print("| model | route | linear s | constant s | linear / constant | max additivity error |")
    print("|---|---|---|---|---|---|")
    for name, route, ours_t, const_t, additivity in bench_constant(args):
        print(f"| {name} | {route} | {ours_t:.3f} | {const_t:.3f} | {ours_t / const_t:.2f}x | "
              f"{additivity:.1e} |")


if __name__ == "__main__":
    main()
