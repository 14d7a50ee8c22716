"""Checks of the inputs: the rows given to a kernel (width, names, inf and NaN,
categories, a sparse block made dense), row weights, targets, the semivalue
chosen and thread counts.

It checks and converts; iterating over blocks of rows is the executor's
(:mod:`._execution.local`).

Ground floor: imports only ``_errors`` (a TreeEnsemble is used through its
attributes, never imported).

Layer: ground floor.
"""
import functools
import numbers
import os

import numpy as np
import scipy.sparse

from ._errors import UnsupportedModelError, import_optional


def _is_pandas(X):
    return hasattr(X, "columns") and hasattr(X, "dtypes") and hasattr(X, "iloc")


def _frame_kind(X):
    """"pandas", "polars", "pyarrow", "interchange" (any other frame with
    ``__dataframe__``) or None: the frame types scikit-learn reads names from."""
    if _is_pandas(X):
        return "pandas"
    module = type(X).__module__.split(".")[0]
    if module == "polars" and hasattr(X, "columns"):
        return "polars"
    if module == "pyarrow" and hasattr(X, "column_names"):
        return "pyarrow"
    if hasattr(X, "__dataframe__") and not hasattr(X, "toarray"):
        return "interchange"
    return None


def _column_names(X, kind):
    if kind == "pandas":
        return list(X.columns)
    if kind == "polars":
        return list(X.columns)
    if kind == "pyarrow":
        return list(X.column_names)
    return list(X.__dataframe__().column_names())


def column_names(X):
    """The column names of a frame (pandas, polars, pyarrow, ...), else None."""
    kind = _frame_kind(X)
    return None if kind is None else np.asarray(_column_names(X, kind), dtype=object)


def _refuse_library_containers(X):
    """XGBoost's DMatrix, LightGBM's Dataset and CatBoost's Pool hold binned or
    library-internal data that cannot be read back row by row."""
    module = type(X).__module__.split(".")[0]
    name = type(X).__name__
    if (module, name) in {("xgboost", "DMatrix"), ("xgboost", "QuantileDMatrix"),
                          ("xgboost", "ExtMemQuantileDMatrix"), ("lightgbm", "Dataset"),
                          ("catboost", "Pool")}:
        raise TypeError(
            f"X is a {module}.{name}; pass the data it was built from instead (a numpy "
            "array, a pandas/polars/pyarrow frame or a scipy.sparse CSR/CSC matrix). For an "
            "XGBoost Booster trained from DMatrix(..., missing=m), also pass missing=m to "
            "sklearn_r2shap.to_ensemble."
        )


def _names_match(given, expected, rule):
    """Compare the columns of a frame with the model's feature names.

    ``rule == "lightgbm"``: LightGBM stores a name with every space replaced
    by "_" (``Dataset::set_feature_names``), so the user's names are compared
    after the same replacement.
    """
    if rule == "lightgbm":
        given = [str(name).replace(" ", "_") for name in given]
    return all(str(a) == str(b) for a, b in zip(given, expected))


def _check_names(ensemble, names):
    expected = ensemble.feature_names
    if expected is None or len(names) != len(expected):
        return
    if not _names_match(names, expected, ensemble.info.get("feature_name_rule")):
        raise ValueError(
            "The feature names of X do not match those the model was fitted with: "
            f"got {list(names)[:10]}, expected {list(expected)[:10]}."
        )


