"""What one step of an elimination costs on small data (issue 33): the model's
fit, our exact R^2 decomposition of the step's ranking rows, and shap's
path-dependent TreeSHAP of the held-out rows (what probatus ``ShapRFECV``
computes per step and fold), on the profile's data and model
(``bench_rfecv_profile.py``: diabetes with 20 row-permuted copies of its
columns, ``LGBMRegressor(n_estimators=100, num_leaves=15, learning_rate=0.05)``,
one thread).

scikit-learn's ``RFECV`` spends a step on the fit alone; ``ShapleyR2RFECV``
on the same fit plus the decomposition; probatus on the same fit plus
TreeSHAP. The printed floors are the best ratios either could reach with no
other cost at all: ours / RFECV >= (fit + decomposition) / fit, and
probatus / ours <= (fit + TreeSHAP) / fit. Each call is timed ``--repeat``
times; minima are printed. Needs shap (a peer, compared only).

    OMP_NUM_THREADS=1 python benchmarks/bench_rfecv_floor.py
"""
import argparse
import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import platform  # noqa: E402
import time  # noqa: E402
from datetime import datetime, timezone  # noqa: E402

import numpy as np  # noqa: E402

from bench_rfecv_profile import LGBM, data  # noqa: E402


def best_of(repeat, function):
    times = []
    for _ in range(repeat):
        since = time.perf_counter()
        function()
        times.append(time.perf_counter() - since)
    return min(times)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=20)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    import lightgbm
    import shap

    from sklearn_r2shap import r2_decomposition

    X, y = data(args.copies, args.seed)
    train = np.arange(len(y)) % 5 != 0  # a fold: 4/5 of the rows rank, 1/5 score
    model = lightgbm.LGBMRegressor(**LGBM).fit(X[train], y[train])
    fit = best_of(args.repeat, lambda: lightgbm.LGBMRegressor(**LGBM).fit(X[train], y[train]))
    ours = best_of(args.repeat, lambda: r2_decomposition(model, X[train], y[train], n_jobs=1))
    treeshap = best_of(args.repeat, lambda: shap.TreeExplainer(model).shap_values(X[~train]))
    print(f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.processor() or platform.machine()}, "
          f"load {os.getloadavg()[0]:.1f}")
    print(f"rows: {train.sum()} ranking, {(~train).sum()} held out; {X.shape[1]} columns")
    print(f"fit {1e3 * fit:.1f} ms, exact R^2 decomposition of the ranking rows "
          f"{1e3 * ours:.1f} ms, TreeSHAP of the held-out rows {1e3 * treeshap:.1f} ms")
    print(f"floor of ShapleyR2RFECV / RFECV: {(fit + ours) / fit:.2f}")
    print(f"ceiling of probatus / ShapleyR2RFECV: {(fit + treeshap) / fit:.2f}")


if __name__ == "__main__":
    main()
