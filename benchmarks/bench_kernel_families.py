"""One call per kernel family, for a before/after comparison of two checkouts.

Times (best of several) one public call for each family of kernels, at the
thread count given: the few-row and bulk pattern tables (a prepared
``TreeExplainer``, 1, 40 and 5,000 rows), interaction values and their
summary, the exact R^2 decomposition (Q-SHAP), Banzhaf and Beta Shapley
values (quadrature and TreeProb), Saabas values, raw predictions, TreeGrad
scores and interventional values, all on an XGBoost regressor of 200 trees
of depth 6 on 20,000 x 20 (trained once and kept in ``--model``).
``sklearn_r2shap`` is imported from the checkout given (with its kernels
built). Alternate two checkouts in one session to compare them, e.g.::

    for i in 1 2 3; do for d in /tmp/before .; do
        python benchmarks/bench_kernel_families.py $d --threads 2; done; done

Prints one JSON line of milliseconds per call.
"""
import argparse
import json
import os
import pickle
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("checkout")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default="/tmp/bench_kernel_families_xgb.pkl")
    args = parser.parse_args()
    sys.path.insert(0, args.checkout)
    import numpy as np
    import sklearn_r2shap as sr
    from sklearn_r2shap.interventional import interventional_values

    rng = np.random.default_rng(0)
    X = rng.normal(size=(20000, 20))
    y = X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(size=20000)
    if os.path.exists(args.model):
        with open(args.model, "rb") as f:
            model = pickle.load(f)
    else:
        import xgboost as xgb
        model = xgb.XGBRegressor(n_estimators=200, max_depth=6, n_jobs=1).fit(X, y)
        with open(args.model, "wb") as f:
            pickle.dump(model, f)
    n_jobs = args.threads
    explainer = sr.TreeExplainer(model, n_jobs=n_jobs)

    def best(call, repeat):
        call()
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return round(min(times) * 1000, 3)

    out = {
        "explainer 1 row": best(lambda: explainer.shap_values(X[:1]), 200),
        "explainer 40 rows": best(lambda: explainer.shap_values(X[:40]), 100),
        "explainer 5000 rows": best(lambda: explainer.shap_values(X[:5000]), 15),
        "interaction summary 500 rows": best(
            lambda: sr.shap_interaction_summary(model, X[:500], n_jobs=n_jobs), 8),
        "interaction values 100 rows": best(
            lambda: sr.shap_interaction_values(model, X[:100], n_jobs=n_jobs), 8),
        "r2_decomposition 500 rows": best(
            lambda: sr.r2_decomposition(model, X[:500], y[:500], n_jobs=n_jobs), 3),
        "banzhaf 2000 rows": best(lambda: sr.banzhaf_values(model, X[:2000], n_jobs=n_jobs), 5),
        "beta shapley (2, 1) 500 rows": best(
            lambda: sr.beta_shapley_values(model, X[:500], alpha=2, beta=1, n_jobs=n_jobs), 5),
        "saabas 5000 rows": best(lambda: sr.saabas_values(model, X[:5000], n_jobs=n_jobs), 5),
        "predict_raw 20000 rows": best(lambda: sr.predict_raw(model, X, n_jobs=n_jobs), 10),
        "treegrad_scores 200 rows": best(
            lambda: sr.treegrad_scores(model, X[:200], n_iter=20, n_jobs=n_jobs), 3),
        "interventional 200 rows, 100 background": best(
            lambda: interventional_values(model, X[:200], background=X[-100:], n_jobs=n_jobs), 5),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
