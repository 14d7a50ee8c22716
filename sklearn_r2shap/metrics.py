"""Insertion and deletion metrics of feature rankings (documentation page "Feature ranking").

For a row ``x`` with path-dependent game ``v_x`` (page "Local attributions") and a
ranking ``pi`` of its features (best first), the **insertion curve** is
``v_x({pi_1, ..., pi_k})`` and the **deletion curve**
``v_x(N \\ {pi_1, ..., pi_k})`` for ``k = 0, ..., p``: features are added to
the empty coalition, or removed from the full one, in the order of the
ranking. Their means over the ``p + 1`` points are the insertion and deletion
AUCs; a good ranking has a high insertion AUC (the top features raise the
output quickly) and a low deletion AUC (removing them lowers it quickly).

Each ``v_x(S)`` is the multilinear extension ``F_x`` at the vertex
``z = 1_S``, evaluated by the TreeGrad kernel (the same one that computes
the ranker's gradients).

Layer: public functions. Imports the games (output selection), the
ground floor and ``attributions``.
"""
from dataclasses import dataclass

import numpy as np

from ._kernels import _semivalues
from ._validation import check_rows, map_row_blocks, n_rows_features, resolve_n_jobs
from .attributions import _explained
from ._games.treegrad import _per_row, _resolve_output, _signed, _take

__all__ = ["insertion_deletion", "InsertionDeletion"]

# Rows of vertices evaluated per kernel call (bounds the (rows, p) arrays).
_CHUNK_POINTS = 1 << 16


@dataclass
class InsertionDeletion:
    """Insertion and deletion curves of rankings (the result of :func:`insertion_deletion`).

    Attributes
    ----------
    insertion : ndarray of shape (n_rows, n_features + 1)
        ``insertion[i, k] = v_x({pi_1, ..., pi_k})``: column 0 is the
        expected value ``v_x(empty)``, the last column the prediction.
    deletion : ndarray of shape (n_rows, n_features + 1)
        ``deletion[i, k] = v_x(N \\ {pi_1, ..., pi_k})``: column 0 is the
        prediction, the last column ``v_x(empty)``.
    rankings : ndarray of shape (n_rows, n_features)
        The rankings evaluated (feature indices, best first).
    """

    insertion: np.ndarray
    deletion: np.ndarray
    rankings: np.ndarray

    @property
    def insertion_auc(self):
        """Mean of each row's insertion curve over its p + 1 points, shape (n_rows,)."""
        return self.insertion.mean(axis=1)

    @property
    def deletion_auc(self):
        """Mean of each row's deletion curve over its p + 1 points, shape (n_rows,)."""
        return self.deletion.mean(axis=1)

    def mean(self):
        """Mean AUCs over the rows.

        Returns
        -------
        dict
            ``{"insertion_auc": float, "deletion_auc": float}`` (higher
            insertion and lower deletion are better).
        """
        return {"insertion_auc": float(np.mean(self.insertion_auc)),
                "deletion_auc": float(np.mean(self.deletion_auc))}

    def plot(self, ax=None, label=None, **line_kwargs):
        """Plot the mean insertion and deletion curves (matplotlib).

        Parameters
        ----------
        ax : sequence of two matplotlib Axes, optional
            Where to draw the insertion and the deletion curve; new axes
            side by side by default. Pass the same axes to overlay rankings.
        label : str, optional
            Legend label; the mean AUC is appended.
        **line_kwargs
            Passed to ``Axes.plot``.

        Returns
        -------
        ndarray of two Axes
        """
        import matplotlib.pyplot as plt

        if ax is None:
            _, ax = plt.subplots(1, 2, figsize=(9, 3.5), sharey=True)
        axes = np.asarray(ax).ravel()
        if len(axes) != 2:
            raise ValueError(f"ax must hold two Axes (insertion, deletion), got {len(axes)}.")
        k = np.arange(self.insertion.shape[1])
        summary = self.mean()
        for ax, curve, name in ((axes[0], self.insertion, "insertion"),
                                (axes[1], self.deletion, "deletion")):
            text = None if label is None else f"{label} ({summary[name + '_auc']:.4g})"
            ax.plot(k, curve.mean(axis=0), label=text, **line_kwargs)
            ax.set_title(f"{name} (higher is better)" if name == "insertion"
                         else f"{name} (lower is better)")
            ax.set_xlabel("features added" if name == "insertion" else "features removed")
            if label is not None:
                ax.legend(fontsize="small")
        axes[0].set_ylabel("mean $v_x(S)$")
        return axes


