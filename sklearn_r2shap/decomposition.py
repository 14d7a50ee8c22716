"""The public functions :func:`r2_decomposition` (Shapley decomposition of R^2
or D^2) and :func:`estimate_cost` (its cost, before it runs).

:func:`r2_decomposition` gives each feature its share R2_j of the model's R^2
on data (X, y): the Shapley value, over features, of the explained sum of
squares; for classifiers and models with a link, the shares of D^2 (Brier,
log-loss, Tweedie deviance; the score definitions live in ``_scores.py``).

It validates its arguments once, converts the model once, chooses the
algorithm and the block size from the cost estimate, and hands the game's
block statistics (:class:`._games.r2._BlockWork`) to the executor's entry
for sums over rows (:func:`._execution.run.reduce_rows`: every row in
memory as one part cut into fixed blocks, or the partitions of a dask
collection or a Spark DataFrame, merged in row order), after a first pass
over y and the weights alone (:func:`._execution.run.reduce_arguments`).

Layer: public functions. Imports the layers below; never an estimator.
"""
from dataclasses import dataclass, replace

import numbers

import numpy as np
from sklearn.utils import check_random_state

from . import _groups, _pipeline
from ._execution import local as _local
from ._execution.run import reduce_arguments, reduce_rows
from ._execution.cost import DEFAULT_EXACT_BUDGET, check_n_permutations, choose_algorithm
from ._execution.cost import ensemble_cost, exact_rows_per_block, per_row_seconds
from ._games import r2 as _r2
from ._kernels import _qshap_sampled
from ._model import explainable_ensemble, to_ensemble
from ._prepare import prepare, row_argument
from ._errors import UndefinedScoreError, UnsupportedModelError
from ._scores import R2Decomposition, R2Interactions
from ._scores import loss_of
from ._scores import is_multi_output_regression
from ._scores import check_n_rows, target_scale, undefined_score_error, weight_scale
from ._validation import check_y, resolve_n_jobs

__all__ = ["r2_decomposition", "R2Decomposition", "r2_interactions", "R2Interactions",
           "estimate_cost"]