def check_rows(ensemble, X, *, allow_nan=None):
    """Return X as a C-contiguous float64 array ready for the kernels.

    Rows are rounded to float32 first when the model's library compares
    float32 values (``ensemble.x_float32``), so that the kernels route rows
    exactly as the model's own ``predict`` does. Entries equal to the model's
    ``info["missing"]`` (XGBoost's ``missing`` parameter, compared on float32
    values as XGBoost does) become NaN.

    A scipy.sparse matrix is made dense here with the library's meaning of
    an absent entry (``info["sparse_absent"]``: "missing" for XGBoost, 0
    otherwise); the executor passes it in blocks of rows
    (:func:`._execution.local.iter_row_blocks`).

    Parameters
    ----------
    ensemble : TreeEnsemble
    X : array-like, DataFrame (pandas, polars, pyarrow) or sparse matrix of
        shape (n_rows, n_features)
    allow_nan : bool, optional
        Defaults to ``ensemble.info.get("allow_nan", True)``.
    """
    _refuse_library_containers(X)
    kind = _frame_kind(X)
    if kind == "interchange":  # any other frame: through pandas' interchange reader
        interchange = import_optional("pandas.api.interchange", "A dataframe of this library")
        X, kind = interchange.from_dataframe(X), "pandas"
    if kind is not None:
        _check_names(ensemble, _column_names(X, kind))
    if _is_sparse(X):
        X = _sparse_to_dense(ensemble, X)
    # a model whose categories need its library to encode them (CatBoost strings)
    encode = ensemble.info.get("encode_rows")
    if encode is not None:
        X = encode(X)
    elif kind is not None:
        X = (_frame_to_array(ensemble, X) if kind == "pandas"
             else _other_frame_to_array(X, kind))
    # float32 rows are float32 values already: no rounding (and its two copies) below
    rounded = getattr(X, "dtype", None) == np.float32
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
    if ensemble.x_float32 and not rounded:
        with np.errstate(over="ignore"):
            X = X.astype(np.float32).astype(np.float64)
        # scikit-learn's float32 trees refuse values float32 cannot hold
        if ensemble.info.get("float32_overflow") == "error" and np.isinf(X).any():
            raise ValueError(
                "X contains a value too large for float32, which "
                f"{ensemble.model_type}.predict refuses (it compares float32 values)."
            )
    X = _apply_missing(ensemble, X)
    if allow_nan is None:
        allow_nan = ensemble.info.get("allow_nan", True)
    if not allow_nan and np.isnan(X).any():
        raise UnsupportedModelError(
            f"X contains NaN, but {ensemble.model_type} does not accept missing values."
        )
    X = _cast_categories(ensemble, X)
    return np.ascontiguousarray(X)


def _apply_missing(ensemble, X):
    """Entries equal to ``info["missing"]`` as NaN (in place).

    XGBoost reads every value as float32 and drops an entry when
    ``value == missing`` with both as float32 (its ``IsValidFunctor``), so
    the comparison is on float32 values: with ``missing=0.1``, any float64
    that rounds to ``float32(0.1)`` is missing.
    """
    missing = ensemble.info.get("missing")
    if missing is None or np.isnan(missing):
        return X
    is_missing = X.astype(np.float32) == np.float32(missing)
    if is_missing.any():
        X = np.where(is_missing, np.nan, X)
    return X


def _is_sparse(X):
    if not hasattr(X, "tocsr"):
        return False

    return scipy.sparse.issparse(X)


def _sparse_to_dense(ensemble, X):
    """A sparse block as float64, absent entries as the library reads them."""
    X = X.tocsr()
    if X.ndim != 2:
        raise ValueError(f"Expected a 2D sparse matrix of rows, got {X.ndim} dimensions.")
    try:
        data = np.asarray(X.data, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"X must be numeric: {exc}") from None
    absent = np.nan if ensemble.info.get("sparse_absent") == "missing" else 0.0
    out = np.full(X.shape, absent)
    rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    # duplicate entries of a non-canonical matrix add up, as in scipy's toarray
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
        data = np.asarray(X.data, dtype=np.float64)
        rows = np.repeat(np.arange(X.shape[0]), np.diff(X.indptr))
    out[rows, X.indices] = data
    return out


def _other_frame_to_array(frame, kind):
    """A polars, pyarrow or interchange frame of numeric columns as float64."""
    if kind == "pyarrow":
        columns = [column.to_numpy() for column in frame.columns]
    else:
        columns = [frame.get_column(name).to_numpy() for name in frame.columns]
    out = np.empty((len(columns[0]) if columns else 0, len(columns)), dtype=np.float64)
    names = _column_names(frame, kind)
    for j, column in enumerate(columns):
        try:
            out[:, j] = np.asarray(column, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"X has a non-numeric column {names[j]!r}; {kind} frames must hold numbers "
                f"(category columns: pass a pandas DataFrame or integer codes) ({exc})."
            ) from None
    return out


