"""The examples run (their quick modes), so that they stay true to the API."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(script, *args):
    # the checked-out package, not whichever copy is installed
    path = os.pathsep.join(filter(None, [str(EXAMPLES.parent), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=path)
    done = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True,
                          text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def test_qshap_simulation_quick():
    pytest.importorskip("xgboost")
    out = run("qshap_simulation.py", "--quick")
    assert "theor" in out.lower()


def test_diabetes_r2(tmp_path):
    pytest.importorskip("pandas")
    out = run("diabetes_r2.py", "--output", str(tmp_path / "r2.png"))
    assert "unattributed" in out


def test_piecewise_linear_lightgbm_quick():
    pytest.importorskip("lightgbm")
    out = run("piecewise_linear_lightgbm.py", "--quick")
    assert "Additivity" in out


def test_ranking_insertion_deletion_quick(tmp_path):
    out = run("ranking_insertion_deletion.py", "--quick", "--output", str(tmp_path / "c.png"))
    assert "insertion" in out and "plot saved" in out


def test_shapflex_vs_qshap_quick():
    out = run("shapflex_vs_qshap.py", "--quick")
    assert "Gelman" in out and "LMG" in out


def test_d2_classifiers_quick():
    out = run("d2_classifiers.py", "--quick")
    assert "D^2 (log-loss)" in out and "permutation" in out and "D^2 (Brier)" in out
