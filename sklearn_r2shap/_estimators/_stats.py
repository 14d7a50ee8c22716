"""Tests on held-out shares and the one-standard-error rule (documentation page "Feature selection").

Plain numpy / scipy on arrays: the one-sided z-test of H0: share_j <= 0 on
pooled per-row terms, the Holm and Benjamini-Hochberg corrections (as
adjusted p-values, so that equal p-values get equal decisions), and the
one-standard-error choice of a number of features from cross-validated
curves. Used by :class:`~sklearn_r2shap.ShapleyR2Importance` and
:class:`~sklearn_r2shap.ShapleyR2RFECV`.

Layer: estimators (the selectors' statistics). Imports ``_selector``; never a public
function module.
"""
import numpy as np
from scipy.stats import norm

from ._selector import selected_by_threshold

__all__ = ["TESTS", "share_tests", "adjusted_pvalues", "rejected",
           "choose_n_features"]

#: The tests of H0: share_j <= 0 (ShapleyR2Importance's ``test``; the names of
#: scikit-learn's SelectFpr, SelectFwe, SelectFdr).
TESTS = ("fpr", "fwe", "fdr")


def share_tests(terms):
    """z statistics and one-sided p-values of H0: E[L_j] <= 0, per column.

    ``terms`` is (n_rows, n_features): each row's term L_ij, scaled so that
    a share is the mean of its column. z_j = mean_j / (sd_j / sqrt(n))
    (ddof=1), p_j = 1 - Phi(z_j). A column of zeros (a feature no model
    splits on) has z = 0 and p = 1: it adds nothing, and nothing is tested.
    A constant positive column has z = inf, p = 0.
    """
    terms = np.asarray(terms, dtype=np.float64)
    n_rows = terms.shape[0]
    if n_rows < 2:
        raise ValueError(f"The tests need at least 2 rows of terms, got {n_rows}.")
    mean = terms.mean(axis=0)
    se = terms.std(axis=0, ddof=1) / np.sqrt(n_rows)
    tested = (se > 0) | (mean != 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        # se = 0: every row's term is the same number
        z = np.where(se > 0, mean / se, np.sign(mean) * np.inf)
    z = np.where(tested, z, 0.0)
    return z, np.where(tested, norm.sf(z), 1.0)


def adjusted_pvalues(pvalues, method):
    """p-values adjusted for ``method`` in {"fpr", "fwe", "fdr"}.

    "fpr": unchanged. "fwe": Holm's step-down, p~_(k) = max_{i<=k}
    min(1, (m - i + 1) p_(i)). "fdr": Benjamini-Hochberg's step-up,
    p~_(k) = min_{i>=k} min(1, m p_(i) / i). Rejecting p~ <= alpha is Holm's
    and BH's procedure at level alpha; equal p-values get equal p~.
    """
    pvalues = np.asarray(pvalues, dtype=np.float64)
    if method == "fpr":
        return pvalues.copy()
    m = pvalues.size
    if m == 0:
        return pvalues.copy()
    order = np.argsort(pvalues, kind="mergesort")
    ranked = pvalues[order]
    rank = np.arange(1, m + 1)
    if method == "fwe":
        adjusted = np.maximum.accumulate(np.minimum(1.0, (m - rank + 1) * ranked))
    elif method == "fdr":
        adjusted = np.minimum.accumulate(np.minimum(1.0, m * ranked / rank)[::-1])[::-1]
    else:
        raise ValueError(f"Unknown test {method!r}: expected one of {TESTS}.")
    out = np.empty(m)
    out[order] = adjusted
    return out


def rejected(pvalues, method, alpha):
    """Mask of the features whose H0 is rejected at level ``alpha`` by ``method``.

    Adjusted p-values within a relative 1e-9 of ``alpha`` count as at it
    (:func:`~sklearn_r2shap._estimators._selector.selected_by_threshold`), so features
    with equal shares and standard errors are kept or dropped together.
    """
    adjusted = adjusted_pvalues(pvalues, method)
    return selected_by_threshold(-adjusted, -float(alpha)) if adjusted.size else adjusted > 0


def choose_n_features(n_features, fold_scores, rule):
    """Index into ``n_features`` chosen from cross-validated curves.

    ``n_features`` is the count of each step, of the units eliminated (the
    features, or the feature groups: ShapleyR2RFECV's
    ``cv_results_["n_feature_groups"]``). ``fold_scores`` is (n_steps, n_folds).
    "best": the largest mean score;
    "one_se": with b that step and se_b = sd(a_b) / sqrt(K) (ddof=1), the
    fewest features whose mean score is >= mean(a_b) - se_b. Mean scores
    equal to a relative 1e-9 count as equal, and equal means go to the
    fewest features. With one fold, se_b is taken as 0.
    """
    n_features = np.asarray(n_features)
    fold_scores = np.asarray(fold_scores, dtype=np.float64)
    mean = fold_scores.mean(axis=1)
    best = int(np.argmax(mean))
    cut = mean[best]
    if rule == "one_se":
        n_folds = fold_scores.shape[1]
        if n_folds > 1:
            cut -= fold_scores[best].std(ddof=1) / np.sqrt(n_folds)
    elif rule != "best":
        raise ValueError(f"selection_rule must be 'one_se' or 'best', got {rule!r}.")
    candidates = np.flatnonzero(selected_by_threshold(mean, cut))
    return int(candidates[np.argmin(n_features[candidates])])
