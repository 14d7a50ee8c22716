"""Outputs of the functions that sum over rows, saved to compare two checkouts bit for bit.

Saves the results of r2_decomposition (exact, sampled, subsampled, with
return_local, feature groups, weights, classifiers, a multi-output forest),
r2_interactions, shap_interaction_summary, the piecewise background's game,
and the map-side paths (shap_values, shap_interaction_values,
banzhaf_values, interventional values, Saabas, Beta Shapley and
probabilistic values, raw predictions, TreeGrad's gradients, scores and
ranker, the piecewise explainer), in memory and on dask (synchronous
scheduler), from the sklearn_r2shap importable in this environment (a
script's own folder comes first on the path, not the current one: with an
editable install, name the old checkout in PYTHONPATH; ``save`` prints the
package it read)::

    PYTHONPATH=/tmp/before python benchmarks/identity_sums.py save before.npz
    python benchmarks/identity_sums.py save after.npz
    python benchmarks/identity_sums.py compare before.npz after.npz

``compare`` lists the arrays that are not equal bit for bit (NaN equal to NaN).
"""
import os
import sys
import warnings

import numpy as np


def save(path):
    import sklearn_r2shap as sr
    from sklearn_r2shap.interventional import interventional_values
    from sklearn.ensemble import (GradientBoostingRegressor, RandomForestRegressor,
                                  HistGradientBoostingRegressor, RandomForestClassifier,
                                  GradientBoostingClassifier)
    import dask
    import dask.array as da
    import lightgbm as lgb
    import xgboost as xgb
    dask.config.set(scheduler="synchronous")

    out = {}
    rng = np.random.default_rng(0)
    n, p = 600, 6
    X = rng.normal(size=(n, p))
    X[rng.random(size=X.shape) < 0.03] = np.nan
    Xf = np.nan_to_num(X)
    y = X[:, 0] * 2 + np.nan_to_num(X[:, 1]) * np.nan_to_num(X[:, 2]) + rng.normal(size=n)
    y = np.nan_to_num(y)
    w = rng.exponential(size=n)
    w[::7] = 0
    yc = (y > 0).astype(int)
    ym = np.digitize(y, [-1, 1])
    Y2 = np.c_[y, y ** 2]
    models = {
      "gbr": GradientBoostingRegressor(n_estimators=30, max_depth=3, random_state=0).fit(Xf, y),
      "rf": RandomForestRegressor(n_estimators=10, max_depth=5, random_state=0).fit(Xf, y),
      "hgb": HistGradientBoostingRegressor(max_iter=20, random_state=0).fit(X, y),
      "xgb": xgb.XGBRegressor(n_estimators=30, max_depth=4).fit(X, y),
      "lgb": lgb.LGBMRegressor(n_estimators=30, num_leaves=15, verbose=-1).fit(X, y),
      "xgb8": xgb.XGBRegressor(n_estimators=20, max_depth=8).fit(X, y),
    }
    cls = {"rfc": (RandomForestClassifier(n_estimators=10, max_depth=4, random_state=0).fit(Xf, ym), ym),
           "gbc": (GradientBoostingClassifier(n_estimators=20, max_depth=3, random_state=0).fit(Xf, yc), yc),
           "xgbc": (xgb.XGBClassifier(n_estimators=20, max_depth=3).fit(X, ym), ym)}

    def put(key, r):
        for a in ("shares", "std_errors", "mc_std_errors", "local"):
            v = getattr(r, a, None)
            if v is not None:
                out[f"{key}.{a}"] = np.asarray(v)
        for a in ("score", "unattributed"):
            if hasattr(r, a):
                out[f"{key}.{a}"] = np.asarray(getattr(r, a))

    def dx(A):  # a dask array of 4 row blocks
        return da.from_array(A, chunks=(150,) + A.shape[1:])
    for name, m in models.items():
        XX = Xf if name in ("gbr", "rf") else X
        for wn, ww in (("now", None), ("w", w)):
            put(f"r2.{name}.{wn}", sr.r2_decomposition(m, XX, y, sample_weight=ww, n_jobs=2))
            put(f"r2d.{name}.{wn}", sr.r2_decomposition(m, dx(XX), dx(y), sample_weight=None if ww is None else dx(ww), n_jobs=1))
            put(f"r2i.{name}.{wn}", sr.r2_interactions(m, XX, y, sample_weight=ww))
            put(f"r2id.{name}.{wn}", sr.r2_interactions(m, dx(XX), dx(y), sample_weight=None if ww is None else dx(ww)))
            s = sr.shap_interaction_summary(m, XX, sample_weight=ww)
            out[f"isum.{name}.{wn}"] = np.stack([s.mean_abs, s.mean, s.mean_square])
            s = sr.shap_interaction_summary(m, dx(XX), sample_weight=None if ww is None else dx(ww))
            out[f"isumd.{name}.{wn}"] = np.stack([s.mean_abs, s.mean, s.mean_square])
        put(f"r2s.{name}", sr.r2_decomposition(m, XX, y, algorithm="sampled", random_state=1))
        put(f"r2ms.{name}", sr.r2_decomposition(m, XX, y, max_samples=200, random_state=3))
        put(f"r2msd.{name}", sr.r2_decomposition(m, dx(XX), dx(y), max_samples=200, random_state=3))
        put(f"r2loc.{name}", sr.r2_decomposition(m, XX, y, return_local=True))
        put(f"r2g.{name}", sr.r2_decomposition(m, XX, y, feature_groups={"a": [0, 1], "b": [2, 3]}))
        out[f"shap.{name}"] = sr.shap_values(m, XX)
        out[f"shapd.{name}"] = sr.shap_values(m, dx(XX)).compute()
        out[f"inter.{name}"] = sr.shap_interaction_values(m, XX[:50])
        out[f"interd.{name}"] = sr.shap_interaction_values(m, dx(XX[:300])).compute()
        out[f"bz.{name}"] = sr.banzhaf_values(m, XX[:100])
        out[f"bzd.{name}"] = sr.banzhaf_values(m, dx(XX[:300])).compute()
        out[f"iv.{name}"] = interventional_values(m, XX[:40], background=XX[:30])
        out[f"ivd.{name}"] = interventional_values(m, dx(XX[:300]), background=XX[:30]).compute()
        out[f"shap1.{name}"] = sr.shap_values(m, XX, n_jobs=1)
        out[f"few.{name}"] = sr.TreeExplainer(m, n_jobs=2).shap_values(XX[:40])
        out[f"shapbg.{name}"] = sr.shap_values(m, XX[:40], background=XX[:25], n_jobs=2)
        out[f"inter2.{name}"] = sr.shap_interaction_values(m, XX[:50], n_jobs=2)
        out[f"saabas.{name}"] = sr.saabas_values(m, XX, n_jobs=2)
        out[f"beta.{name}"] = sr.beta_shapley_values(m, XX[:100], alpha=2, beta=1, n_jobs=2)
        out[f"prob.{name}"] = sr.probabilistic_values(m, XX[:100], np.linspace(0.1, 0.9, p), n_jobs=2)
        out[f"raw.{name}"] = sr.predict_raw(m, XX, n_jobs=2)
        out[f"grad.{name}"], out[f"gradv.{name}"] = sr.multilinear_gradient(m, XX[:100], np.full(p, 0.3), n_jobs=2)
        out[f"tgs.{name}"] = sr.treegrad_scores(m, XX[:100], n_iter=5, n_jobs=2)
        out[f"tgr.{name}"] = sr.TreeGradRanker(m).fit(XX, y).feature_importances_
    for name, (m, yy) in cls.items():
        XX = Xf if name in ("rfc", "gbc") else X
        put(f"r2c.{name}", sr.r2_decomposition(m, XX, yy, sample_weight=w))
        put(f"r2cd.{name}", sr.r2_decomposition(m, dx(XX), dx(yy), sample_weight=dx(w)))
    mo = RandomForestRegressor(n_estimators=5, max_depth=4, random_state=0).fit(Xf, Y2)
    for k, r in enumerate(sr.r2_decomposition(mo, Xf, Y2)): put(f"r2mo.{k}", r)
    for k, r in enumerate(sr.r2_decomposition(mo, dx(Xf), dx(Y2))): put(f"r2mod.{k}", r)
    lin = lgb.LGBMRegressor(n_estimators=10, num_leaves=7, linear_tree=True, verbose=-1).fit(Xf, y)
    out["pw"] = sr.piecewise_shap_values(lin, Xf[:50], background=Xf[:300], background_weight=w[:300])
    out["pwd"] = sr.piecewise_shap_values(lin, Xf[:50], background=dx(Xf[:300]), background_weight=dx(w[:300]))

    out["pwe"] = sr.PiecewiseLinearExplainer(lin).fit(
        Xf[:300], y[:300], sample_weight=w[:300]).feature_importances_
    out["pw2"] = sr.piecewise_shap_values(lin, Xf[:50], background=Xf[:300], n_jobs=2)

    np.savez(path, **out)
    print(len(out), "arrays of", os.path.dirname(sr.__file__), "saved to", path)


def compare(first, second):
    a, b = np.load(first), np.load(second)
    differ = [k for k in a.files
              if k not in b.files or not np.array_equal(a[k], b[k], equal_nan=True)]
    print(len(a.files), "arrays;", len(differ), "differ:", differ)
    return 1 if differ else 0


if __name__ == "__main__":
    warnings.filterwarnings("ignore")
    if sys.argv[1] == "save":
        save(sys.argv[2])
    else:
        sys.exit(compare(sys.argv[2], sys.argv[3]))
