"""Shapley decomposition of a tree model's R^2 or D^2 (Q-SHAP).

:func:`r2_decomposition` gives each feature its share R2_j of the model's R^2
on data (X, y): the Shapley value, over features, of the explained sum of
squares; for classifiers and models with a link, the shares of D^2 (Brier,
log-loss, Tweedie deviance; the score definitions live in ``_scores.py``).
:class:`ShapleyR2Importance` wraps it as a scikit-learn feature selector, and
falls back on the shapFlex shares (:mod:`sklearn_r2shap.shapflex`) for
regressors that are not trees.
"""
import numbers
import warnings
from dataclasses import dataclass, replace

import numpy as np
from sklearn.utils.validation import check_is_fitted

from . import _dask
from ._cost import DEFAULT_EXACT_BUDGET, Progress, choose_algorithm, ensemble_cost
from ._cost import check_n_permutations, chunk_rows_for
from ._kernels import _predict, _qshap_sampled
from ._model import UnsupportedModelError, to_ensemble
from ._r2_terms import R2Terms
from ._report import ScoreValue, deprecated_alias
from ._scores import R2Decomposition, SquaredError, check_target, check_weights, loss_of
from ._scores import undefined_score_error
from ._selector import BaseTreeSelector, _unfrozen, is_classification_target
from ._validation import column_names, iter_row_blocks, n_rows_features, resolve_n_jobs

__all__ = ["r2_decomposition", "R2Decomposition", "ShapleyR2Importance"]

_CHUNK_ROWS = 4096


def _game_ensemble(ensemble, loss, scale):
    """The single-value ensemble the kernel decomposes (and its mode).

    Vector leaves (scikit-learn classifiers' class probabilities, CatBoost
    multiclass) become one tree per output, in the model's order; the
    squared-error regression trees are divided by ``scale`` (a power of two:
    exact). Averaging ensembles are decomposed in the symmetric mode, which
    needs a squared loss.
    """
    work = ensemble
    if isinstance(loss, SquaredError) and loss.classes is not None:
        outputs = loss.outputs
        work = ensemble.per_output(outputs)
        if len(outputs) != ensemble.n_outputs:  # binary: class 1 becomes output 0
            work = replace(work, tree_output=np.zeros(work.n_trees, dtype=np.int64),
                           base_value=ensemble.base_value[outputs].copy())
    elif ensemble.n_values > 1:
        work = ensemble.per_output()
    if scale != 1.0:
        work = replace(work, value=work.value / scale, base_value=work.base_value / scale)
    symmetric = bool(work.averaging)
    if symmetric and not loss.symmetric:
        raise UnsupportedModelError(
            f"{ensemble.model_type} averages its trees in the margin space of objective "
            f"{ensemble.objective!r}: the D^2 decomposition of an averaging ensemble is "
            "defined for the squared error and the Brier score only; use shap_values or "
            "TreeGradRanker instead."
        )
    return work, symmetric


_EXACT_MIN_CHUNK_ROWS = 32


