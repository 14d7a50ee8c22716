"""Exact SHAP values of a LightGBM model with linear leaves (``linear_tree=True``).

Friedman's regression problem #1 (``sklearn.datasets.make_friedman1``: ten
uniform features, of which x0..x4 matter: ``10 sin(pi x0 x1) + 20 (x2 - 0.5)^2
+ 10 x3 + 5 x4`` plus noise) is fitted twice with LightGBM: with ordinary
constant leaves and with linear leaves. The script prints

1. the held-out R^2 of both models (with small trees, linear leaves fit the
   linear terms x3 and x4 that constant leaves approximate by steps);
2. the SHAP summary of both, mean |SHAP| per feature on the held-out rows:
   :func:`sklearn_r2shap.shap_values` for the constant-leaf model,
   :class:`~sklearn_r2shap.piecewise.PiecewiseLinearExplainer` (covers and
   leaf means from the training data) for the linear-leaf one;
3. the proof that the values add up: the largest difference between the
   SHAP values plus the expected value and LightGBM's own raw prediction, for
   both models; and what LightGBM's own ``pred_contrib`` does with linear
   trees (it refuses them).

Run ``python examples/piecewise_linear_lightgbm.py [--quick]``.
"""
import argparse

import numpy as np
from sklearn.datasets import make_friedman1
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

from sklearn_r2shap import shap_values
from sklearn_r2shap.piecewise import PiecewiseLinearExplainer


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows and trees")
    args = parser.parse_args(argv)
    try:
        import lightgbm as lgb
    except ImportError:
        raise SystemExit("This example needs LightGBM: pip install lightgbm")

    n_samples, n_trees = (1000, 50) if args.quick else (4000, 100)
    X, y = make_friedman1(n_samples=n_samples, n_features=10, noise=1.0, random_state=0)
    names = [f"x{j}" for j in range(X.shape[1])]
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25, random_state=0)

    # small trees (4 leaves): linear leaves fit the linear terms x3, x4 that
    # constant leaves approximate by steps
    # n_jobs=1: on data this small, LightGBM's threads only wait for each other
    params = dict(n_estimators=n_trees, learning_rate=0.1, num_leaves=4, min_child_samples=20,
                  n_jobs=1, verbose=-1, random_state=0)
    constant = lgb.LGBMRegressor(**params).fit(X_train, y_train)
    linear = lgb.LGBMRegressor(linear_tree=True, **params).fit(X_train, y_train)

    print("1. Held-out R^2")
    print(f"   constant leaves: {r2_score(y_test, constant.predict(X_test)):.4f}")
    print(f"   linear leaves:   {r2_score(y_test, linear.predict(X_test)):.4f}")

    # SHAP values of the held-out rows. The piecewise-linear game needs the
    # covers and each leaf's feature means: computed from the training data.
    phi_constant = shap_values(constant, X_test)
    explainer = PiecewiseLinearExplainer(linear, prefit=True).fit(X_train)
    phi_linear = explainer.shap_values(X_test)

    print("\n2. Mean |SHAP| on the held-out rows (raw output units)")
    summary_constant = np.abs(phi_constant[:, :-1]).mean(axis=0)
    summary_linear = np.abs(phi_linear[:, :-1]).mean(axis=0)
    print(f"   {'feature':<8} {'constant':>10} {'linear':>10}")
    for j in np.argsort(-summary_linear, kind="mergesort"):
        print(f"   {names[j]:<8} {summary_constant[j]:>10.4f} {summary_linear[j]:>10.4f}")
    print(f"   {'expected':<8} {phi_constant[0, -1]:>10.4f} {phi_linear[0, -1]:>10.4f}")
    noise = slice(5, 10)
    print(f"   share of the noise features x5..x9: "
          f"{summary_constant[noise].sum() / summary_constant.sum():.1%} (constant), "
          f"{summary_linear[noise].sum() / summary_linear.sum():.1%} (linear)")

    print("\n3. Additivity: max |sum of SHAP values + expected value - raw prediction|")
    raw_constant = constant.predict(X_test, raw_score=True)
    raw_linear = linear.predict(X_test, raw_score=True)
    error_constant = np.max(np.abs(phi_constant.sum(axis=1) - raw_constant))
    error_linear = np.max(np.abs(phi_linear.sum(axis=1) - raw_linear))
    print(f"   constant leaves: {error_constant:.2e}")
    print(f"   linear leaves:   {error_linear:.2e}")
    try:
        linear.predict(X_test[:2], pred_contrib=True)
        print("   LightGBM's pred_contrib on the linear model: returned values")
    except lgb.basic.LightGBMError as exc:
        print(f"   LightGBM's pred_contrib on the linear model: {exc}")
    assert error_constant < 1e-9 and error_linear < 1e-9


if __name__ == "__main__":
    main()
