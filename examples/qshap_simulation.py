"""
Reproduce the simulation study of the Q-SHAP paper (feature-specific R²)
=========================================================================

This example reproduces the simulation study of the Q-SHAP paper: estimated
shares of R² against their theoretical values.

Jiang, Zhao, Zhu & Zhang, "Computing Shapley values of R^2 for boosting
trees" (Q-SHAP), section 5 and Appendix B. Three models with Bernoulli
features X1 ~ B(0.6), X2 ~ B(0.7), X3 ~ B(0.5):

    a.  Y = 4 X1 - 5 X2 + 6 X3                              + eps
    b.  Y = 4 X1 - 5 X2 + 6 X3 + 3 X1 X2 - X1 X3            + eps
    c.  Y = 4 X1 - 5 X2 + 6 X3 + 3 X1 X2 - X1 X2 X3         + eps

plus nuisance features ~ B(0.5) up to p = 100, eps ~ N(0, sigma^2) with
sigma in {0.5, 1, 1.5}. As in the paper, each data set is fitted with an
XGBoost regressor of maximum depth 1, 2, 3 for models a, b, c, its learning
rate in {0.01, 0.05, 0.1} and number of trees in {50, 100, 200, ..., 1000}
chosen by 5-fold cross-validation, and its R^2 is decomposed *on the training
data* with :func:`sklearn_r2shap.r2_decomposition`.

The theoretical feature-specific R^2 is the Shapley value of the population
game v(S) = Var(E[Y | X_S]) / Var(Y); the features are independent, so it is
computed exactly by enumerating the 8 values of (X1, X2, X3). The script
checks that this reproduces the paper's Table 6 (every feature value to the
4 printed decimals; the paper's "Total" column is the sum of its rounded
feature values and differs from the exact total by at most 1e-4).

Differences from the paper, to keep the run at a few minutes on 2 cores:

* 10 data sets per setting instead of 1,000 (``--reps``), n = 1000 rows
  (the setting of the paper's Table 1; ``--n`` for 500, 2000 or 5000);
* the cross-validated grid search is run once per (model, sigma), on an
  independent tuning data set, and the chosen learning rate and number of
  trees are used for every repetition; each learning rate needs one
  1000-tree fit per fold (the validation error of every grid value of the
  number of trees is read off the same boosting run).

``--quick`` (smoke test): n = 500, one data set per setting,
no tuning (learning rate 0.1, 100 trees). The documentation's gallery runs
``--quick --reps 5`` (five data sets per setting, no tuning) to stay within
a minute: the output and figure below are of that run. The full run's
output follows, as printed by ``python examples/qshap_simulation.py`` (its
numbers are that run's, not this page's).

Run ``python examples/qshap_simulation.py``. Output of the full run
(2 shared cores, xgboost 3.2.0, scikit-learn 1.9.1); "sd" is the standard
deviation over the repetitions, "nuisance" the sum of the 97 nuisance
features' R2_j, "sum R2_j" the sum over all 100 features, "model R2" the
model's R^2 on the training data and "unattributed" model R2 - sum R2_j::

    Theoretical R^2 (exact Shapley values of Var(E[Y|X_S])/Var(Y)) reproduce the paper's Table 6.
    n = 1000, p = 100, 10 data set(s) per setting; XGBoost, R^2 decomposed on the training data.

    Model a: Y = 4 X1 - 5 X2 + 6 X3 + eps   (max_depth = 1)
    sigma    lr trees                  theory  estimate      sd     bias
      0.5  0.05   500  X1              0.2094    0.2113  0.0073  +0.0020
                       X2              0.2863    0.2829  0.0084  -0.0034
                       X3              0.4907    0.4921  0.0121  +0.0014
                       nuisance (97)   0.0000    0.0006  0.0001  +0.0006
                       sum R2_j        0.9864    0.9870  0.0007  +0.0006
                       model R2        0.9864    0.9870  0.0007  +0.0006
                       unattributed    0.0000    0.0000  0.0000  +0.0000
      1.0  0.05   300  X1              0.2012    0.2039  0.0108  +0.0028
                       X2              0.2750    0.2728  0.0102  -0.0023
                       X3              0.4715    0.4698  0.0119  -0.0017
                       nuisance (97)   0.0000    0.0011  0.0003  +0.0011
                       sum R2_j        0.9476    0.9476  0.0020  -0.0001
                       model R2        0.9476    0.9476  0.0020  -0.0001
                       unattributed    0.0000    0.0000  0.0000  +0.0000
      1.5  0.10   100  X1              0.1888    0.1850  0.0093  -0.0038
                       X2              0.2581    0.2586  0.0135  +0.0005
                       X3              0.4425    0.4462  0.0112  +0.0037
                       nuisance (97)   0.0000    0.0008  0.0003  +0.0008
                       sum R2_j        0.8894    0.8906  0.0039  +0.0012
                       model R2        0.8894    0.8906  0.0039  +0.0012
                       unattributed    0.0000    0.0000  0.0000  +0.0000
    largest |unattributed| over the data sets of model a: 2.2e-11

    Model b: Y = 4 X1 - 5 X2 + 6 X3 + 3 X1 X2 - X1 X3 + eps   (max_depth = 2)
    sigma    lr trees                  theory  estimate      sd     bias
      0.5  0.01   700  X1              0.4390    0.4396  0.0105  +0.0007
                       X2              0.1341    0.1385  0.0062  +0.0044
                       X3              0.4129    0.4078  0.0090  -0.0051
                       nuisance (97)   0.0000    0.0004  0.0001  +0.0004
                       sum R2_j        0.9859    0.9863  0.0006  +0.0004
                       model R2        0.9859    0.9863  0.0006  +0.0004
                       unattributed    0.0000    0.0000  0.0000  +0.0000
      1.0  0.01   800  X1              0.4212    0.4181  0.0138  -0.0031
                       X2              0.1286    0.1321  0.0062  +0.0034
                       X3              0.3961    0.3954  0.0121  -0.0007
                       nuisance (97)   0.0000    0.0037  0.0004  +0.0037
                       sum R2_j        0.9459    0.9493  0.0032  +0.0034
                       model R2        0.9459    0.9493  0.0032  +0.0034
                       unattributed    0.0000    0.0000  0.0000  +0.0000
      1.5  0.01   500  X1              0.3945    0.3878  0.0097  -0.0067
                       X2              0.1205    0.1210  0.0109  +0.0005
                       X3              0.3710    0.3727  0.0120  +0.0017
                       nuisance (97)   0.0000    0.0026  0.0008  +0.0026
                       sum R2_j        0.8860    0.8841  0.0076  -0.0019
                       model R2        0.8860    0.8841  0.0076  -0.0019
                       unattributed    0.0000    0.0000  0.0000  +0.0000
    largest |unattributed| over the data sets of model b: 1.5e-09

    Model c: Y = 4 X1 - 5 X2 + 6 X3 + 3 X1 X2 - X1 X2 X3 + eps   (max_depth = 3)
    sigma    lr trees                  theory  estimate      sd     bias
      0.5  0.05   100  X1              0.4288    0.4390  0.0179  +0.0102
                       X2              0.1450    0.1402  0.0085  -0.0048
                       X3              0.4130    0.4082  0.0112  -0.0048
                       nuisance (97)   0.0000    0.0008  0.0001  +0.0008
                       sum R2_j        0.9868    0.9882  0.0004  +0.0014
                       model R2        0.9868    0.9882  0.0004  +0.0014
                       unattributed    0.0000    0.0000  0.0000  +0.0000
      1.0  0.10    50  X1              0.4124    0.4114  0.0132  -0.0010
                       X2              0.1395    0.1419  0.0078  +0.0024
                       X3              0.3972    0.3978  0.0114  +0.0006
                       nuisance (97)   0.0000    0.0048  0.0005  +0.0048
                       sum R2_j        0.9492    0.9559  0.0021  +0.0067
                       model R2        0.9492    0.9559  0.0021  +0.0067
                       unattributed    0.0000    0.0000  0.0000  +0.0000
      1.5  0.01   400  X1              0.3878    0.3924  0.0175  +0.0046
                       X2              0.1312    0.1302  0.0088  -0.0009
                       X3              0.3735    0.3739  0.0178  +0.0004
                       nuisance (97)   0.0000    0.0068  0.0007  +0.0068
                       sum R2_j        0.8924    0.9033  0.0036  +0.0109
                       model R2        0.8924    0.9033  0.0036  +0.0109
                       unattributed    0.0000    0.0000  0.0000  +0.0000
    largest |unattributed| over the data sets of model c: 3.3e-09


Every bias of a signal feature is within 2.3 standard errors (sd / sqrt(10))
of 0 (27 comparisons). The sum of R2_j is the model's in-sample R^2 (the
unattributed part is below 1e-8: XGBoost stores float32 leaves); it
differs from the theoretical total mostly by the R^2 the nuisance features
receive for fitted noise, which grows with sigma and the depth. For
comparison, the paper's Table 1 (n = 1000, p = 100, sigma = 1.5, 1,000 data
sets, a tuned model per data set) reports Q-SHAP biases of X1, X2, X3 and
the sum of +0.006, +0.008, +0.015, +0.031 (model a), +0.008, +0.002,
+0.009, +0.024 (model b) and +0.005, +0.002, +0.005, +0.021 (model c).
"""
import argparse
import itertools
import math
import time

