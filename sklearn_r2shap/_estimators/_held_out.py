"""Cross-fitted shares: the held-out folds' decompositions pooled over rows.

Documentation page "Feature selection" (tests on held-out shares): a row i of fold k gets
L_ij = n_k * local_ij, its term of feature j's share on fold k scaled so
that the fold's share (fold k's own denominator) is the mean of L_ij over
the fold's rows. All rows pooled: the share is mean_i L_ij, its standard
error sd_i(L_ij) / sqrt(n) (ddof=1). Rows of zero weight are absent, as in
:func:`~sklearn_r2shap.r2_decomposition` (n and n_k count rows of positive
weight).

Layer: estimators (cross-fitted shares of the selectors). Imports numpy only;
never a public function module.
"""
from dataclasses import replace

import numpy as np

__all__ = ["pooled_terms", "pool_folds"]


def pooled_terms(results, tests, n_rows, sample_weight=None):
    """(terms, rows): the scaled terms L of the rows of positive weight, in row order.

    ``results`` are the folds' R2Decompositions with ``local`` (per-row terms
    whose column sums are the fold's shares), ``tests`` the folds' row
    indices into the n_rows rows.
    """
    n_features = results[0].shares.size
    terms = np.zeros((n_rows, n_features))
    present = np.zeros(n_rows, dtype=bool)
    for result, test in zip(results, tests):
        test = np.asarray(test)
        keep = (np.ones(len(test), dtype=bool) if sample_weight is None
                else np.asarray(sample_weight)[test] > 0)
        terms[test[keep]] = keep.sum() * result.local[keep]
        present[test[keep]] = True
    rows = np.flatnonzero(present)
    return terms[rows], rows


def pool_folds(results, tests, n_rows, sample_weight=None):
    """The R2Decomposition of the pooled held-out rows, and the scaled terms L.

    Its ``shares`` are mean_i L_ij (the folds' shares weighted by their
    numbers of rows), ``std_errors`` sd_i(L_ij) / sqrt(n), ``score`` the folds'
    scores weighted the same way, ``local`` (n_rows, n_features) with
    L_ij / n (column sums: ``shares``; zero for rows of zero weight).
    Folds decomposed on a row subset (no ``local``): the size-weighted mean
    of their shares, standard errors combined as independent, and no terms.
    """
    sizes = np.array([np.sum(np.asarray(sample_weight)[np.asarray(t)] > 0)
                      if sample_weight is not None else len(t) for t in tests], dtype=float)
    share = sizes / sizes.sum()
    r2 = float(np.dot(share, [float(r.score) for r in results]))
    sampled = any(r.algorithm == "sampled" for r in results)
    mc_std_errors = None
    if sampled:  # independent folds: the Monte Carlo variances of the weighted mean add
        mc = [r.mc_std_errors if r.mc_std_errors is not None else 0.0 for r in results]
        mc_std_errors = np.sqrt(np.sum([(w * m) ** 2 for w, m in zip(share, mc)], axis=0))
    if any(r.local is None for r in results):
        # a row subset per fold (max_samples): no term for every row; the folds'
        # estimates are independent given the fold models
        importances = np.dot(share, [r.shares for r in results])
        std_errors = np.sqrt(np.dot(share ** 2, [r.std_errors ** 2 for r in results]))
        terms, local = None, None
    else:
        terms, rows = pooled_terms(results, tests, n_rows, sample_weight)
        n_used = len(rows)
        importances = terms.mean(axis=0)
        std_errors = (terms.std(axis=0, ddof=1) / np.sqrt(n_used) if n_used > 1
                      else np.full(importances.size, np.nan))
        local = np.zeros((n_rows, importances.size))
        local[rows] = terms / n_used
    pooled = replace(
        results[0], shares=importances, std_errors=std_errors, score=r2,
        unattributed=r2 - float(importances.sum()), n_rows=n_rows, local=local,
        algorithm="sampled" if sampled else "exact", mc_std_errors=mc_std_errors,
        n_rows_sampled=None)
    return pooled, terms
