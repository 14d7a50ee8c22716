"""The scores of ``benchmarks/bench_selection.py`` (true-positive rate, false
discovery proportion, F1), on a hand-made case and against scikit-learn's
recall / precision / F1 of the indicator vectors over every pair of subsets of
four features. The benchmark itself does not run in the suite."""
import importlib.util
import itertools
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import f1_score, precision_score, recall_score

PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "selection_metrics.py"


@pytest.fixture(scope="module")
def metrics():
    spec = importlib.util.spec_from_file_location("selection_metrics", PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_hand_made_case(metrics):
    # truth {0, 1, 2, 3}; kept {1, 2, 7}: 2 true, 1 false
    out = metrics.selection_scores([7, 2, 1], [0, 1, 2, 3])
    assert (out["tp"], out["fp"], out["n_kept"]) == (2, 1, 3)
    assert out["tpr"] == pytest.approx(2 / 4)
    assert out["fdp"] == pytest.approx(1 / 3)
    # precision 2/3, recall 1/2: F1 = 2 * (2/3 * 1/2) / (2/3 + 1/2) = 4/7
    assert out["f1"] == pytest.approx(4 / 7)
    nothing = metrics.selection_scores([], [0, 1])
    assert (nothing["tpr"], nothing["fdp"], nothing["f1"]) == (0.0, 0.0, 0.0)


def test_against_sklearn_on_every_pair_of_subsets(metrics):
    p = 4
    subsets = [set(c) for k in range(p + 1) for c in itertools.combinations(range(p), k)]
    for selected, relevant in itertools.product(subsets, subsets):
        if not relevant:
            continue
        truth = np.isin(np.arange(p), list(relevant)).astype(int)
        kept = np.isin(np.arange(p), list(selected)).astype(int)
        out = metrics.selection_scores(selected, relevant)
        assert out["tpr"] == pytest.approx(recall_score(truth, kept))
        # nothing kept: no false discovery (precision taken as 1)
        assert out["fdp"] == pytest.approx(1 - precision_score(truth, kept, zero_division=1.0))
        assert out["f1"] == pytest.approx(f1_score(truth, kept, zero_division=0.0))
        assert out["n_kept"] == len(selected)


def test_mean_se(metrics):
    mean, se = metrics.mean_se([1.0, 2.0, 4.0, None, float("nan")])
    assert mean == pytest.approx(7 / 3)
    assert se == pytest.approx(np.std([1, 2, 4], ddof=1) / np.sqrt(3))
    assert np.isnan(metrics.mean_se([3.0])[1])
