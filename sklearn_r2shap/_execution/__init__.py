"""Execution: run a block function over rows and merge the results.

- :mod:`.run`: the entry point of the public functions, a block function
  over a prepared call (:class:`~sklearn_r2shap._prepare.Call`), in memory or
  on dask; :mod:`.local`: fixed blocks of rows on this machine (threads
  inside a block), progress, Ctrl-C; :mod:`.dask`: map over partitions and
  tree-reduce of mergeable sums; :mod:`.cost`: the cost estimates that
  choose the algorithm, the block size and whether progress is shown.

Layer: execution. Imports the ground floor, ``_model`` and ``_kernels``;
never ``_games`` (block functions are handed in), a public module or an
estimator.
"""
