"""The package's layering, and what it guarantees.

- Layers: data flows one way, down. The package's modules are parsed with
  ``ast`` (imports inside functions count, as in /work/shared/hooks/layers.py;
  the kernels' ``.pyx`` files by their Python import lines); there must be no
  import cycle, and no module may import one of a higher layer (the ground
  floor, models, games and execution never import a public module or an
  estimator).
- Blocks fixed by the data and the model: every public function gives
  bit-identical results for n_jobs = 1, 2 and -1 on models of the four
  libraries with several thousand rows (several blocks).
- One validation: X is checked once per call at the public boundary.
- Progress by default: shown when the cost estimate exceeds the threshold,
  silent below it and with verbose=0.
"""
import ast
import fnmatch
import io
import pathlib
import re
import sys

import numpy as np
import pytest

import sklearn_r2shap as sr
from sklearn_r2shap import metrics
from sklearn_r2shap._execution import local as _local

PACKAGE = pathlib.Path(sr.__file__).parent

# Layer of each module (by dotted name under the package, longest prefix wins).
# A module may import modules of its own layer (without cycles) or lower ones.
LAYERS = {
    "_errors": 0, "_numerics": 0, "_validation": 0, "plotting": 0, "_report": 0, "_min_dependencies": 0,
    "_kernels": 1,
    "_model": 2,
    "_scores": 3, "_games": 3,
    "_execution": 4,
    # the public functions and their helpers at the boundary
    "attributions": 5, "decomposition": 5, "piecewise": 5, "ranking": 5, "shapflex": 5,
    "metrics": 5, "interventional": 5, "interactions": 5, "explanation": 5, "explainer": 5,
    "_groups": 5, "_pipeline": 5, "_prepare": 5,
    # the estimators (which call the public functions) and their helpers
    "_estimators": 6, "spark": 6,
    "": 7, "__main__": 7,  # the package root: the public names
}
PUBLIC = 5
ESTIMATORS = 6


def _modules(package=PACKAGE):
    mods = {}
    for f in package.rglob("*.py"):
        parts = f.relative_to(package.parent).with_suffix("").parts
        name = ".".join(parts)
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        mods[name] = f
    for f in package.rglob("*.pyx"):
        mods[".".join(f.relative_to(package.parent).with_suffix("").parts)] = f
    return mods