def r2_decomposition(model, X, y, *, sample_weight=None, return_local=False, n_jobs=None,
                     verbose="auto", algorithm="auto", exact_budget=DEFAULT_EXACT_BUDGET,
                     n_permutations=2, max_samples=None, random_state=None, feature_groups=None):
    """Shapley decomposition of a tree model's R^2 or D^2 on (X, y) (Q-SHAP).

    For a single tree, R2_j = -(1/Q0) sum_i Sh_j[S -> (y_i - v_S(x_i))^2]
    with v_S the path-dependent value function and Q0 = sum_i (y_i - ybar)^2;
    boosted ensembles are decomposed tree by tree against the residuals of
    the trees before (starting from the model's own initial prediction, with
    exactly the trees the model predicts with); averaging ensembles (random
    forests) use the order-free symmetric decomposition. The definitions
    and derivations are on the documentation page "Shapley decomposition
    of R^2".

    Classifiers and models with a link split D^2 = 1 - L(model) / L0
    (documentation page "D^2 decomposition"):

    * scikit-learn tree and forest classifiers (class probabilities averaged
      over trees): the Brier score, exactly, one squared game per class
      (``score_name="d2_brier"``, equal to ``sklearn.metrics.d2_brier_score``);
    * boosted models with a link (binary and multiclass log-loss, Poisson,
      Gamma, Tweedie): tree by tree in the model's order, the second-order
      game S -> g_ik m_k,S(x_i) + h_ik m_k,S(x_i)^2 / 2 with g, h the
      derivatives of the loss at the margins before tree k:
      R2_j = -(1/L0) sum_k sum_i w_i Sh_j[game]; the third- and higher-order
      remainder goes to ``unattributed`` (``score_name="d2_log_loss"`` or
      ``"d2_tweedie"``).

    The exact algorithm costs, per row and tree, about the square of the
    number of leaves. For models where that is out of reach (deep forests),
    the sampled algorithm estimates the same R2_j without bias by random
    feature orders; its standard errors include the Monte Carlo noise.

    Parameters
    ----------
    model : fitted tree model
        A scikit-learn tree / forest / (Hist)GradientBoosting, XGBoost,
        LightGBM or CatBoost model fitted with the squared error, a
        scikit-learn tree or forest classifier, or a boosted model fitted
        with the log-loss, Poisson, Gamma or Tweedie loss. Multi-output
        regressors fitted with the squared error (scikit-learn trees and
        forests fitted on 2-D y, XGBoost multi-target regressors, also with
        vector leaves, CatBoost ``MultiRMSE``) are decomposed output by
        output (see Returns).
    X : array-like, DataFrame, sparse matrix, dask Array, dask DataFrame or Spark DataFrame of shape (n_rows, n_features)
        A dask collection or a Spark DataFrame (or
        ``sklearn_r2shap.spark.SparkRows``) is decomposed on its workers,
        partition by partition (see Notes); the result is computed at once.
    y : array-like of shape (n_rows,) or (n_rows, n_outputs), or str
        Targets; class labels (as in ``model.classes_``) for classifiers;
        one column per output for a multi-output regressor (an array,
        DataFrame, or a 2-D dask Array or dask DataFrame with a dask X).
        With a dask X: a dask Array or Series of the same row blocks (a
        dask array of other chunks is rechunked to X's), or an in-memory
        array, which is split to X's partitions. With a Spark DataFrame:
        the name of its (numeric) label column (single output).
    sample_weight : array-like of shape (n_rows,) or str, optional
        Weights of the rows in every sum and mean (e.g. class weights); with
        a dask X or a Spark DataFrame, as ``y``.
    return_local : bool, default=False
        Keep the (n_rows, n_features) per-row terms in ``.local``. Not with
        a dask X or a Spark DataFrame (raises ValueError).
    n_jobs : int, default=None
        Threads (None: all cores). With a dask X: OpenMP threads per task
        (None: one, as dask runs a task per worker thread). The result does
        not depend on it (bit for bit): the rows are split into blocks by
        the model's cost per row alone and the blocks' sums are added in
        their order.
    verbose : "auto" or int, default="auto"
        Progress with the estimated time left (a tqdm bar where tqdm is
        installed, else lines on stderr): "auto" shows it when the work is
        estimated to take more than about 10 seconds (:func:`estimate_cost`),
        0 never, 1 always. No progress is shown for a dask X (use dask's
        dashboard).
    algorithm : {"auto", "exact", "sampled"}, default="auto"
        "exact": exact Shapley values. "sampled": unbiased Monte Carlo
        estimates (antithetic pairs of random feature orders per row and
        tree, with the exact Shapley values of the trees as control
        variate). "auto": "exact" when :func:`estimate_cost` expects it to
        take at most ``exact_budget`` seconds, else "sampled" with a
        :class:`SampledAlgorithmWarning`. ``result.algorithm`` says which ran.
    exact_budget : float, default=120.0
        Seconds the exact algorithm may be expected to take under
        ``algorithm="auto"``.
    n_permutations : int, default=2
        Sampled algorithm: antithetic pairs of feature orders per row and
        tree (cost grows slowly with it). With 2 or more, ``mc_std_errors``
        reports the Monte Carlo part of the error.
    max_samples : int or float, default=None
        Decompose a random subset of rows: an int is a number of rows, a
        float in (0, 1] a fraction of them. The result then estimates the
        R2_j of all the rows (the subset's sums scaled by n_rows / n_sampled,
        Q0 and ``r2`` from all rows), and its standard errors include the
        subsampling. On dask, the same rows (by global index) as in memory.
    random_state : int, RandomState instance or None, default=None
        Seeds the row subset and the sampled algorithm's feature orders
        (each row's orders depend only on the seed and the row's index, not
        on chunks or threads).
    feature_groups : mapping or "input", default=None
        Feature groups as players (as in :func:`shap_values`): the shares are
        the exact Shapley values of the R^2 (or D^2) game whose players are
        the groups, named by the mapping's keys, then the columns in no
        group. ``"input"`` for a Pipeline: one share per input column.

    Returns
    -------
    R2Decomposition or list of R2Decomposition
        ``score`` is the model's R^2 or D^2 (``score_name`` says which) and
        ``shares`` split it: ``shares.sum() + unattributed == score``.
        For a multi-output regressor: a list with one R2Decomposition per
        output, in the order of Y's columns. ``result[k]`` decomposes the
        R^2 of output k, ``r2_score(Y[:, k], model.predict(X)[:, k])``, as the
        decomposition of a single-output model predicting that output alone
        (its trees' values for output k, its base value, the same mode) would;
        ``result[k].output == k``. Each result holds one score, so its shares
        add up to that output's R^2; the outputs' scores are not added (their
        R^2 have different denominators). The same rows are used for every
        output (``max_samples``), and the same ``sample_weight``.

    Raises
    ------
    UnsupportedModelError
        For losses without a second derivative (absolute error, quantile,
        Huber), other objectives, averaging ensembles with a link, linear
        leaves, multi-label classifiers (several binary outputs) and
        scikit-learn multi-output classifiers.

    See Also
    --------
    estimate_cost : the cost of both algorithms before running either.

    Notes
    -----
    On a dask X, two passes run on the workers: one over y and the weights
    only (row counts, the largest absolute y and weight, and the weighted mean of
    the target that L0 needs), then one over the partitions of (X, y,
    weights), the model shipped once, each partition giving the sums and
    the means and squared deviations of its per-row terms, the loss sums
    and L0's part; these are merged by a tree reduction and the client
    finalizes them as the in-memory call does. The result equals the
    in-memory one to rounding, also for ``algorithm="sampled"`` (each row's
    feature orders depend on its global index) and ``max_samples``.
    ``algorithm="auto"`` estimates the cost of all rows on ``n_jobs`` threads
    of the client's machine (None: all its cores).

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn.metrics import r2_score
    >>> from sklearn_r2shap import r2_decomposition
    >>> X, y = load_diabetes(return_X_y=True)
    >>> model = DecisionTreeRegressor(max_depth=4, random_state=0).fit(X, y)
    >>> result = r2_decomposition(model, X, y)
    >>> result.algorithm
    'exact'
    >>> bool(np.isclose(result.shares.sum(), r2_score(y, model.predict(X))))
    True
    >>> abs(result.unattributed) < 1e-10
    True
    >>> sampled = r2_decomposition(model, X, y, algorithm="sampled", random_state=0)
    >>> sampled.algorithm
    'sampled'
    >>> bool(np.all(np.abs(sampled.shares - result.shares)
    ...             <= 4 * sampled.mc_std_errors + 1e-12))
    True

    A classifier's log-loss D^2:

    >>> from sklearn.datasets import load_breast_cancer
    >>> from sklearn.ensemble import HistGradientBoostingClassifier
    >>> from sklearn.metrics import d2_log_loss_score
    >>> X, y = load_breast_cancer(return_X_y=True)
    >>> model = HistGradientBoostingClassifier(max_iter=20, random_state=0).fit(X, y)
    >>> result = r2_decomposition(model, X, y)
    >>> result.score_name
    'd2_log_loss'
    >>> bool(np.isclose(result.score, d2_log_loss_score(y, model.predict_proba(X))))
    True
    >>> bool(np.isclose(result.shares.sum() + result.unattributed, result.score))
    True

    A multi-output regressor: one result per output, each adding up to that
    output's R^2:

    >>> from sklearn.ensemble import RandomForestRegressor
    >>> X, y = load_diabetes(return_X_y=True)
    >>> Y = np.column_stack([y, X[:, 2] * X[:, 3]])
    >>> model = RandomForestRegressor(n_estimators=5, max_depth=3, random_state=0).fit(X, Y)
    >>> results = r2_decomposition(model, X, Y)
    >>> [r.output for r in results]
    [0, 1]
    >>> prediction = model.predict(X)
    >>> all(bool(np.isclose(r.shares.sum() + r.unattributed,
    ...                     r2_score(Y[:, r.output], prediction[:, r.output])))
    ...     for r in results)
    True
    """
    options = _Options(algorithm=algorithm, exact_budget=exact_budget,
                       n_permutations=n_permutations, max_samples=max_samples,
                       random_state=random_state)
    call = prepare(model, X, feature_groups=feature_groups, n_jobs=n_jobs, verbose=verbose,
                   ensemble_of=to_ensemble if feature_groups is None else explainable_ensemble)
    if is_multi_output_regression(call.ensemble):
        return _per_output_decomposition(call, y, sample_weight=sample_weight,
                                         return_local=return_local, options=options)
    result = _r2_decomposition(call, loss_of(call.ensemble), y, sample_weight=sample_weight,
                               return_local=return_local, options=options)
    if call.players is not None:  # the groups as players, null players dropped
        result = _groups.restrict_decomposition(result, call.players)
    return result


