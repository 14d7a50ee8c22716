"""The scores a decomposition splits, and the result types of the two decompositions.

A score is ``1 - L(model) / L0``: R^2 for the squared error, D^2 for the
Brier score, the log-loss and the Tweedie deviances (scikit-learn's
``r2_score``, ``d2_brier_score``, ``d2_log_loss_score``,
``d2_tweedie_score``). ``L0 = sum_i w_i [l(y_i, best constant) - l(y_i,
saturated)]``. Each loss below is written per row in the model's raw
(margin) space, with its first and second derivatives in one margin, which
define the per-tree second-order games of :func:`~sklearn_r2shap.r2_decomposition`
(documentation page "D^2 decomposition").

Weights are rescaled by a power of two (exact) so that the largest is in
[0.5, 1); squared-error targets and leaf values are rescaled the same way, so
that neither tiny nor huge scales underflow or overflow.

Layer: games (the losses the games are built from, and the result type):
imports the ground floor only (``plotting`` for the results' ``plot``).
"""
import math
from dataclasses import dataclass
from typing import ClassVar, Optional

import numpy as np
from scipy.special import expit, logsumexp, xlogy

from ._errors import UndefinedScoreError, UnsupportedModelError, import_optional
from ._report import MAX_ROWS, score_short, shares_html
from ._report import shares_table
from ._validation import check_row_weights, check_y
from .plotting import plot_bars, plot_heatmap

__all__ = ["R2Decomposition", "R2Interactions", "ShapFlexDecomposition", "check_target", "check_weights",
           "loss_of"]

SCORE_LABELS = {
    "r2": "R^2",
    "d2_brier": "D^2 (Brier)",
    "d2_log_loss": "D^2 (log-loss)",
    "d2_tweedie": "D^2 (Tweedie deviance)",
}

_ALTERNATIVES = ("use shap_values (exact SHAP values of the model's raw output) or "
                 "TreeGradRanker (feature ranking) instead")


class _Shares:
    """What both result types share: a frame, and the table of the shares with
    ``std_errors`` (None for none) that ``repr`` and a notebook show."""

    def __post_init__(self):
        self.score = float(self.score)

    def to_frame(self, sort=True):
        """A pandas DataFrame with columns ``share``, ``std_error``, ``fraction``.

        ``fraction`` is each share over the model's score. Rows are
        features, sorted by decreasing share unless ``sort=False``.
        """
        pd = import_optional("pandas", "R2Decomposition.to_frame()")
        frame = pd.DataFrame(
            {
                "share": self.shares,
                "std_error": self.std_errors,
                "fraction": self.shares / self.score if self.score != 0 else np.nan,
            },
            index=pd.Index(self.feature_names, name="feature"),
        )
        return frame.sort_values("share", ascending=False, kind="mergesort") if sort else frame

    def _table(self, max_rows):
        return shares_table(self.feature_names, self.shares, self._shown_errors(),
                            float(self.score), float(self.unattributed), self.score_name,
                            max_rows=max_rows, score_label=self.score_label)

    def __repr__(self):
        return "\n".join([f"{type(self).__name__}: {self._caption()}"] + self._table(MAX_ROWS))

    def _repr_html_(self):
        return shares_html(
            f"{type(self).__name__}: {self._caption()}", self.feature_names, self.shares,
            self._shown_errors(), float(self.score), float(self.unattributed), self.score_name,
            max_rows=MAX_ROWS, notes=[self._html_note])