import matplotlib.pyplot as plt
import numpy as np

PROBABILITIES = (0.6, 0.7, 0.5)
SIGMAS = (0.5, 1.0, 1.5)
MODELS = {
    # name: (formula, coefficient function, XGBoost max_depth)
    "a": ("Y = 4 X1 - 5 X2 + 6 X3 + eps",
          lambda x1, x2, x3: 4 * x1 - 5 * x2 + 6 * x3, 1),
    "b": ("Y = 4 X1 - 5 X2 + 6 X3 + 3 X1 X2 - X1 X3 + eps",
          lambda x1, x2, x3: 4 * x1 - 5 * x2 + 6 * x3 + 3 * x1 * x2 - x1 * x3, 2),
    "c": ("Y = 4 X1 - 5 X2 + 6 X3 + 3 X1 X2 - X1 X2 X3 + eps",
          lambda x1, x2, x3: 4 * x1 - 5 * x2 + 6 * x3 + 3 * x1 * x2 - x1 * x2 * x3, 3),
}
# Table 6 of the paper: (total, X1, X2, X3) per model and sigma.
PAPER_TABLE_6 = {
    ("a", 0.5): (0.9864, 0.2094, 0.2863, 0.4907),
    ("a", 1.0): (0.9477, 0.2012, 0.2750, 0.4715),
    ("a", 1.5): (0.8894, 0.1888, 0.2581, 0.4425),
    ("b", 0.5): (0.9860, 0.4390, 0.1341, 0.4129),
    ("b", 1.0): (0.9459, 0.4212, 0.1286, 0.3961),
    ("b", 1.5): (0.8860, 0.3945, 0.1205, 0.3710),
    ("c", 0.5): (0.9868, 0.4288, 0.1450, 0.4130),
    ("c", 1.0): (0.9491, 0.4124, 0.1395, 0.3972),
    ("c", 1.5): (0.8925, 0.3878, 0.1312, 0.3735),
}
LEARNING_RATES = (0.01, 0.05, 0.1)
N_TREES = (50,) + tuple(range(100, 1001, 100))


