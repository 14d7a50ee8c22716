"""Interaction shares of R^2 (issue 32, part 1): the cost of ``r2_interactions``
against the plain exact ``r2_decomposition`` of the same model, rows and
threads (goal: at most 3x on XGBoost depth 6), and beside it the two answers
users reach for today: mean |SHAP interaction| (``shap_interaction_summary``)
and Friedman's H-statistic of every pair (brute-force partial dependence on a
sample of rows, written out as the gallery example ``r2_interactions.py`` does).

Each call runs ``--repeat`` times alternately; the medians and the median of
the per-round ratios are printed (one JSON line per model, and a markdown
table with ``--markdown``).

    OMP_NUM_THREADS=2 python benchmarks/bench_r2_interactions.py --depths 4 6 8 --threads 2
"""
import argparse
import json
import platform
import time

import numpy as np


def make(n, p, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, size=(n, p))
    y = X[:, 0] * X[:, 1] + X[:, 2] + 0.5 * X[:, 3] * X[:, 4] + 0.2 * rng.normal(size=n)
    return X, y


def h_statistic(predict, X, n_sample=200, seed=0):
    """Friedman's H^2 of every pair, by brute-force partial dependence on a sample."""
    rng = np.random.default_rng(seed)
    S = X[rng.choice(len(X), size=min(n_sample, len(X)), replace=False)]
    n, p = S.shape

    def pd_of(columns):  # centred partial dependence at the sample's own values
        values = np.empty(n)
        for i in range(n):
            Z = S.copy()
            Z[:, columns] = S[i, columns]
            values[i] = predict(Z).mean()
        return values - values.mean()

    single = [pd_of([j]) for j in range(p)]
    H = np.zeros((p, p))
    for j in range(p):
        for k in range(j + 1, p):
            joint = pd_of([j, k])
            H[j, k] = H[k, j] = np.sum((joint - single[j] - single[k]) ** 2) / max(
                np.sum(joint ** 2), 1e-300)
    return H


def timed(function):
    start = time.perf_counter()
    value = function()
    return time.perf_counter() - start, value


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depths", type=int, nargs="*", default=[4, 6, 8])
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--rows", type=int, default=2000)
    parser.add_argument("--features", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--h-sample", type=int, default=200,
                        help="rows of the H-statistic's sample (0: skip it)")
    parser.add_argument("--markdown", default=None)
    args = parser.parse_args()

    import xgboost

    import sklearn_r2shap
    from sklearn_r2shap import r2_decomposition, r2_interactions, shap_interaction_summary

    X, y = make(args.rows, args.features)
    rows = []
    for depth in args.depths:
        model = xgboost.XGBRegressor(n_estimators=args.trees, max_depth=depth,
                                     learning_rate=0.1, n_jobs=args.threads,
                                     random_state=0).fit(X, y)
        plain, pairs, summary = [], [], []
        for _ in range(args.repeat):
            t, decomposition = timed(lambda: r2_decomposition(
                model, X, y, algorithm="exact", n_jobs=args.threads, verbose=0))
            plain.append(t)
            t, result = timed(lambda: r2_interactions(model, X, y, n_jobs=args.threads,
                                                      verbose=0))
            pairs.append(t)
            t, _ = timed(lambda: shap_interaction_summary(model, X, n_jobs=args.threads,
                                                          verbose=0))
            summary.append(t)
        assert np.allclose(result.shares.sum(axis=1), decomposition.shares, atol=1e-10)
        h_seconds = None
        if args.h_sample:
            h_seconds, H = timed(lambda: h_statistic(model.predict, X, args.h_sample))
        top = result.top_pairs(2)
        record = {
            "depth": depth, "trees": args.trees, "rows": args.rows,
            "features": args.features, "threads": args.threads,
            "r2_decomposition_s": float(np.median(plain)),
            "r2_interactions_s": float(np.median(pairs)),
            "ratio": float(np.median(np.array(pairs) / np.array(plain))),
            "ratio_rounds": [round(a / b, 2) for a, b in zip(pairs, plain)],
            "shap_interaction_summary_s": float(np.median(summary)),
            "h_statistic_s": h_seconds, "h_sample": args.h_sample,
            "top_pairs": [[str(a), str(b), round(float(s), 4)]
                          for a, b, s in zip(top.feature_1, top.feature_2, top.share)],
            "r2": round(float(result.score), 4),
            "machine": platform.processor() or platform.machine(),
            "version": sklearn_r2shap.__version__,
        }
        rows.append(record)
        print(json.dumps(record), flush=True)
    if args.markdown:
        with open(args.markdown, "w") as fh:
            fh.write("| depth | r2_decomposition s | r2_interactions s | ratio (rounds) | "
                     "shap_interaction_summary s | H-statistic s (sample) |\n"
                     "|---|---|---|---|---|---|\n")
            for r in rows:
                h = "" if r["h_statistic_s"] is None else (
                    f"{r['h_statistic_s']:.1f} ({r['h_sample']} rows)")
                fh.write(f"| {r['depth']} | {r['r2_decomposition_s']:.2f} | "
                         f"{r['r2_interactions_s']:.2f} | {r['ratio']:.2f} "
                         f"({', '.join(map(str, r['ratio_rounds']))}) | "
                         f"{r['shap_interaction_summary_s']:.2f} | {h} |\n")


if __name__ == "__main__":
    main()
