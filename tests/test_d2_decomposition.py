"""D^2 decomposition of classifiers and link-function models against brute force.

The reference enumerates every feature subset (p <= 5) with the plain-Python
path-dependent value function of tests/reference.py, never a kernel, and
writes each loss out here:

* Brier (scikit-learn tree and forest classifiers): per class c, the squared
  game of the one-hot y_c against the class-c probability trees, sequential
  for one tree, symmetric (centred trees) for forests; numerators added over
  *all* classes, Q0 = sum_c sum_i w_i (y_ic - ybar_c)^2;
* second order (boosted models): trees in the model's order (a vector-leaf
  tree is one tree per class, class by class), margins F from the model's
  initial margin, g, h the derivatives of the row's loss in the tree's
  margin at F, game S -> g m_S + h m_S^2 / 2;

R2_j = -(1/L0) sum_k sum_i w_i Sh_j[game], L0 from scikit-learn's own losses.
The score itself is checked against ``d2_brier_score``, ``d2_log_loss_score``
and ``d2_tweedie_score``.
"""
import math
from dataclasses import replace

import numpy as np
import pytest
from scipy.special import expit, logsumexp
from sklearn.ensemble import (
    ExtraTreesClassifier,
    GradientBoostingClassifier,
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
)
from sklearn.metrics import (
    d2_brier_score,
    d2_log_loss_score,
    d2_tweedie_score,
    log_loss,
    mean_tweedie_deviance,
)
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor

import reference
from sklearn_r2shap import UnsupportedModelError, r2_decomposition, to_ensemble

ATOL = 1e-9


# --------------------------------------------------------------------------
# Brute-force reference
# --------------------------------------------------------------------------
def _shapley(game, p):
    phi = np.zeros(p)
    for j in range(p):
        bit = 1 << j
        for mask in range(1 << p):
            if not mask & bit:
                s = bin(mask).count("1")
                w = math.factorial(s) * math.factorial(p - 1 - s) / math.factorial(p)
                phi[j] += w * (game[mask | bit] - game[mask])
    return phi


def _tables(ens, x):
    """v^t_x(S) for every tree, subset (bit mask) and value column: (T, 2^p, n_values)."""
    p = ens.n_features
    subsets = [{j for j in range(p) if mask >> j & 1} for mask in range(1 << p)]
    return np.array([[reference.tree_value(ens, t, x, S) for S in subsets]
                     for t in range(ens.n_trees)])


def _classes(model):
    return np.asarray(model.classes_)


def _one_hot(y, classes):
    return (np.asarray(y)[:, None] == np.asarray(classes)[None, :]).astype(float)


def brier_reference(model, X, y, w):
    """Per-row terms of the Brier D^2 of a probability-averaging classifier."""
    ens = to_ensemble(model)
    X = np.asarray(X, dtype=float)
    n, p = X.shape
    Y = _one_hot(y, _classes(model))
    q0 = float(np.sum(w[:, None] * (Y - np.average(Y, axis=0, weights=w)) ** 2))
    full = (1 << p) - 1
    local = np.zeros((n, p))
    for i in range(n):
        table = _tables(ens, reference.prepare(ens, X[i]))  # (T, 2^p, K)
        for c in range(Y.shape[1]):
            tc = table[:, :, c]
            if ens.averaging:  # symmetric: centred trees, r_sym,k
                empty = tc[:, 0]
                centred = tc - empty[:, None]
                mu = ens.base_value[c] + empty.sum()
                f_tilde = centred[:, full].sum()
                for k in range(ens.n_trees):
                    r_sym = Y[i, c] - mu - (f_tilde - centred[k, full]) / 2.0
                    local[i] += _shapley((r_sym - centred[k]) ** 2, p)
            else:
                prediction = ens.base_value[c]
                for k in range(ens.n_trees):
                    local[i] += _shapley((Y[i, c] - prediction - tc[k]) ** 2, p)
                    prediction += tc[k, full]
        local[i] *= -w[i] / q0
    return local