def r2_interactions(model, X, y, *, sample_weight=None, return_local=False, n_jobs=None,
                    verbose="auto", max_samples=None, random_state=None, feature_groups=None):
    """Exact Shapley main effects and pairs' interaction shares of a model's R^2 or D^2.

    Splits each feature's share of the score, as :func:`r2_decomposition`
    reports it, into a main effect and its parts shared with every other
    feature: the SHAP interaction values (Lundberg et al. 2020, eq. (8)) of
    the same per-row games, ``-(1/L0) w_i [a m_S^2 + b m_S]`` for every tree
    (squared error: each tree against the residuals of the trees before it,
    or the symmetric game of a forest), summed over rows. The game is
    multilinear in the features' indicators, so the values are computed
    exactly, from leaf pairs and Gauss-Legendre quadrature of the second
    derivatives of its multilinear extension (documentation page "Shapley
    decomposition of R^2", section "Interaction shares"). With
    ``S = result.shares``:

    * ``S[j, j]`` is feature j's main effect and ``S[j, k] + S[k, j]`` the
      interaction share of the pair (j, k) (``result.pair_shares()``);
    * ``S.sum(axis=1)`` equals ``r2_decomposition(...).shares`` and
      ``S.sum() + result.unattributed == result.score``.

    Parameters
    ----------
    model : fitted tree model
        As :func:`r2_decomposition`, with a single output.
    X : array-like, DataFrame, sparse matrix, dask Array, dask DataFrame or Spark DataFrame of shape (n_rows, n_features)
        The rows (a dask collection or a Spark DataFrame: decomposed
        partition by partition on its workers, as :func:`r2_decomposition`).
    y : array-like of shape (n_rows,), or str
        Targets; class labels for classifiers (a Spark DataFrame: the name
        of its label column).
    sample_weight : array-like of shape (n_rows,) or str, default=None
        Weights of the rows in every sum (a Spark DataFrame: a column name).
    return_local : bool, default=False
        Keep the (n_rows, n_features, n_features) per-row terms in
        ``.local``. Not with a dask X or a Spark DataFrame.
    n_jobs : int, default=None
        Threads (None: all cores). The result does not depend on it, bit
        for bit.
    verbose : "auto" or int, default="auto"
        Progress, as in :func:`r2_decomposition`.
    max_samples : int or float, default=None
        Decompose a random subset of the rows (as in
        :func:`r2_decomposition`): the shares estimate those of all rows and
        the standard errors include the subsampling.
    random_state : int, RandomState instance or None, default=None
        Seeds the row subset.
    feature_groups : mapping or "input", default=None
        Feature groups as players (as in :func:`r2_decomposition`): main
        effects and interactions of groups.

    Returns
    -------
    R2Interactions
        ``shares`` (n_features, n_features), ``std_errors``,
        ``main_effects``, ``pair_shares()``, ``top_pairs()``, ``plot()``, and
        the features' ``decomposition`` (an :class:`R2Decomposition`).

    Raises
    ------
    UnsupportedModelError
        What :func:`r2_decomposition` refuses, multi-output regressors, and
        trees with more than 64 distinct features on a root-to-leaf path.

    See Also
    --------
    r2_decomposition : the features' shares alone (faster: benchmarks/RESULTS.md).
    shap_interaction_summary : interactions of the prediction, not of the score.

    Notes
    -----
    The cost per row and tree grows with the square of the number of leaves,
    as the exact R^2 decomposition's, with a larger constant:
    ``benchmarks/RESULTS.md`` has the measured ratio. There is no sampled
    algorithm for interactions; ``max_samples`` decomposes fewer rows.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from sklearn_r2shap import r2_decomposition, r2_interactions
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-1, 1, size=(500, 4))
    >>> y = X[:, 0] * X[:, 1] + 0.1 * rng.normal(size=500)
    >>> model = GradientBoostingRegressor(max_depth=3, random_state=0).fit(X, y)
    >>> result = r2_interactions(model, X, y)
    >>> bool(np.allclose(result.shares.sum(axis=1), r2_decomposition(model, X, y).shares))
    True
    >>> bool(np.isclose(result.shares.sum() + result.unattributed, result.score))
    True
    >>> top = result.top_pairs(1)
    >>> top.feature_1[0], top.feature_2[0]
    ('x0', 'x1')
    >>> bool(top.share[0] > 0.5 * result.score)
    True
    """
    options = _Options(algorithm="exact", exact_budget=np.inf, n_permutations=2,
                       max_samples=max_samples, random_state=random_state)
    call = prepare(model, X, feature_groups=feature_groups, n_jobs=n_jobs, verbose=verbose,
                   ensemble_of=to_ensemble if feature_groups is None else explainable_ensemble)
    if is_multi_output_regression(call.ensemble):
        raise UnsupportedModelError(
            f"r2_interactions decomposes the score of one output; {call.ensemble.model_type} "
            f"has {call.ensemble.n_outputs}. Use r2_decomposition for each output's shares, or "
            "fit one model per output.")
    result = _r2_decomposition(call, loss_of(call.ensemble), y, sample_weight=sample_weight,
                               return_local=return_local, options=options,
                               work=_r2._PairBlockWork)
    if call.players is not None:  # the groups as players, null players dropped
        result = _groups.restrict_interactions(result, call.players)
    return result


