"""Independent references for the kernels: plain-Python routing, the
path-dependent value function v_x(S) by recursion, and semivalues by
enumerating every subset (small p only). Nothing here calls a kernel."""
import itertools
import math

import numpy as np
from scipy.special import beta as beta_fn

from sklearn_r2shap._model._ensemble import (
    DECISION_CATEGORICAL,
    DECISION_LEQ,
    DECISION_LEQ_ZERO_MISSING,
    DECISION_LT,
)


def route(ens, node, x):
    """The child of ``node`` that row ``x`` goes to (written independently)."""
    v = x[ens.feature[node]]
    kind = ens.decision_type[node]
    if np.isnan(v):
        return ens.default_child[node]
    if kind == DECISION_LEQ:
        return ens.children_left[node] if v <= ens.threshold[node] else ens.children_right[node]
    if kind == DECISION_LT:
        return ens.children_left[node] if v < ens.threshold[node] else ens.children_right[node]
    if kind == DECISION_LEQ_ZERO_MISSING:
        if abs(v) <= 1.0000000180025095e-35:  # LightGBM kZeroThreshold = 1e-35f
            return ens.default_child[node]
        return ens.children_left[node] if v <= ens.threshold[node] else ens.children_right[node]
    assert kind == DECISION_CATEGORICAL
    if v < 0:
        return ens.children_right[node]
    c = int(v)
    words = ens.cat_bitsets[ens.cat_start[node]: ens.cat_start[node] + ens.cat_words[node]]
    inside = c // 32 < len(words) and (int(words[c // 32]) >> (c % 32)) & 1
    return ens.children_left[node] if inside else ens.children_right[node]


def path(ens, t, x):
    """The nodes of tree ``t`` that a prepared row ``x`` visits, root to leaf."""
    k = ens.tree_start[t]
    nodes = [k]
    while ens.children_left[k] >= 0:
        k = route(ens, k, x)
        nodes.append(k)
    return nodes


def prepare(ens, x):
    x = np.asarray(x, dtype=np.float64)
    if ens.x_float32:
        x = x.astype(np.float32).astype(np.float64)
    return x


def tree_value(ens, t, x, S):
    """v^t_x(S) of tree t: follow x where the split feature is in S, else average by cover."""
    cover = ens.cover

    def rec(k):
        if ens.children_left[k] < 0:
            return ens.value[k].copy()
        f = ens.feature[k]
        if f in S:
            return rec(route(ens, k, x))
        a, b = ens.children_left[k], ens.children_right[k]
        if cover[k] > 0:
            return (cover[a] * rec(a) + cover[b] * rec(b)) / cover[k]
        return 0.5 * (rec(a) + rec(b))

    return rec(ens.tree_start[t])


def value_function(ens, x, S):
    """v_x(S) of the ensemble, shape (n_outputs,)."""
    x = prepare(ens, x)
    out = ens.base_value.astype(float).copy()
    for t in range(ens.n_trees):
        val = tree_value(ens, t, x, set(S))
        if ens.n_values == 1:
            out[ens.tree_output[t]] += val[0]
        else:
            out += val
    return out


def predict(ens, X):
    X = np.atleast_2d(X)
    return np.array([value_function(ens, x, range(ens.n_features)) for x in X])


def shapley_weight(n, s):
    return math.factorial(s) * math.factorial(n - 1 - s) / math.factorial(n)


def banzhaf_weight(q):
    return lambda n, s: q**s * (1 - q) ** (n - 1 - s)


def beta_weight(alpha, beta):
    return lambda n, s: beta_fn(s + beta, n - 1 - s + alpha) / beta_fn(alpha, beta)


def semivalue(ens, x, weight=shapley_weight, features=None):
    """Semivalue by enumerating all subsets; shape (n_outputs, n_features).

    ``features`` restricts the players (the others are null players only if
    no tree splits on them; by default all features play).
    """
    p = ens.n_features
    players = list(range(p)) if features is None else list(features)
    n = len(players)
    cache = {}

    def v(S):
        key = frozenset(S)
        if key not in cache:
            cache[key] = value_function(ens, x, key)
        return cache[key]

    phi = np.zeros((ens.n_outputs, p))
    for i in players:
        others = [j for j in players if j != i]
        for s in range(n):
            w = weight(n, s)
            for S in itertools.combinations(others, s):
                phi[:, i] += w * (v(set(S) | {i}) - v(S))
    return phi
