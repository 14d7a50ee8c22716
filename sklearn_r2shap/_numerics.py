"""Numerical helpers: Gauss quadrature rules on (0, 1) and mergeable statistics.

- :func:`beta_quadrature` / :func:`_gauss_legendre` / :func:`_unit_rule`: the
  rules that integrate the gradient of the multilinear extension (documentation
  page "Local attributions"; TreeGrad-Shap, treegrad-ranker Algorithm 7);
- :func:`quadrature_sizes`: the number of nodes that make Sh[m] and Sh[m^2]
  exact for an ensemble (section 3);
- :class:`Moments`, :class:`Extremes` and :func:`merge_statistics`: per-block
  statistics that merge exactly (Chan et al.), so that blocks of rows -- in
  memory or dask partitions -- combine in a fixed order;
- :class:`DyadicSum`: a sum of rows that is bit-identical for any blocks
  and partitions (pairwise over the rows' global indices).

Ground floor: imports nothing of the package.

Layer: ground floor.
"""
import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import eigvalsh_tridiagonal

__all__ = ["beta_quadrature", "quadrature_sizes", "Moments", "WeightedMean", "Extremes", "DyadicSum",
           "merge_statistics"]


@functools.lru_cache(maxsize=64)
def _gauss_legendre(n_nodes):
    """Gauss-Legendre nodes and weights on [-1, 1] by Newton's method on the
    Legendre recurrence (no LAPACK call, whose idle BLAS threads would compete
    with the kernels' OpenMP threads)."""
    i = np.arange(1, n_nodes + 1)
    x = np.cos(np.pi * (i - 0.25) / (n_nodes + 0.5))
    for _ in range(100):
        p0, p1 = np.ones_like(x), x.copy()
        for k in range(2, n_nodes + 1):
            p0, p1 = p1, ((2 * k - 1) * x * p1 - (k - 1) * p0) / k
        derivative = n_nodes * (x * p1 - p0) / (x * x - 1.0) if n_nodes > 1 else np.ones_like(x)
        step = p1 / derivative
        x = x - step
        if np.max(np.abs(step)) < 1e-16:
            break
    p0, p1 = np.ones_like(x), x.copy()
    for k in range(2, n_nodes + 1):
        p0, p1 = p1, ((2 * k - 1) * x * p1 - (k - 1) * p0) / k
    derivative = n_nodes * (x * p1 - p0) / (x * x - 1.0) if n_nodes > 1 else np.ones_like(x)
    weights = 2.0 / ((1.0 - x * x) * derivative * derivative)
    return x[::-1].copy(), weights[::-1].copy()


def beta_quadrature(alpha, beta, degree):
    """Nodes and weights integrating ``g(t) Beta(t; beta, alpha)`` exactly on [0, 1].

    Gauss quadrature for the Beta density ``t^(beta-1) (1-t)^(alpha-1) / B(alpha, beta)``
    as weight function (Gauss-Jacobi on [0, 1]): ``ceil((degree + 1) / 2)``
    nodes integrate every polynomial ``g`` of degree ``<= degree`` exactly,
    whatever ``alpha`` and ``beta`` (TreeGrad-Shap, Algorithm 7, integrates the
    gradient of the multilinear extension against this density). The weights
    are positive and sum to 1. ``alpha = beta = 1`` is Gauss-Legendre.

    Parameters
    ----------
    alpha, beta : int >= 1
    degree : int >= 0

    Returns
    -------
    nodes, weights : ndarray of shape (ceil((degree + 1) / 2),)

    Examples
    --------
    >>> from sklearn_r2shap._numerics import beta_quadrature
    >>> t, w = beta_quadrature(10**6, 1, 5)
    >>> len(t), bool(np.isclose(w @ t, 1 / (10**6 + 1), rtol=1e-13))
    (3, True)
    """
    n_nodes = max(1, math.ceil((degree + 1) / 2))
    if alpha == 1 and beta == 1:
        nodes, weights = _gauss_legendre(n_nodes)
        return (nodes + 1.0) / 2.0, weights / 2.0
    if beta > alpha:
        # Beta(beta, alpha) is the mirror image of Beta(alpha, beta): build the
        # rule where its nodes crowd near 0 (full relative precision) and reflect.
        nodes, weights = _gauss_beta(int(beta), int(alpha), n_nodes)
        return (1.0 - nodes)[::-1].copy(), weights[::-1].copy()
    return _gauss_beta(int(alpha), int(beta), n_nodes)


