"""Sphinx configuration of the sklearn-r2shap documentation.

Build (from the repository root, with the package installed or built in
place; the ``doc`` extra installs the Sphinx extensions)::

    python -m sphinx -W --keep-going -b html doc doc/_build/html

The build needs no network: MathJax is served from the built site
(``sphinx-mathjax-offline``), the theme bundles its fonts and icons, and no
intersphinx inventories are fetched. The examples gallery runs every script
in ``examples/`` (sphinx-gallery) and keeps its figures.
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# Import the in-place build of the package, not an installed copy, and the
# gallery helper next to this file.
sys.path.insert(0, os.path.abspath(os.path.join(HERE, "..")))
sys.path.insert(0, HERE)

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
    "sphinx.ext.mathjax",
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static/mathjax: math renders offline
    "numpydoc",
    "sphinx_gallery.gen_gallery",
    "sphinx_design",
    "sphinx_copybutton",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "auto_examples/*.ipynb", "auto_examples/*.py",
                    "auto_examples/*.zip", "auto_examples/*.md5", "auto_examples/*.json"]
root_doc = "index"
default_role = "literal"

# autodoc / autosummary / numpydoc
autosummary_generate = True
autodoc_default_options = {"members": False}
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False

# Examples in docstrings and pages use ``np`` as in the package's modules.
doctest_global_setup = "import numpy as np"

# sphinx-gallery: every script in examples/ is run and its figures kept.
sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r".*\.py$",  # run every example, not only plot_*.py
    "within_subsection_order": "FileNameSortKey",
    "reset_argv": "_gallery.reset_argv",  # per-example command-line arguments
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "plot_gallery": "True",
    "abort_on_example_error": False,
    "only_warn_on_example_error": False,
    "min_reported_time": 0,
    "matplotlib_animations": False,
    "image_srcset": [],
    "default_thumb_file": None,
}

# copy buttons skip prompts and output
copybutton_prompt_text = r">>> |\.\.\. |\$ "
copybutton_prompt_is_regexp = True

html_theme = "pydata_sphinx_theme"
html_title = f"sklearn-r2shap {release}"
html_static_path = ["_static"]
html_css_files = ["custom.css"]
html_show_sourcelink = False
html_theme_options = {
    "navbar_align": "left",
    "show_toc_level": 2,
    "navigation_with_keys": False,
    "header_links_before_dropdown": 6,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": ["sphinx-version"],
}
html_sidebars = {"index": [], "getting_started": [], "comparison": []}
