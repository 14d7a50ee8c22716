"""Checks of the rows given to a kernel: width, names, inf and NaN."""
import numpy as np

from ._model import UnsupportedModelError


def _is_dataframe(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


def check_rows(ensemble, X, *, allow_nan=None):
    """Return X as a C-contiguous float64 array ready for the kernels.

    Rows are rounded to float32 first when the model's library compares
    float32 values (``ensemble.x_float32``), so that the kernels route rows
    exactly as the model's own ``predict`` does.

    Parameters
    ----------
    ensemble : TreeEnsemble
    X : array-like or pandas DataFrame of shape (n_rows, n_features)
    allow_nan : bool, optional
        Defaults to ``ensemble.info.get("allow_nan", True)``.
    """
    if _is_dataframe(X):
        names = np.asarray(X.columns, dtype=object)
        expected = ensemble.feature_names
        if expected is not None and len(names) == len(expected):
            if not all(str(a) == str(b) for a, b in zip(names, expected)):
                raise ValueError(
                    "The feature names of X do not match those the model was fitted with: "
                    f"got {list(names)[:10]}, expected {list(expected)[:10]}."
                )
        try:
            X = X.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                "X has non-numeric columns; encode categorical columns as non-negative "
                f"integer codes first ({exc})."
            ) from None
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"X must be numeric: {exc}") from None
    if X.ndim == 1:
        raise ValueError(
            "Expected a 2D array of rows, got a 1D array; use X.reshape(1, -1) for a "
            "single row or X.reshape(-1, 1) for a single feature."
        )
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D array of rows, got {X.ndim} dimensions.")
    if X.shape[1] != ensemble.n_features:
        raise ValueError(
            f"X has {X.shape[1]} features, but the model ({ensemble.model_type}) "
            f"expects {ensemble.n_features}."
        )
    if np.isinf(X).any():
        raise ValueError("X contains infinity; tree splits are not defined for it.")
    if allow_nan is None:
        allow_nan = ensemble.info.get("allow_nan", True)
    if not allow_nan and np.isnan(X).any():
        raise UnsupportedModelError(
            f"X contains NaN, but {ensemble.model_type} does not accept missing values."
        )
    if ensemble.x_float32:
        X = X.astype(np.float32).astype(np.float64)
    return np.ascontiguousarray(X)


def resolve_n_jobs(n_jobs):
    """OpenMP thread count: None or -1 -> all cores, -k -> all but k-1."""
    import os

    n_cpus = os.cpu_count() or 1
    if n_jobs is None:
        return n_cpus
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None or -1 for all cores.")
    if n_jobs < 0:
        return max(1, n_cpus + 1 + n_jobs)
    return n_jobs