def _derivatives(kind, y, F, c, power=None, sigma=1.0):
    """g, h of the loss of one row in margin c at margins F (written out)."""
    if kind == "binomial":
        p = 1.0 / (1.0 + math.exp(-sigma * F[0]))
        return sigma * (p - y), sigma ** 2 * p * (1.0 - p)
    if kind == "multinomial":
        p = np.exp(F - logsumexp(F))
        return p[c] - (y == c), p[c] * (1.0 - p[c])
    mu = math.exp(F[0])  # Tweedie, log link: d/dF of the half deviance
    return mu ** (2 - power) - y * mu ** (1 - power), \
        (2 - power) * mu ** (2 - power) - (1 - power) * y * mu ** (1 - power)


def newton_reference(model, X, y, w, kind, power=None, sigma=1.0):
    """Per-row terms of the second-order D^2 decomposition, and L0."""
    ens = to_ensemble(model)
    X = np.asarray(X, dtype=float)
    n, p = X.shape
    full = (1 << p) - 1
    if kind == "binomial":
        y_model = (np.asarray(y) == _classes(model)[1]).astype(float)
        ybar = np.average(y_model, weights=w)
        l0 = log_loss(y_model, np.full(n, ybar), sample_weight=w, normalize=False)
    elif kind == "multinomial":
        classes = _classes(model)
        y_model = np.array([np.flatnonzero(classes == v)[0] for v in y])
        Y = _one_hot(y, classes)
        null = np.tile(np.average(Y, axis=0, weights=w), (n, 1))
        l0 = log_loss(y_model, null, sample_weight=w, normalize=False, labels=range(len(classes)))
    else:
        y_model = np.asarray(y, dtype=float)
        ybar = np.average(y_model, weights=w)
        l0 = 0.5 * np.sum(w) * mean_tweedie_deviance(y_model, np.full(n, ybar), sample_weight=w,
                                                     power=power)
    local = np.zeros((n, p))
    for i in range(n):
        table = _tables(ens, reference.prepare(ens, X[i]))
        F = ens.base_value.astype(float).copy()
        for k in range(ens.n_trees):
            outputs = [ens.tree_output[k]] if ens.n_values == 1 else range(ens.n_values)
            for column, c in enumerate(outputs):
                m = table[k, :, 0 if ens.n_values == 1 else c]
                g, h = _derivatives(kind, y_model[i], F, c, power, sigma)
                local[i] += _shapley(g * m + 0.5 * h * m ** 2, p)
                F[c] += m[full]
        local[i] *= -w[i] / l0
    return local


# --------------------------------------------------------------------------
# Data and models
# --------------------------------------------------------------------------
def make_data(seed, n=50, p=4, nan_fraction=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p)).round(2)
    signal = X[:, 0] + (X[:, 1] > 0) - X[:, 2] * (X[:, 3] > 0)
    noise = rng.normal(size=n)
    if nan_fraction:
        X[rng.random(size=X.shape) < nan_fraction] = np.nan
    binary = np.where(signal + noise > 0.5, "yes", "no")
    three = np.array(["a", "b", "c"])[(signal + noise > 0).astype(int) + (X[:, 0] > 0.5)]
    counts = rng.poisson(np.exp(0.5 * signal))
    positive = rng.gamma(2.0, np.exp(0.4 * signal) / 2.0)
    weight = rng.uniform(0.3, 3.0, size=n)
    return X, {"binary": binary, "three": three, "counts": counts, "positive": positive,
               "weight": weight}


def _sk(estimator, target, weighted=False, nan=0.0, seed=0, fit_weight=False):
    def build():
        X, t = make_data(seed, nan_fraction=nan)
        y = t[target]
        w = t["weight"] if weighted else None
        model = estimator.fit(X, y, sample_weight=w if fit_weight else None)
        return model, X, y, w
    return build


def _xgb(target, seed=0, nan=0.0, weighted=False, early=False, **params):
    def build():
        xgb = pytest.importorskip("xgboost")
        X, t = make_data(seed, n=80 if early else 50, nan_fraction=nan)
        y = t[target]
        w = t["weight"] if weighted else None
        if target in ("binary", "three"):
            y = np.unique(y, return_inverse=True)[1]
            model = xgb.XGBClassifier(n_estimators=30 if early else 5, max_depth=2,
                                      learning_rate=0.5, n_jobs=1, random_state=0,
                                      early_stopping_rounds=2 if early else None, **params)
        else:
            model = xgb.XGBRegressor(n_estimators=5, max_depth=2, learning_rate=0.5, n_jobs=1,
                                     random_state=0, **params)
        if early:
            model.fit(X[:40], y[:40], eval_set=[(X[40:], y[40:])], verbose=False)
            return model, X[:40], y[:40], None
        model.fit(X, y)
        return model, X, y, w
    return build