@functools.lru_cache(maxsize=64)
def _gauss_beta(alpha, beta, n_nodes):
    """Gauss rule of the Beta(beta, alpha) density on [0, 1] (Golub-Welsch).

    The three-term recurrence of the polynomials orthonormal for the density
    is that of the Jacobi polynomials P^(A, B), A = alpha - 1, B = beta - 1,
    moved from [-1, 1] to [0, 1]. Its diagonal is written as a sum of
    positive terms, so that it keeps full relative precision when alpha or
    beta is huge and the nodes crowd near 0 or 1. The nodes (eigenvalues of
    the tridiagonal Jacobi matrix) are polished by Newton steps on the
    recurrence; the weights are the Christoffel numbers
    ``1 / sum_k p_k(t)^2``, positive by construction.
    """
    A, B = float(alpha - 1), float(beta - 1)
    s = A + B
    n = np.arange(n_nodes, dtype=np.float64)
    diagonal = np.empty(n_nodes)
    diagonal[0] = (B + 1.0) / (s + 2.0)  # the mean beta / (alpha + beta)
    m = n[1:]
    diagonal[1:] = (2 * m * m + 2 * m * s + 2 * m + s * (B + 1.0)) / (
        (2 * m + s) * (2 * m + s + 2.0))
    m = np.arange(1, n_nodes, dtype=np.float64)
    off = np.sqrt(m * (m + A) * (m + B) * (m + s)
                  / ((2 * m + s) ** 2 * (2 * m + s + 1.0) * (2 * m + s - 1.0)))
    nodes = eigvalsh_tridiagonal(diagonal, off) if n_nodes > 1 else diagonal.copy()

    def recurrence(t):
        """p_0..p_{N-1} at t, and p_N and its derivative (orthonormal, p_0 = 1)."""
        p = np.zeros((n_nodes + 1, len(t)))
        dp = np.zeros_like(p)
        p[0] = 1.0
        previous, d_previous = np.zeros_like(t), np.zeros_like(t)
        for k in range(n_nodes):
            scale = off[k] if k < n_nodes - 1 else 1.0  # p_N up to a constant factor
            back = off[k - 1] if k > 0 else 0.0
            p[k + 1] = ((t - diagonal[k]) * p[k] - back * previous) / scale
            dp[k + 1] = (p[k] + (t - diagonal[k]) * dp[k] - back * d_previous) / scale
            previous, d_previous = p[k], dp[k]
        return p, dp

    for _ in range(3):  # Newton on p_N: eigenvalues are already close to roots
        p, dp = recurrence(nodes)
        nodes = nodes - p[n_nodes] / dp[n_nodes]
    p, _ = recurrence(nodes)
    weights = 1.0 / np.sum(p[:n_nodes] ** 2, axis=0)
    return nodes, weights


def _unit_rule(n_nodes):
    nodes, weights = _gauss_legendre(n_nodes)
    return (nodes + 1.0) / 2.0, weights / 2.0


def quadrature_sizes(ensemble):
    """Gauss-Legendre nodes: exact Sh[m^2] (degree < 2d) and Sh[m] (degree < d)."""
    d = max(1, int(ensemble.n_path_features))
    return d, max(1, math.ceil(d / 2))


