"""Fixed cost and throughput of the executor's two entries, for a before/after comparison.

Times (best of several, one thread) a 1-row and a 5,000-row ``shap_values``
call (through a prepared ``TreeExplainer``, and a 1-row call from the
model), the exact ``r2_decomposition`` of a forest and of an XGBoost model,
and ``shap_interaction_summary``, importing ``sklearn_r2shap`` from the
checkout given as the argument (with its kernels built). Alternate two
checkouts in one session to compare them, e.g.::

    git worktree add /tmp/before <commit>; cp sklearn_r2shap/_kernels/*.so /tmp/before/sklearn_r2shap/_kernels/
    for i in 1 2; do for d in /tmp/before .; do
        OMP_NUM_THREADS=1 python benchmarks/bench_entry_points.py $d; done; done
"""
import sys, time, json
sys.path.insert(0, sys.argv[1])
import numpy as np
import sklearn_r2shap as sr
import xgboost as xgb
from sklearn.ensemble import RandomForestRegressor
rng = np.random.default_rng(0)
X = rng.normal(size=(20000, 20)); y = X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(size=20000)
xg = xgb.XGBRegressor(n_estimators=200, max_depth=6, n_jobs=1).fit(X, y)
rf = RandomForestRegressor(n_estimators=30, max_depth=10, n_jobs=1, random_state=0).fit(X[:5000], y[:5000])
ex = sr.TreeExplainer(xg)
def best(f, k):
    t = []
    for _ in range(k):
        s = time.perf_counter(); f(); t.append(time.perf_counter() - s)
    return min(t)
out = {
 "xgb shap 1 row (explainer)": best(lambda: ex.shap_values(X[:1]), 30),
 "xgb shap 1 row (model)": best(lambda: sr.shap_values(xg, X[:1], n_jobs=1), 5),
 "xgb shap 5000 rows (explainer)": best(lambda: ex.shap_values(X[:5000]), 3),
 "rf r2_decomposition 2000 rows": best(lambda: sr.r2_decomposition(rf, X[:2000], y[:2000], n_jobs=1), 3),
 "xgb r2_decomposition 5000 rows": best(lambda: sr.r2_decomposition(xg, X[:5000], y[:5000], n_jobs=1), 3),
 "xgb interaction summary 500 rows": best(lambda: sr.shap_interaction_summary(xg, X[:500], n_jobs=1), 3),
}
print(json.dumps(out))
