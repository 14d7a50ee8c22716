"""Scores of a feature selection against the known truth (``bench_selection.py``).

``selected`` and ``relevant`` are sets (or iterables) of column indices.

- true-positive rate: |selected & relevant| / |relevant|;
- false discovery proportion: |selected - relevant| / |selected|, 0 when
  nothing is selected (the convention of the FDR, Benjamini & Hochberg 1995);
- F1: 2 |selected & relevant| / (|selected| + |relevant|), the harmonic mean
  of precision and recall (0 when both sets are empty).
"""
import numpy as np


def selection_scores(selected, relevant):
    """Dict with ``tp``, ``fp``, ``n_kept``, ``tpr``, ``fdp``, ``f1``."""
    selected, relevant = set(int(j) for j in selected), set(int(j) for j in relevant)
    tp = len(selected & relevant)
    fp = len(selected) - tp
    return {
        "tp": tp,
        "fp": fp,
        "n_kept": len(selected),
        "tpr": tp / len(relevant) if relevant else float("nan"),
        "fdp": fp / len(selected) if selected else 0.0,
        "f1": 2 * tp / (len(selected) + len(relevant)) if selected or relevant else 0.0,
    }


def mean_se(values):
    """Mean and standard error of the mean (ddof=1; nan with fewer than 2 values)."""
    values = np.asarray([v for v in values if v is not None and np.isfinite(v)], dtype=float)
    if values.size == 0:
        return float("nan"), float("nan")
    se = values.std(ddof=1) / np.sqrt(values.size) if values.size > 1 else float("nan")
    return float(values.mean()), float(se)
