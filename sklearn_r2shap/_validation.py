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
    # a model whose categories need its library to encode them (CatBoost strings)
    encode = ensemble.info.get("encode_rows")
    if encode is not None:
        X = encode(X)
    elif _is_dataframe(X):
        X = _frame_to_array(ensemble, X)
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
    X = _cast_categories(ensemble, X)
    if ensemble.x_float32:
        with np.errstate(over="ignore"):
            X = X.astype(np.float32).astype(np.float64)
        # scikit-learn's float32 trees refuse values float32 cannot hold
        if ensemble.info.get("float32_overflow") == "error" and np.isinf(X).any():
            raise ValueError(
                "X contains a value too large for float32, which "
                f"{ensemble.model_type}.predict refuses (it compares float32 values)."
            )
    return np.ascontiguousarray(X)


def _frame_to_array(ensemble, frame):
    """A DataFrame as float64, its category columns as the model's codes.

    XGBoost (``info["category_levels"]``, by column) and LightGBM
    (``info["pandas_categorical"]``, one list per category column in order)
    code a category by its position among the levels seen in training.
    Unseen levels become NaN (LightGBM) or raise, as XGBoost does
    (``info["unseen_category"] == "error"``). Other category columns must
    hold numbers.
    """
    import pandas as pd

    info = ensemble.info
    is_category = [isinstance(dtype, pd.CategoricalDtype) for dtype in frame.dtypes]
    levels = info.get("category_levels")
    if levels is None and info.get("pandas_categorical") is not None:
        columns = [j for j, flag in enumerate(is_category) if flag]
        levels = dict(zip(columns, info["pandas_categorical"]))
    levels = levels or {}
    out = np.empty(frame.shape, dtype=np.float64)
    for j in range(frame.shape[1]):
        column = frame.iloc[:, j]
        if is_category[j] and j in levels:
            codes = pd.Index(levels[j]).get_indexer(column.astype(object)).astype(np.float64)
            unseen = (codes < 0) & column.notna().to_numpy()
            if unseen.any() and info.get("unseen_category") == "error":
                value = column[unseen].iloc[0]
                raise ValueError(
                    f"Column {frame.columns[j]!r} has the category {value!r}, which "
                    f"{ensemble.model_type} did not see in training."
                )
            codes[codes < 0] = np.nan
            out[:, j] = codes
            continue
        try:
            out[:, j] = column.to_numpy(dtype=np.float64, na_value=np.nan)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"X has a non-numeric column {frame.columns[j]!r}; encode categorical "
                f"columns as non-negative integer codes first ({exc})."
            ) from None
    return out


def _cast_categories(ensemble, X):
    """Values of categorical columns as the model's library reads them.

    ``info["category_cast"]``: "truncate" (LightGBM casts with
    ``static_cast<int>``, so x in (-1, 0) is category 0) or "integer"
    (HistGradientBoosting treats a non-integer value as an unknown category,
    i.e. missing). The kernels take int(x) and send negative values right.
    """
    cast = ensemble.info.get("category_cast")
    columns = ensemble.info.get("categorical_features") or []
    if cast is None or len(columns) == 0:
        return X
    X = X.copy()
    values = X[:, columns]
    if cast == "truncate":
        values[(values > -1.0) & (values < 0.0)] = 0.0
    elif cast == "integer":
        values[values != np.floor(values)] = np.nan
    else:
        raise ValueError(f"unknown category_cast {cast!r}")
    X[:, columns] = values
    return X


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
