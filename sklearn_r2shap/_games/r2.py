"""The R^2 / D^2 games: per-row terms of a block of rows, and their statistics.

- :class:`R2Terms`: the per-row terms, exact or sampled, behind one call;
- the game builders (:func:`squared_error_game`, :func:`second_order_game`,
  the symmetric mode) and the ensemble they decompose (:func:`_game_ensemble`);
- :class:`_BlockWork`: a block of rows in, mergeable statistics out, and the
  step from the merged statistics to the :class:`R2Decomposition`;
  :class:`_PairBlockWork` the same with the per-row interaction matrices,
  to the :class:`R2Interactions` of :func:`r2_interactions`;
- :func:`target_statistics`: the statistics of y and the weights alone (the
  first pass over the rows).

Layer: games. Imports the ground floor, ``_model``, ``_kernels`` and
``_scores``; never ``_execution``, a public module or an estimator.

The per-row terms, exact or sampled, behind one call.

Both compute, per row i and feature j, sum_k a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i)
for game coefficients (a, b) of shape (n_rows, n_trees) computed by the
caller (squared error: a = w_i, b = -2 w_i c_ik). ``algorithm="exact"``:
the Q-SHAP kernel (:mod:`._kernels._qshap`). ``algorithm="sampled"``: an
unbiased Monte Carlo estimate (:mod:`._kernels._qshap_sampled`), returned
with the Monte Carlo variance of each row's estimate.
"""
import numbers
from dataclasses import dataclass, replace

import numpy as np

from .._errors import UnsupportedModelError
from .._kernels import _predict, _qshap, _qshap_interactions, _qshap_sampled, _semivalues
from .._numerics import Extremes, Moments, WeightedMean, _unit_rule, quadrature_sizes
from .._scores import R2Decomposition, R2Interactions, SquaredError, _regression_target
from .._validation import as_column, check_row_weights


class R2Terms:
    """``terms(X, a, b, row_ids) -> (terms, mc_variance or None)``.

    ``row_ids`` are the rows' indices in the whole data: the sampled
    algorithm draws each row's feature orders from (seed, row id, tree), so
    its estimate does not depend on chunks, threads or subsampling.
    """

    def __init__(self, ensemble, algorithm, n_threads, n_permutations=2, seed=0, slots=None):
        self.ensemble = ensemble
        self.algorithm = algorithm
        self.n_threads = n_threads
        self.n_permutations = n_permutations
        self.seed = int(seed) % (1 << 64)
        m_exact, m_sampled = quadrature_sizes(ensemble)
        if algorithm == "exact":
            # grad of the squared game has degree < 2 d: d Gauss-Legendre nodes are exact
            self.points, self.weights = _unit_rule(m_exact)
        elif algorithm == "sampled":
            # only Sh[m] (degree < d) is computed by quadrature
            self.points, self.weights = _unit_rule(m_sampled)
            self.slots = _qshap_sampled.tree_slots(ensemble) if slots is None else slots
        else:
            raise ValueError(f"unknown algorithm {algorithm!r}")

    def pairs(self, X, square_coef, linear_coef):
        """Per row, the terms (as ``__call__``'s) and the (n_features,
        n_features) matrix of the games' SHAP interaction values Phi_jk (0 on
        the diagonal), from one kernel pass (exact algorithm only): ``(terms,
        matrices)``. What the kernel reads besides the rows is computed at the
        first call."""
        if self.algorithm != "exact":
            raise ValueError("interaction values are computed by the exact algorithm only")
        if not hasattr(self, "_pair_plan"):
            structure = _semivalues.pattern_structure(self.ensemble)
            if structure["leaf_dim"].max(initial=0) > 64:
                raise UnsupportedModelError(
                    f"{self.ensemble.model_type} has a leaf with more than 64 distinct features "
                    "on its path: its interaction shares are not computed; use "
                    "r2_decomposition for the shares alone.")
            # the R^2 kernel's rule per tree: exact for the first derivatives
            # (the terms), so for the second (one degree less) too
            tree_m, rule_points, rule_weights = _qshap._tree_rules(
                self.ensemble, self.points, self.weights,
                _qshap._PairTables(self.ensemble).max_union)
            self._pair_plan = (_qshap_interactions.pair_plan(self.ensemble, structure, tree_m,
                                                             rule_points),
                               tree_m, rule_points, rule_weights)
        plan, tree_m, rule_points, rule_weights = self._pair_plan
        return _qshap_interactions.r2_interaction_terms(
            self.ensemble, plan, X, square_coef, linear_coef, tree_m, rule_points,
            rule_weights, self.n_threads)

    def __call__(self, X, square_coef, linear_coef, row_ids):
        if self.algorithm == "exact":
            terms = _qshap.r2_terms(self.ensemble, X, square_coef, linear_coef, self.points,
                                    self.weights, self.n_threads)
            return terms, None
        linear, sampled = _qshap_sampled.sampled_r2_terms(
            self.ensemble, X, square_coef, linear_coef, self.points, self.weights, self.slots,
            self.n_permutations, np.uint64(self.seed), np.ascontiguousarray(row_ids, np.int64),
            self.n_threads)
        K = sampled.shape[1]
        terms = linear + sampled.mean(axis=1)
        # replicates are i.i.d. given the row: the variance of their mean
        variance = sampled.var(axis=1, ddof=1) / K if K > 1 else np.full(linear.shape, np.nan)
        return terms, variance