def _per_output_decomposition(call, Y, *, sample_weight, return_local, options):
    """:func:`r2_decomposition` of a multi-output regressor: one R2Decomposition per
    output, each the decomposition of the single-output ensemble of that output
    (:meth:`TreeEnsemble.single_output`) against its column of Y."""
    ensemble = call.ensemble
    columns = _output_columns(Y, ensemble.n_outputs, ensemble.model_type)
    if not isinstance(options.random_state, numbers.Integral):
        # one seed for every output: the same rows (max_samples) for each
        seed = int(check_random_state(options.random_state).randint(np.iinfo(np.int32).max))
        options = replace(options, random_state=seed)
    results = []
    for k, y in enumerate(columns):
        one = replace(call, ensemble=ensemble.single_output(k))
        try:
            result = _r2_decomposition(one, loss_of(one.ensemble), y,
                                       sample_weight=sample_weight, return_local=return_local,
                                       options=options)
        except UndefinedScoreError as error:
            raise UndefinedScoreError(f"Output {k} of Y: {error}") from None
        result = replace(result, output=k)
        if call.players is not None:
            result = _groups.restrict_decomposition(result, call.players)
        results.append(result)
    return results


def _output_columns(Y, n_outputs, model_type):
    """The columns of a multi-output target: one per output, as 1-D targets."""
    if Y is None:
        raise ValueError("r2_decomposition requires y, but y is None.")
    frame = hasattr(Y, "columns") and hasattr(Y, "iloc")
    shape = (len(Y.columns),) if frame else None
    if frame:
        width, ndim = len(Y.columns), 2
    else:
        if not (hasattr(Y, "ndim") and hasattr(Y, "shape")):  # a lazy array stays lazy
            Y = np.asarray(Y)
        ndim, shape = Y.ndim, Y.shape
        width = Y.shape[1] if ndim == 2 else None
    if ndim != 2 or width != n_outputs:
        got = f"{width} columns" if frame else f"shape {tuple(shape)}"
        raise ValueError(
            f"{model_type} has {n_outputs} outputs: y must have shape (n_rows, {n_outputs}), "
            f"one column per output, got {got}. The R^2 of each output is decomposed "
            "separately."
        )
    if frame:
        return [Y.iloc[:, k] for k in range(n_outputs)]
    return [Y[:, k] for k in range(n_outputs)]