@dataclass
class Moments:
    """Weight, mean and sum of squared deviations of values, merged exactly.

    ``weight`` is a row count (or a sum of row weights), ``mean`` the
    (weighted) mean and ``m2 = sum_i w_i (v_i - mean)^2``, per column. Two
    groups merge by Chan, Golub and LeVeque's pairwise update (weighted as
    in West, 1979): with ``delta = mean_b - mean_a`` and ``W = W_a + W_b``,
    ``mean = mean_a + delta W_b / W`` and
    ``m2 = m2_a + m2_b + delta^2 W_a W_b / W``. An empty group (weight 0) is
    the identity, so empty partitions merge away.
    """

    weight: float
    mean: np.ndarray
    m2: np.ndarray

    @classmethod
    def of(cls, values, weight=None):
        """Moments of ``values`` (rows along axis 0), optionally weighted."""
        values = np.asarray(values, dtype=np.float64)
        if weight is None:
            total = float(values.shape[0])
            if total == 0:
                zeros = np.zeros(values.shape[1:])
                return cls(0.0, zeros, zeros.copy())
            mean = values.mean(axis=0)
            return cls(total, mean, ((values - mean) ** 2).sum(axis=0))
        weight = np.asarray(weight, dtype=np.float64)
        total = float(weight.sum())
        if total == 0:
            zeros = np.zeros(values.shape[1:])
            return cls(0.0, zeros, zeros.copy())
        w = weight.reshape((-1,) + (1,) * (values.ndim - 1))
        mean = (w * values).sum(axis=0) / total
        return cls(total, mean, (w * (values - mean) ** 2).sum(axis=0))

    def merge(self, other):
        """The moments of both groups together."""
        if other.weight == 0:
            return self
        if self.weight == 0:
            return other
        total = self.weight + other.weight
        delta = other.mean - self.mean
        return Moments(
            total,
            self.mean + delta * (other.weight / total),
            self.m2 + other.m2 + delta ** 2 * (self.weight * other.weight / total),
        )

    def variance(self, ddof=0):
        """``m2 / (weight - ddof)`` (NaN when ``weight <= ddof``)."""
        if self.weight <= ddof:
            return np.full(np.shape(self.m2), np.nan)
        return self.m2 / (self.weight - ddof)


@dataclass
class WeightedMean:
    """Weighted mean of values, merged as :class:`Moments` merges its means,
    with the weights kept as ``weight * 2**exponent``: each group's weights
    are first divided by the power of two below its largest (exact), so
    that tiny (subnormal) weights lose no digit, and two groups are brought
    to the larger exponent to merge."""

    weight: float
    exponent: int
    mean: np.ndarray

    @classmethod
    def of(cls, values, weight):
        """The weighted mean of ``values`` (rows along axis 0)."""
        values = np.asarray(values, dtype=np.float64)
        weight = np.asarray(weight, dtype=np.float64)
        largest = float(weight.max()) if weight.size else 0.0
        if not largest > 0:
            return cls(0.0, 0, np.zeros(values.shape[1:]))
        exponent = math.frexp(largest)[1] - 1
        weight = weight / math.ldexp(1.0, exponent)
        total = float(weight.sum())
        w = weight.reshape((-1,) + (1,) * (values.ndim - 1))
        return cls(total, exponent, (w * values).sum(axis=0) / total)

    def merge(self, other):
        """The mean of both groups together."""
        if other.weight == 0:
            return self
        if self.weight == 0:
            return other
        exponent = max(self.exponent, other.exponent)
        mine = math.ldexp(self.weight, self.exponent - exponent)
        theirs = math.ldexp(other.weight, other.exponent - exponent)
        total = mine + theirs
        return WeightedMean(total, exponent,
                            self.mean + (other.mean - self.mean) * (theirs / total))


@dataclass
class Extremes:
    """Smallest and largest values per column; an empty group is the identity."""

    low: np.ndarray
    high: np.ndarray

    @classmethod
    def of(cls, values):
        values = np.asarray(values, dtype=np.float64)
        return cls(np.min(values, axis=0, initial=np.inf),
                   np.max(values, axis=0, initial=-np.inf))

    def merge(self, other):
        return Extremes(np.minimum(self.low, other.low), np.maximum(self.high, other.high))