def _lgb(target, seed=0, nan=0.0, weighted=False, **params):
    def build():
        lgb = pytest.importorskip("lightgbm")
        X, t = make_data(seed, nan_fraction=nan)
        y = t[target]
        w = t["weight"] if weighted else None
        kind = lgb.LGBMClassifier if target in ("binary", "three") else lgb.LGBMRegressor
        model = kind(n_estimators=4, num_leaves=4, learning_rate=0.5, min_child_samples=5,
                     n_jobs=1, verbose=-1, random_state=0, **params).fit(X, y)
        return model, X, y, w
    return build


def _lgb_early_stopping():
    lgb = pytest.importorskip("lightgbm")
    X, t = make_data(1, n=80)
    y = np.unique(t["three"], return_inverse=True)[1]  # eval_y is not label-encoded
    model = lgb.LGBMClassifier(n_estimators=40, num_leaves=4, learning_rate=0.5,
                               min_child_samples=5, n_jobs=1, verbose=-1, random_state=0)
    model.fit(X[:40], y[:40], eval_set=[(X[40:], y[40:])],
              callbacks=[lgb.early_stopping(2, verbose=False)])
    assert 0 < model.booster_.best_iteration < 40
    return model, X[:40], y[:40], None


def _cb(target, seed=0, weighted=False, nan=0.0, **params):
    def build():
        cb = pytest.importorskip("catboost")
        X, t = make_data(seed, nan_fraction=nan)
        y = t[target]
        w = t["weight"] if weighted else None
        kind = cb.CatBoostClassifier if target in ("binary", "three") else cb.CatBoostRegressor
        model = kind(iterations=4, depth=2, learning_rate=0.5, random_seed=0, thread_count=1,
                     verbose=0, allow_writing_files=False, **params).fit(X, y)
        return model, X, y, w
    return build


