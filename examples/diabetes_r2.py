"""Shapley decomposition of R^2 on the diabetes data, and feature selection.

A gradient boosting model of the diabetes data (442 patients, 10 features)
is fitted by :class:`sklearn_r2shap.ShapleyR2Importance`, which splits the
model's R^2 exactly into one part per feature (Q-SHAP). The script

1. prints the decomposition on the training data (``str(result)`` and
   ``result.to_frame()``) and on held-out data (``decompose``);
2. uses the selector in a :class:`~sklearn.pipeline.Pipeline` in front of a
   ridge regression and prints the pipeline's cross-validated R^2 against
   the number of features kept, then the cross-fitted importances
   (``cv=5``: each fold's model decomposed on the rows it did not see);
3. saves the bar chart of the decomposition (``result.plot()``) to a PNG
   when matplotlib is installed.

Run ``python examples/diabetes_r2.py [--output PATH]`` (default: a file
``diabetes_r2.png`` in the system's temporary directory).
"""
import argparse
import os
import sys
import tempfile

import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.ensemble import GradientBoostingRegressor
from sklearn.linear_model import RidgeCV
from sklearn.model_selection import KFold, cross_val_score, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from sklearn_r2shap import ShapleyR2Importance


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output", default=os.path.join(tempfile.gettempdir(),
                                                          "diabetes_r2.png"),
                        help="where to save the plot (PNG)")
    args = parser.parse_args(argv)

    X, y = load_diabetes(return_X_y=True, as_frame=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=0)
    booster = GradientBoostingRegressor(n_estimators=100, max_depth=2, learning_rate=0.05,
                                        random_state=0)

    # 1. Decomposition of the model's R^2 on its training data.
    selector = ShapleyR2Importance(booster, threshold="mean").fit(X_train, y_train)
    result = selector.decomposition_
    print(f"{type(booster).__name__}: R^2 on the {result.n_rows} training rows, "
          f"decomposed by feature ({result.mode} mode)\n")
    print(result)
    print("\nAs a DataFrame (share = R2_j / model R^2):\n")
    print(result.to_frame().round(4))
    print(f"\nselected (R2_j >= mean = {selector.threshold_:.4f}): "
          f"{selector.get_feature_names_out().tolist()}")

    # The same fitted model on held-out rows: R^2 is lower, and the part no
    # feature receives is no longer ~0.
    held_out = selector.decompose(X_test, y_test)
    print(f"\nHeld-out ({held_out.n_rows} rows): model R^2 {held_out.r2:.4f}, "
          f"sum of R2_j {held_out.importances.sum():.4f}, "
          f"unattributed {held_out.r2_unattributed:+.1e}")
    top = held_out.to_frame().head(4)
    print(top.round(4))

    # 2. Selection inside a pipeline: the selector keeps the features with
    # the largest R2_j (max_features, threshold=-inf: on the count only) and
    # a ridge regression is fitted on them. 5-fold cross-validated R^2 of the
    # whole pipeline (the importances are recomputed on every training fold)
    # against the number of features kept:
    folds = KFold(n_splits=5, shuffle=True, random_state=0)
    print("\nPipeline(ShapleyR2Importance(max_features=k), StandardScaler, RidgeCV):")
    print(f"{'k':>3} {'CV R^2':>8}  features kept when fitted on all rows")
    for k in (1, 2, 3, 4, 6, 10):
        pipeline = make_pipeline(
            ShapleyR2Importance(booster, threshold=-np.inf, max_features=k),
            StandardScaler(),
            RidgeCV(alphas=np.logspace(-3, 3, 13)),
        )
        score = cross_val_score(pipeline, X, y, cv=folds, scoring="r2").mean()
        kept = pipeline.fit(X, y)[0].get_feature_names_out().tolist()
        print(f"{k:>3} {score:>8.4f}  {kept}")

    # Cross-fitted importances (cv=5: each fold's model is decomposed on the
    # rows it was not fitted on) and the default threshold (the mean R2_j).
    cross_fitted = ShapleyR2Importance(booster, cv=5).fit(X, y)
    print("\nCross-fitted R2_j (cv=5), mean over folds +/- standard error:")
    for j in np.argsort(-cross_fitted.feature_importances_):
        print(f"  {X.columns[j]:<4} {cross_fitted.feature_importances_[j]:>7.4f} "
              f"+/- {cross_fitted.importances_std_[j]:.4f}")
    print(f"held-out model R^2 (mean over folds) {cross_fitted.r2_:.4f}; selected: "
          f"{cross_fitted.get_feature_names_out().tolist()}")

    # 3. The bar chart (matplotlib is optional).
    try:
        import matplotlib

        matplotlib.use("Agg")
    except ImportError:
        print("\nmatplotlib is not installed: no plot.")
        return 0
    ax = result.plot()
    ax.figure.tight_layout()
    ax.figure.savefig(args.output, dpi=120)
    print(f"\nplot saved to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
