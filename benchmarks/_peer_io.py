"""Input and output of the peer runners of ``bench_selection.py``.

Each peer runs in a virtual environment of its own (its pins clash with
ours), as ``<venv>/bin/python benchmarks/peer_<name>.py IN.npz OUT.json``.
``IN.npz`` holds the training rows ``X``, ``y`` and ``spec``, a JSON string
with the task ("regression" or "classification"), the seed, the number of
threads and the LightGBM parameters of the base model. The runner writes
``{"selected": {rule: [column indices]}, "time": seconds, "versions": {...}}``
or ``{"error": traceback}``. Only NumPy and the standard library here: this
module is imported by the runners in the peers' environments.
"""
import json
from importlib import metadata
import sys
import time
import traceback

import numpy as np


def load(path):
    data = np.load(path)
    spec = json.loads(str(data["spec"]))
    return data["X"], data["y"], spec


def model(spec):
    """The base model, the same in every method: LightGBM with ``spec["lgbm"]``."""
    import lightgbm

    cls = lightgbm.LGBMClassifier if spec["task"] == "classification" else lightgbm.LGBMRegressor
    return cls(**spec["lgbm"])


def frame(X):
    """The rows as a pandas DataFrame with columns f0, f1, ... (the peers want names)."""
    import pandas as pd

    return pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])


def columns(names):
    """Column indices of the names f0, f1, ..., sorted."""
    return sorted(int(str(name)[1:]) for name in names)


def run(select, packages):
    """``packages``: the distributions whose versions are reported.
    ``select(X, y, spec)`` returns ``{rule: [columns]}`` (and optionally extra info
    as a second value); time it and write the JSON answer."""
    inp, out = sys.argv[1], sys.argv[2]
    try:
        X, y, spec = load(inp)
        start = time.perf_counter()
        answer = select(X, y, spec)
        elapsed = time.perf_counter() - start
        selected, extra = answer if isinstance(answer, tuple) else (answer, {})
        versions = {name: metadata.version(name) for name in packages}
        result = {"selected": {rule: [int(j) for j in cols] for rule, cols in selected.items()},
                  "time": elapsed, "versions": versions, "extra": extra}
    except BaseException:  # reported by the benchmark, with the peer's traceback
        result = {"error": traceback.format_exc()}
    with open(out, "w") as handle:
        json.dump(result, handle)
