# pytest collects doc/*.rst as doctests; the Sphinx configuration, its
# helpers and the files the build generates are not tests.
collect_ignore = ["conf.py", "_gallery.py"]
collect_ignore_glob = ["_build/*", "auto_examples/*", "generated/*", "sg_execution_times.rst"]
