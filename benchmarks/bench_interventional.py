"""Interventional SHAP (background data): sklearn-r2shap against shap and woodelf.

XGBoost, 200 trees of depth 6, 20 features; rows x background rows of
500 x 200 and 2,000 x 2,000. shap's interventional TreeExplainer is
single-threaded, so it is compared with our kernel on one thread; woodelf
(NumPy/SciPy, vectorised) runs in its own virtual environment (PEERS.md:
``python -m venv /work/peer-venvs/woodelf-iv && .../pip install
woodelf-explainer``) with ``OMP_NUM_THREADS`` / ``OPENBLAS_NUM_THREADS``
set to ``--threads`` like ours. Times include building the background summary
(shap and woodelf: the explainer's construction). shap is quadratic in
rows x background rows: at 2,000 x 2,000 it runs on ``--shap-rows`` rows and
its time is scaled to all rows (linear in rows). The values of all three are
compared (max |difference|); ``--brute-force`` also checks them against
every-subset enumeration on a small model (8 features) to say who is right
where they differ. Usage::

    OMP_NUM_THREADS=1 python benchmarks/bench_interventional.py [--threads 1] [--brute-force]
"""
import argparse
import json
import math
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

WOODELF_PYTHON = "/work/peer-venvs/woodelf-iv/bin/python"

WOODELF_RUNNER = r"""
import json, sys, time
import numpy as np, pandas as pd, xgboost as xgb
from woodelf import WoodelfExplainer
model_path, x_path, bg_path, out_path, repeat = sys.argv[1:6]
model = xgb.XGBRegressor()
model.load_model(model_path)
X = np.load(x_path); B = np.load(bg_path)
cols = [f"f{j}" for j in range(X.shape[1])]
X, B = pd.DataFrame(X, columns=cols), pd.DataFrame(B, columns=cols)
times = []
for _ in range(int(repeat)):
    start = time.perf_counter()
    explainer = WoodelfExplainer(model, B)
    values = explainer.shap_values(X, verbose=False)
    times.append(time.perf_counter() - start)
np.save(out_path, np.asarray(values, dtype=np.float64))
print(json.dumps({"time": min(times)}))
"""


def best_of(fn, repeat):
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def data(n, p, seed=0):
    rng = np.random.default_rng(seed)
    cov = 0.5 ** np.abs(np.subtract.outer(np.arange(p), np.arange(p)))  # correlated
    X = rng.multivariate_normal(np.zeros(p), cov, size=n)
    y = (X[:, 0] * X[:, 1] + np.sin(2 * X[:, 2]) + np.abs(X[:, 3]) - X[:, 4] * (X[:, 5] > 0)
         + 0.5 * X[:, 6:].sum(axis=1) + 0.2 * rng.normal(size=n))
    return X, y


def train(p, trees, depth, threads, n=10_000, seed=0):
    import xgboost as xgb

    X, y = data(n, p, seed)
    model = xgb.XGBRegressor(n_estimators=trees, max_depth=depth, learning_rate=0.1,
                             tree_method="hist", n_jobs=threads, random_state=seed)
    return model.fit(X, y), X


def run_woodelf(model, X, B, threads, repeat, tmp):
    if not os.path.exists(WOODELF_PYTHON):
        return None, None
    paths = [os.path.join(tmp, name) for name in ("model.json", "X.npy", "B.npy", "out.npy")]
    model.save_model(paths[0])
    np.save(paths[1], X)
    np.save(paths[2], B)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    result = subprocess.run([WOODELF_PYTHON, "-c", WOODELF_RUNNER, *paths, str(repeat)],
                            capture_output=True, text=True, env=env)
    if result.returncode != 0:
        print(result.stderr[-2000:], file=sys.stderr)
        return None, None
    info = json.loads(result.stdout.strip().splitlines()[-1])
    return info["time"], np.load(paths[3])


def run_shap(model, X, B, rows):
    import shap

    def go():
        # shap's default masker keeps 100 background rows (maskers.Independent,
        # max_samples=100): pass all of them, as to the others
        masker = shap.maskers.Independent(B, max_samples=len(B))
        explainer = shap.TreeExplainer(model, data=masker, feature_perturbation="interventional")
        return explainer.shap_values(X[:rows], check_additivity=False)

    t, values = best_of(go, 1)
    return t * len(X) / rows, values