@dataclass(repr=False)
class R2Decomposition(_Shares):
    """Each feature's Shapley share of a model's R^2 or D^2 on data (the result of :func:`r2_decomposition`).

    The names follow the glossary of the documentation: a feature's
    **share** is its Shapley share of the model's **score** (R^2, or D^2
    for classifiers and models with a link); the shares and the
    **unattributed** part add up to the score. (shapFlex's shares, which
    are not Shapley values, are a :class:`~sklearn_r2shap.shapflex.ShapFlexDecomposition`.)

    Attributes
    ----------
    shares : ndarray of shape (n_features,)
        Each feature's share; ``shares.sum() + unattributed == score``.
    std_errors : ndarray of shape (n_features,)
        Standard errors of the shares ``sqrt(n * var_i(L_ij))`` (rows treated
        as i.i.d.; rows of zero weight are left out, as if dropped).
    score : float
        The model's score on the data: R^2 = ``1 - SS(y - f(X)) /
        SS(y - mean(y))``, or the D^2 that ``score_name`` names.
    unattributed : float
        ``score - shares.sum()``, the part no feature receives (~0 in
        sample; constant terms otherwise).
    feature_names : ndarray of str
    mode : {"sequential", "symmetric"}
        How the ensemble's trees are decomposed: "sequential" (boosted
        ensembles and single trees, tree by tree against the residuals of the
        trees before) or "symmetric" (averaging ensembles such as forests).
    n_rows : int
    local : ndarray of shape (n_rows, n_features) or None
        Per-row terms L_ij (their column sums are ``shares``).
    model_name : str or None
        The class name of the decomposed model (plot titles).
    algorithm : {"exact", "sampled"}
        "exact" values, or the "sampled" (unbiased Monte Carlo) estimate,
        whose ``std_errors`` include the Monte Carlo noise.
    mc_std_errors : ndarray of shape (n_features,) or None
        Sampled algorithm: the Monte Carlo part of the error alone,
        ``sqrt(sum_i var(L^_ij | x_i))`` estimated from the replicates (NaN
        with ``n_permutations=1``); None for exact values.
    n_rows_sampled : int or None
        With ``max_samples``: the rows decomposed (``shares`` estimate the
        shares of all ``n_rows``); None when every row was used.
    score_name : {"r2", "d2_brier", "d2_log_loss", "d2_tweedie"}
        Which score ``score`` is: R^2, or the D^2 of the Brier score
        (probability-averaging classifiers), of the log-loss (boosted
        classifiers) or of the Tweedie deviance (Poisson, Gamma, Tweedie
        models).
    power : float or None
        The Tweedie power of ``"d2_tweedie"`` (1 Poisson, 2 Gamma).
    output : int or None
        For a multi-output regressor (:func:`r2_decomposition` returns one
        result per output): the output (column of Y) this result decomposes;
        None for a single-output model.
    method : "qshap"
        The method (a class constant): exact Shapley values of the score
        (Q-SHAP, the method of Jiang et al. that this package extends to D^2).

    Notes
    -----
    ``print(result)`` shows every feature and what the columns mean;
    ``repr(result)`` (and a notebook) the largest 20 shares.
    """

    shares: np.ndarray
    std_errors: np.ndarray
    score: float
    unattributed: float
    feature_names: np.ndarray
    mode: str
    n_rows: int
    local: Optional[np.ndarray] = None
    model_name: Optional[str] = None
    algorithm: str = "exact"
    mc_std_errors: Optional[np.ndarray] = None
    n_rows_sampled: Optional[int] = None
    score_name: str = "r2"
    power: Optional[float] = None
    output: Optional[int] = None

    method: ClassVar[str] = "qshap"
    _html_note = ("share: the feature's Shapley share of the score; shares + unattributed "
                  "= score. std.err: over the rows.")

    @property
    def score_label(self):
        """The score's name for people, e.g. ``"R^2"`` or ``"D^2 (log-loss)"``."""
        if self.score_name == "d2_tweedie" and self.power is not None:
            return f"D^2 (Tweedie deviance, power {self.power:g})"
        return SCORE_LABELS.get(self.score_name, self.score_name)

    def _shown_errors(self):
        return self.std_errors

    def plot(self, ax=None, max_features=20):
        """Horizontal bar chart of the shares, largest on top (matplotlib).

        The title names the model and its score; bars carry +/-1 standard
        error (over rows) as error bars.

        Returns
        -------
        matplotlib Axes
        """
        model = f"{self.model_name}\n" if self.model_name else ""
        if self.output is not None:
            model = f"{self.model_name or 'model'}, output {self.output}\n"
        label = self.score_label.replace("^2", "$^2$")
        title = (f"{model}{label} = {self.score:.3f} on {self.n_rows} rows "
                 f"(unattributed {self.unattributed:+.3f})\n"
                 "bars: \u00b11 standard error over rows")
        return plot_bars(self.shares, self.std_errors, self.feature_names, ax=ax,
                         max_features=max_features, xlabel=f"share of {label}", title=title)

    def _caption(self):
        rows = (f"{self.n_rows} rows" if self.n_rows_sampled is None
                else f"{self.n_rows_sampled} of {self.n_rows} rows")
        model = f" of {self.model_name}" if self.model_name else ""
        if self.output is not None:
            model += f", output {self.output},"
        kind = "exact" if self.algorithm == "exact" else "sampled (Monte Carlo)"
        return f"{kind} Shapley shares of the {self.score_label}{model} on {rows}"

    def __str__(self):
        lines = self._table(None)
        short = score_short(self.score_name)
        if self.algorithm == "sampled" or self.n_rows_sampled is not None:
            rows = ("" if self.n_rows_sampled is None else
                    f", {self.n_rows_sampled} of {self.n_rows} rows")
            lines.append(f"({self.algorithm} algorithm{rows}; std.err include the sampling)")
        kind = "exact" if self.algorithm == "exact" else "estimated (sampled)"
        lines += [
            "",
            f"share: the feature's {kind} Shapley share of the model's {short} on these "
            f"{self.n_rows} rows;",
            f"  % of {short} = share / score. A negative share means the feature makes the "
            "fit",
            "  worse on these rows.",
            f"std.err: standard error of the share over the {self.n_rows} rows (rows treated "
            "as independent).",
            ("unattributed: score - sum; ~0 on the training rows, larger on held-out "
             "rows." if self.mode == "symmetric" or self.score_name in ("r2", "d2_brier")
             else "unattributed: score - sum: initial margin, tree means and the third- "
             "and higher-order remainder."),
        ]
        return "\n".join(lines)