def _resolve(mods, module, node):
    is_package = mods[module].name == "__init__.py"
    package = module.split(".") if is_package else module.split(".")[:-1]
    if isinstance(node, ast.ImportFrom):
        if node.level:
            base = package[: len(package) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        return [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target
                for a in node.names]
    return [a.name for a in node.names]


_PYX_IMPORT = re.compile(r"^\s*(?:from\s+(\.+)([\w.]*)\s+c?import\s+([\w, ]+)|import\s+([\w.]+))",
                         re.M)


def _pyx_imports(mods, module, text):
    """Python-level imports of a kernel (``from ..x import y`` lines; cimports of
    the kernels' own .pxd are within the kernel layer)."""
    package = module.split(".")[:-1]
    out = []
    for dots, name, names, plain in _PYX_IMPORT.findall(text):
        if plain:
            out.append(plain)
            continue
        base = package[: len(package) - len(dots) + 1]
        target = ".".join(base + ([name] if name else []))
        out += [f"{target}.{n.strip()}" if f"{target}.{n.strip()}" in mods else target
                for n in names.split(",") if n.strip()]
    return out


def import_graph(package=PACKAGE):
    """{module: set of package modules it imports}, as the hook counts them."""
    mods = _modules(package)
    edges = {m: set() for m in mods}
    for module, f in mods.items():
        if f.suffix == ".py":
            targets = [t for node in ast.walk(ast.parse(f.read_text()))
                       if isinstance(node, (ast.Import, ast.ImportFrom))
                       for t in _resolve(mods, module, node)]
        else:
            targets = _pyx_imports(mods, module, f.read_text())
        for target in targets:
            while target and target not in mods:
                target = target.rpartition(".")[0]
            if not target or target == module or not target.startswith(package.name):
                continue
            if module.startswith(target + "."):  # a package's __init__ from inside it
                continue
            edges[module].add(target)
    return edges


def strongly_connected(edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            out.append(sorted(component))

    for v in edges:
        if v not in index:
            visit(v)
    return out


def layer_of(module):
    name = module[len("sklearn_r2shap"):].lstrip(".")
    parts = name.split(".") if name else [""]
    for k in range(len(parts), 0, -1):
        key = ".".join(parts[:k])
        if key in LAYERS:
            return LAYERS[key]
    raise AssertionError(f"module {module} has no layer: add it to LAYERS (and to "
                         "doc/contributing.rst)")


def test_no_import_cycle():
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    cycles = [c for c in strongly_connected(import_graph())
              if len(c) > 1 and c != ["sklearn_r2shap"]]
    assert cycles == [], "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_imports_go_down():
    upward = [(m, t) for m, targets in import_graph().items() for t in targets
              if layer_of(t) > layer_of(m)]
    assert upward == [], "imports from a lower layer into a higher one: " + ", ".join(
        f"{m} -> {t}" for m, t in upward)


def test_execution_and_below_import_no_public_module():
    """The execution layer (and below) imports no public module and no estimator."""
    edges = import_graph()
    below = [m for m in edges if layer_of(m) < PUBLIC]
    assert any(m.startswith("sklearn_r2shap._execution") for m in below)
    bad = [(m, t) for m in below for t in edges[m] if layer_of(t) >= PUBLIC]
    assert bad == []


# the preparation (which decides the engine) and the public Spark module
# (whose subject is Spark) are the only modules above the executor that know one
ENGINE_AWARE = {"sklearn_r2shap._prepare", "sklearn_r2shap._pipeline", "sklearn_r2shap.spark"}


def _engine_uses(module, path):
    """The imports of an engine and the reads of ``.engine`` / ``.dask`` in a module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names]
            # dask, pyspark, or an engine module (``from ._execution import dask``)
            found += [f"{module} imports {name}" for name in names
                      if name.split(".")[0] in ("dask", "distributed", "pyspark", "spark")]
        elif isinstance(node, ast.Attribute) and node.attr in ("engine", "dask") and (
                isinstance(node.value, ast.Name) and node.value.id == "call"):
            found.append(f"{module} reads call.{node.attr} (line {node.lineno})")
    return found


def test_no_public_module_asks_which_engine_runs():
    """Public functions and estimators hand their work to the executor's two
    entries (map_rows, reduce_rows): none imports dask, pyspark or an engine
    module of the executor, and none reads the call's engine."""
    mods = _modules()
    above = [m for m in mods if layer_of(m) >= PUBLIC and m not in ENGINE_AWARE
             and mods[m].suffix == ".py"]
    assert "sklearn_r2shap.decomposition" in above and "sklearn_r2shap.interactions" in above
    found = [use for m in above for use in _engine_uses(m, mods[m])]
    assert found == []


def test_engine_check_finds_an_engine_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("from ._execution import dask as _dask\n"
                      "def f(call):\n    return call.engine\n")
    assert _engine_uses("m", module) == ["m imports dask", "m reads call.engine (line 3)"]


def test_graph_sees_imports_inside_functions(tmp_path):
    """The checker counts an import inside a function (the cycles of issue #22 were
    there): a deliberate lazy upward import is found."""
    package = tmp_path / "sklearn_r2shap"
    package.mkdir()
    (package / "__init__.py").write_text('"""Layer: root."""\n')
    (package / "_errors.py").write_text(
        '"""Layer: ground floor."""\n\n\ndef helper():\n    from .attributions import f\n'
        '    return f\n')
    (package / "attributions.py").write_text('"""Layer: public functions."""\nfrom . import _errors\n')
    edges = import_graph(package)
    assert "sklearn_r2shap.attributions" in edges["sklearn_r2shap._errors"]  # inside a function
    assert "sklearn_r2shap._errors" in edges["sklearn_r2shap.attributions"]
    assert ["sklearn_r2shap._errors", "sklearn_r2shap.attributions"] in strongly_connected(edges)
    assert "sklearn_r2shap._numerics" in import_graph()["sklearn_r2shap._kernels._qshap"]


def test_functions_never_import_an_estimator():
    """The estimators are a layer above the public functions: no function module
    (nor anything below) imports one."""
    edges = import_graph()
    estimators = [m for m in edges if layer_of(m) == ESTIMATORS]
    functions = [m for m in edges if layer_of(m) == PUBLIC]
    assert "sklearn_r2shap._estimators.importance" in estimators
    assert "sklearn_r2shap.attributions" in functions
    bad = [(m, t) for m in edges if layer_of(m) < ESTIMATORS for t in edges[m]
           if layer_of(t) >= ESTIMATORS]
    assert bad == []


#: The rows of the table in doc/contributing.rst, by layer.
LAYER_ROWS = {0: "Ground floor", 1: "Kernels", 2: "Models", 3: "Games", 4: "Execution",
              5: "Public functions", 6: "Estimators", 7: "Package root"}
CONTRIBUTING = pathlib.Path(__file__).resolve().parents[1] / "doc" / "contributing.rst"


def contributing_table(text):
    """{row title: the ``literals`` of its "Modules" cell} of the layer table."""
    table = text[text.index(".. list-table::"):]
    table = table[: re.search(r"\n\n(?=\S)", table).start()]  # up to the next paragraph
    rows = {}
    for row in re.split(r"^   \* - ", table, flags=re.M)[2:]:  # after the header row
        cells = re.split(r"^     - ", row, flags=re.M)
        rows[cells[0].strip()] = set(re.findall(r"``([^`]+)``", cells[1]))
    return rows


def _documented(path, literals):
    """Whether a module's path (relative to the package) is named by a literal:
    itself, its folder (``_model/``), a glob (``_kernels/*.pyx``), or for a
    subpackage's ``__init__.py`` any module of the subpackage."""
    folder = path.rpartition("/")[0]
    return any(path == lit or (lit.endswith("/") and path.startswith(lit))
               or fnmatch.fnmatch(path, lit)
               or (path.endswith("/__init__.py") and lit.startswith(folder + "/"))
               for lit in literals)


def test_contributing_table_lists_every_module_in_its_layer():
    rows = contributing_table(CONTRIBUTING.read_text())
    assert set(rows) == set(LAYER_ROWS.values())
    missing, misplaced = [], []
    for module, f in _modules().items():
        path = f.relative_to(PACKAGE).as_posix()
        places = [title for title, literals in rows.items() if _documented(path, literals)]
        if not places:
            missing.append(path)
        elif LAYER_ROWS[layer_of(module)] not in places:
            misplaced.append(f"{path} (in {places}, layer {LAYER_ROWS[layer_of(module)]!r})")
    assert missing == [], "doc/contributing.rst's layer table misses " + ", ".join(missing)
    assert misplaced == [], "in another row of doc/contributing.rst: " + ", ".join(misplaced)


def test_contributing_table_check_finds_a_missing_module():
    """The check above fails when a module is left out of the table."""
    text = CONTRIBUTING.read_text().replace("``_estimators/_held_out.py``", "the shares")
    rows = contributing_table(text)
    assert not _documented("_estimators/_held_out.py", rows["Estimators"])
    assert _documented("_estimators/_stats.py", rows["Estimators"])
    assert _documented("_kernels/_qshap.pyx", rows["Kernels"])
    assert _documented("_model/_xgboost.py", rows["Models"])


def test_imports_at_module_top():
    """No import inside a function or class of the package: an optional
    dependency is imported where it is needed by ``_errors.import_optional``
    (doc/contributing.rst)."""
    inside = []
    for f in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                inside += [f"{f.relative_to(PACKAGE)}:{sub.lineno}" for sub in ast.walk(node)
                           if isinstance(sub, (ast.Import, ast.ImportFrom))]
    assert sorted(set(inside)) == []


def test_every_module_states_its_layer():
    for f in PACKAGE.rglob("*.py"):
        doc = ast.get_docstring(ast.parse(f.read_text()))
        assert doc and "Layer" in doc, f"{f}: no module docstring saying its layer"


# --------------------------------------------------------------------------
# Bit-identical results for any n_jobs
# --------------------------------------------------------------------------
N_ROWS = 3000


def _data(seed=0, n=N_ROWS, p=6):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    X[rng.random(size=X.shape) < 0.02] = np.nan
    Xf = np.nan_to_num(X)
    y = Xf[:, 0] + Xf[:, 1] * Xf[:, 2] + 0.5 * np.sin(3 * Xf[:, 3]) + rng.normal(size=n)
    return X, y


def _model(library):
    X, y = _data()
    if library == "sklearn":
        from sklearn.ensemble import RandomForestRegressor

        X = np.nan_to_num(X)
        model = RandomForestRegressor(n_estimators=20, max_depth=6, random_state=0)
    elif library == "xgboost":
        import xgboost

        model = xgboost.XGBRegressor(n_estimators=30, max_depth=4, random_state=0,
                                     n_jobs=1)
    elif library == "lightgbm":
        import lightgbm

        model = lightgbm.LGBMRegressor(n_estimators=30, num_leaves=15, verbose=-1,
                                       random_state=0, n_jobs=1)
    else:
        import catboost

        model = catboost.CatBoostRegressor(iterations=30, depth=4, verbose=0,
                                           random_seed=0, thread_count=1)
    return model.fit(X, y), X, y


LIBRARIES = ["sklearn", "xgboost", "lightgbm", "catboost"]


@pytest.fixture(params=["default-blocks", "small-blocks"])
def blocks(request, monkeypatch):
    """The block policy as shipped, and blocks of a few hundred rows (several
    blocks whatever the machine)."""
    if request.param == "small-blocks":
        _small_blocks(monkeypatch)
    return request.param


def _small_blocks(monkeypatch, rows=700):
    """Blocks of ``rows`` rows, whatever the model's cost (several blocks)."""
    monkeypatch.setattr(_local, "block_rows_for", lambda *args, **kwargs: rows)


def _calls(model, X, y):
    n = X.shape[1]
    shapley = np.array([1.0 / (n * _comb(n - 1, s)) for s in range(n)])
    ranking = np.argsort(-np.abs(sr.shap_values(model, X[:50])[:, :-1]), axis=1)
    return {
        "shap_values": lambda j: sr.shap_values(model, X, n_jobs=j),
        "beta_shapley_values": lambda j: sr.beta_shapley_values(model, X, alpha=4, beta=1,
                                                                n_jobs=j),
        "banzhaf_values": lambda j: sr.banzhaf_values(model, X, q=0.3, n_jobs=j),
        "probabilistic_values": lambda j: sr.probabilistic_values(model, X, shapley, n_jobs=j),
        "saabas_values": lambda j: sr.saabas_values(model, X, n_jobs=j),
        "predict_raw": lambda j: sr.predict_raw(model, X, n_jobs=j),
        "r2_decomposition": lambda j: _r2_arrays(sr.r2_decomposition(
            model, X, y, algorithm="exact", return_local=True, n_jobs=j)),
        "r2_decomposition-sampled": lambda j: _r2_arrays(sr.r2_decomposition(
            model, X, y, algorithm="sampled", random_state=0, n_jobs=j)),
        "r2_decomposition-max_samples": lambda j: _r2_arrays(sr.r2_decomposition(
            model, X, y, algorithm="exact", max_samples=1000, random_state=0, n_jobs=j)),
        "shapflex_decomposition": lambda j: _r2_arrays(sr.shapflex_decomposition(
            model, X, y, n_jobs=j)),
        "multilinear_gradient": lambda j: sr.multilinear_gradient(
            model, X, np.linspace(0.1, 0.9, n), n_jobs=j),
        "treegrad_scores": lambda j: sr.treegrad_scores(model, X[:600], n_iter=5, n_jobs=j),
        "piecewise_shap_values": lambda j: sr.piecewise_shap_values(
            model, X[:600], background=X, n_jobs=j),
        "piecewise_predict": lambda j: sr.piecewise_predict(model, X, n_jobs=j),
        "insertion_deletion": lambda j: _curves(metrics.insertion_deletion(
            model, X[:50], ranking, n_jobs=j)),
    }


def _comb(n, k):
    from math import comb

    return comb(n, k)


def _r2_arrays(result):
    out = [result.shares, result.std_errors, np.array([result.score, result.unattributed])]
    for extra in (getattr(result, "local", None), getattr(result, "mc_std_errors", None)):
        if extra is not None:
            out.append(np.asarray(extra))
    return out


def _curves(result):
    return [np.asarray(getattr(result, name)) for name in vars(result)
            if isinstance(getattr(result, name), np.ndarray)]


def _flatten(value):
    if isinstance(value, (tuple, list)):
        return [a for item in value for a in _flatten(item)]
    return [np.asarray(value)]


@pytest.mark.parametrize("library", LIBRARIES)
def test_bit_identical_for_any_n_jobs(library, blocks):
    pytest.importorskip({"sklearn": "sklearn", "xgboost": "xgboost", "lightgbm": "lightgbm",
                         "catboost": "catboost"}[library])
    model, X, y = _model(library)
    calls = _calls(model, X, y)
    if library == "sklearn":  # rows need no NaN for the forest; the others keep them
        assert not np.isnan(X).any()
    for name, call in calls.items():
        results = [_flatten(call(j)) for j in (1, 2, -1)]
        for other in results[1:]:
            assert len(other) == len(results[0])
            for a, b in zip(results[0], other):
                np.testing.assert_array_equal(a, b, err_msg=f"{library} {name}")


def test_small_blocks_are_several_blocks(monkeypatch):
    """The block policy splits rows by the model's cost: with a small share of work
    per block, several thousand rows make several blocks (what the small-blocks
    case above forces)."""
    model, X, y = _model("xgboost")
    seen = []
    reduce = _local.reduce_blocks

    def spy(function, ensemble, X_, **kwargs):
        seen.append(kwargs["block_rows"])
        return reduce(function, ensemble, X_, **kwargs)

    monkeypatch.setattr(_local, "BLOCK_SECONDS", 1e-3)
    monkeypatch.setattr(_local, "reduce_blocks", spy)
    sr.r2_decomposition(model, X, y, algorithm="exact")
    assert 1 < N_ROWS // seen[0] < N_ROWS
    mapped = []
    map_blocks = _local.map_blocks

    def spy_map(function, ensemble, X_, **kwargs):
        mapped.append(kwargs["block_rows"])
        return map_blocks(function, ensemble, X_, **kwargs)

    monkeypatch.setattr(_local, "map_blocks", spy_map)
    sr.shap_values(model, X)
    assert 1 < N_ROWS // mapped[0] < N_ROWS


def test_blocks_do_not_depend_on_threads():
    """The rows per block come from the model's cost per row, never n_jobs."""
    from sklearn_r2shap import decomposition
    from sklearn_r2shap._execution.cost import DEFAULT_EXACT_BUDGET
    from sklearn_r2shap._games import r2 as r2_games
    from sklearn_r2shap._scores import loss_of
    from sklearn_r2shap._validation import resolve_n_jobs

    model, X, y = _model("lightgbm")
    ensemble = sr.to_ensemble(model)
    sizes = set()
    for n_jobs in (1, 2, -1, 7):
        plan = r2_games._BlockWork.of(ensemble, loss_of(ensemble), 1.0)
        n_threads = resolve_n_jobs(n_jobs)
        decomposition._choose(plan, len(X), n_threads=n_threads, block_threads=n_threads,
                              options=decomposition._Options(
                                  algorithm="exact", exact_budget=DEFAULT_EXACT_BUDGET,
                                  n_permutations=2, max_samples=None, random_state=0))
        sizes.add(plan.chunk_rows)
    assert len(sizes) == 1


def test_dask_equals_local_to_rounding():
    da = pytest.importorskip("dask.array")
    model, X, y = _model("lightgbm")
    X_dask = da.from_array(X, chunks=(700, -1))
    y_dask = da.from_array(y, chunks=700)
    local = sr.r2_decomposition(model, X, y, algorithm="exact")
    remote = sr.r2_decomposition(model, X_dask, y_dask, algorithm="exact")
    np.testing.assert_allclose(remote.shares, local.shares, rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(remote.std_errors, local.std_errors, rtol=1e-9, atol=1e-15)
    assert np.isclose(remote.score, local.score, rtol=1e-13)
    np.testing.assert_array_equal(sr.shap_values(model, X_dask).compute(),
                                  sr.shap_values(model, X))


# --------------------------------------------------------------------------
# One validation at the public boundary
# --------------------------------------------------------------------------
def _count_checks(monkeypatch):
    from sklearn_r2shap import _validation
    from sklearn_r2shap._execution import dask as _dask

    calls = []
    check = _validation.check_rows

    def counting(ensemble, X, **kwargs):
        calls.append(np.shape(X))
        return check(ensemble, X, **kwargs)

    for module in (_validation, _local, _dask):
        monkeypatch.setattr(module, "check_rows", counting)
    return calls


@pytest.mark.parametrize("max_samples", [None, 500])
def test_r2_decomposition_checks_X_once(monkeypatch, max_samples):
    import pandas as pd

    model, X, y = _model("xgboost")
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    model.fit(frame, y)
    _small_blocks(monkeypatch)
    calls = _count_checks(monkeypatch)
    sr.r2_decomposition(model, frame, y, max_samples=max_samples, random_state=0)
    assert calls == [X.shape]


def test_shap_values_checks_X_once(monkeypatch):
    model, X, y = _model("catboost")
    _small_blocks(monkeypatch)
    calls = _count_checks(monkeypatch)
    sr.shap_values(model, X)
    assert calls == [X.shape]


def test_dask_checks_each_partition_once(monkeypatch):
    da = pytest.importorskip("dask.array")
    import dask

    model, X, y = _model("lightgbm")
    calls = _count_checks(monkeypatch)
    X_dask = da.from_array(X, chunks=(1000, -1))
    with dask.config.set(scheduler="synchronous"):
        sr.shap_values(model, X_dask).compute()
    # an empty stand-in at once (width, names, dtypes), then each partition on its worker
    assert calls == [(0, X.shape[1])] + [(1000, X.shape[1])] * 3
    calls.clear()
    with dask.config.set(scheduler="synchronous"):
        sr.r2_decomposition(model, X_dask, da.from_array(y, chunks=1000))
    assert calls == [(0, X.shape[1])] + [(1000, X.shape[1])] * 3


# --------------------------------------------------------------------------
# Progress by default (verbose="auto")
# --------------------------------------------------------------------------
@pytest.fixture(params=["tqdm", "plain"])
def progress_kind(request, monkeypatch):
    if request.param == "plain":
        monkeypatch.setitem(sys.modules, "tqdm.auto", None)  # import fails: lines
    else:
        pytest.importorskip("tqdm")
    return request.param


def _small():
    from sklearn.ensemble import GradientBoostingRegressor

    X, y = _data(n=400)
    X = np.nan_to_num(X)
    return GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0).fit(X, y), X, y


def _run_all(model, X, y, **kwargs):
    sr.r2_decomposition(model, X, y, **kwargs)
    sr.shap_values(model, X, **kwargs)
    sr.ShapleyR2Importance(model, prefit=True, **kwargs).fit(X, y)


def test_progress_shown_above_the_estimate(monkeypatch, capsys, progress_kind):
    model, X, y = _small()
    monkeypatch.setattr(_local, "AUTO_PROGRESS_SECONDS", 0.0)  # every estimate is "long"
    sr.r2_decomposition(model, X, y)
    err = capsys.readouterr().err
    assert "R^2 decomposition (exact)" in err
    sr.shap_values(model, X)
    err = capsys.readouterr().err
    assert "SHAP values" in err
    sr.ShapleyR2Importance(model, prefit=True).fit(X, y)
    assert "R^2 decomposition" in capsys.readouterr().err
    if progress_kind == "plain":
        sr.shap_values(model, X)
        lines = capsys.readouterr().err.splitlines()
        assert lines[0].startswith("SHAP values: 400 rows, estimated")
        assert lines[-1].startswith("SHAP values: 400/400 rows,")


def test_progress_silent_below_the_estimate(capsys, progress_kind):
    model, X, y = _small()
    assert sr.estimate_cost(model, X).exact_seconds < _local.AUTO_PROGRESS_SECONDS
    _run_all(model, X, y)
    assert capsys.readouterr().err == ""


def test_progress_silent_with_verbose_0(monkeypatch, capsys, progress_kind):
    model, X, y = _small()
    monkeypatch.setattr(_local, "AUTO_PROGRESS_SECONDS", 0.0)
    _run_all(model, X, y, verbose=0)
    assert capsys.readouterr().err == ""


def test_progress_shown_with_verbose_1(capsys):
    model, X, y = _small()
    stream = io.StringIO()
    progress = _local.Progress(10, 1, "x", estimate=0.001, stream=stream)
    progress.update(10)
    progress.close()
    assert "x" in stream.getvalue()
    sr.r2_decomposition(model, X, y, verbose=1)
    assert "R^2 decomposition" in capsys.readouterr().err


def test_progress_decision_uses_the_estimate(monkeypatch):
    """A long estimate alone switches progress on (no slow test: the estimate
    is made long by the per-operation constant)."""
    from sklearn_r2shap._execution import cost
    from sklearn_r2shap._games import semivalues

    model, X, y = _small()
    monkeypatch.setattr(cost, "SEMIVALUE_SECONDS_PER_NODE_POINT", 1.0)
    monkeypatch.setattr(semivalues, "_SECONDS_PER_CURVE_UNIT", 1.0)  # the game's own estimate
    stream_before = sys.stderr
    captured = io.StringIO()
    monkeypatch.setattr(sys, "stderr", captured)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)
    sr.shap_values(model, X[:5])
    monkeypatch.setattr(sys, "stderr", stream_before)
    assert captured.getvalue().startswith("SHAP values: 5 rows, estimated")


@pytest.mark.parametrize("verbose", ["sometimes", 1.5])
def test_verbose_is_checked(verbose):
    model, X, y = _small()
    with pytest.raises(ValueError, match="verbose"):
        sr.shap_values(model, X, verbose=verbose)
    with pytest.raises(ValueError, match="verbose"):
        sr.r2_decomposition(model, X, y, verbose=verbose)
