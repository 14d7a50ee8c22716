"""TreeGrad games (treegrad-ranker, Algorithms 2, 9 and 10; documentation page "Ranking").

Which output of a model a row's game explains (:func:`_resolve_output`, shared
by the ranker and the insertion / deletion curves), and the kernels of a
block of checked rows: :func:`gradient` (the multilinear extension and its
gradient) and :func:`ranker_scores` (the TreeGrad-Ranker scores).

Layer: games. Imports the ground floor, ``_model`` and ``_kernels``.
"""
import numpy as np

from .._kernels import _predict, _semivalues

__all__ = ["gradient", "ranker_scores", "pattern_structure"]


def pattern_structure(ensemble):
    """Row-independent structure of the ensemble's paths (computed once per call)."""
    return _semivalues.pattern_structure(ensemble)


def gradient(ensemble, X, z, kernel_output, n_threads):
    """``(grad F_x(z), F_x(z))`` of every row of X (TreeGrad, Algorithm 9)."""
    return _semivalues.treegrad(ensemble, X, z, kernel_output, n_threads)


def ranker_scores(ensemble, structure, X, kernel_output, n_iter, step_size, adam, n_threads):
    """TreeGrad-Ranker scores zeta of every row of X (Algorithms 2 and 10)."""
    return _semivalues.treegrad_ranker(ensemble, structure, X, kernel_output, n_iter, step_size,
                                       adam, n_threads)


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


def _resolve_output(ensemble, X, output, n_threads):
    """Kernel output and sign (+1 / -1) of every row, see the module docstring.

    Returns ``(kernel_output, sign)``, arrays of shape (n_rows,): int64
    indices into the ensemble's outputs and float64 signs (-1 only for class
    0 of a binary margin model).
    """
    n_rows = X.shape[0]
    binary = _is_binary_margin(ensemble)
    classes = _classes(ensemble)
    n_choices = 2 if binary else ensemble.n_outputs
    if output is None:
        if binary:
            chosen = (_predict.predict_raw(ensemble, X, n_threads)[:, 0] > 0).astype(np.int64)
        elif ensemble.n_outputs == 1:
            chosen = np.zeros(n_rows, dtype=np.int64)
        elif classes is None:
            raise ValueError(
                f"{ensemble.model_type} has {ensemble.n_outputs} outputs and no classes: "
                "choose the output to explain with an integer output index."
            )
        else:
            raw = _predict.predict_raw(ensemble, X, n_threads)
            chosen = np.argmax(raw, axis=1).astype(np.int64)
    else:
        chosen = np.asarray(output)
        if chosen.dtype == bool or not np.issubdtype(chosen.dtype, np.integer):
            raise ValueError(
                "output must be None, an integer or an array of integers (one per row), "
                f"got {output!r}."
            )
        if chosen.ndim == 0:
            chosen = np.full(n_rows, int(chosen), dtype=np.int64)
        elif chosen.shape != (n_rows,):
            raise ValueError(
                f"output must be an integer or have one entry per row ({n_rows}), got "
                f"shape {chosen.shape}."
            )
        chosen = chosen.astype(np.int64)
        if n_rows and (chosen.min() < 0 or chosen.max() >= n_choices):
            what = ("class indices 0 (negated margin) or 1 (margin) of the binary classifier"
                    if binary else f"indices in [0, {n_choices})")
            raise ValueError(
                f"output must hold {what} of {ensemble.model_type}; got values in "
                f"[{chosen.min()}, {chosen.max()}]."
            )
    if binary:
        return np.zeros(n_rows, dtype=np.int64), np.where(chosen == 1, 1.0, -1.0)
    return np.ascontiguousarray(chosen), np.ones(n_rows)


def _per_row(output):
    """``output`` as an array when it has one entry per row (sliced by blocks)."""
    if output is None or np.ndim(output) == 0:
        return output
    return np.asarray(output)


def _take(output, part):
    return output if output is None or np.ndim(output) == 0 else output[part]


def _signed(values, sign):
    """values * sign, with no negative zeros (0 stays 0 for class 0 too)."""
    return values * sign + 0.0