@dataclass(repr=False)
class R2Interactions:
    """Main effects and pairs' interaction shares of a model's R^2 or D^2 (the result of :func:`r2_interactions`).

    The matrix ``shares`` splits each feature's share of the score
    (``decomposition.shares``, as :func:`r2_decomposition` reports it) into
    its main effect (the diagonal) and half of its interaction share with
    every other feature (off the diagonal, symmetric), the layout of SHAP
    interaction values: ``shares.sum(axis=1) == decomposition.shares`` and
    ``shares.sum() + unattributed == score``. The interaction share of the
    pair (j, k) is ``shares[j, k] + shares[k, j]`` (:meth:`pair_shares`).

    Attributes
    ----------
    shares : ndarray of shape (n_features, n_features)
        ``-(1/L0) sum_i`` of the rows' SHAP interaction values of the score's
        game (documentation page "Shapley decomposition of R^2", section
        "Interaction shares").
    std_errors : ndarray of shape (n_features, n_features)
        Standard errors of the cells, ``sqrt(n * var_i)`` of their per-row
        terms (rows treated as i.i.d.; rows of zero weight left out). A pair's
        share has twice its cell's standard error.
    decomposition : R2Decomposition
        The shares of the features (the matrix's row sums), the score and
        everything :func:`r2_decomposition` reports.
    local : ndarray of shape (n_rows, n_features, n_features) or None
        Per-row terms (``return_local=True``); they sum over rows to ``shares``.
    """

    shares: np.ndarray
    std_errors: np.ndarray
    decomposition: R2Decomposition
    local: Optional[np.ndarray] = None

    @property
    def score(self):
        """The model's R^2 or D^2 on the data (``decomposition.score``)."""
        return self.decomposition.score

    @property
    def unattributed(self):
        """``score - shares.sum()``, as ``decomposition.unattributed``."""
        return self.decomposition.unattributed

    @property
    def feature_names(self):
        return self.decomposition.feature_names

    @property
    def score_name(self):
        return self.decomposition.score_name

    @property
    def n_rows(self):
        return self.decomposition.n_rows

    @property
    def main_effects(self):
        """Each feature's main effect: the diagonal of ``shares``."""
        return np.diag(self.shares).copy()

    def pair_shares(self):
        """The (n_features, n_features) matrix of the pairs' interaction shares,
        ``shares[j, k] + shares[k, j]``, 0 on the diagonal."""
        pairs = self.shares + self.shares.T
        np.fill_diagonal(pairs, 0.0)
        return pairs

    def top_pairs(self, n=10):
        """The ``n`` pairs of largest absolute interaction share, as a pandas
        DataFrame with columns ``feature_1``, ``feature_2``, ``share``,
        ``std_error`` and ``fraction`` (of the score)."""
        pd = import_optional("pandas", "R2Interactions.top_pairs()")
        j, k = np.triu_indices(len(self.feature_names), 1)
        share = self.pair_shares()[j, k]
        order = np.argsort(-np.abs(share), kind="mergesort")[:n]
        names = np.asarray(self.feature_names)
        return pd.DataFrame({
            "feature_1": names[j[order]], "feature_2": names[k[order]], "share": share[order],
            "std_error": 2.0 * self.std_errors[j[order], k[order]],
            "fraction": share[order] / self.score if self.score != 0 else np.nan})

    def plot(self, ax=None, max_features=20):
        """Heatmap (matplotlib): main effects on the diagonal, the pairs'
        interaction shares off it; the features of the largest row sums of
        absolute values first."""
        matrix = self.pair_shares() + np.diag(self.main_effects)
        label = self.decomposition.score_label.replace("^2", "$^2$")
        return plot_heatmap(matrix, self.feature_names, ax=ax, max_features=max_features,
                            label=f"share of {label}",
                            title=(f"{label} = {self.score:.3f} on {self.n_rows} rows: main "
                                   "effects (diagonal) and pairs"))

    def _terms(self):
        """Names, shares and standard errors of the main effects, then the pairs."""
        names = [str(name) for name in self.feature_names]
        j, k = np.triu_indices(len(names), 1)
        return ([f"{name} (main)" for name in names]
                + [f"{names[a]} x {names[b]}" for a, b in zip(j, k)],
                np.concatenate([self.main_effects, self.pair_shares()[j, k]]),
                np.concatenate([np.diag(self.std_errors), 2.0 * self.std_errors[j, k]]))

    def __str__(self):
        names, shares, errors = self._terms()
        short = score_short(self.score_name)
        lines = shares_table(names, shares, errors, float(self.score), float(self.unattributed),
                             self.score_name, max_rows=MAX_ROWS,
                             score_label=self.decomposition.score_label)
        return "\n".join(
            [f"R2Interactions: exact Shapley main effects and interaction shares of the "
             f"{self.decomposition.score_label} on {self.n_rows} rows", ""] + lines + [
                "",
                f"(main): the feature's main effect; a x b: the pair's interaction share "
                f"(both halves). Main effects + pairs + unattributed = {short}."])

    def __repr__(self):
        pairs = self.pair_shares()
        text = (f"R2Interactions: {len(self.feature_names)} features, "
                f"{self.decomposition.score_label} = {self.score:.4g}")
        if len(pairs) > 1:
            j, k = np.unravel_index(np.argmax(np.abs(np.triu(pairs, 1))), pairs.shape)
            text += (f"; largest pair share {pairs[j, k]:.4g} ({self.feature_names[j]}, "
                     f"{self.feature_names[k]})")
        return text


