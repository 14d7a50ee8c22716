"""The package as a user installs it (issue 29).

- The dependency floors are stated once (``sklearn_r2shap/_min_dependencies.py``)
  and ``pyproject.toml`` says the same; the version has one source.
- The installed metadata (what ``pip show`` and PyPI print) is right.
- Where the release check (``build_tools/check_release.sh``) runs the tests
  against a built wheel, it sets environment variables that switch on the
  checks that need the built artefacts: the package imported is the venv's,
  not the checkout's (``SKLEARN_R2SHAP_EXPECT_INSTALLED``); the wheel and the
  sdist hold every module of the source tree (``SKLEARN_R2SHAP_WHEEL``,
  ``SKLEARN_R2SHAP_SDIST``, ``SKLEARN_R2SHAP_SOURCE``); the kernels are
  linked with OpenMP or not, as the build was asked (``SKLEARN_R2SHAP_EXPECT_OPENMP``).
"""
import importlib.metadata
import os
import re
import sys
import sysconfig
import tarfile
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest

import sklearn_r2shap
from sklearn_r2shap import _min_dependencies

CHECKOUT = Path(__file__).resolve().parents[1]
PACKAGE = Path(sklearn_r2shap.__file__).resolve().parent


def _pyproject():
    with open(CHECKOUT / "pyproject.toml", "rb") as fh:
        return tomllib.load(fh)


def _floors(requirements):
    """``{name: floor}`` of requirements written ``name>=version`` (extras kept in the name)."""
    found = {}
    for requirement in requirements:
        match = re.fullmatch(r"([A-Za-z0-9_.\-\[\],]+)>=([0-9][0-9.]*)", requirement.replace(" ", ""))
        if match and not match.group(1).startswith("sklearn-r2shap"):
            found[match.group(1)] = match.group(2)
    return found


def _source_tree():
    source = Path(os.environ.get("SKLEARN_R2SHAP_SOURCE", CHECKOUT / "sklearn_r2shap"))
    if not (source / "__init__.py").exists():
        pytest.skip("no source tree beside the tests")
    return source


def _source_files(source, suffixes):
    return sorted(path.relative_to(source.parent).as_posix() for path in source.rglob("*")
                  if path.suffix in suffixes and "__pycache__" not in path.parts)


def test_run_time_floors_are_the_table():
    project = _pyproject()["project"]
    assert _floors(project["dependencies"]) == _min_dependencies.floors("install")
    assert len(project["dependencies"]) == len(_min_dependencies.floors("install"))


@pytest.mark.parametrize("extra", ["test", "doc", "benchmark", "plot", "lightgbm", "progress", "dask",
                                   "spark"])
def test_extra_floors_are_the_table(extra):
    stated = _floors(_pyproject()["project"]["optional-dependencies"][extra])
    table = _min_dependencies.floors(extra)
    # every package the table tags with this extra has its floor here, and no
    # package of the table has another floor in this extra
    assert {name: stated.get(name) for name in table} == table
    for name, floor in stated.items():
        if name in _min_dependencies.DEPENDENT_PACKAGES:
            assert _min_dependencies.DEPENDENT_PACKAGES[name][0] == floor, name


