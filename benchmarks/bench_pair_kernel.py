"""The pair kernel of ``r2_interactions`` alone (issue 32): its CPU time on one
thread for the blocks one ``r2_interactions`` call gives it (XGBoost, 100
trees of depth 6 on ``bench_r2_interactions.make``'s data), best of
``--repeat``. To compare two builds, run it on each in turn, alternating
(e.g. ``PYTHONPATH`` at a copy of the package built from the other commit).

    OMP_NUM_THREADS=1 python benchmarks/bench_pair_kernel.py --rows 1000 --repeat 3

On a shared machine the times vary by more than a small change gains; the
instructions and (simulated) branch misses do not: run it under callgrind on
a few rows of the same model, counting the kernel only (``--kernel-rows``),

    OMP_NUM_THREADS=1 valgrind --tool=callgrind --branch-sim=yes \
        --toggle-collect='*r2_interaction_terms*' \
        python benchmarks/bench_pair_kernel.py --rows 1000 --kernel-rows 150 --repeat 1
"""
import argparse
import json
import os
import sys
import time

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=6)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--kernel-rows", type=int, default=None,
                        help="explain the first rows only (the model is fitted on --rows)")
    args = parser.parse_args()

    import xgboost

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from bench_r2_interactions import make

    import sklearn_r2shap
    from sklearn_r2shap import r2_interactions
    from sklearn_r2shap._kernels import _qshap_interactions

    X, y = make(args.rows, 20)
    model = xgboost.XGBRegressor(n_estimators=100, max_depth=args.depth, learning_rate=0.1,
                                 n_jobs=1).fit(X, y)
    kernel = _qshap_interactions.r2_interaction_terms
    calls = []

    def recorded(*call):
        calls.append(call)
        return kernel(*call)

    _qshap_interactions.r2_interaction_terms = recorded
    try:
        r2_interactions(model, X[:args.kernel_rows], y[:args.kernel_rows], n_jobs=1,
                        verbose=False)
    finally:
        _qshap_interactions.r2_interaction_terms = kernel
    seconds = []
    for _ in range(args.repeat):
        start = time.process_time()
        for call in calls:
            kernel(*call[:-1], 1)
        seconds.append(time.process_time() - start)
    print(json.dumps({"rows": args.rows, "kernel_rows": args.kernel_rows, "depth": args.depth,
                      "blocks": len(calls),
                      "best_s": round(min(seconds), 3),
                      "median_s": round(float(np.median(seconds)), 3),
                      "package": os.path.dirname(sklearn_r2shap.__file__)}))


if __name__ == "__main__":
    main()