@dataclass(repr=False)
class ShapFlexDecomposition(_Shares):
    """shapFlex shares of Gelman's R^2 (the result of :func:`shapflex_decomposition`).

    Not a Shapley decomposition of R^2 (documentation page "shapFlex"): the
    shares split Gelman's R^2 by how much each feature's SHAP term, removed
    from the predictions, raises the residual variance.

    Attributes
    ----------
    shares : ndarray of shape (n_features,)
        R2_j = R2 (1 - ratio_j) / sum_k (1 - ratio_k).
    score : float
        Gelman's R^2, ``var(f(X)) / (var(f(X)) + var(y - f(X)))``.
    unattributed : float
        ``score - shares.sum()``: all of ``score`` when no feature's removal
        raises the residual variance, else ~0.
    feature_names : ndarray of str
    source : {"tree", "piecewise-linear tree", "linear", "callable"}
        Where the SHAP values came from (:func:`model_shap_values`).
    n_rows : int
    sigma_unique : float
        sum_j [var(e + phi_j) - var(e)] / (var(y) - var(e)), the residual
        variance each feature adds when its SHAP term is removed, summed over
        features, relative to the explained variance. A ratio, not a share:
        1 for an OLS fit on uncorrelated features, below 1 when correlated
        features can stand in for each other, above 1 when correlated terms
        of opposite sign cancel (removing either one undoes the
        cancellation). NaN when the model predicts y no better than its mean.
    residual_variance_ratios : ndarray of shape (n_features,)
        ``min(var(e) / var(e + phi_j), 1)``.
    model_name : str or None
        The class name of the decomposed model (plot titles).
    std_errors : ndarray of shape (n_features,)
        NaN (a property): the shares are not sums of per-row terms.
    method, algorithm, score_name : "shapflex", "exact", "r2"
        Class constants, as :class:`R2Decomposition` names them (the score
        is an R^2, Gelman's).
    """

    shares: np.ndarray
    score: float
    unattributed: float
    feature_names: np.ndarray
    source: str
    n_rows: int
    sigma_unique: float
    residual_variance_ratios: np.ndarray
    model_name: Optional[str] = None

    method: ClassVar[str] = "shapflex"
    algorithm: ClassVar[str] = "exact"
    score_name: ClassVar[str] = "r2"
    score_label: ClassVar[str] = "R^2"
    _html_note = ("share: shapFlex share of Gelman's R^2 (not a Shapley value); no "
                  "standard error.")

    @property
    def std_errors(self):
        return np.full(len(self.shares), np.nan)

    def _shown_errors(self):
        return None

    def plot(self, ax=None, max_features=20):
        """Horizontal bar chart of the shares, largest on top (matplotlib), without
        error bars (shapFlex has no standard error).

        Returns
        -------
        matplotlib Axes
        """
        model = f"{self.model_name}\n" if self.model_name else ""
        title = (f"{model}Gelman R$^2$ = {self.score:.3f}, shapFlex shares "
                 f"($\\sigma_{{unique}}$ = {self.sigma_unique:.2f})\n"
                 "no error bars: shapFlex has no standard error")
        return plot_bars(self.shares, None, self.feature_names, ax=ax,
                         max_features=max_features,
                         xlabel="share of Gelman R$^2$ (shapFlex)", title=title)

    def _caption(self):
        model = f" of {self.model_name}" if self.model_name else ""
        return (f"shapFlex shares of Gelman's R^2{model} on {self.n_rows} rows "
                f"({self.source} SHAP values; sigma_unique {self.sigma_unique:.4f})")

    def __str__(self):
        lines = self._table(None)
        short = score_short(self.score_name)
        lines[-1] = lines[-1].replace(f"score ({short})", "Gelman R2   ")
        lines.append(f"{'sigma_unique':<12} {self.sigma_unique:>9.4f}   (shapFlex shares, "
                     f"{self.source} SHAP values)")
        lines += [
            "",
            "share: shapFlex share of Gelman's R2 = var(f(X)) / (var(f(X)) + var(y - f(X)));",
            "  not a Shapley decomposition of R2. % of R2: share / Gelman R2.",
            "std.err: none (shapFlex shares are not sums over rows).",
            "sigma_unique: residual variance added by removing each feature's SHAP term,",
            "  summed, over the explained variance (a ratio; 1 for OLS on uncorrelated",
            "  features, above 1 when correlated terms cancel).",
        ]
        return "\n".join(lines)