def theoretical_r2(signal, sigma):
    """(total R^2, Shapley R^2 of X1, X2, X3) of the population game.

    v(S) = Var(E[g(X) | X_S]) / (Var(g(X)) + sigma^2) with independent
    Bernoulli features, by enumeration of the 2^3 points.
    """
    points = np.array(list(itertools.product([0, 1], repeat=3)), dtype=float)
    prob = np.prod(np.where(points == 1, PROBABILITIES, 1 - np.asarray(PROBABILITIES)), axis=1)
    g = signal(*points.T)
    mean = prob @ g
    total_variance = prob @ (g - mean) ** 2 + sigma ** 2

    def value(subset):
        if not subset:
            return 0.0
        keys = points[:, list(subset)] @ (2.0 ** np.arange(len(subset)))
        conditional = np.empty_like(g)
        for key in np.unique(keys):
            rows = keys == key
            conditional[rows] = prob[rows] @ g[rows] / prob[rows].sum()
        return prob @ (conditional - mean) ** 2 / total_variance

    shapley = []
    for j in range(3):
        others = [k for k in range(3) if k != j]
        phi = 0.0
        for size in range(3):
            weight = math.factorial(size) * math.factorial(2 - size) / math.factorial(3)
            for subset in itertools.combinations(others, size):
                phi += weight * (value(subset + (j,)) - value(subset))
        shapley.append(phi)
    return value((0, 1, 2)), np.array(shapley)


