"""TreeGrad-Ranker: feature rankings that optimise the joint insertion/deletion
objective of one row (treegrad-ranker paper, Algorithms 2 and 10;
documentation page "Feature ranking").

For a row ``x`` the path-dependent game ``v_x`` (page "Local attributions") has the
multilinear extension ``F(z) = E_{S ~ Bernoulli(z)} v_x(S)`` on ``[0, 1]^p``.
:func:`multilinear_gradient` evaluates ``F`` and its gradient exactly at any
point with TreeGrad (Algorithm 9), including points with coordinates 0 and 1.
:func:`treegrad_scores` runs projected gradient ascent (or Adam) on the joint
objective ``(F(z) - F(1 - z)) / 2`` from ``z = 1/2`` and returns the running
mean of its gradients: the TreeGrad-Ranker scores.
:class:`~sklearn_r2shap.TreeGradRanker` (in ``_estimators``) wraps them as a
scikit-learn feature selector.

Which output is explained
-------------------------
All functions take ``class_index``, the index of the model output (class) whose
game is explained:

* single-output models (regressors): that output; ``class_index`` may be None or 0;
* models with one output per class (multiclass boosting margins, the class
  probabilities of scikit-learn tree and forest classifiers): ``class_index``
  is a class index, or an array of one class index per row; None means the
  **predicted class of each row** (the argmax of the raw output, which is the
  class the model's ``predict`` returns);
* binary boosted classifiers with one margin (log-odds of class 1): ``class_index``
  is a class index too: 1 is the margin, 0 its negation (the log-odds of
  class 0; the game, its gradients, values and scores change sign); None is
  again the predicted class of each row (class 1 where the margin is > 0);
* multi-output regressors: an output index must be given.

Class semantics come from the model's ``classes_``: a bare XGBoost or
LightGBM ``Booster`` of a binary objective has none and is explained as a
single-output model (its margin).

The games (output selection, the TreeGrad kernels of a block of rows) live in
:mod:`._games.treegrad`. Layer: public functions; never imports an estimator.
"""
import numbers

import numpy as np

from ._execution.cost import semivalue_seconds
from ._execution.run import map_rows
from ._games import treegrad as _tg
from ._prepare import prepare, split_row_argument

__all__ = ["multilinear_gradient", "treegrad_scores"]

_OPTIMIZERS = ("adam", "gd")


def _check_points(z, shape):
    n_rows, n_features = shape
    try:
        z = np.asarray(z, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"z must be numeric: {exc}") from None
    if z.ndim == 1:
        if z.shape[0] != n_features:
            raise ValueError(f"z has {z.shape[0]} entries, expected n_features = {n_features}.")
        z = np.broadcast_to(z, (n_rows, n_features))
    elif z.ndim != 2 or z.shape != (n_rows, n_features):
        raise ValueError(
            f"z must have shape ({n_features},) or ({n_rows}, {n_features}), got {z.shape}."
        )
    if not np.all((z >= 0.0) & (z <= 1.0)):  # also False for NaN
        raise ValueError("z must lie in [0, 1] (every entry a probability).")
    return np.ascontiguousarray(z)


def _check_ranker_params(n_iter, step_size, optimizer):
    if (not isinstance(n_iter, numbers.Integral) or isinstance(n_iter, bool)
            or n_iter < 1):
        raise ValueError(f"n_iter must be an integer >= 1, got {n_iter!r}.")
    if (not isinstance(step_size, numbers.Real) or isinstance(step_size, bool)
            or not np.isfinite(step_size) or step_size <= 0):
        raise ValueError(f"step_size must be a positive finite number, got {step_size!r}.")
    if not isinstance(optimizer, str) or optimizer not in _OPTIMIZERS:
        raise ValueError(f"optimizer must be 'adam' or 'gd', got {optimizer!r}.")
    return int(n_iter), float(step_size), optimizer == "adam"


def scores_of(call, *, n_iter, step_size, adam, class_index=None):
    """TreeGrad-Ranker scores of a prepared call's rows (checked parameters)."""
    rows, fixed = split_row_argument("class_index", class_index, call.n_rows)
    ensemble = call.ensemble
    return map_rows(call, _tg.ranker_block, trailing_shape=(ensemble.n_features,),
                    desc="TreeGrad-Ranker", row_arguments=rows,
                    seconds_per_row=semivalue_seconds(ensemble, 2 * n_iter),
                    structure=_tg.pattern_structure(ensemble), n_iter=n_iter,
                    step_size=step_size, adam=adam, **fixed)


# --------------------------------------------------------------------------
# Functions


