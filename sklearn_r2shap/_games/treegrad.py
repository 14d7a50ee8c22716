"""TreeGrad games (treegrad-ranker, Algorithms 2, 9 and 10; documentation page "Ranking").

Which output of a model a row's game explains (:func:`_resolve_output`, shared
by the ranker and the insertion / deletion curves), and the block functions
the executor runs over blocks of checked rows: :func:`gradient_block` (the
multilinear extension and its gradient), :func:`ranker_block` (the
TreeGrad-Ranker scores), :func:`curves_block` (insertion and deletion
curves) and :func:`outputs_block` (the output each row explains).

Layer: games. Imports the ground floor, ``_model`` and ``_kernels``.
"""
import numpy as np

from .._kernels import _predict, _semivalues

__all__ = ["gradient_block", "ranker_block", "curves_block", "curves_bytes_per_row",
           "outputs_block", "pattern_structure"]


def curves_bytes_per_row(n_features):
    """The memory of one row of :func:`curves_block`: p + 1 vertices, each a
    row of its indicator, of the rows repeated, of the other curve's
    indicator and of the kernel's gradient (p float64 each)."""
    return 4 * 8 * (n_features + 1) * n_features


def pattern_structure(ensemble):
    """Row-independent structure of the ensemble's paths (computed once per call)."""
    return _semivalues.pattern_structure(ensemble)


def gradient_block(ensemble, X, *, z, class_index=None, n_threads):
    """``(grad F_x(z), F_x(z))`` of every row of X (TreeGrad, Algorithm 9), for
    the output ``class_index`` (one per row, or one for all) selects."""
    kernel_output, sign = _resolve_output(ensemble, X, class_index, n_threads)
    gradient, value = _semivalues.treegrad(ensemble, X, np.ascontiguousarray(z), kernel_output,
                                           n_threads)
    return _signed(gradient, sign[:, None]), _signed(value, sign)


def ranker_block(ensemble, X, *, structure, n_iter, step_size, adam, class_index=None,
                 n_threads):
    """TreeGrad-Ranker scores zeta of every row of X (Algorithms 2 and 10);
    ``structure``: :func:`pattern_structure` of the ensemble, once per call."""
    kernel_output, sign = _resolve_output(ensemble, X, class_index, n_threads)
    zeta = _semivalues.treegrad_ranker(ensemble, structure, X, kernel_output, n_iter, step_size,
                                       adam, n_threads)
    return _signed(zeta, sign[:, None])


def outputs_block(ensemble, X, *, class_index=None, n_threads):
    """The kernel output and sign (columns 0 and 1) each row's game explains."""
    kernel_output, sign = _resolve_output(ensemble, X, class_index, n_threads)
    return np.column_stack([kernel_output.astype(np.float64), sign])


def curves_block(ensemble, X, *, rankings, class_index=None, n_threads):
    """Insertion and deletion curves ``v_x(first k of the ranking)`` and
    ``v_x(N minus the first k)``, k = 0..p, of the rows X (checked): each
    ``v_x(S)`` is the multilinear extension at the vertex ``z = 1_S``. The
    executor bounds a block's rows by :func:`curves_bytes_per_row`."""
    n_rows, n_features = X.shape
    kernel_output, sign = _resolve_output(ensemble, X, class_index, n_threads)
    # position[i, j]: where feature j comes in row i's ranking
    position = np.empty_like(rankings)
    np.put_along_axis(position, rankings, np.arange(n_features)[None, :], axis=1)
    n_points = n_features + 1
    # inserted[r, k, j]: feature j is among the first k of row r's ranking
    inserted = (position[:, None, :] < np.arange(n_points)[None, :, None]).astype(np.float64)
    rows = np.repeat(X, n_points, axis=0)
    outputs = np.repeat(kernel_output, n_points)
    insertion, deletion = (
        _semivalues.treegrad(ensemble, rows, np.ascontiguousarray(Z.reshape(-1, n_features)),
                             outputs, n_threads)[1].reshape(n_rows, n_points)
        for Z in (inserted, 1.0 - inserted))
    sign = sign[:, None]
    return _signed(insertion, sign), _signed(deletion, sign)


# Models whose leaves hold class probabilities (predict_proba is their raw output).
_PROBABILITY_MODELS = ("DecisionTreeClassifier", "ExtraTreeClassifier",
                       "RandomForestClassifier", "ExtraTreesClassifier")


def _classes(ensemble):
    classes = ensemble.info.get("classes")
    return None if classes is None else np.asarray(classes)


def _is_binary_margin(ensemble):
    """A binary classifier whose single output is the log-odds of class 1."""
    classes = _classes(ensemble)
    return classes is not None and len(classes) == 2 and ensemble.n_outputs == 1


def _has_probability_leaves(ensemble):
    return ensemble.model_type in _PROBABILITY_MODELS and _classes(ensemble) is not None


def _resolve_output(ensemble, X, class_index, n_threads):
    """Kernel output and sign (+1 / -1) of every row, see the module docstring.

    Returns ``(kernel_output, sign)``, arrays of shape (n_rows,): int64
    indices into the ensemble's outputs and float64 signs (-1 only for class
    0 of a binary margin model).
    """
    n_rows = X.shape[0]
    binary = _is_binary_margin(ensemble)
    classes = _classes(ensemble)
    n_choices = 2 if binary else ensemble.n_outputs
    if class_index is None:
        if binary:
            chosen = (_predict.predict_raw(ensemble, X, n_threads)[:, 0] > 0).astype(np.int64)
        elif ensemble.n_outputs == 1:
            chosen = np.zeros(n_rows, dtype=np.int64)
        elif classes is None:
            raise ValueError(
                f"{ensemble.model_type} has {ensemble.n_outputs} outputs and no classes: "
                "choose the output to explain with an integer class_index."
            )
        else:
            raw = _predict.predict_raw(ensemble, X, n_threads)
            chosen = np.argmax(raw, axis=1).astype(np.int64)
    else:
        chosen = np.asarray(class_index)
        if chosen.dtype == bool or not np.issubdtype(chosen.dtype, np.integer):
            raise ValueError(
                "class_index must be None, an integer or an array of integers (one per row), "
                f"got {class_index!r}."
            )
        if chosen.ndim == 0:
            chosen = np.full(n_rows, int(chosen), dtype=np.int64)
        elif chosen.shape != (n_rows,):
            raise ValueError(
                f"class_index must be an integer or have one entry per row ({n_rows}), got "
                f"shape {chosen.shape}."
            )
        chosen = chosen.astype(np.int64)
        if n_rows and (chosen.min() < 0 or chosen.max() >= n_choices):
            what = ("class indices 0 (negated margin) or 1 (margin) of the binary classifier"
                    if binary else f"indices in [0, {n_choices})")
            raise ValueError(
                f"class_index must hold {what} of {ensemble.model_type}; got values in "
                f"[{chosen.min()}, {chosen.max()}]."
            )
    if binary:
        return np.zeros(n_rows, dtype=np.int64), np.where(chosen == 1, 1.0, -1.0)
    return np.ascontiguousarray(chosen), np.ones(n_rows)


def _signed(values, sign):
    """values * sign, with no negative zeros (0 stays 0 for class 0 too)."""
    return values * sign + 0.0
