"""What a new user meets first: the README's commands and first code block run
with the bare install (no pandas, no matplotlib), CI runs the README's commands
verbatim, and the printed and plotted results say what they show."""
import importlib.util
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
# the package these tests import (the checkout's, or the installed wheel's)
PACKAGE_HOME = str(Path(importlib.util.find_spec("sklearn_r2shap").origin).parents[1])
README = (ROOT / "README.md").read_text(encoding="utf-8")

# Makes ``import pandas`` / ``import matplotlib`` fail in the child process, as
# on a bare install (a finder, not sys.modules[...] = None, which scikit-learn's
# own "is pandas loaded?" checks would trip over).
BLOCK_OPTIONAL = textwrap.dedent("""
    import sys

    class _Absent:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("pandas", "matplotlib"):
                raise ImportError(f"No module named {name!r} (blocked: bare install)")

    sys.meta_path.insert(0, _Absent())
""")


def run_bare(code, *args):
    """Run ``code`` in a fresh interpreter without pandas and matplotlib."""
    done = subprocess.run([sys.executable, "-c", BLOCK_OPTIONAL + code, *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=600,
                          env=dict(os.environ, PYTHONPATH=PACKAGE_HOME))
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def readme_blocks(language):
    return re.findall(rf"```{language}\n(.*?)```", README, flags=re.S)


def test_blocker_blocks_pandas():
    with pytest.raises(AssertionError, match="blocked: bare install"):
        run_bare("import pandas")


def test_readme_commands_are_run_verbatim_by_ci():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    commands = [line.strip() for block in readme_blocks("bash")[:2]
                for line in block.splitlines() if line.strip()]
    assert commands[0] == "pip install -e . && python -m sklearn_r2shap"
    assert commands[1] == 'pip install -e ".[test]" && python -m pytest -n 2'
    for command in commands:
        assert command in ci, command
    # the bare install comes first
    assert ci.index(commands[0]) < ci.index(commands[1])


def test_readme_array_block_runs_without_pandas():
    """The README's blocks on arrays run on the bare install (no pandas)."""
    (block,) = [b for b in readme_blocks("python")
                if "from sklearn_r2shap import TreeExplainer, shap_values" in b]
    assert "as_frame" not in block
    out = run_bare(block + "\nprint('DONE', type(X).__name__)")
    assert "(442, 10) True" in out and "DONE ndarray" in out


def test_main_command_without_pandas_explains_and_ranks():
    out = run_bare("import runpy\nrunpy.run_module('sklearn_r2shap', run_name='__main__')",
                   "--n-estimators", "30", "--folds", "3")
    for phrase in ("std.err: standard error of the share over the rows",
                   "std.err: standard deviation over the 442 held-out rows of each row's term",
                   "/ sqrt(442)",
                   "A negative share means", "held-out", "% of R2: share / score",
                   "learning_rate=0.05"):
        assert phrase in out, phrase
    # "selected" lists features in the order of the cross-fitted table
    cross_fitted = out.split("2. Cross-fitted")[1]
    table = [line.split()[0] for line in cross_fitted.splitlines()[3:]
             if re.match(r"^\w+\s+-?\d\.\d{4}\s", line)
             and line.split()[0] not in ("sum", "unattributed", "score")]
    selected = out.rsplit(": ", 1)[1].strip().split(", ")
    assert selected == table[:len(selected)], (selected, table)


def _decomposition():
    from sklearn.datasets import load_diabetes
    from sklearn.ensemble import GradientBoostingRegressor

    from sklearn_r2shap import r2_decomposition

    X, y = load_diabetes(return_X_y=True)
    model = GradientBoostingRegressor(n_estimators=20, max_depth=2, random_state=0).fit(X, y)
    return r2_decomposition(model, X, y)


def test_str_explains_the_columns():
    text = str(_decomposition())
    assert "std.err: standard error of the share over the 442 rows" in text
    assert "A negative share means the feature makes the fit" in text
    assert "% of R2 = share / score" in text


def test_plot_names_the_model_and_the_error_bars():
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    result = _decomposition()
    ax = result.plot()
    title = ax.get_title()
    assert "GradientBoostingRegressor" in title
    assert "\u00b11 standard error" in title
    # the error bars drawn are the standard errors, in the order of the bars
    from matplotlib.container import BarContainer

    (bars,) = [c for c in ax.containers if isinstance(c, BarContainer)]
    order = np.argsort(-result.shares, kind="mergesort")[::-1]
    widths = [patch.get_width() for patch in bars.patches]
    np.testing.assert_allclose(widths, result.shares[order])
    (segments,) = [lines.get_segments() for lines in bars.errorbar.lines[2]]
    half_widths = [(segment[1][0] - segment[0][0]) / 2 for segment in segments]
    np.testing.assert_allclose(half_widths, result.std_errors[order])
    plt.close(ax.figure)
