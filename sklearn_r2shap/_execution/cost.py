"""Cost of the R^2 decomposition before it runs, the choice between the exact
and the sampled algorithm, and progress with an estimated time left.

The exact kernel takes, per row and tree, every pair of leaves: from
leaf-pair tables (every tree with positive covers; large tables in blocks)
at one operation per pair and per feature the pair's paths share, times the
tree's quadrature points; or, for the other trees, by a walk of every leaf
against every node of the subtrees beside it (pairs grouped by lowest
common ancestor): sum over internal nodes w of leaves(left of w) *
nodes(right of w), plus one term per leaf, times the tree's quadrature
points n_t. The tables are built once per tree and block of rows (tables
larger than the kernel's block size once per group of rows, ROW_GROUPS
groups per block), at one operation per shared feature and point; a block takes enough rows that this
is at most EXACT_BUILD_SHARE of its work (:func:`exact_rows_per_block`).
The sampled kernel makes one pass over each tree per row, of width
2 K (p_t + 1) (K antithetic pairs of feature orders, p_t features the tree
splits on), plus the exact Shapley values of the tree at ceil(d / 2)
quadrature points. The seconds per operation below were measured on one
core of an x86-64 machine (CPU time, 2026-11-25, kernel alone, on LightGBM
trees of 255 leaves, XGBoost trees of depth 6 and 8 and random forests of
depth 8 and of full depth); ``benchmarks/bench_r2_cost.py`` prints the
estimate against the measured time.

:func:`semivalue_seconds` estimates the per-row attributions
(``shap_values`` and the other semivalues) the same way, so that progress
is shown by default for long work only (``verbose="auto"``).

The public :func:`~sklearn_r2shap.estimate_cost` prepares its call as every
public function does (``decomposition.py``) and reads :func:`ensemble_cost`.

Layer: execution. Imports the ground floor and ``_kernels``; never a game, a
public module or an estimator.
"""
import html
import warnings
import weakref
from dataclasses import dataclass

import numpy as np

from .._errors import SampledAlgorithmWarning
from .._kernels import _qshap, _qshap_sampled
from .._numerics import quadrature_sizes

__all__ = ["CostEstimate", "ensemble_cost", "semivalue_seconds"]

# seconds per operation, one thread (see the module docstring): per row, a
# point of a pair or of a shared feature of a pair (tables), a (leaf, node)
# point of the walk; per block of rows, a point of a shared feature (building
# the tables)
EXACT_SECONDS_PER_TABLE_POINT = 0.9e-9
EXACT_SECONDS_PER_WALK_POINT = 4.0e-9
EXACT_SECONDS_PER_BUILD_POINT = 2.5e-9
#: fewest rows per block of the exact algorithm, and the most of a block's
#: work its table building may take
EXACT_MIN_BLOCK_ROWS = 32
EXACT_BUILD_SHARE = 0.05
SAMPLED_SECONDS_PER_NODE_POINT = 1.25e-8
SAMPLED_SECONDS_PER_NODE_PREFIX = 5.5e-10

#: default ``exact_budget``: "auto" runs the exact algorithm when it is
#: estimated to take at most this many seconds
DEFAULT_EXACT_BUDGET = 120.0