def _check_rankings(rankings, n_rows, n_features):
    rankings = np.asarray(rankings)
    if rankings.dtype == bool or not np.issubdtype(rankings.dtype, np.integer):
        raise ValueError("rankings must hold integer feature indices (e.g. from np.argsort).")
    if rankings.ndim == 1:
        rankings = np.broadcast_to(rankings, (n_rows, len(rankings)))
    if rankings.ndim != 2 or rankings.shape != (n_rows, n_features):
        raise ValueError(
            f"rankings must have shape ({n_rows}, {n_features}) or ({n_features},), got "
            f"{np.shape(rankings)}."
        )
    if not np.array_equal(np.sort(rankings, axis=1),
                          np.broadcast_to(np.arange(n_features), rankings.shape)):
        raise ValueError("every row of rankings must be a permutation of 0, ..., n_features - 1.")
    return np.ascontiguousarray(rankings, dtype=np.int64)


def insertion_deletion(model, X, rankings, *, output=None, n_jobs=None):
    """Insertion and deletion curves of feature rankings on the path-dependent game.

    Parameters
    ----------
    model : fitted tree model
        scikit-learn tree, forest or gradient boosting model, XGBoost,
        LightGBM or CatBoost model.
    X : array-like or DataFrame of shape (n_rows, n_features)
    rankings : array-like of int of shape (n_rows, n_features) or (n_features,)
        Feature indices of each row, best first (one ranking for all rows if
        1-dimensional). From scores, ``np.argsort(-scores, axis=1,
        kind="stable")`` ranks ties by the lower index, as
        :meth:`~sklearn_r2shap.TreeGradRanker.rank` does.
    output : int, array-like of int of shape (n_rows,), or None, default=None
        The output (class) whose game is evaluated, as in
        :func:`~sklearn_r2shap.treegrad_scores`: None is the
        predicted class of each row for classifiers.
    n_jobs : int, default=None
        Threads; None uses all cores.

    Returns
    -------
    InsertionDeletion
        The curves, per-row AUCs (``insertion_auc``, ``deletion_auc``), their
        means (``mean()``) and ``plot()``.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap.metrics import insertion_deletion
    >>> from sklearn_r2shap.ranking import treegrad_scores
    >>> X, y = load_diabetes(return_X_y=True)
    >>> tree = DecisionTreeRegressor(max_depth=5, random_state=0).fit(X, y)
    >>> rankings = np.argsort(-treegrad_scores(tree, X[:20]), axis=1, kind="stable")
    >>> result = insertion_deletion(tree, X[:20], rankings)
    >>> result.insertion.shape
    (20, 11)
    >>> bool(np.allclose(result.insertion[:, -1], tree.predict(X[:20])))
    True
    >>> bool(np.allclose(result.deletion[:, -1], y.mean()))   # v_x(empty)
    True
    """
    ensemble = _explained(model)
    n_rows, n_features = n_rows_features(X)
    rankings = _check_rankings(rankings, n_rows, n_features)
    n_threads = resolve_n_jobs(n_jobs)
    output = _per_row(output)

    def block(rows, part):  # a sparse X goes in blocks of rows
        rows = check_rows(ensemble, rows)
        return _curves(ensemble, rows, rankings[part], _take(output, part), n_threads)

    insertion, deletion = map_row_blocks(block, X)
    return InsertionDeletion(insertion=insertion, deletion=deletion, rankings=rankings)


def _curves(ensemble, X, rankings, output, n_threads):
    """Insertion and deletion curves of the rows X (checked)."""
    n_rows, n_features = X.shape
    kernel_output, sign = _resolve_output(ensemble, X, output, n_threads)
    # position[i, j]: where feature j comes in row i's ranking
    position = np.empty_like(rankings)
    np.put_along_axis(position, rankings, np.arange(n_features)[None, :], axis=1)
    n_points = n_features + 1
    insertion = np.empty((n_rows, n_points))
    deletion = np.empty((n_rows, n_points))
    k = np.arange(n_points)[None, :, None]
    chunk = max(1, _CHUNK_POINTS // n_points)
    for start in range(0, n_rows, chunk):
        stop = min(start + chunk, n_rows)
        # inserted[r, k, j]: feature j is among the first k of row r's ranking
        inserted = (position[start:stop, None, :] < k).astype(np.float64)
        rows = np.repeat(X[start:stop], n_points, axis=0)
        outputs = np.repeat(kernel_output[start:stop], n_points)
        for Z, out in ((inserted, insertion), (1.0 - inserted, deletion)):
            _, value = _semivalues.treegrad(
                ensemble, rows, np.ascontiguousarray(Z.reshape(-1, n_features)), outputs,
                n_threads)
            out[start:stop] = value.reshape(stop - start, n_points)
    sign = sign[:, None]
    return _signed(insertion, sign), _signed(deletion, sign)