@dataclass(frozen=True)
class _Options:
    """The caller's choices of algorithm and rows (checked in :func:`_choose`)."""

    algorithm: str
    exact_budget: float
    n_permutations: int
    max_samples: object
    random_state: object


def _choose(plan, n_rows, *, n_threads, block_threads, options):
    """Draw the row subset (or None), then choose the algorithm for the rows used
    (cost on ``n_threads`` threads) and the rows per block (by the cost per row
    alone, never the threads); blocks run on ``block_threads``.
    Sets the plan's algorithm, terms, estimate and block size."""
    plan.n_threads = block_threads
    plan.n_permutations = check_n_permutations(options.n_permutations)
    # the kernels add every tree to one output: the games already carry the class
    single = replace(plan.work, tree_output=np.zeros(plan.work.n_trees, dtype=np.int64))
    # draws only when something is random (random_state=None uses numpy's global state)
    random = check_random_state(options.random_state)
    rows = _r2._subsample_rows(n_rows, options.max_samples, random)
    n_used = n_rows if rows is None else len(rows)
    slots = _qshap_sampled.tree_slots(single)
    cost = ensemble_cost(single, n_used, n_threads, plan.n_permutations, slots)
    plan.algorithm = choose_algorithm(options.algorithm, cost, options.exact_budget)
    seed = int(random.randint(np.iinfo(np.int64).max)) if plan.algorithm == "sampled" else 0
    plan.terms_of = _r2.R2Terms(single, plan.algorithm, plan.n_threads, plan.n_permutations,
                            seed, slots)
    plan.seconds = (cost.exact_seconds * plan.cost_ratio if plan.algorithm == "exact"
                    else cost.sampled_seconds)
    # memory: (rows, trees) coefficients, and (rows, n_permutations, features) replicates
    exact_row, sampled_row, _, _ = per_row_seconds(single, slots, plan.n_permutations)
    plan.chunk_rows = _local.block_rows_for(exact_row * plan.cost_ratio
                                            if plan.algorithm == "exact" else sampled_row)
    if plan.algorithm == "exact" and plan.tables_per_block:
        # the kernel tabulates each tree once per call: enough rows to share it
        plan.chunk_rows = max(plan.chunk_rows, exact_rows_per_block(single))
    # and by memory: the (rows, trees) coefficients, 32 bytes a tree; sampled,
    # also the (rows, n_permutations, features) replicates, 16 bytes each
    plan.chunk_rows = min(plan.chunk_rows, _r2.MAX_BLOCK_ROWS, _local.block_rows_for(
        0.0, 32 * plan.work.n_trees, minimum=16))
    if plan.algorithm == "sampled":
        plan.chunk_rows = min(plan.chunk_rows, _local.block_rows_for(
            0.0, 16 * plan.n_permutations * plan.ensemble.n_features, minimum=16))
    plan.limit_block_rows()
    return rows