# name: (builder, kind, power, sigma)
CASES = {
    "tree-binary-nan": (_sk(DecisionTreeClassifier(max_depth=3, random_state=0), "binary",
                            nan=0.1), "brier", None, 1.0),
    "tree-three-weighted": (_sk(DecisionTreeClassifier(max_depth=3, random_state=0), "three",
                                weighted=True, fit_weight=True), "brier", None, 1.0),
    "forest-binary-weighted": (_sk(RandomForestClassifier(4, max_depth=3, random_state=0),
                                   "binary", weighted=True), "brier", None, 1.0),
    "extra-trees-three": (_sk(ExtraTreesClassifier(4, max_depth=3, random_state=0), "three"),
                          "brier", None, 1.0),
    "hgb-binary-nan": (_sk(HistGradientBoostingClassifier(max_iter=4, max_depth=2,
                                                          learning_rate=0.5, random_state=0),
                           "binary", nan=0.1), "binomial", None, 1.0),
    "hgb-three-weighted": (_sk(HistGradientBoostingClassifier(max_iter=3, max_depth=2,
                                                              learning_rate=0.5, random_state=0),
                               "three", weighted=True), "multinomial", None, 1.0),
    "gb-binary": (_sk(GradientBoostingClassifier(n_estimators=3, max_depth=2,
                                                 learning_rate=0.5, random_state=0), "binary",
                      weighted=True), "binomial", None, 1.0),
    "gb-three": (_sk(GradientBoostingClassifier(n_estimators=3, max_depth=2, learning_rate=0.5,
                                                random_state=0), "three"),
                 "multinomial", None, 1.0),
    "hgb-poisson": (_sk(HistGradientBoostingRegressor(loss="poisson", max_iter=4, max_depth=2,
                                                      learning_rate=0.5, random_state=0),
                        "counts"), "tweedie", 1.0, 1.0),
    "hgb-gamma-weighted": (_sk(HistGradientBoostingRegressor(loss="gamma", max_iter=4,
                                                             max_depth=2, learning_rate=0.5,
                                                             random_state=0),
                               "positive", weighted=True), "tweedie", 2.0, 1.0),
    "xgboost-binary-nan": (_xgb("binary", nan=0.1), "binomial", None, 1.0),
    "xgboost-binary-early-stopping": (_xgb("binary", early=True), "binomial", None, 1.0),
    "xgboost-three": (_xgb("three"), "multinomial", None, 1.0),
    "xgboost-poisson-weighted": (_xgb("counts", weighted=True, objective="count:poisson"),
                                 "tweedie", 1.0, 1.0),
    "xgboost-tweedie": (_xgb("counts", objective="reg:tweedie", tweedie_variance_power=1.3),
                        "tweedie", 1.3, 1.0),
    "lightgbm-binary-sigmoid-nan": (_lgb("binary", nan=0.1, sigmoid=0.7), "binomial", None,
                                    0.7),
    "lightgbm-three": (_lgb("three"), "multinomial", None, 1.0),
    "lightgbm-three-early-stopping": (_lgb_early_stopping, "multinomial", None, 1.0),
    "lightgbm-poisson-weighted": (_lgb("counts", weighted=True, objective="poisson"),
                                  "tweedie", 1.0, 1.0),
    "lightgbm-tweedie": (_lgb("counts", objective="tweedie"), "tweedie", 1.5, 1.0),
    "lightgbm-gamma": (_lgb("positive", objective="gamma"), "tweedie", 2.0, 1.0),
    "catboost-binary-weighted-nan": (_cb("binary", weighted=True, nan=0.1), "binomial", None,
                                     1.0),
    "catboost-three": (_cb("three"), "multinomial", None, 1.0),
    "catboost-poisson": (_cb("counts", loss_function="Poisson"), "tweedie", 1.0, 1.0),
    "catboost-tweedie": (_cb("counts", loss_function="Tweedie:variance_power=1.6"), "tweedie",
                         1.6, 1.0),
}
FLOAT32_PROBA = {"xgboost"}  # predict / predict_proba in float32
_cache = {}


def case(name):
    if name not in _cache:
        build, kind, power, sigma = CASES[name]
        model, X, y, w = build()
        weight = np.ones(len(y)) if w is None else w
        result = r2_decomposition(model, X, y, sample_weight=w, return_local=True, n_jobs=2)
        if kind == "brier":
            local = brier_reference(model, X, y, weight)
        else:
            local = newton_reference(model, X, y, weight, kind, power, sigma)
        _cache[name] = (model, X, y, w, result, local)
    return _cache[name]


def sklearn_score(name, model, X, y, w):
    kind, power = CASES[name][1], CASES[name][2]
    if kind == "brier":
        proba = model.predict_proba(X)
        if proba.shape[1] == 2:
            return d2_brier_score(y, proba[:, 1], sample_weight=w, pos_label=model.classes_[1])
        return d2_brier_score(y, proba, sample_weight=w, labels=model.classes_)
    if kind in ("binomial", "multinomial"):
        return d2_log_loss_score(y, model.predict_proba(X), sample_weight=w,
                                 labels=model.classes_)
    return d2_tweedie_score(y, model.predict(X), sample_weight=w, power=power)


# --------------------------------------------------------------------------
# Against the brute-force reference and scikit-learn's D^2
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", CASES)
def test_matches_brute_force(name):
    model, X, y, w, result, local = case(name)
    expected = local.sum(axis=0)
    assert np.abs(expected).max() > 1e-3
    np.testing.assert_allclose(result.shares, expected, rtol=0, atol=ATOL)
    np.testing.assert_allclose(result.local, local, rtol=0, atol=ATOL)
    averaging = getattr(model, "estimators_", None) is not None and CASES[name][1] == "brier"
    assert result.mode == ("symmetric" if averaging else "sequential")
    expected_score = {"brier": "d2_brier", "binomial": "d2_log_loss",
                      "multinomial": "d2_log_loss", "tweedie": "d2_tweedie"}[CASES[name][1]]
    assert result.score_name == expected_score
    if expected_score == "d2_tweedie":
        assert result.power == CASES[name][2]


