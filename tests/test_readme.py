"""Every ```python block of README.md runs on its own and prints what the README says.

Each block runs in a fresh interpreter (its own imports and data), in an empty
temporary directory, with the package the tests import on PYTHONPATH. The README shows a
block's output in a ``# prints: <line>`` comment on a line of the block, or in
a ```text block right after it ("..." there stands for lines left out): every
line shown must be a line of the block's output, in order, so the numbers the
README quotes are those of the run.
"""
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from spark_java import no_java  # tests/ is on sys.path under pytest

ROOT = Path(__file__).resolve().parents[1]
# the package these tests import (the checkout's, or the installed wheel's)
PACKAGE_HOME = str(Path(importlib.util.find_spec("sklearn_r2shap").origin).parents[1])
README = ROOT / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\n", re.S | re.M)

# what each block needs beyond the bare install (the test extra has them all)
NEEDS = {"lightgbm": "lightgbm", "dask.array": "dask", "pandas": "pandas", "pyspark": "pyspark"}


PRINTS = re.compile(r"#\s*prints:\s*(.*)$", re.M)


def readme_blocks():
    """[(heading, code, [lines of output shown])] for every ```python block, in order."""
    text = README.read_text(encoding="utf-8")
    fences = list(FENCE.finditer(text))
    blocks = []
    for i, fence in enumerate(fences):
        if fence.group(1) != "python":
            continue
        heading = re.findall(r"^## (.+)$", text[: fence.start()], re.M)[-1]
        shown = [line.rstrip() for line in PRINTS.findall(fence.group(2))]
        if i + 1 < len(fences) and fences[i + 1].group(1) == "text" \
                and not text[fence.end(): fences[i + 1].start()].strip():
            shown += [line.rstrip() for line in fences[i + 1].group(2).splitlines()
                      if line.strip() not in ("", "...")]
        blocks.append((heading, fence.group(2), shown))
    return blocks


BLOCKS = readme_blocks()


def test_readme_has_the_blocks_and_the_ci_commands():
    assert len(BLOCKS) >= 7
    assert all(shown for _, _, shown in BLOCKS)  # every block says what it prints
    text = README.read_text(encoding="utf-8")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    for command in ('pip install -e . && python -m sklearn_r2shap',
                    'pip install -e ".[test]" && python -m pytest -n 2'):
        assert f"```bash\n{command}\n```" in text
        assert f"\n{command}\n" in ci  # CI runs the README's commands verbatim


@pytest.mark.parametrize("heading, code, shown", BLOCKS, ids=[b[0] for b in BLOCKS])
def test_readme_block_runs_on_its_own(heading, code, shown, tmp_path):
    for module, package in NEEDS.items():
        if re.search(rf"^(import|from) {re.escape(module)}\b", code, re.M):
            pytest.importorskip(package)
    if re.search(r"^(import|from) pyspark\b", code, re.M):
        reason = no_java()
        if reason:
            pytest.skip(f"the Spark block needs Java: {reason}")
    path = os.pathsep.join(filter(None, [PACKAGE_HOME, os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, PYTHONPATH=path, MPLBACKEND="Agg")
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, (f"README block under '## {heading}' failed:\n{code}\n"
                                  f"--- stderr ---\n{done.stderr[-3000:]}")
    output = [line.rstrip() for line in done.stdout.splitlines()]
    position = 0
    for line in shown:
        try:
            position = output.index(line, position) + 1
        except ValueError:
            pytest.fail(f"README block under '## {heading}' does not print the line "
                        f"{line!r} the README shows (in order).\n{code}\n--- stdout ---\n"
                        f"{done.stdout}")
