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

Layer: public functions. Imports ``_prepare``, the games (output selection,
the curves' block function), ``_execution`` and the ground floor.
"""
from dataclasses import dataclass

import numpy as np

from ._errors import import_optional
from ._execution.cost import semivalue_seconds
from ._execution.run import map_rows
from ._games.treegrad import curves_block, curves_bytes_per_row
from ._prepare import prepare, split_row_argument

__all__ = ["insertion_deletion", "InsertionDeletion"]


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
        plt = import_optional("matplotlib.pyplot", "InsertionDeletion.plot()")
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


def insertion_deletion(model, X, rankings, *, class_index=None, n_jobs=None, verbose="auto"):
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
    class_index : int, array-like of int of shape (n_rows,), or None, default=None
        The output (class) whose game is evaluated, as in
        :func:`~sklearn_r2shap.treegrad_scores`: None is the
        predicted class of each row for classifiers.
    n_jobs : int, default=None
    verbose : "auto" or int, default="auto"
        Threads (None: all cores) and progress, as in :func:`~sklearn_r2shap.shap_values`.

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
    call = prepare(model, X, n_jobs=n_jobs, verbose=verbose,
                   in_memory="insertion_deletion needs X in memory (its rankings are per row).")
    rankings = _check_rankings(rankings, call.n_rows, call.n_features)
    rows, fixed = split_row_argument("class_index", class_index, call.n_rows)
    rows["rankings"] = rankings
    insertion, deletion = map_rows(
        call, curves_block, trailing_shape=(call.n_features + 1,), desc="Insertion and deletion",
        row_arguments=rows, seconds_per_row=semivalue_seconds(call.ensemble, 2 * call.n_features),
        bytes_per_row=curves_bytes_per_row(call.n_features), **fixed)
    return InsertionDeletion(insertion=insertion, deletion=deletion, rankings=rankings)