def _statistics(plan, X, target, weight, first=0, rows=None, null_mean=None, local=None,
                progress=None):
    """Statistics of rows X (in memory, or one dask partition): ``plan.block`` run
    by the local executor over fixed blocks of rows, merged in block order.

    ``first`` is X's first row in the whole data, ``rows`` X's rows in the
    random subset (``max_samples``; indices into X), or None for all. Keys as
    :meth:`_BlockWork.block`, with ``loss`` over every row of X (also with
    ``max_samples``) and ``null`` (L0's sum over X with the best constant
    ``null_mean`` of all rows, when given).
    """
    statistics = plan.empty_statistics()
    null_sum = 0.0
    if null_mean is not None:
        with np.errstate(all="ignore"):
            null_sum = plan.loss.null_sum(target, weight, null_mean)
    if len(target) > 0:
        def one(start, stop, X_chunk):
            ids = np.arange(start, stop) if rows is None else rows[start:stop]
            terms, block = plan.block(X_chunk, target, weight, ids, first,
                                      subset=rows is not None, with_loss=rows is None)
            if local is not None:
                local[start:stop] = terms
            return block

        merged = _local.reduce_blocks(one, plan.ensemble, X, block_rows=plan.chunk_rows,
                                      rows=rows, progress=progress)
        if merged is not None:
            statistics = merged
        if rows is not None:  # the model's loss is over every row, also with max_samples
            statistics["loss"] = _local.reduce_blocks(
                lambda start, stop, block: {"loss": plan._loss(
                    block, target[start:stop], weight[start:stop])},
                plan.ensemble, X, block_rows=_r2.MAX_BLOCK_ROWS)["loss"]
    statistics["null"] = null_sum
    return statistics