def n_rows_features(X):
    """(n_rows, n_features) of any accepted X, refusing 1-D input as check_rows does."""
    _refuse_library_containers(X)
    shape = np.shape(X) if hasattr(X, "shape") else np.shape(np.asarray(X, dtype=object))
    if len(shape) == 1:
        raise ValueError(
            "Expected a 2D array of rows, got a 1D array; use X.reshape(1, -1) for a "
            "single row or X.reshape(-1, 1) for a single feature."
        )
    if len(shape) != 2:
        raise ValueError(f"Expected a 2D array of rows, got {len(shape)} dimensions.")
    return int(shape[0]), int(shape[1])


def _frame_to_array(ensemble, frame):
    """A DataFrame as float64, its category columns as the model's codes.

    XGBoost (``info["category_levels"]``, by column) and LightGBM
    (``info["pandas_categorical"]``, one list per category column in order)
    code a category by its position among the levels seen in training.
    Unseen levels become NaN (LightGBM) or raise, as XGBoost does
    (``info["unseen_category"] == "error"``). A LightGBM model refuses a
    frame whose number of category columns differs from training (as
    LightGBM does: a category column passed as its integer codes would
    shift the levels onto the next category column), and codes the category
    columns of a model fitted without a DataFrame by the frame's own
    categories. Other category columns must hold numbers.
    """
    pd = import_optional("pandas", "A frame with category columns")
    info = ensemble.info
    is_category = [isinstance(dtype, pd.CategoricalDtype) for dtype in frame.dtypes]
    levels = info.get("category_levels") or {}
    if "pandas_categorical" in info:  # LightGBM
        columns = [j for j, flag in enumerate(is_category) if flag]
        trained = info["pandas_categorical"]
        if trained is None:  # fitted without a DataFrame: the frame's own codes
            levels = {j: list(frame.iloc[:, j].cat.categories) for j in columns}
        elif len(columns) != len(trained):
            # LightGBM's _data_from_pandas raises "train and valid dataset
            # categorical_feature do not match" for such a frame.
            raise ValueError(
                f"X has {len(columns)} pandas 'category' columns, but {ensemble.model_type} "
                f"was fitted on a DataFrame with {len(trained)}; LightGBM refuses such a "
                "frame too. Pass the category columns with dtype 'category' (the categories "
                "seen in training), not as their integer codes."
            )
        else:
            levels = dict(zip(columns, trained))
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


def as_column(values):
    """An in-memory column (ndarray, list, pandas Series or frame, a dask
    partition of one) as an ndarray."""
    return np.asarray(values.to_numpy() if hasattr(values, "to_numpy") else values)


def check_row_weights(weight, n_rows, name="sample_weight", *, partition_of=None):
    """Row weights as float64: shape (n_rows,), finite, non-negative, not all zero.

    The one checker of row weights: ``sample_weight`` of every function and
    estimator, ``background_weight``. ``partition_of``: the weights are those
    of one dask partition of the rows so named (e.g. "X"), which has
    ``n_rows`` rows: a single column is made 1-D, a partition of other rows
    is refused (the weights must have the rows' blocks), and the weights of
    one partition may all be zero (the caller checks their sum over all
    partitions).
    """
    weight = np.asarray(as_column(weight), dtype=np.float64)
    if partition_of is not None:
        weight = weight.reshape(-1)
        if weight.shape != (n_rows,):
            raise ValueError(f"{name} has {weight.shape[0]} rows in a partition where "
                             f"{partition_of} has {n_rows}: give {name} the same row blocks "
                             f"(partitions) as {partition_of}.")
    elif weight.shape != (n_rows,):
        raise ValueError(f"{name} must have shape ({n_rows},), got {weight.shape}.")
    if not np.all(np.isfinite(weight)) or np.any(weight < 0):
        raise ValueError(f"{name} must be finite and non-negative.")
    if partition_of is None and not weight.max(initial=0.0) > 0:
        raise ValueError(f"{name} is zero for every row: no row counts.")
    return np.ascontiguousarray(weight)