def check_table_6():
    """The exact values reproduce the paper's Table 6."""
    for (name, sigma), (total, *features) in PAPER_TABLE_6.items():
        exact_total, exact_features = theoretical_r2(MODELS[name][1], sigma)
        assert np.array_equal(np.round(exact_features, 4), features), (name, sigma)
        # the paper's Total is the sum of its rounded feature values
        assert abs(exact_total - total) <= 1.5e-4, (name, sigma, exact_total, total)
        assert abs(sum(features) - total) <= 1e-9, (name, sigma)


def simulate(name, sigma, n, p, seed):
    """One data set: X (n, p) of Bernoulli features and y."""
    rng = np.random.default_rng(seed)
    probabilities = np.r_[PROBABILITIES, np.full(p - 3, 0.5)]
    X = (rng.random((n, p)) < probabilities).astype(np.float64)
    y = MODELS[name][1](X[:, 0], X[:, 1], X[:, 2]) + sigma * rng.standard_normal(n)
    return X, y


def tune(X, y, max_depth, seed):
    """5-fold CV over the paper's grid: (learning rate, number of trees)."""
    import xgboost as xgb

    data = xgb.DMatrix(X, label=y)
    best = (np.inf, None, None)
    for learning_rate in LEARNING_RATES:
        params = {"max_depth": max_depth, "eta": learning_rate, "nthread": 1,
                  "objective": "reg:squarederror", "tree_method": "hist", "seed": seed}
        history = xgb.cv(params, data, num_boost_round=max(N_TREES), nfold=5, seed=seed,
                         metrics="rmse")
        rmse = history["test-rmse-mean"].to_numpy()
        for n_trees in N_TREES:
            if rmse[n_trees - 1] < best[0]:
                best = (rmse[n_trees - 1], learning_rate, n_trees)
    return best[1], best[2]


def fit_and_decompose(X, y, max_depth, learning_rate, n_trees, n_jobs):
    import xgboost as xgb

    from sklearn_r2shap import r2_decomposition

    model = xgb.XGBRegressor(n_estimators=n_trees, learning_rate=learning_rate,
                             max_depth=max_depth, tree_method="hist", n_jobs=1,
                             random_state=0)
    model.fit(X, y)
    return r2_decomposition(model, X, y, n_jobs=n_jobs)


def _r4(value):
    """Rounded to 4 decimals, without a sign on zero."""
    return round(float(value), 4) + 0.0