def _r2_part(payload, rows, start, subset, arguments, *, n_threads, progress=None,
             local=None):
    """One part's statistics of the decomposition (a part function of
    :func:`._execution.run.reduce_rows`): the part's target and weights as
    the whole call's (rescaled by the powers of two of the first pass),
    then :func:`_statistics`."""
    plan, scale, weight_scale_, null_mean = payload
    n_rows = rows.shape[0]
    y = check_y(arguments["y"], n_rows, partition_of="X")
    target = _r2._block_target(plan.loss, plan.ensemble, y, n_rows, scale)
    weight = _r2._block_weight(arguments.get("sample_weight"), n_rows, "X") / weight_scale_
    return _statistics(plan, rows, target, weight, first=start, rows=subset,
                       null_mean=null_mean, local=local, progress=progress)


def _r2_decomposition(call, loss, y, *, sample_weight, return_local, options,
                      work=_r2._BlockWork):
    """:func:`r2_decomposition` of a prepared call, in two passes over the rows
    (:func:`._execution.run.reduce_arguments`, :func:`._execution.run.reduce_rows`:
    every row in memory as one part, or the partitions of a dask collection
    or a Spark DataFrame, merged in row order).

    Pass 1 reads y and the weights only: the number of rows, the largest
    |y| and weight (the power-of-two rescalings) and the weighted mean of
    the target (L0's best constant). Pass 2 runs the plan's block statistics
    (``work``: :class:`._games.r2._BlockWork`, or ``_PairBlockWork`` for
    :func:`r2_interactions`) over the parts, and the plan finalizes the
    merged statistics.
    """
    if y is None:
        raise ValueError("r2_decomposition requires y, but y is None.")
    ensemble = call.ensemble
    work.of(ensemble, loss, 1.0)  # refuse what cannot be decomposed, before any pass
    arguments = {"y": row_argument(call, y, "y"),
                 "sample_weight": row_argument(call, sample_weight, "sample_weight")}
    first = reduce_arguments(call, _r2.target_statistics, payload=(loss, ensemble),
                             arguments=arguments)
    n_rows = int(first["rows"])
    check_n_rows(n_rows)
    scale_w = 1.0
    if sample_weight is not None:
        if not first["largest_weight"].high > 0:
            raise ValueError("sample_weight is zero for every row: no row counts.")
        scale_w = weight_scale(first["largest_weight"].high)
    counted = first["counted_target"]
    if np.all(counted.low == counted.high):
        raise undefined_score_error(loss)
    scale = target_scale(float(np.max(first["largest_target"].high))) if _r2._is_regression(
        loss) else 1.0
    null_mean = first["target"].mean / scale

    plan = work.of(ensemble, loss, scale)
    # the estimate: all rows on n_jobs threads of this machine (None: all its cores)
    rows = _choose(plan, n_rows, n_threads=resolve_n_jobs(call.n_jobs),
                   block_threads=call.n_threads, options=options)
    if rows is not None and return_local:
        raise ValueError("return_local=True needs every row: it cannot be combined with "
                         "max_samples.")
    local = np.empty(plan.local_shape(n_rows)) if return_local else None
    n_used = n_rows if rows is None else len(rows)
    merged = reduce_rows(call, _r2_part, payload=(plan, scale, scale_w, null_mean),
                         arguments=arguments, subset=rows,
                         desc=f"{plan.description} ({plan.algorithm})", estimate=plan.seconds,
                         in_memory={"local": local})
    total = merged["null"]
    if not total > 0:
        raise undefined_score_error(loss)
    return plan.finalize(merged, total, n_rows=n_rows, n_used=n_used, names=call.names,
                         local=local)