@pytest.mark.parametrize("name", CASES)
def test_accounting_identity_against_sklearn(name):
    """importances + unattributed == the model's D^2, as scikit-learn computes it."""
    model, X, y, w, result, _ = case(name)
    expected = sklearn_score(name, model, X, y, w)
    tol = 1e-6 if name.split("-")[0] in FLOAT32_PROBA else 1e-10
    assert abs(result.score - expected) < tol
    assert result.shares.sum() + result.unattributed == pytest.approx(result.score,
                                                                           abs=1e-12)
    assert result.score > 0.05  # the models learn something: the identity is not 0 = 0


def test_single_tree_brier_in_sample_has_nothing_unattributed():
    """In sample a classification tree's leaf probabilities are the class means of its
    leaves: the Brier shares add up to D^2 exactly (as R^2 for a regression tree)."""
    for name in ("tree-binary-nan", "tree-three-weighted"):
        model, X, y, w, result, _ = case(name)
        assert abs(result.unattributed) < 1e-10


def test_binary_brier_mirror():
    """Binary Brier: decomposing class 1 only equals adding both classes' games."""
    model, X, y, w, result, local = case("forest-binary-weighted")
    ens = to_ensemble(model)
    assert ens.n_outputs == 2  # the reference adds both classes
    np.testing.assert_allclose(result.local, local, rtol=0, atol=ATOL)


def test_multiclass_brier_equals_sum_of_one_vs_rest_regressions():
    """Multiclass Brier numerators are per-class squared-error games: class c of the
    classifier is the regression of the indicator y == c on the class-c trees."""
    model, X, y, w, result, _ = case("extra-trees-three")
    ens = to_ensemble(model)
    Y = _one_hot(y, model.classes_)
    q0 = np.sum((Y - Y.mean(axis=0)) ** 2)
    total = np.zeros(X.shape[1])
    for c in range(3):
        regression = replace(ens.per_output([c]), objective="squared_error",
                             model_type="class trees", tree_output=np.zeros(4, dtype=np.int64),
                             base_value=np.zeros(1))
        part = r2_decomposition(regression, X, Y[:, c])
        total += part.shares * np.sum((Y[:, c] - Y[:, c].mean()) ** 2) / q0
    np.testing.assert_allclose(result.shares, total, rtol=0, atol=1e-12)


def test_softmax_order_matters_and_is_the_models():
    """Multiclass: one margin changes at a time, in the model's order; the
    reference with all classes of an iteration updated at once differs."""
    model, X, y, w, result, local = case("hgb-three-weighted")
    np.testing.assert_allclose(result.shares, local.sum(axis=0), rtol=0, atol=ATOL)
    ens = to_ensemble(model)
    assert ens.n_outputs == 3 and ens.n_values == 1
    assert list(ens.tree_output[:6]) == [0, 1, 2, 0, 1, 2]


def test_remainder_is_higher_order_only():
    """The unattributed part is exactly: the initial margin's loss gap, the
    trees' empty-coalition games and the third- and higher-order remainder
    L(F_k) - L(F_{k-1}) - (g m + h m^2 / 2) summed over trees."""
    model, X, y, w, result, _ = case("lightgbm-three")
    ens = to_ensemble(model)
    classes = _classes(model)
    codes = np.array([np.flatnonzero(classes == v)[0] for v in y])
    Y = _one_hot(y, classes)
    n, p = X.shape
    l0 = -np.sum(Y * np.log(Y.mean(axis=0)))

    def loss(F):
        return logsumexp(F) - F[codes[i]]

    constant = 0.0
    for i in range(n):
        x = reference.prepare(ens, X[i])
        F = ens.base_value.astype(float).copy()
        constant += loss(F)
        for k in range(ens.n_trees):
            c = ens.tree_output[k]
            empty = reference.tree_value(ens, k, x, set())[0]
            full = reference.tree_value(ens, k, x, set(range(p)))[0]
            g, h = _derivatives("multinomial", codes[i], F, c)
            G = F.copy()
            G[c] += full
            remainder = loss(G) - loss(F) - (g * full + 0.5 * h * full ** 2)
            constant += g * empty + 0.5 * h * empty ** 2 + remainder
            F = G
    # D^2 - sum_j R2_j = 1 - [L(F_0) + sum of empty games and remainders] / L0
    expected = 1.0 - constant / l0
    assert abs(result.unattributed - expected) < 1e-9
    assert abs(result.unattributed) > 1e-4


