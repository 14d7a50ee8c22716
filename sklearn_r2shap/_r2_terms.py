"""The per-row terms of the R^2 decomposition, exact or sampled, behind one call.

Both compute, per row i and feature j, sum_k a_ik Sh_j[m_k^2](x_i) + b_ik Sh_j[m_k](x_i)
for game coefficients (a, b) of shape (n_rows, n_trees) computed by the
caller (squared error: a = w_i, b = -2 w_i c_ik). ``algorithm="exact"``:
the Q-SHAP kernel (:mod:`._kernels._qshap`). ``algorithm="sampled"``: an
unbiased Monte Carlo estimate (:mod:`._kernels._qshap_sampled`), returned
with the Monte Carlo variance of each row's estimate.
"""
import numpy as np

from ._kernels import _qshap, _qshap_sampled
from ._numerics import _unit_rule, quadrature_sizes


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