def multilinear_gradient(model, X, z, *, class_index=None, n_jobs=None, verbose="auto"):
    """Gradient and value of the multilinear extension of each row's game.

    For row ``x`` with path-dependent game ``v_x`` (page "Local attributions"),
    ``F_x(z) = sum_S prod_{j in S} z_j prod_{j not in S} (1 - z_j) v_x(S)``,
    the expected value of ``v_x(S)`` when every feature joins ``S``
    independently with probability ``z_j``. Computed exactly by TreeGrad
    (treegrad-ranker Algorithm 9) in one pass down and up each tree, also at
    points with coordinates 0 or 1 (at a vertex ``z = 1_S``, ``F_x(z)`` is
    ``v_x(S)``).

    Parameters
    ----------
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features)
        Rows to explain.
    z : array-like of shape (n_features,) or (n_rows, n_features)
        The point (the same for every row, or one per row), in ``[0, 1]``.
    class_index : int, array-like of int of shape (n_rows,), or None, default=None
        The output whose game is explained: see the module docstring. For
        classifiers a class index; None is the predicted class of each row.
        For a binary boosted classifier 1 is its margin and 0 the negated
        margin (log-odds of class 0).
    n_jobs : int, default=None
    verbose : "auto" or int, default="auto"
        Threads (None: all cores) and progress, as in :func:`~sklearn_r2shap.shap_values`.

    Returns
    -------
    gradient : ndarray of shape (n_rows, n_features)
        ``grad F_x(z)``. At ``z = q 1`` this is the weighted Banzhaf value.
    value : ndarray of shape (n_rows,)
        ``F_x(z)``, the model's base value included.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap.ranking import multilinear_gradient
    >>> X, y = load_diabetes(return_X_y=True)
    >>> tree = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    >>> grad, value = multilinear_gradient(tree, X[:3], np.ones(10))
    >>> bool(np.allclose(value, tree.predict(X[:3])))   # F(1) = v(N) = f(x)
    True
    >>> grad.shape
    (3, 10)
    """
    call = prepare(model, X, n_jobs=n_jobs, verbose=verbose,
                   in_memory="multilinear_gradient needs X in memory (its points z are per row).")
    rows, fixed = split_row_argument("class_index", class_index, call.n_rows)
    rows["z"] = _check_points(z, (call.n_rows, call.n_features))
    return map_rows(call, _tg.gradient_block, trailing_shape=(call.n_features,),
                    desc="Multilinear gradient", row_arguments=rows,
                    seconds_per_row=semivalue_seconds(call.ensemble, 1), **fixed)


def treegrad_scores(model, X, *, n_iter=100, step_size=5.0, optimizer="adam", class_index=None,
                    n_jobs=None, verbose="auto"):
    """TreeGrad-Ranker scores of every row (Algorithms 2 and 10).

    Starting from ``z = 1/2``, each of the ``n_iter`` steps takes the
    gradient ``g = (grad F_x(z) + grad F_x(1 - z)) / 2`` of the joint
    objective ``(F_x(z) - F_x(1 - z)) / 2`` (keep the features of ``z``,
    drop the others), adds it to the running mean ``zeta`` and moves ``z``
    up the gradient, by plain projected gradient ascent
    (``z += step_size * g``) or Adam (beta1 = 0.9, beta2 = 0.999, eps = 1e-8,
    ``z += step_size * m_hat / sqrt(v_hat + eps)``), then clips ``z`` to
    ``[0, 1]``. The scores are ``zeta``; sorting them in decreasing order
    ranks the features. With ``n_iter=1`` they are the Banzhaf values.

    The scores satisfy the dummy axiom (a feature whose marginal contribution
    is the same constant for every coalition gets that constant; a feature
    no tree splits on gets 0), equal treatment (two interchangeable features
    get equal scores) and monotonicity, but not linearity (Theorem 1 of the
    paper).

    Parameters
    ----------
    model : fitted tree model
    X : array-like, DataFrame or sparse matrix of shape (n_rows, n_features)
    n_iter : int, default=100
        Number of steps T.
    step_size : float, default=5.0
        Learning rate epsilon (the paper's choice, with T = 100).
    optimizer : {"adam", "gd"}, default="adam"
        Adam (Algorithm 10) or projected gradient ascent (Algorithm 2).
    class_index : int, array-like of int of shape (n_rows,), or None, default=None
        The output (class) explained; see :func:`multilinear_gradient`.
    n_jobs : int, default=None
        Threads; None uses all cores. The scores do not depend on it (bit
        for bit).
    verbose : "auto" or int, default="auto"
        Progress, as in :func:`~sklearn_r2shap.shap_values`.

    Returns
    -------
    ndarray of shape (n_rows, n_features)
        The scores zeta, in the units of the explained output.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import banzhaf_values, treegrad_scores
    >>> X, y = load_diabetes(return_X_y=True)
    >>> tree = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    >>> zeta = treegrad_scores(tree, X[:5])
    >>> zeta.shape
    (5, 10)
    >>> one_step = treegrad_scores(tree, X[:5], n_iter=1)
    >>> bool(np.allclose(one_step, banzhaf_values(tree, X[:5])[:, :-1]))
    True
    """
    n_iter, step_size, adam = _check_ranker_params(n_iter, step_size, optimizer)
    call = prepare(model, X, n_jobs=n_jobs, verbose=verbose)
    return scores_of(call, n_iter=n_iter, step_size=step_size, adam=adam,
                     class_index=class_index)