# --------------------------------------------------------------------------
# Weights, chunks, threads
# --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["forest-binary-weighted", "hgb-three-weighted",
                                  "xgboost-poisson-weighted"])
def test_zero_weights_equal_dropping_rows(name):
    model, X, y, w, _, _ = case(name)
    w = w.copy()
    drop = np.random.default_rng(0).random(len(y)) < 0.3
    w[drop] = 0.0
    zeroed = r2_decomposition(model, X, y, sample_weight=w, return_local=True)
    kept = r2_decomposition(model, X[~drop], np.asarray(y)[~drop], sample_weight=w[~drop])
    np.testing.assert_allclose(zeroed.shares, kept.shares, rtol=0, atol=1e-12)
    assert abs(zeroed.score - kept.score) < 1e-12
    np.testing.assert_allclose(zeroed.std_errors, kept.std_errors, rtol=1e-10)
    assert np.all(zeroed.local[drop] == 0)


@pytest.mark.parametrize("name", ["extra-trees-three", "gb-three", "catboost-three"])
def test_chunks_and_threads(name, monkeypatch):
    from sklearn_r2shap._games import r2 as r2_games

    model, X, y, w, result, _ = case(name)
    monkeypatch.setattr(r2_games, "MAX_BLOCK_ROWS", 7)
    chunked = r2_decomposition(model, X, y, sample_weight=w, return_local=True, n_jobs=1)
    np.testing.assert_allclose(chunked.local, result.local, rtol=0, atol=1e-14)
    np.testing.assert_allclose(chunked.std_errors, result.std_errors, rtol=1e-10)


def test_class_weights_as_sample_weight():
    """Balanced class weights change the shares, and match the reference."""
    from sklearn.utils.class_weight import compute_sample_weight

    model, X, y, _, plain, _ = case("gb-three")
    w = compute_sample_weight("balanced", y)
    weighted = r2_decomposition(model, X, y, sample_weight=w)
    local = newton_reference(model, X, y, w, "multinomial")
    np.testing.assert_allclose(weighted.shares, local.sum(axis=0), rtol=0, atol=ATOL)
    assert np.abs(weighted.shares - plain.shares).max() > 1e-4
    assert abs(weighted.score - d2_log_loss_score(y, model.predict_proba(X), sample_weight=w)) \
        < 1e-10


def test_string_and_integer_labels_give_the_same_shares():
    model, X, y, _, result, _ = case("hgb-binary-nan")
    codes = (np.asarray(y) == "yes").astype(int)
    refit = HistGradientBoostingClassifier(max_iter=4, max_depth=2, learning_rate=0.5,
                                           random_state=0).fit(X, codes)
    again = r2_decomposition(refit, X, codes)
    np.testing.assert_allclose(again.shares, result.shares, rtol=0, atol=1e-12)


# --------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------
def test_unknown_labels_and_single_class_raise():
    model, X, y, _, _, _ = case("tree-three-weighted")
    bad = np.asarray(y, dtype=object).copy()
    bad[0] = "zzz"
    with pytest.raises(ValueError, match="zzz"):
        r2_decomposition(model, X, bad)
    with pytest.raises(ValueError, match="single class"):
        r2_decomposition(model, X, np.full(len(y), "a"))
    model, X, y, _, _, _ = case("hgb-poisson")
    with pytest.raises(ValueError, match="y >= 0"):
        r2_decomposition(model, X, -np.asarray(y, dtype=float) - 1)
    model, X, y, _, _, _ = case("hgb-gamma-weighted")
    with pytest.raises(ValueError, match="y > 0"):
        r2_decomposition(model, X, np.zeros(len(y)))