class DyadicSum:
    """A sum of rows whose floating-point result does not depend on how the
    rows were cut into blocks, threads or dask partitions.

    Row i is leaf i of one binary tree over the rows' global indices: node
    ``(k, j)`` is the sum of rows ``j 2^k`` to ``(j + 1) 2^k - 1``, always
    computed as its left child plus its right child (pairwise summation, with
    its error bound). A block of rows holds the largest aligned nodes inside
    it (:meth:`of`), two blocks merge by adding sibling nodes (:meth:`merge`),
    and :meth:`total` adds the nodes left, those of the binary digits of the
    row count, from the last to the first. Every addition is therefore the
    same for any blocks: the total is bit-identical for any block sizes and
    partitions, in any merge order. About one addition per row and entry,
    as a plain sum; ``nodes`` holds O(log n) arrays per block.

    Examples
    --------
    >>> rows = np.random.default_rng(0).normal(size=(10, 3))
    >>> a = DyadicSum.of(0, rows[:4]).merge(DyadicSum.of(4, rows[4:]))
    >>> b = DyadicSum.of(7, rows[7:]).merge(DyadicSum.of(0, rows[:7]))
    >>> bool(np.array_equal(a.total(), b.total()))
    True
    >>> bool(np.allclose(a.total(), rows.sum(axis=0)))
    True
    """

    __slots__ = ("nodes",)

    def __init__(self, nodes):
        self.nodes = nodes  # {(level k, index j): sum of rows j 2^k .. (j + 1) 2^k - 1}

    @classmethod
    def of(cls, start, values):
        """The nodes of rows ``start, start + 1, ...`` (``values`` along axis 0)."""
        values = np.asarray(values, dtype=np.float64)
        nodes = {}
        i, end = int(start), int(start) + values.shape[0]
        while i < end:
            k = 0  # the largest aligned node starting at row i inside the block
            while i % (2 << k) == 0 and i + (2 << k) <= end:
                k += 1
            node = values[i - start:i - start + (1 << k)]
            for _ in range(k):
                node = node[0::2] + node[1::2]
            nodes[(k, i >> k)] = node[0].copy()
            i += 1 << k
        return cls(nodes)

    def merge(self, other):
        """The sum of both blocks' rows (disjoint rows)."""
        spans = sorted((j << k, (j + 1) << k) for k, j in [*self.nodes, *other.nodes])
        for (_, end), (start, _) in zip(spans[:-1], spans[1:]):
            if start < end:
                raise ValueError(f"row {start} is in both sums.")
        nodes = dict(self.nodes)
        pending = list(other.nodes.items())
        while pending:
            (k, j), value = pending.pop()
            sibling = (k, j ^ 1)
            if sibling in nodes:  # left child plus right child, whichever came first
                other_value = nodes.pop(sibling)
                left, right = (value, other_value) if j % 2 == 0 else (other_value, value)
                pending.append(((k + 1, j >> 1), left + right))
            else:
                nodes[(k, j)] = value
        return DyadicSum(nodes)

    @property
    def n_rows(self):
        return sum(1 << k for k, _ in self.nodes)

    def total(self):
        """The sum of the rows, nodes added from the last row's to the first's."""
        if not self.nodes:
            raise ValueError("a sum of no rows.")
        order = sorted(self.nodes, key=lambda node: node[1] << node[0], reverse=True)
        total = self.nodes[order[0]].copy()
        for node in order[1:]:
            total = self.nodes[node] + total
        return total


def merge_statistics(a, b):
    """Merge two dicts of per-partition statistics with the same keys.

    A :class:`Moments`, :class:`WeightedMean`, :class:`Extremes` or
    :class:`DyadicSum` value merges by its ``merge`` (Chan's update; minimum
    and maximum; sibling nodes);
    anything else (a number or an
    array: sums, counts) is added.
    """
    if set(a) != set(b):
        raise ValueError(f"statistics with different keys: {sorted(a)} and {sorted(b)}.")
    return {key: a[key].merge(b[key]) if isinstance(
        a[key], (Moments, WeightedMean, Extremes, DyadicSum))
            else a[key] + b[key] for key in a}