#: the most rows of a block of the decomposition (its memory per row and its
#: seconds per row size it below this: ``_execution.local.block_rows_for``)
MAX_BLOCK_ROWS = 4096


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


@dataclass
class _BlockWork:
    """The per-block work of :func:`r2_decomposition` and the step from its merged
    statistics to the result.

    A block of rows gives *unscaled* statistics (the per-row terms before the
    division by -L0, which needs every row), which add up over blocks (sums)
    or merge exactly (:class:`~.._numerics.Moments`); :meth:`finalize` divides
    by L0 once. The executors run :meth:`block` over fixed blocks of rows (in
    memory, and inside each dask partition) and merge in block order; the
    public function chooses the algorithm and the block size
    (``decomposition._choose``).
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
    tree_mean: object = None  # each tree's cover-weighted mean (computed once)

    #: what a call computes (its progress bar's title)
    description = "R^2 decomposition"
    #: the kernel's time per row over the R^2 kernel's (the cost estimate)
    cost_ratio = 1.0
    #: whether the exact kernel tabulates each tree once per block of rows (so
    #: that a block should hold enough rows to share the tables)
    tables_per_block = True

    @classmethod
    def of(cls, ensemble, loss, scale):
        work, symmetric = _game_ensemble(ensemble, loss, scale)
        return cls(ensemble, loss, work, symmetric)

    def coefficients(self, X_chunk, target, weight):
        """The games' coefficients (a, b), shape (n_rows, n_trees), of a block of
        checked rows with their targets and weights."""
        work = self.work
        base = np.asarray(work.base_value, dtype=np.float64)
        if self.tree_mean is None:
            self.tree_mean = np.ascontiguousarray(
                _predict.node_means(work)[work.tree_start[:-1], 0])
        leaf = _predict.leaf_values(work, X_chunk, self.n_threads)
        with np.errstate(all="ignore"):
            if self.symmetric:
                return _symmetric_game(leaf, target, weight, base, self.tree_mean,
                                       work.tree_output)
            return second_order_game(leaf, self.loss, target, weight, base, work.tree_output)

    def block(self, X_chunk, target, weight, ids, first=0, subset=False, with_loss=True):
        """The per-row terms of a block of checked rows and its statistics.

        ``ids`` index the block's rows in ``target`` and ``weight``; ``first``
        is the first row of ``target`` in the whole data (the sampled
        algorithm seeds each row by its index). Returns ``(terms, statistics)``
        with statistics that add up / merge over blocks: ``sums`` (per-feature
        sums of the raw terms), ``terms`` (their Moments over the rows of
        positive weight; all rows of a random subset, ``subset=True``),
        ``mc_variance`` (sampled algorithm: sums of the rows' Monte Carlo
        variances) and ``loss`` (sum of w l(y, f(x)) over the block's rows,
        0 unless ``with_loss``).
        """
        n_features = self.ensemble.n_features
        square_coef, linear_coef = self.coefficients(X_chunk, target[ids], weight[ids])
        terms, variance, extra = self._terms(X_chunk, square_coef, linear_coef, first + ids)
        loss_sum = self._loss(X_chunk, target[ids], weight[ids]) if with_loss else 0.0
        # rows of zero weight are absent from the data, also for the standard
        # error; a random subset estimates a sum over all rows, zeros included
        counted = np.ones(len(ids), dtype=bool) if subset else weight[ids] > 0
        local, more = self._more(terms, extra, counted)
        return local, {
            "sums": terms.sum(axis=0),
            "terms": Moments.of(terms[counted]),
            "mc_variance": (np.zeros(n_features) if variance is None
                            else variance.sum(axis=0)),
            "loss": loss_sum, **more}

    def _terms(self, X_chunk, square_coef, linear_coef, row_ids):
        """The kernel's per-row terms, their Monte Carlo variances (None when
        exact) and what a subclass's ``_more`` reads beside them (here None)."""
        return (*self.terms_of(X_chunk, square_coef, linear_coef, row_ids), None)

    def _more(self, terms, extra, counted):
        """A subclass's per-row results and statistics beyond the terms (the
        rows ``counted`` in the Moments): here the terms themselves, none."""
        return terms, {}

    def local_shape(self, n_rows):
        """The shape of the per-row terms of ``n_rows`` rows (``return_local``)."""
        return (n_rows, self.ensemble.n_features)

    def limit_block_rows(self):
        """Cap ``chunk_rows`` by the memory of a block's results (none here)."""

    def empty_statistics(self):
        """The statistics of no row (the identity of the merge)."""
        n_features = self.ensemble.n_features
        return {"sums": np.zeros(n_features), "terms": Moments.of(np.zeros((0, n_features))),
                "mc_variance": np.zeros(n_features), "loss": 0.0}

    def _loss(self, X_chunk, target, weight):
        prediction = _predict.predict_raw(self.work, X_chunk, self.n_threads)
        with np.errstate(all="ignore"):
            return float(np.sum(weight * self.loss.loss(target, prediction)))

    def finalize(self, statistics, total, *, n_rows, n_used, names, local=None):
        """The R2Decomposition from the merged statistics of every block and L0."""
        n_features = self.ensemble.n_features
        terms = statistics["terms"]
        # R2_j = -(1/L0) sum_i terms_ij; a random subset: n / n_used times its sum is
        # unbiased for the sum over all rows
        scale = -n_rows / n_used / total
        sums = statistics["sums"] * scale
        std_errors = _std_errors(terms, abs(scale))
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