# --------------------------------------------------------------------------
# Targets and weights
# --------------------------------------------------------------------------
def _power_of_two_below(value):
    """2^e with 2^e <= value < 2^(e+1) for a finite value > 0 (exact rescaling)."""
    return math.ldexp(1.0, math.frexp(value)[1] - 1)


def check_n_rows(n_rows):
    """Refuse fewer than 2 rows."""
    if n_rows < 2:
        raise ValueError(f"A decomposition of R^2 or D^2 needs at least 2 samples; got "
                         f"{n_rows} sample.")


def weight_scale(largest):
    """The power of two that :func:`check_weights` divides weights by (largest weight > 0)."""
    return _power_of_two_below(float(largest))


def target_scale(largest):
    """The power of two that divides a regression target of largest ``|y|`` (1 for y = 0)."""
    return _power_of_two_below(float(largest)) if largest > 0 else 1.0


def undefined_score_error(loss):
    """The error for a target without variation under the weights."""
    what = "has a single class" if loss.score in ("d2_brier", "d2_log_loss") else "is constant"
    return UndefinedScoreError(f"y {what} (with the given weights): "
                      f"{'R^2' if loss.score == 'r2' else 'D^2'} is not defined.")


def check_weights(sample_weight, n_rows):
    """Float64 weights, rescaled by a power of two so that the largest is in [1, 2).

    All-zero weights raise: no row would count.
    """
    check_n_rows(n_rows)
    if sample_weight is None:
        return np.ones(n_rows)
    weight = check_row_weights(sample_weight, n_rows)
    return weight / weight_scale(weight.max())


def _regression_target(y, n_rows):
    y = check_y(y, n_rows, "for an R^2 decomposition")
    try:
        y = y.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError("y must be numeric for a regression model (R^2 or Tweedie D^2); "
                         f"got values of type {y.dtype}.") from None
    if not np.all(np.isfinite(y)):
        raise ValueError("y contains NaN or infinity.")
    return y


def check_target(y, n_rows, sample_weight):
    """(y, weight, scale) of a regression target.

    ``weight`` is rescaled as in :func:`check_weights`; ``scale`` is a power
    of two near max |y| such that y / scale is of order 1 (exact). Raises if y
    is constant under the weights.
    """
    y = _regression_target(y, n_rows)
    weight = check_weights(sample_weight, n_rows)
    scale = target_scale(float(np.max(np.abs(y))))
    scaled = y / scale
    mean = np.average(scaled, weights=weight)
    if np.ptp(y[weight > 0]) == 0 or not np.sum(weight * (scaled - mean) ** 2) > 0:
        raise UndefinedScoreError("y is constant (with the given weights): R^2 is not defined.")
    return y, weight, scale


