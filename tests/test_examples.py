"""The examples run (their quick modes), so that they stay true to the API, and
have the layout the documentation's gallery (sphinx-gallery) builds from."""
import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sklearn_r2shap

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def run(script, *args):
    pytest.importorskip("matplotlib")  # every example draws a figure
    # the package these tests import (the checkout's, or the installed wheel's)
    package_home = str(Path(sklearn_r2shap.__file__).resolve().parents[1])
    path = os.pathsep.join(filter(None, [package_home, os.environ.get("PYTHONPATH")]))
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


def test_every_example_is_a_gallery_page_and_is_run_here():
    """A title underlined with '=', text cells ('# %%'), a figure, and a test above."""
    tests = Path(__file__).read_text(encoding="utf-8")
    scripts = sorted(EXAMPLES.glob("*.py"))
    assert scripts
    for script in scripts:
        source = script.read_text(encoding="utf-8")
        lines = ast.get_docstring(ast.parse(source), clean=False).strip("\n").splitlines()
        title, underline = lines[0], lines[1]
        assert set(underline) == {"="} and len(underline) >= len(title), script.name
        assert "\n# %%\n" in source, script.name
        assert "plt.show()" in source, script.name
        assert f'run("{script.name}"' in tests, f"{script.name} is not run by a test"
        # the page opens with one sentence saying what the example shows
        opening = " ".join(lines[2:]).strip()
        assert opening.startswith("This example "), script.name
        assert "." in opening.split("\n")[0], script.name
        # no timings in the text: they would be another run's, not the page's
        docstring = "\n".join(lines)
        assert not re.search(r"\d+(\.\d+)? ?s\b[^a-z]*(on \d+ cores|wall)|total time", docstring), \
            script.name


def test_dask_local_cluster():
    pytest.importorskip("distributed")
    out = run("dask_local_cluster.py")
    assert "mean |SHAP|" in out
    line = next(line for line in out.splitlines() if "cluster and in-memory" in line)
    assert float(line.split(":")[-1]) < 1e-10
    line = next(line for line in out.splitlines() if "raw prediction" in line)
    assert float(line.split(":")[-1]) < 1e-8
    # the R^2 shares reduced on the cluster equal the in-memory ones
    line = next(line for line in out.splitlines() if "of the R^2 shares" in line)
    shares, r2 = (float(part.split(":")[-1]) for part in line.split(";"))
    assert shares < 1e-10 and r2 < 1e-10
    assert "score (R2)" in out


def test_spark_local_session():
    pytest.importorskip("pyspark")
    pytest.importorskip("pyarrow")
    from spark_java import no_java  # tests/ is on sys.path under pytest
    reason = no_java()
    if reason is not None:
        pytest.skip(reason)
    out = run("spark_local_session.py")
    assert "mean |SHAP|" in out and "score (R2)" in out
    # the sample explained on Spark equals the same rows explained in memory
    line = next(line for line in out.splitlines() if "in-memory explanation" in line)
    assert float(line.split(":")[-1]) == 0.0, line


def test_d2_classifiers_quick():
    out = run("d2_classifiers.py", "--quick")
    assert "D^2 (log-loss)" in out and "permutation" in out and "D^2 (Brier)" in out
    # the contradiction is explained by correlated features: shuffling the twin
    # features together drops D^2 by more than their two single drops
    line = next(line for line in out.splitlines() if "shuffled together" in line)
    numbers = [float(part.split()[-1]) for part in line.split(";")]
    shares, single, joint = numbers
    assert joint > single + 0.02, line
    pair_line = next(line for line in out.splitlines() if "most correlated" in line)
    assert abs(float(pair_line.split("r = ")[1].rstrip(")"))) > 0.8, pair_line


def test_pipeline_explanations():
    pytest.importorskip("pandas")
    out = run("pipeline_explanations.py")
    assert "held-out R^2" in out and "group share" in out
    assert "SHAP values of feature groups" in out


def test_interaction_values(tmp_path):
    out = run("interaction_values.py", "--output", str(tmp_path / "interactions.png"))
    assert "strongest partner" in out and (tmp_path / "interactions.png").exists()
    for label in ("row sum - SHAP value", "total - prediction"):
        line = next(line for line in out.splitlines() if label in line)
        assert float(line.split(":")[-1]) < 1e-9


def test_r2_interactions(tmp_path):
    pytest.importorskip("pandas")
    out = run("r2_interactions.py", "--output", str(tmp_path / "pairs.png"))
    assert (tmp_path / "pairs.png").exists()
    line = next(line for line in out.splitlines() if line.startswith("top pair by each"))
    assert line.count("'x0 x x1'") == 3, line
    line = next(line for line in out.splitlines() if "row sum of S" in line)
    assert float(line.split(":")[-1]) < 1e-10
    assert "= R^2" in out and "time of this run" in out


def test_how_many_features_quick():
    pytest.importorskip("pandas")
    out = run("how_many_features.py", "--quick")
    assert "one-SE rule:" in out and "noise columns selected:" in out
    # the peers' table, read from the benchmark's recorded results
    assert "diabetes (all features:" in out and "powershap" in out