def brute_force(model, x, B):
    """Shapley values of the interventional game by every subset (XGBoost's
    own predict on the hybrid rows, output_margin=True)."""
    p = len(x)
    masks = np.arange(1 << p)
    Z = np.tile(B, (len(masks), 1))
    which = np.repeat(masks, len(B))
    for j in range(p):
        rows = ((which >> j) & 1).astype(bool)
        Z[rows, j] = x[j]
    v = model.predict(Z, output_margin=True).astype(np.float64).reshape(len(masks), len(B))
    v = v.mean(axis=1)
    size = np.array([bin(int(S)).count("1") for S in masks])
    weight = np.array([math.factorial(s) * math.factorial(p - 1 - s) / math.factorial(p)
                       for s in range(p)])
    phi = np.zeros(p)
    for i in range(p):
        without = masks[((masks >> i) & 1) == 0]
        phi[i] = np.sum(weight[size[without]] * (v[without | (1 << i)] - v[without]))
    return phi


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shap-rows", type=int, default=200)
    parser.add_argument("--brute-force", action="store_true")
    parser.add_argument("--sizes", default="500x200,2000x2000")
    args = parser.parse_args()

    from sklearn_r2shap import shap_values

    print(f"# {platform.platform()}, {os.cpu_count()} cores, threads={args.threads}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS')}, "
          f"load {os.getloadavg()[0]:.1f}")
    model, X_train = train(20, 200, 6, args.threads)
    print("| rows x background | ours (s) | shap (s) | woodelf (s) | shap / ours | "
          "woodelf / ours | max |ours - shap| | max |ours - woodelf| |")
    print("|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in filter(None, args.sizes.split(",")):
            n, m = (int(v) for v in size.split("x"))
            rng = np.random.default_rng(1)
            X = X_train[rng.choice(len(X_train), n, replace=False)]
            B = X_train[rng.choice(len(X_train), m, replace=False)]
            ours_t, ours = best_of(
                lambda: shap_values(model, X, background=B, n_jobs=args.threads), args.repeat)
            shap_t, sv = run_shap(model, X, B, min(n, args.shap_rows if n * m > 10**6 else n))
            wood_t, wv = run_woodelf(model, X, B, args.threads, args.repeat, tmp)
            k = sv.shape[0]
            d_shap = np.max(np.abs(ours[:k, :-1] - sv))
            d_wood = np.max(np.abs(ours[:, :-1] - wv)) if wv is not None else float("nan")
            print(f"| {n} x {m} | {ours_t:.3f} | {shap_t:.3f}"
                  f"{'' if k == n else f' ({k} rows, scaled)'} | "
                  f"{wood_t if wood_t is not None else float('nan'):.3f} | {shap_t / ours_t:.1f}x | "
                  f"{(wood_t or float('nan')) / ours_t:.1f}x | {d_shap:.2e} | {d_wood:.2e} |")
        if args.brute_force:
            print("\n# brute force (every subset), XGBoost 20 trees depth 6, 8 features, "
                  "5 rows x 30 background rows")
            small, Xs = train(8, 20, 6, args.threads, n=3000, seed=2)
            x, B = Xs[:5], Xs[1000:1030]
            ref = np.array([brute_force(small, r, B) for r in x])
            ours = shap_values(small, x, background=B, n_jobs=args.threads)[:, :-1]
            _, sv = run_shap(small, x, B, len(x))
            _, wv = run_woodelf(small, x, B, args.threads, 1, tmp)
            print(f"max |ours - brute force|    = {np.max(np.abs(ours - ref)):.2e}")
            print(f"max |shap - brute force|    = {np.max(np.abs(sv - ref)):.2e}")
            if wv is not None:
                print(f"max |woodelf - brute force| = {np.max(np.abs(wv - ref)):.2e}")
            print(f"scale: max |phi| = {np.max(np.abs(ref)):.2e}")
            # shap's default background: 100 of the rows (maskers.Independent)
            import shap

            model_b, X_b = model, X_train
            rng = np.random.default_rng(1)
            X = X_b[rng.choice(len(X_b), 100, replace=False)]
            B = X_b[rng.choice(len(X_b), 200, replace=False)]
            default = shap.TreeExplainer(model_b, data=B, feature_perturbation="interventional")
            sv = default.shap_values(X, check_additivity=False)
            ours = shap_values(model_b, X, background=B, n_jobs=args.threads)
            print(f"\n# benchmark model, 100 rows x 200 background rows: shap's default masker "
                  f"keeps {default.data.shape[0]} background rows; max |ours - shap| = "
                  f"{np.max(np.abs(ours[:, :-1] - sv)):.3f}, shap's expected value - mean "
                  f"prediction = {float(default.expected_value) - ours[0, -1]:.3f}")
            # one (row, background row) pair of the 2,000 x 2,000 sample where shap
            # and woodelf are wrong: brute force over all 2^20 coalitions
            rng = np.random.default_rng(1)
            X = X_b[rng.choice(len(X_b), 2000, replace=False)]
            B = X_b[rng.choice(len(X_b), 2000, replace=False)]
            x, b = X[565], B[172:173]
            ref = brute_force(model_b, x, b)
            ours = shap_values(model_b, x[None], background=b, n_jobs=args.threads)[0, :-1]
            sv = shap.TreeExplainer(model_b, data=b, feature_perturbation="interventional"
                                    ).shap_values(x[None], check_additivity=False)[0]
            _, wv = run_woodelf(model_b, x[None], b, args.threads, 1, tmp)
            f32 = np.float32
            sv32 = shap.TreeExplainer(model_b, data=b.astype(f32).astype(float),
                                      feature_perturbation="interventional").shap_values(
                x[None].astype(f32).astype(float), check_additivity=False)[0]
            print(f"one pair (row 565, background row 172 of the 2,000 x 2,000 sample), 2^20 "
                  f"coalitions: max |ours - brute force| = {np.max(np.abs(ours - ref)):.1e}, "
                  f"max |shap - brute force| = {np.max(np.abs(sv - ref)):.1e}"
                  + (f", max |woodelf - brute force| = {np.max(np.abs(wv - ref)):.1e}"
                     if wv is not None else "")
                  + f"; shap on float32-rounded rows: {np.max(np.abs(sv32 - ref)):.1e}")
            print(f"  background value x_9 = {b[0, 9]!r} rounds to float32 {f32(b[0, 9])!r}, "
                  f"one ulp below a threshold {f32(-0.4483002)!r}: XGBoost (float32(x) < t) "
                  "sends it left, a float64 comparison with the threshold moved one ulp down "
                  "(x <= nextafter(t)) sends it right")

if __name__ == "__main__":
    main()