def class_codes(y, classes, n_rows):
    """Class index of every label (position in ``classes``)."""
    y = check_y(y, n_rows, "class labels")
    classes = np.asarray(classes)
    lookup = {value: k for k, value in enumerate(classes.tolist())}
    try:
        codes = np.fromiter((lookup.get(v, -1) for v in y.tolist()), dtype=np.int64,
                            count=len(y))
    except TypeError:
        codes = np.full(len(y), -1)
    if np.any(codes < 0):
        unknown = [str(v) for v in np.unique(np.asarray(y, dtype=object)[codes < 0].astype(str))[:5]]
        raise ValueError(f"y has labels {unknown} that are not among the model's classes "
                         f"{classes.tolist()}.")
    return codes


# --------------------------------------------------------------------------
# Losses in the margin space
# --------------------------------------------------------------------------
class _Loss:
    """l(y, F) - l(y, saturated) per row, its derivatives in one margin, and L0."""

    score = "r2"
    power = None
    separable = True  # the loss is a sum over outputs of per-output terms
    symmetric = False  # forests (averaging) can use the order-free squared game

    def target(self, y, n_rows, ensemble):
        raise NotImplementedError

    def null_loss(self, target, weight):
        """L0 = sum_i w_i [l(y_i, best constant) - l(y_i, saturated)]."""
        return self.null_sum(target, weight, self.null_mean(target, weight))

    def null_mean(self, target, weight):
        """The best constant prediction: the weighted mean of the target columns."""
        return np.average(target, axis=0, weights=weight)

    def null_sum(self, target, weight, mean):
        """L0's sum over the given rows, with the best constant ``mean`` of all rows
        (so that L0 adds up over blocks of rows)."""
        raise NotImplementedError

    def loss(self, target, margin):
        """Per-row loss minus its saturated value; ``margin`` of shape (n, n_outputs)."""
        raise NotImplementedError

    def derivatives(self, target, margin, output):
        """(g, h), the derivatives of l in margin ``output``.

        Separable losses: ``target`` is the output's column (n, 1) and
        ``margin`` any (n, m) array of that output's margins (broadcast).
        Otherwise (softmax): ``margin`` holds all margins, shape (n, n_outputs).
        """
        raise NotImplementedError


class SquaredError(_Loss):
    """l = (y - F)^2 / 2 per output; L0 = Q0 / 2. Brier: y one-hot, F class probabilities."""

    symmetric = True

    def __init__(self, classes=None, score="r2"):
        self.classes = classes
        self.score = score

    def target(self, y, n_rows, ensemble):
        if self.classes is None:
            return _regression_target(y, n_rows)[:, None]
        codes = class_codes(y, self.classes, n_rows)
        return (codes[:, None] == self.outputs).astype(np.float64)

    @property
    def outputs(self):
        """Classes whose Brier terms are decomposed. Binary: class 1 only, as the
        class-0 terms mirror them (y_0 = 1 - y_1, p_0 = 1 - p_1: equal games,
        equal denominators, the same ratio)."""
        n_classes = len(self.classes)
        return np.array([1]) if n_classes == 2 else np.arange(n_classes)

    def null_sum(self, target, weight, mean):
        return 0.5 * float(np.sum(weight[:, None] * (target - mean) ** 2))

    def loss(self, target, margin):
        return 0.5 * np.sum((target - margin) ** 2, axis=1)

    def derivatives(self, target, margin, output):
        return margin - target, np.ones_like(margin)


class Binomial(_Loss):
    """Binary log-loss of p = expit(sigma F): l = log(1 + e^{sigma F}) - y sigma F."""

    score = "d2_log_loss"

    def __init__(self, classes, sigma=1.0):
        self.classes = classes
        self.sigma = float(sigma)

    def target(self, y, n_rows, ensemble):
        return (class_codes(y, self.classes, n_rows) == 1).astype(np.float64)[:, None]

    def null_sum(self, target, weight, mean):
        mean = float(mean[0])
        return -float(np.sum(weight * (xlogy(target[:, 0], mean)
                                       + xlogy(1.0 - target[:, 0], 1.0 - mean))))

    def loss(self, target, margin):
        z = self.sigma * margin[:, 0]
        return np.logaddexp(0.0, z) - target[:, 0] * z

    def derivatives(self, target, margin, output):
        p = expit(self.sigma * margin)
        return self.sigma * (p - target), self.sigma ** 2 * p * (1.0 - p)


