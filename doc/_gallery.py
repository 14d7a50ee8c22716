"""Command-line arguments of the examples when the documentation's gallery runs them.

Each example must run in well under a minute on 2 cores; the ones whose
default run is longer get a smaller setting here (their pages say which).
"""

ARGV = {
    # the full run tunes 9 grids and takes ~100 s: 5 data sets per setting, no tuning
    "qshap_simulation.py": ["--quick", "--reps", "5"],
    # 75 cross-validated pipeline fits and 10 permutation repeats: fewer trees and repeats
    "d2_classifiers.py": ["--quick"],
}


def reset_argv(gallery_conf, script_vars):
    """sphinx-gallery ``reset_argv``: the arguments of the example being run."""
    name = script_vars["src_file"].replace("\\", "/").rsplit("/", 1)[-1]
    return list(ARGV.get(name, []))