def _chunk_rows(n_trees):
    """Rows per chunk: the (rows, trees) coefficient arrays stay near 32 MB."""
    return int(min(_CHUNK_ROWS, max(16, (1 << 21) // max(1, n_trees))))


def squared_error_game(leaf, y, weight, base, tree_mean, symmetric):
    """Coefficients (a, b) of the squared-error games, shape (n_rows, n_trees).

    Tree k of row i contributes ``a Sh[m_k^2] + b Sh[m_k]`` with a = w_i and
    b = -2 w_i c_ik (Sh[(c - m)^2] = Sh[m^2] - 2 c Sh[m] for a constant c).
    Sequential (boosting): c_ik = y_i - F_{k-1}(x_i), the residual of the
    trees before k from the initial prediction ``base``. Symmetric (forests):
    c_ik = y_i - mu - (f~(x_i) - m~_k(x_i)) / 2 + v^k(empty), with m~ the
    centred trees, f~ their sum and mu = base + sum of tree means.
    """
    if symmetric:
        centred = leaf - tree_mean
        total = centred.sum(axis=1, keepdims=True)
        mu = base + float(np.sum(tree_mean))
        residual = (y - mu)[:, None] - (total - centred) / 2.0 + tree_mean
    else:
        before = np.cumsum(leaf, axis=1) - leaf
        residual = (y - base)[:, None] - before
    square = np.repeat(weight[:, None], leaf.shape[1], axis=1)
    return np.ascontiguousarray(square), np.ascontiguousarray(-2.0 * square * residual)


def second_order_game(leaf, loss, target, weight, base, tree_output):
    """Coefficients (a, b) of the per-tree second-order games, shape (n_rows, n_trees).

    Tree k (adding to margin c = ``tree_output[k]``) of row i contributes
    ``w_i Sh[g_ik m_k + h_ik m_k^2 / 2] = a Sh[m_k^2] + b Sh[m_k]`` with
    a = w_i h_ik / 2 and b = w_i g_ik, where g and h are the first and second
    derivatives of the row's loss in margin c at the margins F_{k-1}(x_i) of
    the trees before k, starting from the initial margins ``base``. For the
    squared error l = (y - F)^2 / 2 this is half the squared-error game.
    """
    n_rows, n_trees = leaf.shape
    square = np.empty((n_rows, n_trees))
    linear = np.empty((n_rows, n_trees))
    if loss.separable:  # each output's margin only moves with its own trees
        for c in range(len(base)):
            trees = np.flatnonzero(tree_output == c)
            if len(trees) == 0:
                continue
            own = leaf[:, trees]
            before = base[c] + (np.cumsum(own, axis=1) - own)
            g, h = loss.derivatives(target[:, [c]], before, c)
            square[:, trees], linear[:, trees] = h, g
    else:  # softmax: every margin moves p_c; one margin changes at a time
        margin = np.repeat(np.asarray(base, dtype=np.float64)[None, :], n_rows, axis=0)
        for k in range(n_trees):
            c = tree_output[k]
            linear[:, k], square[:, k] = loss.derivatives(target, margin, c)
            margin[:, c] += leaf[:, k]
    square *= 0.5 * weight[:, None]
    linear *= weight[:, None]
    return square, linear


def _symmetric_game(leaf, target, weight, base, tree_mean, tree_output):
    """Half the squared-error games of the symmetric mode, per output (Brier: per class)."""
    square = np.empty(leaf.shape)
    linear = np.empty(leaf.shape)
    for c in range(len(base)):
        trees = np.flatnonzero(tree_output == c)
        if len(trees) == 0:
            continue
        a, b = squared_error_game(leaf[:, trees], target[:, c], weight, float(base[c]),
                                  tree_mean[trees], True)
        square[:, trees], linear[:, trees] = a / 2.0, b / 2.0
    return square, linear


def r2_decomposition(model, X, y, *, sample_weight=None, return_local=False, n_jobs=None,
                     verbose=0, algorithm="auto", exact_budget=DEFAULT_EXACT_BUDGET,
                     n_permutations=2, max_samples=None, random_state=None):
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
        with the log-loss, Poisson, Gamma or Tweedie loss.
    X : array-like, DataFrame, sparse matrix, dask Array or dask DataFrame of shape (n_rows, n_features)
        A dask collection is decomposed on its workers, partition by
        partition (see Notes); the result is computed at once.
    y : array-like of shape (n_rows,)
        Targets; class labels (as in ``model.classes_``) for classifiers.
        With a dask X: a dask Array or Series of the same row blocks (a
        dask array of other chunks is rechunked to X's), or an in-memory
        array, which is split to X's partitions.
    sample_weight : array-like of shape (n_rows,), optional
        Weights of the rows in every sum and mean (e.g. class weights); with
        a dask X, as ``y``.
    return_local : bool, default=False
        Keep the (n_rows, n_features) per-row terms in ``.local``. Not with
        a dask X (raises ValueError).
    n_jobs : int, default=None
        Threads (None: all cores). With a dask X: OpenMP threads per task
        (None: one, as dask runs a task per worker thread).
    verbose : int, default=0
        Show progress with the estimated time left (tqdm if installed). No
        progress is shown for a dask X (use dask's dashboard).
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

    Returns
    -------
    R2Decomposition
        ``score`` is the model's R^2 or D^2 (``score_name`` says which) and
        ``shares`` split it: ``shares.sum() + unattributed == score``.

    Raises
    ------
    UnsupportedModelError
        For losses without a second derivative (absolute error, quantile,
        Huber), other objectives, averaging ensembles with a link, linear
        leaves, and multi-output models.

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
    """
    ensemble = to_ensemble(model)
    loss = loss_of(ensemble)
    if _dask.is_dask_collection(X):
        return _dask.r2_decomposition(
            ensemble, loss, X, y, sample_weight=sample_weight, return_local=return_local,
            n_jobs=n_jobs, algorithm=algorithm, exact_budget=exact_budget,
            n_permutations=n_permutations, max_samples=max_samples, random_state=random_state)
    # the user's column names (LightGBM stores them with spaces replaced)
    names = column_names(X)
    if names is None:
        names = ensemble.feature_names
    n_rows, n_features = n_rows_features(X)
    scale = 1.0
    if isinstance(loss, SquaredError) and loss.classes is None:
        y, weight, scale = check_target(y, n_rows, sample_weight)
        target = (y / scale)[:, None]
    else:
        weight = check_weights(sample_weight, n_rows)
        target = loss.target(y, n_rows, ensemble)
    plan = _BlockWork.of(ensemble, loss, scale)
    with np.errstate(all="ignore"):
        total = loss.null_loss(target, weight)
    if not total > 0:
        raise undefined_score_error(loss)
    rows = plan.choose(n_rows, n_jobs, None, algorithm, exact_budget, n_permutations,
                       max_samples, random_state)
    if rows is not None and return_local:
        raise ValueError("return_local=True needs every row: it cannot be combined with "
                         "max_samples.")
    n_used = n_rows if rows is None else len(rows)
    local = np.empty((n_rows, n_features)) if return_local else None
    progress = Progress(n_used, verbose, f"R^2 decomposition ({plan.algorithm})",
                        plan.seconds)
    statistics = plan.statistics(X, target, weight, rows=rows, local=local, progress=progress)
    progress.close()
    return plan.finalize(statistics, total, n_rows=n_rows, n_used=n_used, names=names,
                         local=local)


@dataclass
class _BlockWork:
    """The per-block work of :func:`r2_decomposition` and the step from its merged
    statistics to the result.

    A block of rows gives *unscaled* statistics (the per-row terms before the
    division by -L0, which needs every row), which add up over blocks (sums)
    or merge exactly (:class:`~._dask.Moments`); :meth:`finalize` divides by
    L0 once. The in-memory call treats X as one block; on dask every
    partition is one (``_dask.r2_decomposition``).
    """

    ensemble: object  # the model's TreeEnsemble (to check the rows of a block)
    loss: object
    work: object  # the ensemble of the games (vector leaves split, rescaled)
    symmetric: bool
    algorithm: str = None
    n_permutations: int = None
    terms_of: R2Terms = None
    chunk_rows: int = None
    seconds: float = None
    n_threads: int = None

    @classmethod
    def of(cls, ensemble, loss, scale):
        work, symmetric = _game_ensemble(ensemble, loss, scale)
        return cls(ensemble, loss, work, symmetric)

    def choose(self, n_rows, n_jobs, block_threads, algorithm, exact_budget, n_permutations,
               max_samples, random_state):
        """Draw the row subset (or None), then choose the algorithm for the rows used
        (cost on ``n_jobs`` threads); tasks run on ``block_threads`` (None: n_jobs)."""
        from sklearn.utils import check_random_state

        n_threads = resolve_n_jobs(n_jobs)
        self.n_threads = n_threads if block_threads is None else resolve_n_jobs(block_threads)
        self.n_permutations = check_n_permutations(n_permutations)
        # the kernels add every tree to one output: the games already carry the class
        single = replace(self.work, tree_output=np.zeros(self.work.n_trees, dtype=np.int64))
        # draws only when something is random (random_state=None uses numpy's global state)
        random = check_random_state(random_state)
        rows = _subsample_rows(n_rows, max_samples, random)
        n_used = n_rows if rows is None else len(rows)
        slots = _qshap_sampled.tree_slots(single)
        cost = ensemble_cost(single, n_used, n_threads, self.n_permutations, slots)
        self.algorithm = choose_algorithm(algorithm, cost, exact_budget)
        seed = int(random.randint(np.iinfo(np.int64).max)) if self.algorithm == "sampled" else 0
        self.terms_of = R2Terms(single, self.algorithm, self.n_threads, self.n_permutations,
                                seed, slots)
        self.seconds = cost.exact_seconds if self.algorithm == "exact" else cost.sampled_seconds
        # memory: (rows, trees) coefficients, and (rows, n_permutations, features) replicates
        self.chunk_rows = chunk_rows_for(
            self.seconds / max(1, n_used) * min(n_threads, n_used), n_threads)
        if self.algorithm == "exact":
            # the kernel tabulates each tree once per call: a few rows' worth of work
            self.chunk_rows = max(self.chunk_rows, _EXACT_MIN_CHUNK_ROWS)
        self.chunk_rows = min(self.chunk_rows, _chunk_rows(self.work.n_trees))
        if self.algorithm == "sampled":
            self.chunk_rows = min(self.chunk_rows, max(
                16, (1 << 22) // (self.n_permutations * self.ensemble.n_features)))
        return rows

    def statistics(self, X, target, weight, first=0, rows=None, null_mean=None, local=None,
                   progress=None):
        """Statistics of a block of rows: a dict that adds up / merges over blocks.

        ``first`` is the block's first row in the whole data (the sampled
        algorithm seeds each row by its index), ``rows`` the block's rows in
        the random subset (``max_samples``; indices into the block), or None
        for all. Keys: ``sums`` (per-feature sums of the raw terms),
        ``terms`` (their Moments over the rows of positive weight; all rows
        of a random subset), ``mc_variance`` (sampled algorithm: sums of the
        rows' Monte Carlo variances), ``loss`` (sum of w l(y, f(x)) over
        every row of the block) and ``null`` (L0's sum over the block with
        the best constant ``null_mean`` of all rows, when given).
        """
        from ._dask import Moments

        work, n_threads, n_features = self.work, self.n_threads, self.ensemble.n_features
        base = np.asarray(work.base_value, dtype=np.float64)
        tree_mean = np.ascontiguousarray(_predict.node_means(work)[work.tree_start[:-1], 0])
        sums, mc_variance = np.zeros(n_features), np.zeros(n_features)
        moments = Moments.of(np.zeros((0, n_features)))
        loss_sum, null_sum = 0.0, 0.0
        if null_mean is not None:
            with np.errstate(all="ignore"):
                null_sum = self.loss.null_sum(target, weight, null_mean)
        if len(target) > 0:
            # the model's loss is over every row, also with max_samples
            if rows is not None:
                for start, stop, block in iter_row_blocks(self.ensemble, X, _CHUNK_ROWS):
                    loss_sum += self._loss(block, target[start:stop], weight[start:stop])
            for start, stop, X_chunk in iter_row_blocks(self.ensemble, X, self.chunk_rows,
                                                        rows):
                if start == stop:  # no row of the block in the random subset
                    break
                ids = np.arange(start, stop) if rows is None else rows[start:stop]
                leaf = _predict.leaf_values(work, X_chunk, n_threads)
                with np.errstate(all="ignore"):
                    if self.symmetric:
                        square_coef, linear_coef = _symmetric_game(
                            leaf, target[ids], weight[ids], base, tree_mean, work.tree_output)
                    else:
                        square_coef, linear_coef = second_order_game(
                            leaf, self.loss, target[ids], weight[ids], base, work.tree_output)
                terms, variance = self.terms_of(X_chunk, square_coef, linear_coef, first + ids)
                if rows is None:
                    loss_sum += self._loss(X_chunk, target[ids], weight[ids])
                sums += terms.sum(axis=0)
                if variance is not None:
                    mc_variance += variance.sum(axis=0)
                if local is not None:
                    local[start:stop] = terms
                if progress is not None:
                    progress.update(stop - start)
                # rows of zero weight are absent from the data, also for the standard
                # error; a random subset estimates a sum over all rows, zeros included
                moments = moments.merge(Moments.of(terms if rows is not None
                                                   else terms[weight[ids] > 0]))
        return {"sums": sums, "terms": moments, "mc_variance": mc_variance,
                "loss": loss_sum, "null": null_sum}

    def _loss(self, X_chunk, target, weight):
        prediction = _predict.predict_raw(self.work, X_chunk, self.n_threads)
        with np.errstate(all="ignore"):
            return float(np.sum(weight * self.loss.loss(target, prediction)))

    def finalize(self, statistics, total, *, n_rows, n_used, names, local=None):
        """The R2Decomposition from the merged statistics of every block and L0."""
        n_features = self.ensemble.n_features
        terms = statistics["terms"]
        count = terms.weight
        # R2_j = -(1/L0) sum_i terms_ij; a random subset: n / n_used times its sum is
        # unbiased for the sum over all rows
        scale = -n_rows / n_used / total
        sums = statistics["sums"] * scale
        std_errors = (np.sqrt(count * terms.m2 / (count - 1)) * abs(scale) if count > 1
                      else np.full(n_features, np.nan))
        mc_std_errors = None
        if self.algorithm == "sampled":
            mc_std_errors = (np.sqrt(statistics["mc_variance"]) * abs(scale)
                             if self.n_permutations > 1 else np.full(n_features, np.nan))
        if local is not None:
            local /= -total
        with np.errstate(all="ignore"):
            r2 = 1.0 - statistics["loss"] / total
        if not (np.isfinite(r2) and np.all(np.isfinite(sums))):
            raise FloatingPointError(
                f"The {self.loss.score} decomposition of {self.ensemble.model_type} is not "
                "finite: the margins, targets or leaf values overflow in double precision "
                "(e.g. exp of a huge margin); rescale y or check the model's predictions."
            )
        if names is None:
            names = np.array([f"x{j}" for j in range(n_features)], dtype=object)
        return R2Decomposition(
            shares=sums, std_errors=std_errors, score=r2,
            unattributed=r2 - float(sums.sum()), feature_names=np.asarray(names, dtype=object),
            mode="symmetric" if self.symmetric else "sequential", n_rows=n_rows, local=local,
            model_name=self.ensemble.model_type or None, algorithm=self.algorithm,
            mc_std_errors=mc_std_errors, n_rows_sampled=None if n_used == n_rows else n_used,
            score_name=self.loss.score, power=self.loss.power,
        )


def _subsample_rows(n_rows, max_samples, random):
    """Sorted indices of a uniform random subset of rows, or None for all rows."""
    if max_samples is None:
        return None
    if isinstance(max_samples, bool) or not isinstance(max_samples, numbers.Real):
        raise ValueError(f"max_samples must be None, an int or a float, got {max_samples!r}.")
    if isinstance(max_samples, numbers.Integral):
        if max_samples < 2:
            raise ValueError(f"max_samples must be >= 2 rows, got {max_samples}.")
        n_used = int(max_samples)
    else:
        if not 0 < max_samples <= 1:
            raise ValueError(f"a float max_samples is a fraction in (0, 1], got {max_samples}.")
        n_used = max(2, int(round(max_samples * n_rows)))
    if n_used >= n_rows:
        return None
    return np.sort(random.choice(n_rows, n_used, replace=False))


class ShapleyR2Importance(BaseTreeSelector):
    """Feature selection by each feature's share of the model's R^2 (or D^2).

    Fits a model (or takes a fitted one) and splits its R^2 on the data
    into per-feature parts R2_j. For tree models the split is exact Shapley
    values of R^2 (Q-SHAP, :func:`r2_decomposition`), which add up, with the
    unattributed part, to the model's R^2; for tree classifiers and boosted
    models with a link it splits D^2 (Brier score for scikit-learn tree and
    forest classifiers, log-loss for boosted classifiers, Tweedie deviance
    for Poisson / Gamma / Tweedie models). For other regressors it is the
    shapFlex shares computed from SHAP values
    (:func:`~sklearn_r2shap.shapflex_decomposition`), which add up to Gelman's
    R^2 and are *not* a Shapley decomposition of R^2. Acts as a
    :class:`~sklearn.feature_selection.SelectFromModel`-style selector on the
    signed R2_j: a feature with a negative share hurts the fit and is never
    "important" by default.

    Parameters
    ----------
    estimator : regressor or classifier, default=None
        A tree model of scikit-learn, XGBoost, LightGBM or CatBoost fitted
        with the squared error, the log-loss, Poisson, Gamma or Tweedie, a
        scikit-learn tree or forest classifier (Q-SHAP), or any regressor
        (shapFlex). None uses ``HistGradientBoostingClassifier(random_state=0)``
        for a classification target (``type_of_target`` "binary" or
        "multiclass", labels that are not floats: D^2 of the log-loss) and
        ``HistGradientBoostingRegressor(random_state=0)`` otherwise. A
        :class:`~sklearn.frozen.FrozenEstimator` is used as fitted.
    method : {"auto", "qshap", "shapflex"}, default="auto"
        "qshap": exact Shapley values of R^2 or D^2 (tree models with
        constant leaves). "shapflex": the shapFlex shares from SHAP values
        (regressors only). "auto": "qshap" where it applies, "shapflex"
        otherwise for regressors; a classifier "qshap" cannot read raises
        an error naming what was tried.
    shap_values : callable, default=None
        shapFlex only: ``shap_values(estimator, X)`` returning the SHAP
        values as an (n_samples, n_features) or (n_samples, n_features + 1)
        array (last column the expected value), e.g. from the ``shap``
        package. Without it, shapFlex uses this package's exact SHAP values
        for tree models (including linear leaves) and ``coef_ * (x - mean(x))``
        for scikit-learn linear regressors (also at the end of a Pipeline
        whose steps transform each feature separately); any other model
        raises an error that asks for it.
    prefit : bool, default=False
        Use ``estimator`` as already fitted: ``fit`` only decomposes R^2 on
        the (X, y) it is given, e.g. held-out data.
    threshold : str or float, default=None
        Features with ``share >= threshold`` are selected: a number, "mean",
        "median" or e.g. "1.5*mean"; None means "mean".
    max_features : int or callable, default=None
        At most this many features (the largest shares), also subject to the
        threshold (use ``threshold=-np.inf`` to select on this only).
    cv : int, cross-validation generator or iterable, default=None
        Cross-fitted shares: a clone is fitted on each training fold and its
        score decomposed on its held-out fold (stratified folds for
        classifiers, as ``check_cv`` gives them); the fold values are
        averaged (``cv_shares_`` keeps them) and the estimator is then
        refitted on all the data for ``transform``.
    n_jobs : int, default=None
        Threads of the decomposition kernel (None: all cores).
    verbose : int, default=0
        Show progress with the estimated time left.
    algorithm : {"auto", "exact", "sampled"}, default="auto"
        Q-SHAP only: exact values, or the unbiased sampled estimate for
        models too large for exact values; "auto" chooses by the estimated
        cost (see :func:`r2_decomposition`).
    exact_budget : float, default=120.0
        Seconds the exact algorithm may be expected to take under
        ``algorithm="auto"``.
    n_permutations : int, default=2
        Sampled algorithm: antithetic pairs of feature orders per row and tree.
    max_samples : int or float, default=None
        Q-SHAP only: decompose a random subset of the rows (a number of
        rows, or a fraction); the shares estimate those of all rows.
    random_state : int, RandomState instance or None, default=None
        Seeds the row subset and the sampled algorithm.

    Attributes
    ----------
    estimator_ : estimator
        The fitted model.
    method_ : {"qshap", "shapflex"}
        The method used.
    algorithm_ : {"exact", "sampled"}
        The algorithm that ran ("sampled" if any fold was sampled; "exact"
        for shapFlex, which does not sample).
    feature_importances_ : ndarray of shape (`n_features_in_`,)
        The features' shares of the score on the data given to ``fit``
        (cross-fitted with ``cv``); scikit-learn's name, read by
        ``SelectFromModel`` and the threshold.
    std_errors_ : ndarray of shape (`n_features_in_`,)
        Standard errors of the shares (rows treated as i.i.d.); with ``cv``,
        the standard deviation of the fold values over sqrt(n_folds). NaN
        for shapFlex without ``cv`` (its shares are not sums over rows).
    score_ : float
        The model's score on the data, R^2 or the D^2 ``score_name_`` names
        (mean over folds with ``cv``); Gelman's R^2 for shapFlex.
    score_name_ : {"r2", "d2_brier", "d2_log_loss", "d2_tweedie"}
        Which score ``score_`` is and ``feature_importances_`` split.
    unattributed_ : float
        ``score_ - feature_importances_.sum()``.
    sigma_unique_ : float or None
        shapFlex: sum_j [var(e + phi_j) - var(e)] / (var(y) - var(e)), the
        residual variance added by removing each feature's SHAP term,
        summed over features, relative to the explained variance (mean over
        folds with ``cv``; NaN where the model predicts no better than the
        mean of y). A ratio, not a share: it exceeds 1 when correlated
        terms of opposite sign cancel (see :class:`R2Decomposition`). None
        for Q-SHAP.
    decomposition_ : R2Decomposition
        The full result (without ``cv``).
    cv_shares_ : ndarray of shape (n_folds, `n_features_in_`)
        Per-fold shares (only with ``cv``).
    threshold_ : float
        The threshold applied.
    n_features_in_ : int
    feature_names_in_ : ndarray of str
        Defined when X has feature names that are all strings.

    See Also
    --------
    r2_decomposition : Q-SHAP, the functional form.
    shapflex_decomposition : shapFlex, the functional form.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.ensemble import GradientBoostingRegressor
    >>> from sklearn.linear_model import LinearRegression
    >>> from sklearn_r2shap import ShapleyR2Importance
    >>> X, y = load_diabetes(return_X_y=True, as_frame=True)
    >>> selector = ShapleyR2Importance(
    ...     GradientBoostingRegressor(max_depth=2, random_state=0), max_features=3,
    ...     threshold=-np.inf).fit(X, y)
    >>> selector.method_, selector.get_feature_names_out().tolist()
    ('qshap', ['bmi', 'bp', 's5'])
    >>> bool(np.isclose(selector.feature_importances_.sum() + selector.unattributed_,
    ...                 selector.score_))
    True
    >>> linear = ShapleyR2Importance(LinearRegression(), max_features=3).fit(X, y)
    >>> linear.method_, linear.get_feature_names_out().tolist()
    ('shapflex', ['bmi', 's1', 's5'])
    """

    def __init__(self, estimator=None, *, method="auto", shap_values=None, prefit=False,
                 threshold=None, max_features=None, cv=None, n_jobs=None, verbose=0,
                 algorithm="auto", exact_budget=DEFAULT_EXACT_BUDGET, n_permutations=2,
                 max_samples=None, random_state=None):
        self.estimator = estimator
        self.method = method
        self.shap_values = shap_values
        self.prefit = prefit
        self.threshold = threshold
        self.max_features = max_features
        self.cv = cv
        self.n_jobs = n_jobs
        self.verbose = verbose
        self.algorithm = algorithm
        self.exact_budget = exact_budget
        self.n_permutations = n_permutations
        self.max_samples = max_samples
        self.random_state = random_state

    def _default_estimator(self, y=None):
        from sklearn.ensemble import HistGradientBoostingClassifier, HistGradientBoostingRegressor

        if is_classification_target(y):
            return HistGradientBoostingClassifier(random_state=0)
        return HistGradientBoostingRegressor(random_state=0)

    def fit(self, X, y, sample_weight=None, **fit_params):
        """Fit the model (unless prefit) and decompose its R^2 on (X, y).

        Parameters
        ----------
        X : array-like, DataFrame, dask Array or dask DataFrame of shape (n_samples, n_features)
            A dask collection needs a model fitted beforehand (``prefit=True``
            or a FrozenEstimator) and ``cv=None``: its R^2 is then
            decomposed on the workers (:func:`r2_decomposition`).
        y : array-like of shape (n_samples,)
            With a dask X, a dask Array or Series of the same row blocks, or
            an in-memory array.
        sample_weight : array-like of shape (n_samples,), optional
            Passed to the model's ``fit`` (to its final step, as
            ``<step>__sample_weight``, for a Pipeline) and used in the
            decomposition. A HistGradientBoosting model fitted here (not
            prefit) is explained with node covers weighted by it, as its own
            node counts ignore the weights.
        **fit_params : dict
            Passed to the model's ``fit``.

        Returns
        -------
        self : ShapleyR2Importance
        """
        from sklearn.utils import check_array

        self._check_params()
        if self.method not in ("auto", "qshap", "shapflex"):
            raise ValueError(f"method must be 'auto', 'qshap' or 'shapflex', got {self.method!r}.")
        if self.algorithm not in ("auto", "exact", "sampled"):
            raise ValueError("algorithm must be 'auto', 'exact' or 'sampled', got "
                             f"{self.algorithm!r}.")
        if self.shap_values is not None and not callable(self.shap_values):
            raise ValueError("shap_values must be None or a callable f(estimator, X), got "
                             f"{type(self.shap_values).__name__}.")
        if y is None:
            raise ValueError(
                f"{type(self).__name__} requires y to be passed, but the target y is None."
            )
        if _dask.is_dask_collection(X):
            self._check_dask_fit(fit_params)
            # a dask DataFrame's names and width: those of its empty pandas stand-in
            self._record_input(X._meta if hasattr(X, "_meta") and hasattr(X, "columns") else X)
        else:
            allow_nan = self.__sklearn_tags__().input_tags.allow_nan
            n_rows_features(X)
            checked = check_array(X, ensure_all_finite="allow-nan" if allow_nan else True,
                                  dtype=None, ensure_min_samples=2,
                                  accept_sparse=("csr", "csc"))
            self._record_input(X)
            if not hasattr(X, "iloc"):  # array-likes: indexable by fold, and by the SHAP sources
                X, y = checked, np.asarray(y)
            if sample_weight is not None:
                sample_weight = np.asarray(sample_weight)
        if self.cv is None:
            self.estimator_ = self._fit_estimator(X, y, sample_weight, **fit_params)
            result = self._decompose(self.estimator_, X, y, sample_weight)
            self.decomposition_ = result
            self.feature_importances_ = result.shares
            self.std_errors_ = result.std_errors
            self.score_ = float(result.score)
            self.score_name_ = result.score_name
            self.method_ = result.method
            self.algorithm_ = result.algorithm
            self.sigma_unique_ = result.sigma_unique
        else:
            self._fit_cross_validated(X, y, sample_weight, fit_params)
        self.score_ = ScoreValue(self.score_, self.score_name_, "score_", "score_name_")
        self.unattributed_ = self.score_ - float(np.sum(self.feature_importances_))
        self._set_threshold(X)
        return self

    def _check_dask_fit(self, fit_params):
        """On dask data, ``fit`` only decomposes the R^2 of a model fitted beforehand."""
        estimator = self.estimator if self.estimator is not None else self._default_estimator()
        if not (self.prefit or _unfrozen(estimator)[1]):
            raise ValueError(
                f"{type(self).__name__} does not fit models on dask collections: fit the "
                "model first (e.g. with xgboost.dask or lightgbm.dask, or in memory on a "
                "sample), then pass it with prefit=True (or as a FrozenEstimator) to "
                "decompose its R^2 on the dask data.")
        if self.cv is not None:
            raise ValueError("cv refits the estimator on each fold, which is not supported "
                             "on dask collections; use cv=None with a prefit model.")
        if fit_params:
            raise ValueError(f"fit parameters {sorted(fit_params)} are for fitting the model, "
                             "which a prefit model on dask data does not do.")

    def _fit_cross_validated(self, X, y, sample_weight, fit_params):
        from sklearn.model_selection import check_cv
        from sklearn.utils import _safe_indexing

        if self.prefit:
            raise ValueError("cv refits the estimator on each fold; it cannot be used "
                             "with prefit=True.")
        from sklearn.base import is_classifier

        estimator = self.estimator if self.estimator is not None else self._default_estimator(y)
        # stratified folds for classifiers, as cross_val_score uses
        cv = check_cv(self.cv, y, classifier=is_classifier(_unfrozen(estimator)[0]))
        importances, r2, sigma_unique, methods, algorithms = [], [], [], set(), set()
        scores = set()
        for train, test in cv.split(X, y):
            weight_train = None if sample_weight is None else _safe_indexing(sample_weight, train)
            weight_test = None if sample_weight is None else _safe_indexing(sample_weight, test)
            model = self._fit_estimator(_safe_indexing(X, train), _safe_indexing(y, train),
                                        weight_train, **fit_params)
            result = self._decompose(model, _safe_indexing(X, test), _safe_indexing(y, test),
                                     weight_test)
            importances.append(result.shares)
            r2.append(float(result.score))
            sigma_unique.append(result.sigma_unique)
            methods.add(result.method)
            scores.add(result.score_name)
            algorithms.add(result.algorithm)
        self.cv_shares_ = np.asarray(importances)
        self.feature_importances_ = self.cv_shares_.mean(axis=0)
        n_folds = len(importances)
        self.std_errors_ = (self.cv_shares_.std(axis=0, ddof=1) / np.sqrt(n_folds)
                            if n_folds > 1 else np.zeros_like(self.feature_importances_))
        self.score_ = float(np.mean(r2))
        (self.method_,) = methods
        (self.score_name_,) = scores
        self.algorithm_ = "sampled" if "sampled" in algorithms else "exact"
        self.sigma_unique_ = (float(np.mean(sigma_unique)) if self.method_ == "shapflex"
                              else None)
        self.estimator_ = self._fit_estimator(X, y, sample_weight, **fit_params)

    def _resolve_method(self, model):
        """(method, TreeEnsemble or None) for a fitted model."""
        if self.method == "shapflex":
            return "shapflex", None
        from sklearn.base import is_classifier

        try:
            ensemble = self._tree_ensemble(model)
            loss_of(ensemble)
        except UnsupportedModelError as error:
            if self.method == "qshap":
                raise
            if is_classifier(model):  # shapFlex decomposes regressors only
                raise UnsupportedModelError(
                    f"{type(model).__name__} is a classifier: method='auto' tried the exact "
                    f"D^2 decomposition, which needs a tree classifier it can read exactly "
                    f"({error}), and shapFlex, which decomposes regressors only. Use a "
                    "scikit-learn tree, forest or (Hist)GradientBoosting classifier, or an "
                    "XGBoost, LightGBM or CatBoost classifier with the log-loss; or "
                    "sklearn.inspection.permutation_importance with "
                    "scoring='neg_log_loss' (sampled, not a decomposition)."
                ) from error
            return "shapflex", None
        if self.shap_values is not None:
            raise ValueError(
                f"shap_values is used by method='shapflex' only, and {ensemble.model_type} is "
                f"decomposed exactly by Q-SHAP with method={self.method!r}; pass "
                "method='shapflex' to use your SHAP values."
            )
        return "qshap", ensemble

    def _decompose(self, model, X, y, sample_weight, return_local=False):
        method, ensemble = self._resolve_method(model)
        if method == "qshap":
            result = r2_decomposition(
                ensemble, X, y, sample_weight=sample_weight, return_local=return_local,
                n_jobs=self.n_jobs, verbose=self.verbose, algorithm=self.algorithm,
                exact_budget=self.exact_budget, n_permutations=self.n_permutations,
                max_samples=None if return_local else self.max_samples,
                random_state=self.random_state)
        elif return_local:
            raise ValueError("local_shares needs method='qshap': shapFlex shares are not sums of "
                             "per-row terms.")
        elif _dask.is_dask_collection(X):
            raise ValueError("shapFlex (method='shapflex', or 'auto' for a model Q-SHAP "
                             "cannot decompose) does not accept dask collections; use a tree "
                             "model with Q-SHAP, or X.compute() of a sample.")
        else:
            from .shapflex import shapflex_decomposition

            result = shapflex_decomposition(model, X, y, shap_values=self.shap_values,
                                            sample_weight=sample_weight, n_jobs=self.n_jobs)
        if hasattr(self, "feature_names_in_"):
            result.feature_names = np.asarray(self.feature_names_in_, dtype=object)
        return result

    def decompose(self, X, y, sample_weight=None):
        """Decompose the fitted model's R^2 on other data (e.g. held out).

        ``X`` may be a dask collection (as in :func:`r2_decomposition`).

        Returns
        -------
        R2Decomposition
        """
        check_is_fitted(self, "estimator_")
        return self._decompose(self.estimator_, X, y, sample_weight)

    def local_shares(self, X, y, sample_weight=None):
        """Per-row terms L_ij of shape (n_samples, n_features) (Q-SHAP only).

        Their column sums are the shares of the fitted model on (X, y) (every
        row, whatever ``max_samples``; Monte Carlo estimates when the
        sampled algorithm runs).
        """
        check_is_fitted(self, "estimator_")
        return self._decompose(self.estimator_, X, y, sample_weight, return_local=True).local

    def local_r2(self, X, y, sample_weight=None):
        """Deprecated alias of :meth:`local_shares` (removed in 0.3)."""
        warnings.warn("'local_r2' was renamed 'local_shares' in 0.2 and will be removed in "
                      "0.3; use 'local_shares'.", FutureWarning, stacklevel=2)
        return self.local_shares(X, y, sample_weight)

    importances_std_ = deprecated_alias("importances_std_", "std_errors_")
    r2_ = deprecated_alias("r2_", "score_")
    r2_unattributed_ = deprecated_alias("r2_unattributed_", "unattributed_")
    cv_importances_ = deprecated_alias("cv_importances_", "cv_shares_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = self._estimator_accepts_sparse()
        tags.target_tags.required = True
        return tags