def test_python_floor_and_classifiers_agree():
    project = _pyproject()["project"]
    floor = _min_dependencies.PYTHON_MIN_VERSION
    assert project["requires-python"] == f">={floor}"
    claimed = sorted(int(c.rsplit(".", 1)[1]) for c in project["classifiers"]
                     if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert claimed[0] == int(floor.split(".")[1])
    assert claimed == list(range(claimed[0], claimed[-1] + 1))  # no gap
    assert sys.version_info[:2] >= tuple(int(part) for part in floor.split("."))


def test_min_dependencies_prints_pins_without_the_package(tmp_path):
    import subprocess

    done = subprocess.run([sys.executable, "-I", str(Path(_min_dependencies.__file__)), "install"],
                          capture_output=True, text=True, cwd=tmp_path, check=True)
    assert done.stdout.split() == [f"{name}=={version}" for name, version
                                   in _min_dependencies.floors("install").items()]


def test_installed_metadata():
    metadata = importlib.metadata.metadata("sklearn-r2shap")
    assert metadata["Version"] == sklearn_r2shap.__version__
    assert "version" in _pyproject()["project"]["dynamic"]  # one source: __version__
    assert metadata["Requires-Python"] == f">={_min_dependencies.PYTHON_MIN_VERSION}"
    assert metadata["License-Expression"] == "BSD-3-Clause"
    assert metadata["Summary"].startswith("Exact Shapley explanations")
    required = [r for r in metadata.get_all("Requires-Dist") if "extra ==" not in r]
    assert _floors(required) == _min_dependencies.floors("install")
    assert set(metadata.get_all("Provides-Extra")) >= {"test", "plot", "progress", "dask", "lightgbm"}


def test_imported_from_the_installed_package():
    if not os.environ.get("SKLEARN_R2SHAP_EXPECT_INSTALLED"):
        pytest.skip("run by build_tools/check_release.sh against an installed wheel")
    installed = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    assert PACKAGE.parent in installed, (PACKAGE, installed)
    assert Path(sys.prefix).resolve() in PACKAGE.parents  # the venv's own site-packages


def test_wheel_holds_every_module():
    wheel = os.environ.get("SKLEARN_R2SHAP_WHEEL")
    if not wheel:
        pytest.skip("run by build_tools/check_release.sh with the wheel it built")
    source = _source_tree()
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = [f for f in _source_files(source, {".py", ".pxd"}) if f not in names]
    for pyx in _source_files(source, {".pyx"}):
        stem = pyx[: -len(".pyx")]
        if not any(name.startswith(stem + ".") and name.endswith((".so", ".pyd")) for name in names):
            missing.append(pyx + " (compiled)")
    assert not missing, f"the wheel {wheel} lacks {missing}"
    assert not [name for name in names if name.endswith((".c", ".cpp"))]


def test_sdist_holds_the_sources_and_nothing_generated():
    sdist = os.environ.get("SKLEARN_R2SHAP_SDIST")
    if not sdist:
        pytest.skip("run by build_tools/check_release.sh with the sdist it built")
    source = _source_tree()
    with tarfile.open(sdist) as archive:
        names = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    needed = _source_files(source, {".py", ".pyx", ".pxd"})
    needed += ["setup.py", "pyproject.toml", "README.md", "LICENSE", "PKG-INFO"]
    assert not [f for f in needed if f not in names]
    generated = [n for n in names if n.endswith((".c", ".cpp", ".so", ".pyd", ".pyc", ".html"))]
    assert not generated
    assert not [n for n in names if n.split("/")[0].startswith((".venv", "build", "dist", ".ci"))]


def test_kernels_linked_with_openmp_as_asked():
    expected = os.environ.get("SKLEARN_R2SHAP_EXPECT_OPENMP")
    if expected not in ("0", "1") or not sys.platform.startswith("linux"):
        pytest.skip("set SKLEARN_R2SHAP_EXPECT_OPENMP=0/1 (release check, Linux)")
    kernels = sorted((PACKAGE / "_kernels").glob("*.so"))
    # every kernel of the source (an installed wheel holds no .pyx), built
    source = Path(os.environ.get("SKLEARN_R2SHAP_SOURCE", PACKAGE)) / "_kernels"
    sources = {path.stem for path in source.glob("*.pyx")}
    assert sources, f"no kernel sources (.pyx) under {source}"
    assert {path.name.split(".")[0] for path in kernels} == sources
    linked = {path.name.split(".")[0]: b"libgomp" in path.read_bytes() for path in kernels}
    assert any(linked.values()) == (expected == "1"), linked


@pytest.mark.parametrize("library", ["xgboost", "lightgbm", "catboost"])
def test_models_of_a_library_older_than_its_floor_are_refused(library, monkeypatch):
    module = pytest.importorskip(library)
    from sklearn_r2shap import UnsupportedModelError, to_ensemble

    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(60, 3)), rng.normal(size=60)
    if library == "xgboost":
        model = module.XGBRegressor(n_estimators=2, max_depth=2).fit(X, y)
    elif library == "lightgbm":
        model = module.LGBMRegressor(n_estimators=2, verbose=-1).fit(X, y)
    else:
        model = module.CatBoostRegressor(iterations=2, depth=2, verbose=0,
                                         allow_writing_files=False).fit(X, y)
    assert to_ensemble(model).n_features == 3  # the installed version is supported
    floor = _min_dependencies.oldest_version(library)
    older = f"{_min_dependencies._release(floor)[0] - 1}.99.0"
    monkeypatch.setattr(module, "__version__", older)
    with pytest.raises(UnsupportedModelError, match=rf"{library} {re.escape(older)} is older than "
                                                    rf"{re.escape(floor)}.*pip install --upgrade"):
        to_ensemble(model)
    monkeypatch.setattr(module, "__version__", floor)
    assert to_ensemble(model).n_features == 3