class Multinomial(_Loss):
    """Softmax log-loss: l = logsumexp(F) - F_y."""

    score = "d2_log_loss"
    separable = False

    def __init__(self, classes):
        self.classes = classes

    def target(self, y, n_rows, ensemble):
        codes = class_codes(y, self.classes, n_rows)
        return (codes[:, None] == np.arange(len(self.classes))).astype(np.float64)

    def null_sum(self, target, weight, mean):
        return -float(np.sum(weight[:, None] * xlogy(target, mean)))

    def loss(self, target, margin):
        return logsumexp(margin, axis=1) - np.sum(target * margin, axis=1)

    def derivatives(self, target, margin, output):
        p = np.exp(margin[:, output] - logsumexp(margin, axis=1))
        return p - target[:, output], p * (1.0 - p)


class Tweedie(_Loss):
    """Half Tweedie deviance with log link, mu = e^F, power p in [1, 2] (1 Poisson, 2 Gamma).

    l = y^(2-p) / ((1-p)(2-p)) - y mu^(1-p) / (1-p) + mu^(2-p) / (2-p);
    g = mu^(2-p) - y mu^(1-p), h = (2-p) mu^(2-p) - (1-p) y mu^(1-p).
    """

    score = "d2_tweedie"

    def __init__(self, power):
        self.power = float(power)

    def target(self, y, n_rows, ensemble):
        y = _regression_target(y, n_rows)
        if self.power >= 2.0 and np.any(y <= 0):
            raise ValueError(f"The Tweedie deviance with power {self.power:g} (Gamma) needs "
                             "y > 0.")
        if np.any(y < 0):
            raise ValueError(f"The Tweedie deviance with power {self.power:g} needs y >= 0.")
        return y[:, None]

    def deviance(self, y, mu):
        """Half the unit deviance d(y, mu) / 2."""
        p = self.power
        if p == 1.0:
            return xlogy(y, y / mu) - y + mu
        if p == 2.0:
            return np.log(mu / y) + y / mu - 1.0
        return (np.power(y, 2.0 - p) / ((1.0 - p) * (2.0 - p))
                - y * np.power(mu, 1.0 - p) / (1.0 - p) + np.power(mu, 2.0 - p) / (2.0 - p))

    def null_sum(self, target, weight, mean):
        return float(np.sum(weight * self.deviance(target[:, 0], float(mean[0]))))

    def loss(self, target, margin):
        return self.deviance(target[:, 0], np.exp(margin[:, 0]))

    def derivatives(self, target, margin, output):
        p = self.power
        a, b = np.exp((2.0 - p) * margin), target * np.exp((1.0 - p) * margin)
        return a - b, (2.0 - p) * a - (1.0 - p) * b


# --------------------------------------------------------------------------
# Which loss a model was fitted with
# --------------------------------------------------------------------------
_PROBABILITY_AVERAGING = {"DecisionTreeClassifier", "ExtraTreeClassifier",
                          "RandomForestClassifier", "ExtraTreesClassifier"}
_IDENTITY_TREES = {"DecisionTreeRegressor", "ExtraTreeRegressor", "RandomForestRegressor",
                   "ExtraTreesRegressor"}
_NO_HESSIAN = {  # losses without a (useful) second derivative, per library spelling
    "absolute_error", "quantile", "huber", "reg:absoluteerror", "reg:quantileerror",
    "reg:pseudohubererror", "l1", "regression_l1", "mae", "mean_absolute_error", "quantile",
    "huber", "fair", "MAE", "Quantile", "Huber", "MAPE", "Lq", "Expectile", "LogLinQuantile",
}


def _classes(ensemble, n_classes):
    classes = ensemble.info.get("classes")
    return np.arange(n_classes) if classes is None else np.asarray(classes)


def _lightgbm_params(ensemble):
    """``{"sigmoid": "1", ...}`` from LightGBM's objective string."""
    words = (ensemble.info.get("objective_string") or "").split()[1:]
    return dict(word.split(":", 1) for word in words if ":" in word)


#: Objectives of regressors whose outputs are each fitted by the squared error.
_MULTI_OUTPUT_SQUARED = ("squared_error", "MultiRMSE")