@dataclass(repr=False)
class CostEstimate:
    """Estimated cost of an R^2 decomposition (the result of
    :func:`~sklearn_r2shap.estimate_cost`).

    Attributes
    ----------
    exact_seconds : float
        Estimated wall-clock seconds of ``algorithm="exact"``.
    sampled_seconds : float
        Estimated wall-clock seconds of ``algorithm="sampled"`` with
        ``n_permutations`` orders per row and tree.
    exact_operations : float
        Leaf-pair operations of the exact algorithm (all rows).
    sampled_operations : float
        Node operations of the sampled algorithm (all rows).
    n_rows : int
    n_trees : int
    n_threads : int
    n_permutations : int
    """

    exact_seconds: float
    sampled_seconds: float
    exact_operations: float
    sampled_operations: float
    n_rows: int
    n_trees: int
    n_threads: int
    n_permutations: int

    def __str__(self):
        return (f"R^2 decomposition of {self.n_rows} rows, {self.n_trees} trees, "
                f"{self.n_threads} thread(s): exact ~{format_seconds(self.exact_seconds)}, "
                f"sampled ({self.n_permutations} permutation pairs) "
                f"~{format_seconds(self.sampled_seconds)} (estimates)")

    def _lines(self):
        return [
            f"CostEstimate: R^2 / D^2 decomposition of {self.n_rows} rows, {self.n_trees} trees, "
            f"{self.n_threads} thread(s)",
            f"{'algorithm':<10} {'seconds':>9} {'operations':>11}",
            f"{'exact':<10} {format_seconds(self.exact_seconds):>9} "
            f"{self.exact_operations:>11.3g}",
            f"{'sampled':<10} {format_seconds(self.sampled_seconds):>9} "
            f"{self.sampled_operations:>11.3g}   ({self.n_permutations} permutation pairs)",
            "(estimates, within a factor of a few)",
        ]

    def __repr__(self):
        return "\n".join(self._lines())

    def _repr_html_(self):
        head, _, exact, sampled, note = self._lines()
        rows = "".join(
            f"<tr><th style=\"text-align:left\">{name}</th>"
            f"<td style=\"text-align:right\">{format_seconds(seconds)}</td>"
            f"<td style=\"text-align:right\">{operations:.3g}</td></tr>"
            for name, seconds, operations in (
                ("exact", self.exact_seconds, self.exact_operations),
                (f"sampled ({self.n_permutations} permutation pairs)", self.sampled_seconds,
                 self.sampled_operations)))
        return (f"<div><table><caption style=\"text-align:left\">{html.escape(head)}</caption>"
                "<thead><tr><th>algorithm</th><th>seconds</th><th>operations</th></tr></thead>"
                f"<tbody>{rows}</tbody></table><small>{html.escape(note)}</small></div>")


def format_seconds(seconds):
    if not np.isfinite(seconds):
        return "?"
    if seconds < 1:
        return f"{seconds:.2g} s"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.0f} days"


#: The last ensemble's ``_exact_parts`` (a weak reference to it, and its parts):
#: one cost estimate asks for them up to three times (``decomposition._choose``),
#: and building the pair tables to count them is the costly part.
_LAST_EXACT_PARTS = (lambda: None, None)


def _exact_parts(ensemble):
    """Seconds of the exact kernel on one thread: per row, per block of rows
    (building the tables), and its operations per row."""
    global _LAST_EXACT_PARTS
    reference, parts = _LAST_EXACT_PARTS
    if reference() is ensemble:
        return parts
    parts = _count_exact_parts(ensemble)
    _LAST_EXACT_PARTS = (weakref.ref(ensemble), parts)
    return parts


