"""ShapleyR2RFECV with an oracle ranking: does the ranking limit the one-SE rule?

On the data sets of ``bench_selection.py`` with row-permuted copies (diabetes,
breast cancer), the same protocol (70 % selection rows, LightGBM 200 trees of
15 leaves, ``step=0.2``, one thread, seeds 0..n-1), with each step's ranking
replaced by an oracle: every real column ranks above every permuted one (the
in-sample shares plus 1 for the real columns, so the order within each kind is
the in-sample one and no real column leaves in a batch of negative shares).
The folds' curve and the one-SE rule are unchanged. With this ranking no count
of at most the number of real columns holds a permuted column, so the permuted
columns kept measure what the *count* chosen by the one-SE rule costs, whatever
the ranking. Usage::

    python benchmarks/bench_rfecv_oracle_ranking.py [--seeds 5] [--datasets diabetes breast_cancer]
"""
import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--datasets", nargs="*", default=["diabetes", "breast_cancer"])
    args = parser.parse_args()
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = "1"
    import numpy as np

    from bench_selection import base_model, held_out_score, make_dataset, split
    from sklearn_r2shap import ShapleyR2RFECV
    from sklearn_r2shap._estimators.rfecv import _Scored

    class OracleRFECV(ShapleyR2RFECV):
        """Each step's shares plus 1 for the real columns (``_real``, a mask)."""

        def _fit_step(self, X, y, weight, features, scored_like=None, **kwargs):
            step = super()._fit_step(X, y, weight, features, scored_like, **kwargs)
            if not isinstance(step, _Scored):
                step.feature_importances_ = (np.asarray(step.feature_importances_)
                                             + self._real[np.asarray(features)])
            return step

    print("data set | seed | count with the best mean score | one-SE count | real / permuted "
          "kept | held-out score | time s")
    for dataset in args.datasets:
        for seed in range(args.seeds):
            X, y, task, relevant, _ = make_dataset(dataset, seed, 1000)
            X_train, X_test, y_train, y_test = split(X, y, task, seed)
            selector = OracleRFECV(base_model(task, seed, 1), step=0.2, n_jobs=1,
                                   random_state=seed)
            selector._real = np.isin(np.arange(X.shape[1]), relevant).astype(float)
            start = time.perf_counter()
            selector.fit(X_train, y_train)
            elapsed = time.perf_counter() - start
            results = selector.cv_results_
            best = int(results["n_features"][np.argmax(results["mean_test_score"])])
            kept = np.flatnonzero(selector.support_)
            real = int(np.isin(kept, relevant).sum())
            score = held_out_score(kept, X_train, y_train, X_test, y_test, task, seed, 1)
            print(f"{dataset} | {seed} | {best} | {selector.n_features_} | {real} / "
                  f"{len(kept) - real} | {score:.3f} | {elapsed:.1f}", flush=True)


if __name__ == "__main__":
    main()