def check_y(y, n_rows, what="", *, partition_of=None):
    """y as a 1-D array of ``n_rows`` values (a single column is made 1-D).

    The one checker of a target's rows (its values are the loss's to check:
    ``_scores``). ``what`` completes the message of a y of other dimensions
    (e.g. "class labels"); ``partition_of``: as in :func:`check_row_weights`.
    """
    y = as_column(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"y must be 1-dimensional{' ' if what else ''}{what}, got shape "
                         f"{y.shape}.")
    if partition_of is not None and len(y) != n_rows:
        raise ValueError(f"y has {len(y)} rows in a partition where {partition_of} has "
                         f"{n_rows}: give y (and sample_weight) the same row blocks "
                         f"(partitions) as {partition_of}, e.g. a column of the same dask "
                         "DataFrame, or y.rechunk(X.chunks[0]).")
    if len(y) != n_rows:
        raise ValueError(f"X has {n_rows} rows but y has {len(y)}.")
    return y


#: The semivalues a public function or method chooses by ``semivalue=``.
SEMIVALUES = ("shapley", "banzhaf", "weighted_banzhaf", "beta")


def _check_beta_parameter(name, value):
    if isinstance(value, bool) or int(value) != value or value < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}.")
    return int(value)


def check_semivalue(semivalue, *, q=0.5, alpha=1, beta=1):
    """The game of a semivalue, checked: ``(family, parameters)``.

    ``semivalue`` is one of :data:`SEMIVALUES`: ``"shapley"`` (``("beta",
    (1, 1))``), ``"banzhaf"`` (``("banzhaf", (0.5,))``),
    ``"weighted_banzhaf"`` (``("banzhaf", (q,))``, q in (0, 1)) or ``"beta"``
    (``("beta", (alpha, beta))``, integers >= 1); ``q`` is read only for
    ``"weighted_banzhaf"``, ``alpha`` and ``beta`` only for ``"beta"``. The
    family names the games' weights: a Beta(alpha, beta) density or the
    point mass at q (documentation page "Local attributions").
    """
    if not isinstance(semivalue, str) or semivalue not in SEMIVALUES:
        raise ValueError(f"semivalue must be one of {SEMIVALUES}, got {semivalue!r}.")
    if semivalue == "shapley":
        return "beta", (1, 1)
    if semivalue == "beta":
        return "beta", (_check_beta_parameter("alpha", alpha),
                        _check_beta_parameter("beta", beta))
    q = 0.5 if semivalue == "banzhaf" else float(q)
    if not 0.0 < q < 1.0:
        raise ValueError(f"q must be in the open interval (0, 1), got {q}.")
    return "banzhaf", (q,)


@functools.lru_cache(maxsize=None)
def _n_cpus():
    """The cores (asked once: ``os.cpu_count`` takes tens of microseconds here)."""
    return os.cpu_count() or 1


def resolve_n_jobs(n_jobs):
    """OpenMP thread count: None or -1 -> all cores, -k -> all but k-1.

    ``n_jobs`` must be None or a non-zero integer, as scikit-learn's
    ``n_jobs`` (a float such as 1.5 is refused, not truncated); more threads
    than cores are capped at the number of cores (the kernels are CPU-bound).
    """
    n_cpus = _n_cpus()
    if n_jobs is None:
        return n_cpus
    if not isinstance(n_jobs, numbers.Integral) or isinstance(n_jobs, (bool, np.bool_)):
        raise ValueError(f"n_jobs must be an integer or None, got {n_jobs!r}.")
    n_jobs = int(n_jobs)
    if n_jobs == 0:
        raise ValueError("n_jobs == 0 has no meaning; use None or -1 for all cores.")
    if n_jobs < 0:
        return max(1, n_cpus + 1 + n_jobs)
    return min(n_jobs, n_cpus)