def is_multi_output_regression(ensemble):
    """Whether ``ensemble`` is a regressor with several outputs, each fitted by the
    squared error (scikit-learn trees and forests fitted on 2-D y, XGBoost
    multi-target regressors, CatBoost ``MultiRMSE``): :func:`r2_decomposition`
    decomposes the R^2 of each output (:meth:`TreeEnsemble.single_output`)."""
    return (ensemble.n_outputs > 1 and ensemble.objective in _MULTI_OUTPUT_SQUARED
            and ensemble.model_type not in _PROBABILITY_AVERAGING
            and ensemble.info.get("classes") is None and not ensemble.has_linear_leaves)


def loss_of(ensemble):
    """The loss whose score the decomposition splits, from the ensemble's objective.

    Raises :class:`UnsupportedModelError` for anything else.
    """
    name, objective = ensemble.model_type, ensemble.objective
    n_outputs = ensemble.n_outputs
    if ensemble.has_linear_leaves:
        raise UnsupportedModelError(
            f"{name} has linear leaves; the R^2 / D^2 decomposition supports constant leaves "
            f"only ({_ALTERNATIVES})."
        )
    if name in _PROBABILITY_AVERAGING:
        classes = _classes(ensemble, n_outputs)
        return SquaredError(classes, score="d2_brier")
    if name in _IDENTITY_TREES and objective != "squared_error":
        raise UnsupportedModelError(
            f"{name} was fitted with criterion {objective!r}: it predicts leaf means "
            "without a link, so its loss is not quadratic in the trees and has no "
            f"tree-by-tree expansion; {_ALTERNATIVES}."
        )
    if is_multi_output_regression(ensemble):
        raise UnsupportedModelError(
            f"{name} is a regressor with {n_outputs} outputs: its R^2 is decomposed output "
            "by output, by r2_decomposition(model, X, Y) with Y of shape (n_rows, "
            f"{n_outputs}) (a list of R2Decomposition, one per output); this estimator and "
            "the selectors decompose single-output models only."
        )
    if objective in _MULTI_OUTPUT_SQUARED:  # one output
        return SquaredError()
    lightgbm = ensemble.info.get("objective_string") is not None
    catboost = "loss_function" in ensemble.info
    if objective in ("log_loss", "binary:logistic", "binary:logitraw", "binary", "Logloss",
                     "multi:softprob", "multi:softmax", "multiclass", "softmax", "MultiClass"):
        if n_outputs == 1:
            sigma = float(_lightgbm_params(ensemble).get("sigmoid", 1.0)) if lightgbm else 1.0
            return Binomial(_classes(ensemble, 2), sigma)
        if objective in ("binary:logistic", "binary:logitraw", "binary", "Logloss"):
            raise UnsupportedModelError(
                f"{name} is a multi-label classifier ({n_outputs} binary outputs with "
                f"objective {objective!r}); the D^2 decomposition needs one label "
                f"(a binary or multiclass classifier): fit one model per label, or "
                f"{_ALTERNATIVES}."
            )
        return Multinomial(_classes(ensemble, n_outputs))
    if objective in ("poisson", "count:poisson", "Poisson"):
        return Tweedie(1.0)
    if objective in ("gamma", "reg:gamma"):
        return Tweedie(2.0)
    if objective in ("tweedie", "reg:tweedie", "Tweedie"):
        if catboost:
            power = ensemble.info.get("loss_params", {}).get("variance_power")
        else:
            power = ensemble.info.get("tweedie_variance_power")
        if power is None:
            raise UnsupportedModelError(
                f"{name}: the Tweedie variance power of objective {objective!r} could not be "
                f"read from the model; {_ALTERNATIVES}."
            )
        power = float(power)
        if not 1.0 <= power <= 2.0:
            raise UnsupportedModelError(
                f"{name}: Tweedie power {power:g} is outside [1, 2]; {_ALTERNATIVES}.")
        return Tweedie(power)
    if objective in _NO_HESSIAN or objective.split(":")[0] in _NO_HESSIAN:
        raise UnsupportedModelError(
            f"{name} was fitted with loss {objective!r}, which has no second derivative: "
            f"neither R^2 nor a D^2 can be split exactly into feature shares; {_ALTERNATIVES}."
        )
    raise UnsupportedModelError(
        f"{name} was fitted with objective {objective!r}; the R^2 / D^2 decomposition "
        "supports the squared error, the Brier score of scikit-learn tree and forest "
        "classifiers, binary and multiclass log-loss, Poisson, Gamma and Tweedie "
        f"(log link); {_ALTERNATIVES}."
    )
