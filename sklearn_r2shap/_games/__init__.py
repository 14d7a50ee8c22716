"""Games: what each algorithm family computes for a block of rows.

One module per family -- :mod:`.semivalues` (Shapley, Beta Shapley,
Banzhaf, TreeProb, Saabas, raw predictions), :mod:`.r2` (the squared and
second-order R^2 / D^2 games and their block statistics), :mod:`.piecewise`
(piecewise-linear trees), :mod:`.treegrad` (TreeGrad gradients and the
ranker) -- holds plain functions of a :class:`~.._model.TreeEnsemble` and a
block of checked rows, returning arrays or mergeable statistics, next to its
kernel in ``_kernels``.

Layer: games. Imports the ground floor, ``_model``, ``_kernels`` and
``_scores`` (the losses); never ``_execution``, a public module or an
estimator.
"""