def _count_exact_parts(ensemble):
    m_exact, _ = quadrature_sizes(ensemble)
    tables = _qshap._PairTables(ensemble, m_exact)
    by_pairs = tables.by_pairs.astype(bool)
    tree_m = np.clip(_qshap.tree_rule_sizes(ensemble), 1, m_exact)
    pair_m = np.minimum(tree_m, (tables.max_union + 1) // 2)
    table_points = ((tables.n_pairs + tables.n_entries) * pair_m)[by_pairs].sum()
    # a tree whose tables pass the block size is built once per group of rows
    per_entry, per_pair = _qshap.entry_bytes(1)
    size = tables.n_entries * (per_entry + 16 * (pair_m - 1)) + tables.n_pairs * per_pair
    builds = np.where(size > _qshap.DEFAULT_BLOCK_BYTES, _qshap.ROW_GROUPS, 1)
    build_points = (tables.n_entries * pair_m * builds)[by_pairs].sum()
    # the kernel skips single-leaf trees
    walks = ~by_pairs & (np.diff(np.asarray(ensemble.tree_start)) > 1)
    walk_points = (_qshap_sampled.cost_units(ensemble) * tree_m)[walks].sum()
    row = (table_points * EXACT_SECONDS_PER_TABLE_POINT
           + walk_points * EXACT_SECONDS_PER_WALK_POINT)
    return row, build_points * EXACT_SECONDS_PER_BUILD_POINT, float(table_points + walk_points)


def _block_rows(row, build):
    if row <= 0:
        return EXACT_MIN_BLOCK_ROWS
    return int(max(EXACT_MIN_BLOCK_ROWS, np.ceil(build / (EXACT_BUILD_SHARE * row))))


def exact_rows_per_block(ensemble):
    """Fewest rows per block of the exact algorithm: the kernel builds each
    tree's tables once per block (large tables once per group of its rows), so
    a block takes enough rows that building is at most EXACT_BUILD_SHARE of
    its work, and at least EXACT_MIN_BLOCK_ROWS."""
    row, build, _ = _exact_parts(ensemble)
    return _block_rows(row, build)


def per_row_seconds(ensemble, slots, n_permutations):
    """(exact, sampled) seconds of one row on one thread, and their operation
    counts; the exact seconds include the building of the tables, shared by
    the rows of a block (at most exact_rows_per_block rows: an upper estimate)."""
    m_exact, m_sampled = quadrature_sizes(ensemble)
    row, build, pairs = _exact_parts(ensemble)
    nodes = np.diff(np.asarray(ensemble.tree_start)).astype(float)
    features = np.diff(slots[1]).astype(float)
    trees = features > 0  # single-leaf trees are skipped
    node_points = float(np.sum(nodes[trees])) * m_sampled
    node_prefix = float(np.sum(nodes[trees] * 2 * n_permutations * (features[trees] + 1)))
    exact = row + build / _block_rows(row, build)
    sampled = (node_points * SAMPLED_SECONDS_PER_NODE_POINT
               + node_prefix * SAMPLED_SECONDS_PER_NODE_PREFIX)
    return exact, sampled, pairs, node_points + node_prefix


def ensemble_cost(ensemble, n_rows, n_threads, n_permutations, slots=None):
    """The :class:`CostEstimate` of both algorithms on ``n_rows`` rows and
    ``n_threads`` threads (:func:`~sklearn_r2shap.estimate_cost`)."""
    if slots is None:
        slots = _qshap_sampled.tree_slots(ensemble)
    exact, sampled, pairs, nodes = per_row_seconds(ensemble, slots, n_permutations)
    parallel = max(1, min(n_threads, n_rows))
    return CostEstimate(
        exact_seconds=exact * n_rows / parallel, sampled_seconds=sampled * n_rows / parallel,
        exact_operations=pairs * n_rows, sampled_operations=nodes * n_rows, n_rows=int(n_rows),
        n_trees=int(ensemble.n_trees), n_threads=int(n_threads),
        n_permutations=int(n_permutations),
    )


def check_n_permutations(n_permutations):
    if (isinstance(n_permutations, bool) or not isinstance(n_permutations, (int, np.integer))
            or n_permutations < 1):
        raise ValueError(f"n_permutations must be an integer >= 1, got {n_permutations!r}.")
    return int(n_permutations)


def choose_algorithm(algorithm, cost, exact_budget):
    """"exact" or "sampled" for ``algorithm`` in {"auto", "exact", "sampled"}."""
    if algorithm not in ("auto", "exact", "sampled"):
        raise ValueError(f"algorithm must be 'auto', 'exact' or 'sampled', got {algorithm!r}.")
    if exact_budget is None or not (isinstance(exact_budget, (int, float, np.number))
                                    and exact_budget >= 0):
        raise ValueError(f"exact_budget must be a number of seconds >= 0, got {exact_budget!r}.")
    if algorithm != "auto":
        return algorithm
    if cost.exact_seconds <= exact_budget:
        return "exact"
    warnings.warn(
        f"The exact R^2 decomposition would take about {format_seconds(cost.exact_seconds)} "
        f"({cost.n_rows} rows, {cost.n_trees} trees, {cost.n_threads} thread(s)), more than "
        f"exact_budget={exact_budget:g} s; running the sampled algorithm instead (unbiased "
        f"Monte Carlo estimate, about {format_seconds(cost.sampled_seconds)}; its standard "
        "errors include the Monte Carlo noise). Pass algorithm='exact' to wait for exact "
        "values, or raise exact_budget.",
        SampledAlgorithmWarning, stacklevel=3,
    )
    return "sampled"




# seconds per node and quadrature point of one row, one thread: the per-row
# quadrature kernel of the semivalues does per node and point the work the
# sampled kernel's quadrature does (SAMPLED_SECONDS_PER_NODE_POINT); the pattern
# tables of shallow trees are several times faster (2026-11, a loaded 2-core
# machine gave 5-20x this on a 20-tree depth-8 forest: an upper estimate)
SEMIVALUE_SECONDS_PER_NODE_POINT = 1e-8


def semivalue_seconds(ensemble, n_points):
    """Seconds of one row's semivalues (TreeGrad-Shap quadrature) on one thread.

    The quadrature kernel visits every node of every tree at each of the
    ``n_points`` quadrature points; the pattern tables used for shallow trees
    and many rows are cheaper, so this is an upper estimate. It decides the
    rows per block and whether progress is shown by default where the game
    has no estimate of its own (the path-dependent semivalues in memory use
    ``SemivalueGame.seconds_per_row``, which knows the routes it takes).
    """
    return float(ensemble.n_nodes) * max(1, int(n_points)) * SEMIVALUE_SECONDS_PER_NODE_POINT