def _refused():
    X, t = make_data(3)
    from sklearn.ensemble import GradientBoostingRegressor

    yield "absolute_error", GradientBoostingRegressor(loss="absolute_error",
                                                      n_estimators=2).fit(X, t["counts"])
    yield "quantile", HistGradientBoostingRegressor(loss="quantile", quantile=0.7, max_iter=2).fit(
        X, t["counts"])
    yield "criterion 'poisson'", DecisionTreeRegressor(criterion="poisson", max_depth=2).fit(
        X, t["counts"])
    yield "exponential", GradientBoostingClassifier(loss="exponential", n_estimators=2).fit(
        X, t["binary"])
    xgb = pytest.importorskip("xgboost")
    yield "reg:quantileerror", xgb.XGBRegressor(objective="reg:quantileerror", quantile_alpha=0.7, n_estimators=2,
                                                n_jobs=1).fit(X, t["counts"])
    lgb = pytest.importorskip("lightgbm")
    yield "multiclassova", lgb.LGBMClassifier(objective="multiclassova", n_estimators=2,
                                              verbose=-1, n_jobs=1).fit(X, t["three"])
    yield "'rf'|averages", lgb.LGBMClassifier(boosting_type="rf", n_estimators=2,
                                              bagging_freq=1, bagging_fraction=0.5,
                                              verbose=-1, n_jobs=1).fit(X, t["binary"])
    cb = pytest.importorskip("catboost")
    yield "Quantile", cb.CatBoostRegressor(loss_function="Quantile", iterations=2, verbose=0,
                                           thread_count=1, allow_writing_files=False).fit(
        X, t["counts"])


def test_unsupported_losses_raise_naming_loss_and_alternatives():
    X, _ = make_data(3)
    for loss, model in _refused():
        with pytest.raises(UnsupportedModelError, match=loss) as error:
            r2_decomposition(model, X, model.predict(X))
        assert "shap_values" in str(error.value)


# --------------------------------------------------------------------------
# Issue 14: scales, tiny weights, zero weights; never NaN quietly
# --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def regression():
    X, t = make_data(5, n=60)
    y = X[:, 0] * 2 + (X[:, 1] > 0) + np.random.default_rng(5).normal(size=60)
    model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X[:40], y[:40])
    return to_ensemble(model), X, y, r2_decomposition(model, X, y, return_local=True)


@pytest.mark.parametrize("factor", [1e200, 1e-200, 3.0e-300, 1e300])
def test_scaled_target_and_model_give_the_same_shares(regression, factor):
    ens, X, y, plain = regression
    scaled = replace(ens, value=ens.value * factor, base_value=ens.base_value * factor)
    result = r2_decomposition(scaled, X, y * factor)
    np.testing.assert_allclose(result.shares, plain.shares, rtol=1e-9, atol=1e-12)
    assert result.score == pytest.approx(plain.score, rel=1e-9)


@pytest.mark.parametrize("tiny", [1e-320, 5e-324 * 7, 1e-300])
def test_tiny_uniform_weights_equal_no_weights(regression, tiny):
    ens, X, y, plain = regression
    result = r2_decomposition(ens, X, y, sample_weight=np.full(len(y), tiny), return_local=True)
    np.testing.assert_allclose(result.shares, plain.shares, rtol=0, atol=1e-13)
    np.testing.assert_allclose(result.local, plain.local, rtol=0, atol=1e-14)


def test_zero_weights_have_their_own_error(regression):
    ens, X, y, _ = regression
    with pytest.raises(ValueError, match="zero for every row"):
        r2_decomposition(ens, X, y, sample_weight=np.zeros(len(y)))
    model, X, y, _, _, _ = case("hgb-binary-nan")
    with pytest.raises(ValueError, match="zero for every row"):
        r2_decomposition(model, X, y, sample_weight=np.zeros(len(y)))


def test_constant_target_still_reported(regression):
    ens, X, y, _ = regression
    with pytest.raises(ValueError, match="constant"):
        r2_decomposition(ens, X, np.full(len(y), 1e-200))


def test_overflow_raises_instead_of_nan():
    """Margins whose exp overflows: a clear error, not NaN shares."""
    model, X, y, _, _, _ = case("hgb-poisson")
    ens = to_ensemble(model)
    huge = replace(ens, value=ens.value * 1e6)
    with pytest.raises(FloatingPointError, match="not finite"):
        r2_decomposition(huge, X, y)
