"""Sphinx configuration of the sklearn-r2shap documentation.

Build (from the repository root, with the Cython extensions built in place)::

    PYTHONPATH=. python -m sphinx -W --keep-going -b html doc doc/_build/html
    PYTHONPATH=. python -m sphinx -b doctest doc doc/_build/doctest

The build uses no network: intersphinx is loaded but given no inventories.
"""
import os
import sys

# Import the in-place build of the package, not an installed copy.
sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..")))

import sklearn_r2shap  # noqa: E402

project = "sklearn-r2shap"
author = "sklearn-r2shap developers"
copyright = "sklearn-r2shap developers (BSD-3-Clause)"
version = ".".join(sklearn_r2shap.__version__.split(".")[:2])
release = sklearn_r2shap.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.doctest",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
]

templates_path = ["_templates"]
exclude_patterns = ["_build"]
root_doc = "index"
default_role = "literal"

# autodoc / autosummary / numpydoc
autosummary_generate = True
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# No network on the build machine: no inventories to fetch.
intersphinx_mapping = {}

# Examples in docstrings and pages use ``np`` as in the package's modules.
doctest_global_setup = "import numpy as np"

html_theme = "alabaster"
html_title = f"sklearn-r2shap {release}"
html_static_path = []