def estimate_cost(model, X, *, n_permutations=2, n_jobs=None):
    """Estimate how long :func:`~sklearn_r2shap.r2_decomposition` will take.

    Counts the operations of both algorithms from the trees' structure (the
    exact algorithm's leaf pairs, the sampled algorithm's node passes) and
    converts them to seconds with per-operation times measured on one core
    of a recent x86-64 machine. It is an estimate, good to within a factor
    of a few; ``algorithm="auto"`` compares ``exact_seconds`` with its
    ``exact_budget``.

    Parameters
    ----------
    model : fitted tree regressor, TreeEnsemble or Pipeline ending in one
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features), or int
        The rows to decompose, checked as :func:`r2_decomposition` checks
        them (the cost depends on their number only; a dask collection's
        partition lengths are computed when unknown), or that number.
    n_permutations : int, default=2
        Antithetic pairs of feature orders per row and tree of the sampled
        algorithm.
    n_jobs : int, default=None
        Threads (None: all cores).

    Returns
    -------
    CostEstimate

    Examples
    --------
    >>> from sklearn.datasets import make_friedman1
    >>> from sklearn.ensemble import RandomForestRegressor
    >>> from sklearn_r2shap import estimate_cost
    >>> X, y = make_friedman1(n_samples=500, random_state=0)
    >>> model = RandomForestRegressor(n_estimators=10, random_state=0).fit(X, y)
    >>> cost = estimate_cost(model, X, n_jobs=1)
    >>> cost.n_rows, cost.n_trees
    (500, 10)
    >>> bool(cost.sampled_seconds < cost.exact_seconds)
    True
    """
    n_permutations = check_n_permutations(n_permutations)
    if isinstance(X, (int, np.integer)):  # a number of rows: nothing to check
        n_rows = int(X)
        if n_rows < 0:
            raise ValueError(f"the number of rows must be >= 0, got {n_rows}.")
        return ensemble_cost(to_ensemble(_pipeline.final_step(model)), n_rows,
                             resolve_n_jobs(n_jobs), n_permutations)
    call = prepare(model, X, n_jobs=n_jobs, ensemble_of=to_ensemble)
    n_rows = call.row_count()
    # as r2_decomposition: all rows on n_jobs threads of this machine
    return ensemble_cost(call.ensemble, n_rows, resolve_n_jobs(call.n_jobs), n_permutations)