@dataclass
class _PairBlockWork(_BlockWork):
    """The per-block work of :func:`r2_interactions`: the statistics of
    :class:`_BlockWork` and, per row, the (n_features, n_features) matrix of
    its terms (unscaled): halves of the pairs' interaction terms off the
    diagonal, main effects on it, so that each row of the matrix sums to the
    feature's term of :class:`_BlockWork` (documentation page "Shapley
    decomposition of R^2", "Interaction shares")."""

    description = "R^2 interaction shares"
    # measured on XGBoost depth 6 (benchmarks/bench_r2_interactions.py)
    cost_ratio = 2.9
    tables_per_block = False
    #: the most bytes of a block's (rows, n_features, n_features) matrices
    block_bytes = 32 << 20

    def local_shape(self, n_rows):
        p = self.ensemble.n_features
        return (n_rows, p, p)

    def limit_block_rows(self):
        p = self.ensemble.n_features
        self.chunk_rows = int(max(1, min(self.chunk_rows, self.block_bytes // (8 * p * p))))

    def _terms(self, X_chunk, square_coef, linear_coef, row_ids):
        """The terms and the per-row matrices of one pass of the pair kernel."""
        terms, matrices = self.terms_of.pairs(X_chunk, square_coef, linear_coef)
        return terms, None, matrices

    def _more(self, terms, matrices, counted):
        """The block's per-row matrices, and ``pair_sums`` (their sum) and
        ``pair_terms`` (their Moments over the rows ``counted``)."""
        diagonal = np.arange(matrices.shape[1])
        matrices[:, diagonal, diagonal] = terms - matrices.sum(axis=2)
        return matrices, {"pair_sums": matrices.sum(axis=0),
                          "pair_terms": Moments.of(matrices[counted])}

    def empty_statistics(self):
        p = self.ensemble.n_features
        return {**super().empty_statistics(), "pair_sums": np.zeros((p, p)),
                "pair_terms": Moments.of(np.zeros((0, p, p)))}

    def finalize(self, statistics, total, *, n_rows, n_used, names, local=None):
        """The R2Interactions from the merged statistics of every block and L0."""
        decomposition = super().finalize(statistics, total, n_rows=n_rows, n_used=n_used,
                                         names=names)
        scale = n_rows / n_used / total  # as _BlockWork.finalize
        std_errors = _std_errors(statistics["pair_terms"], scale)
        if local is not None:
            local /= -total
        return R2Interactions(
            shares=statistics["pair_sums"] * -scale, std_errors=std_errors,
            decomposition=decomposition, local=local)


def _std_errors(moments, scale):
    """``scale * sqrt(n var_i)`` (ddof=1) of per-row terms from their Moments
    (documentation page "Shapley decomposition of R^2"), NaN for fewer than
    two rows."""
    count = moments.weight
    if count > 1:
        return np.sqrt(count * moments.m2 / (count - 1)) * scale
    return np.full(np.shape(moments.m2), np.nan)


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


# Statistics of the target alone (the first pass over a dask collection)


def _is_regression(loss):
    return isinstance(loss, SquaredError) and loss.classes is None


def _block_target(loss, ensemble, y, n_rows, scale):
    """The target columns of a block, as the in-memory call computes them for all rows."""
    if _is_regression(loss):
        return (_regression_target(y, n_rows) / scale)[:, None]
    return loss.target(y, n_rows, ensemble)


def _block_weight(weight, n_rows, what):
    """The weights of one partition whose rows ``what`` has (all one without
    weights); a partition's weights may all be zero (the sum over all rows is
    checked at the end)."""
    if weight is None:
        return np.ones(n_rows)
    return check_row_weights(weight, n_rows, partition_of=what)


def target_statistics(payload, arguments):
    """First pass, over y (and the weights) only: what L0 and the rescaling need
    (a function of :func:`.._execution.run.reduce_arguments`)."""
    loss, ensemble = payload
    y = as_column(arguments["y"])
    n_rows = len(y)
    target = _block_target(loss, ensemble, y, n_rows, 1.0)
    weight = _block_weight(arguments.get("sample_weight"), n_rows, "y")
    return {"rows": n_rows,
            "largest_target": Extremes.of(np.abs(target)),
            "largest_weight": Extremes.of(weight),
            # a target constant over the rows that count makes the score undefined
            "counted_target": Extremes.of(target[weight > 0]),
            "target": WeightedMean.of(target, weight)}