def run(n, p, reps, quick, n_jobs, out=print):
    check_table_6()
    out("Theoretical R^2 (exact Shapley values of Var(E[Y|X_S])/Var(Y)) reproduce the "
        "paper's Table 6.")
    out(f"n = {n}, p = {p}, {reps} data set(s) per setting; XGBoost, R^2 decomposed on "
        f"the training data.\n")
    rows = []
    for m, (name, (formula, signal, max_depth)) in enumerate(MODELS.items()):
        out(f"Model {name}: {formula}   (max_depth = {max_depth})")
        out(f"{'sigma':>5} {'lr':>5} {'trees':>5}  {'':<14}{'theory':>8} {'estimate':>9} "
            f"{'sd':>7} {'bias':>8}")
        largest = 0.0
        for s, sigma in enumerate(SIGMAS):
            total, features = theoretical_r2(signal, sigma)
            if quick:
                learning_rate, n_trees = 0.1, 100
            else:
                X, y = simulate(name, sigma, n, p, seed=[m, s, 10 ** 6])
                learning_rate, n_trees = tune(X, y, max_depth, seed=0)
            estimates = []
            for rep in range(reps):
                X, y = simulate(name, sigma, n, p, seed=[m, s, rep])
                result = fit_and_decompose(X, y, max_depth, learning_rate, n_trees, n_jobs)
                r2j = result.shares
                estimates.append([r2j[0], r2j[1], r2j[2], r2j[3:].sum(), r2j.sum(),
                                  result.score, result.unattributed])
            estimates = np.asarray(estimates)
            mean = estimates.mean(axis=0)
            sd = estimates.std(axis=0, ddof=1) if reps > 1 else np.full(mean.shape, np.nan)
            theory = np.r_[features, 0.0, total, total, 0.0]
            labels = ["X1", "X2", "X3", f"nuisance ({p - 3})", "sum R2_j", "model R2",
                      "unattributed"]
            for k, label in enumerate(labels):
                head = f"{sigma:>5.1f} {learning_rate:>5.2f} {n_trees:>5d}" if k == 0 else " " * 17
                spread = f"{_r4(sd[k]):>7.4f}" if reps > 1 else f"{'-':>7}"
                out(f"{head}  {label:<14}{_r4(theory[k]):>8.4f} {_r4(mean[k]):>9.4f} {spread} "
                    f"{_r4(mean[k] - theory[k]):>+8.4f}")
                rows.append((name, sigma, label, theory[k], mean[k], sd[k]))
            largest = max(largest, float(np.max(np.abs(estimates[:, -1]))))
        out(f"largest |unattributed| over the data sets of model {name}: {largest:.1e}\n")
    return rows


def plot(rows, reps):
    """Theoretical against estimated R2_j of X1, X2, X3, one panel per model."""
    fig, axes = plt.subplots(1, len(MODELS), figsize=(11, 4.2), sharey=True)
    for ax, name in zip(axes, MODELS):
        for k, feature in enumerate(("X1", "X2", "X3")):
            picked = [r for r in rows if r[0] == name and r[2] == feature]
            sigmas = np.array([r[1] for r in picked]) + (k - 1) * 0.06
            ax.plot(sigmas, [r[3] for r in picked], "_", color=f"C{k}", markersize=14,
                    markeredgewidth=2)
            spread = None if reps < 2 else [r[5] for r in picked]
            ax.errorbar(sigmas, [r[4] for r in picked], yerr=spread, fmt="o", color=f"C{k}",
                        markersize=4, capsize=2, label=feature)
        ax.set_xticks(SIGMAS)
        ax.set_xlabel("noise sigma")
        ax.set_title(f"model {name} (XGBoost, max_depth {MODELS[name][2]})", fontsize="medium")
    axes[0].set_ylabel("share of R$^2$")
    # one legend below the panels, where it covers no point
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False, fontsize="small",
               title="dash: theoretical share, dot: mean estimate, bar: sd over data sets",
               title_fontsize="small")
    fig.tight_layout(rect=(0, 0.14, 1, 1))
    return fig


parser = argparse.ArgumentParser(description="The Q-SHAP paper's simulation study")
parser.add_argument("--quick", action="store_true",
                    help="smoke test: n=500, one data set per setting, no tuning")
parser.add_argument("--n", type=int, default=None, help="rows per data set (1000)")
parser.add_argument("--p", type=int, default=100, help="number of features (100)")
parser.add_argument("--reps", type=int, default=None, help="data sets per setting (10)")
parser.add_argument("--n-jobs", type=int, default=1,
                    help="threads of the R^2 decomposition (1)")
args = parser.parse_args()
if args.p < 3:
    parser.error("p must be at least 3")
n = args.n if args.n is not None else (500 if args.quick else 1000)
reps = args.reps if args.reps is not None else (1 if args.quick else 10)

# %%
# Theory against the decomposition of fitted models
# -------------------------------------------------
# For each model and noise level: the theoretical R2_j, the mean of the
# estimates over the data sets, their standard deviation and the bias.

start = time.perf_counter()
rows = run(n, args.p, reps, args.quick, args.n_jobs)
print(f"total time {time.perf_counter() - start:.1f} s")

# %%
# The three signal features
# -------------------------

plot(rows, reps)
plt.show()
