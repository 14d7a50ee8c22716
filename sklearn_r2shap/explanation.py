"""One result object for the local explanations: :class:`Explanation` and :func:`explain`.

The array functions (:func:`~sklearn_r2shap.shap_values`, ...) return the
attributions with the expected value as the last column, multi-output models
as ``(rows, outputs, features + 1)``. :func:`explain` returns them in the
layout of shap's ``Explanation`` instead -- ``values`` of shape
``(rows, features)`` or ``(rows, features, outputs)``, ``base_values``,
``data``, ``feature_names``, ``output_names`` -- indexable by rows and by
feature name, convertible to a pandas frame and to a ``shap.Explanation``
(so that shap's plots take it). Nothing is computed here that the array
functions do not compute.

Layer: public functions. Imports ``attributions``, ``interactions``, ``_prepare``
and the layers below; never an estimator.
"""
import numbers

import numpy as np

from ._errors import import_optional
from ._execution.run import collect_rows
from ._prepare import prepare
from ._validation import column_names
from .attributions import semivalues_of
from .interactions import _interaction_values

__all__ = ["Explanation", "explain"]

_AXES = ("rows", "features", "outputs")


def _dense(X):
    """The rows as a 2-D ndarray (the data shap's plots colour points by)."""
    if hasattr(X, "toarray") and not hasattr(X, "columns"):  # scipy.sparse
        return X.toarray()
    if hasattr(X, "to_numpy"):  # pandas, polars
        return np.asarray(X.to_numpy())
    return np.asarray(X)


def _row_index(X, n_rows):
    index = getattr(X, "index", None)
    if index is not None and hasattr(X, "iloc") and len(index) == n_rows:
        return np.asarray(index)
    return np.arange(n_rows)


class Explanation:
    """Local explanations of rows in shap's layout.

    Returned by :func:`explain`; it can also be built from arrays.

    Parameters
    ----------
    values : ndarray of shape (n_rows, n_features) or (n_rows, n_features, n_outputs)
        The attributions (SHAP values) of every row, feature (and output).
    base_values : ndarray of shape (n_rows,) or (n_rows, n_outputs)
        The expected value of every row (``v_x(empty)``): a row's values plus
        its base value is the model's raw prediction.
    data : ndarray of shape (n_rows, n_features), default=None
        The feature values explained (for a Pipeline: the columns its last
        step sees).
    feature_names : array-like of str of shape (n_features,), default=None
        None gives ``x0, x1, ...``.
    output_names : array-like of shape (n_outputs,), default=None
        Class labels of a multi-output model.
    interaction_values : ndarray of shape (n_rows, n_features, n_features[, n_outputs]), default=None
        SHAP interaction values (row sums are ``values``).
    row_index : array-like of shape (n_rows,), default=None
        Row labels (a DataFrame's index); None gives ``0, 1, ...``.
    description : str, default="SHAP values"
        What the values are, shown by ``repr``.

    Attributes
    ----------
    shape : tuple
        The shape of ``values``.

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.tree import DecisionTreeRegressor
    >>> from sklearn_r2shap import explain
    >>> X, y = load_diabetes(return_X_y=True, as_frame=True)
    >>> model = DecisionTreeRegressor(max_depth=3, random_state=0).fit(X, y)
    >>> e = explain(model, X.iloc[:50])
    >>> e.values.shape, e.base_values.shape
    ((50, 10), (50,))
    >>> e[:, "bmi"].values.shape                 # one feature, every row
    (50,)
    >>> bool(np.allclose(e.values.sum(axis=1) + e.base_values, model.predict(X.iloc[:50])))
    True
    >>> e.to_frame().shape                       # long: one line per row and feature
    (500, 5)
    """

    def __init__(self, values, base_values, data=None, feature_names=None, output_names=None,
                 interaction_values=None, row_index=None, description="SHAP values",
                 _axes=None):
        values = np.asarray(values, dtype=np.float64)
        if _axes is None:
            if values.ndim not in (2, 3):
                raise ValueError("values must have shape (n_rows, n_features) or "
                                 f"(n_rows, n_features, n_outputs), got {values.shape}.")
            _axes = _AXES[:values.ndim]
        self._axes = tuple(_axes)
        self.values = values
        self.base_values = np.asarray(base_values, dtype=np.float64)
        sizes = dict(zip(self._axes, values.shape))
        if self.base_values.shape != tuple(sizes[a] for a in self._axes if a != "features"):
            raise ValueError(f"base_values has shape {self.base_values.shape}, values "
                             f"{values.shape}: expected one base value per row (and output).")
        self.data = None if data is None else np.asarray(data)
        if "features" in sizes and feature_names is None:
            feature_names = [f"x{j}" for j in range(sizes["features"])]
        self.feature_names = (np.asarray(feature_names, dtype=object)
                              if feature_names is not None and np.ndim(feature_names) else
                              feature_names)
        self.output_names = (None if output_names is None else
                             np.asarray(output_names) if np.ndim(output_names) else output_names)
        self.interaction_values = (None if interaction_values is None
                                   else np.asarray(interaction_values, dtype=np.float64))
        if "rows" in sizes:
            self.row_index = (np.arange(sizes["rows"]) if row_index is None
                              else np.asarray(row_index))
        else:
            self.row_index = row_index
        self.description = description

    # ------------------------------------------------------------------ shape
    @property
    def shape(self):
        return self.values.shape

    def __len__(self):
        if "rows" not in self._axes:
            raise TypeError("this Explanation is of a single row (it has no rows axis).")
        return self.values.shape[0]

    # --------------------------------------------------------------- indexing
    def _feature_index(self, key):
        names = [str(n) for n in np.atleast_1d(self.feature_names)]

        def position(name):
            try:
                return names.index(name)
            except ValueError:
                raise KeyError(f"no feature named {name!r}; features: {names}") from None

        if isinstance(key, str):
            return position(key)
        if isinstance(key, (list, tuple, np.ndarray)) and len(key) and all(
                isinstance(k, str) for k in key):
            return np.array([position(k) for k in key])
        return key

    def __getitem__(self, key):
        """Rows, features (by name or position) and outputs, in that order.

        ``e[5]`` is one row, ``e[:10]`` ten rows, ``e["bmi"]`` or ``e[:, "bmi"]``
        one feature of every row, ``e[:, ["bmi", "s5"], 1]`` two features of
        output 1. An integer drops its axis, as in numpy.
        """
        if not isinstance(key, tuple):
            key = (key,)
        if len(key) == 1 and "features" in self._axes and (
                isinstance(key[0], str) or (isinstance(key[0], (list, tuple)) and key[0]
                                            and all(isinstance(k, str) for k in key[0]))):
            key = (slice(None),) * self._axes.index("features") + key
        if len(key) > len(self._axes):
            raise IndexError(f"too many indices: this Explanation has axes {self._axes}.")
        index = dict(zip(self._axes, key))
        if "features" in index:
            index["features"] = self._feature_index(index["features"])

        def take(array, axes):
            """``array`` (whose axes are ``axes``) indexed axis by axis, last first."""
            if array is None:
                return None
            for position in range(len(axes) - 1, -1, -1):
                if axes[position] in index:
                    array = array[(slice(None),) * position + (index[axes[position]],)]
            return array

        kept = tuple(a for a in self._axes
                     if not isinstance(index.get(a, slice(None)), numbers.Integral))
        interaction_axes = ("rows", "features", "interacting") + (
            ("outputs",) if "outputs" in self._axes else ())
        interaction_axes = tuple(a for a in interaction_axes
                                 if a in self._axes or a == "interacting")

        def labels(array, axis):
            return array[index[axis]] if array is not None and axis in index else array

        return Explanation(
            take(self.values, self._axes),
            take(self.base_values, tuple(a for a in self._axes if a != "features")),
            data=take(self.data, tuple(a for a in self._axes if a != "outputs")),
            feature_names=labels(self.feature_names, "features"),
            output_names=labels(self.output_names, "outputs"),
            interaction_values=take(self.interaction_values, interaction_axes),
            row_index=labels(self.row_index, "rows"),
            description=self.description, _axes=kept)

    # ------------------------------------------------------------ conversions
    def _full(self):
        """values (rows, features, outputs), base (rows, outputs), data (rows, features)
        with every axis present (length 1 where indexing dropped it), and labels."""
        values, base = self.values, self.base_values
        data = self.data
        for position, axis in enumerate(_AXES):
            if axis not in self._axes:
                values = np.expand_dims(values, position)
                if axis != "features":
                    base = np.expand_dims(base, 0 if axis == "rows" else base.ndim)
                if data is not None and axis != "outputs":
                    data = np.expand_dims(data, position)
        features = np.atleast_1d(np.asarray(self.feature_names, dtype=object))
        rows = np.atleast_1d(self.row_index if self.row_index is not None else 0)
        outputs = (None if self.output_names is None and "outputs" not in self._axes
                   else np.atleast_1d(self.output_names if self.output_names is not None
                                      else np.arange(values.shape[2])))
        return values, base, data, rows, features, outputs

    def to_frame(self, layout="long"):
        """The values as a pandas DataFrame.

        Parameters
        ----------
        layout : {"long", "wide"}, default="long"
            "long": one line per row, feature (and output), with columns
            ``row``, (``output``,) ``feature``, ``value``, ``data``,
            ``base_value``. "wide": one line per row, one column per feature
            (a column MultiIndex (output, feature) for several outputs).

        Returns
        -------
        pandas.DataFrame
        """
        pd = import_optional("pandas", "Explanation.to_frame()")
        if not isinstance(layout, str) or layout not in ("long", "wide"):
            raise ValueError(f"layout must be 'long' or 'wide', got {layout!r}.")
        values, base, data, rows, features, outputs = self._full()
        n_rows, n_features, n_outputs = values.shape
        if layout == "wide":
            if outputs is None:
                return pd.DataFrame(values[:, :, 0], index=rows, columns=features)
            columns = pd.MultiIndex.from_product([outputs, features],
                                                 names=["output", "feature"])
            return pd.DataFrame(values.transpose(0, 2, 1).reshape(n_rows, -1), index=rows,
                                columns=columns)
        frame = {"row": np.repeat(rows, n_features * n_outputs)}
        if outputs is not None:
            frame["output"] = np.tile(outputs, n_rows * n_features)
        frame["feature"] = np.tile(np.repeat(features, n_outputs), n_rows)
        frame["value"] = values.reshape(-1)
        frame["data"] = (np.repeat(data.reshape(-1), n_outputs) if data is not None
                         else np.full(values.size, np.nan))
        frame["base_value"] = np.repeat(base[:, None, :], n_features, axis=1).reshape(-1)
        return pd.DataFrame(frame)

    def to_shap(self):
        """A ``shap.Explanation`` of the same values, for shap's plots.

        ``shap.plots.beeswarm(e.to_shap())``, ``shap.plots.waterfall(e[0].to_shap())``.
        Needs the ``shap`` package (imported here only).
        """
        shap = import_optional("shap", "Explanation.to_shap() (to_frame() needs only pandas)")
        features = self.feature_names
        outputs = self.output_names
        return shap.Explanation(
            values=self.values,
            base_values=self.base_values if self.base_values.ndim else float(self.base_values),
            data=self.data,
            feature_names=(list(map(str, features)) if np.ndim(features) else
                           None if features is None else str(features)),
            output_names=(None if outputs is None else
                          list(map(str, outputs)) if np.ndim(outputs) else str(outputs)),
        )

    def __repr__(self):
        sizes = dict(zip(self._axes, self.values.shape))
        parts = [f"{sizes[a]} {a}" for a in self._axes]
        head = (f"Explanation({self.description}: " + " x ".join(parts) if parts
                else f"Explanation({self.description}: one value") + ")"
        lines = [head]
        if "rows" not in sizes and self.row_index is not None:
            lines.append(f"  row: {self.row_index}")
        if "features" not in sizes and self.feature_names is not None:
            lines.append(f"  feature: {self.feature_names}")
        if "outputs" in sizes and self.output_names is not None:
            lines.append(f"  outputs: {', '.join(map(str, self.output_names))}")
        base = np.asarray(self.base_values)
        if base.size:
            shown = (f"{float(base.reshape(-1)[0]):.6g}" if np.ptp(base) == 0 else
                     f"{float(base.mean()):.6g} on average")
            if "outputs" in sizes and base.ndim:
                per_output = base.reshape(-1, sizes["outputs"]).mean(axis=0)
                shown = ", ".join(f"{v:.6g}" for v in per_output)
            lines.append(f"  base value: {shown}")
        if "features" in sizes:
            magnitude = np.abs(self.values)
            feature_axis = self._axes.index("features")
            magnitude = np.moveaxis(magnitude, feature_axis, 0).reshape(sizes["features"], -1)
            magnitude = magnitude.mean(axis=1)
            top = np.argsort(-magnitude, kind="stable")[:5]
            names = np.atleast_1d(self.feature_names)
            shown = ", ".join(f"{names[j]} {magnitude[j]:.4g}" for j in top)
            more = ", ..." if sizes["features"] > 5 else ""
            lines.append(f"  mean |value|: {shown}{more}")
        if self.interaction_values is not None:
            lines.append(f"  interaction_values: shape {self.interaction_values.shape}")
        return "\n".join(lines)


def _shap_layout(phi, n_outputs):
    """(values, base_values) in shap's layout from an array function's output."""
    if n_outputs == 1:
        return phi[:, :-1], phi[:, -1].copy()
    return phi[:, :, :-1].transpose(0, 2, 1), phi[:, :, -1].copy()


def _interaction_layout(phi, n_outputs):
    """(rows, features, features[, outputs]) from (rows[, outputs], p + 1, p + 1)."""
    if n_outputs == 1:
        return phi[:, :-1, :-1]
    return phi[:, :, :-1, :-1].transpose(0, 2, 3, 1)


def _group_data(X, feature_groups, names):
    """With ``feature_groups="input"``: the input columns the groups stand for (a group's
    data is one input column); else None (a group has no single value)."""
    if not (isinstance(feature_groups, str) and feature_groups == "input"):
        return None
    inputs = column_names(X)
    inputs = ([f"x{j}" for j in range(np.shape(X)[1])] if inputs is None
              else [str(n) for n in inputs])
    dense = _dense(X)
    return dense[:, [inputs.index(str(n)) for n in names]]


def explain(model, X, *, background=None, feature_groups=None, interactions=False, n_jobs=None,
            verbose="auto"):
    """Exact SHAP values of a tree model (or a Pipeline ending in one) as an :class:`Explanation`.

    The values of :func:`~sklearn_r2shap.shap_values` in shap's layout, with
    the names of the columns, ready for pandas and for shap's plots.

    Parameters
    ----------
    model : fitted tree model or Pipeline
        A model :func:`~sklearn_r2shap.shap_values` reads, or a fitted
        scikit-learn Pipeline whose last step is one: its steps transform X
        and the explanation is that of the last step, on the columns named by
        ``get_feature_names_out``.
    X : array-like, DataFrame, sparse matrix, dask collection or Spark DataFrame of shape (n_rows, n_features)
        Rows to explain. The result holds them and their values in memory: a
        dask collection's values are computed on its workers, a Spark
        DataFrame's on its executors (its feature columns named as in
        :func:`~sklearn_r2shap.shap_values`), and then brought to the driver
        with the rows (pass a sample you can hold; for every row of a large
        table, keep :func:`~sklearn_r2shap.shap_values`' lazy result instead).
    background : array-like or DataFrame, default=None
        Rows of the interventional game (page "Local attributions"); None
        gives the path-dependent values (TreeSHAP's game). For a Pipeline,
        transformed as X.
    feature_groups : mapping or "input", default=None
        Feature groups as players (see :func:`~sklearn_r2shap.shap_values`):
        exact Shapley values of the groups, one value per group, named by the
        mapping's keys (then the columns in no group). ``"input"`` for a
        Pipeline: one group per input column (its one-hot columns, ...),
        ``data`` then holds the input columns. With ``background``, the
        interventional values of the groups. Not with ``interactions``.
    interactions : bool, default=False
        Also compute the SHAP interaction values (``interaction_values``; not
        for a Spark DataFrame, whose values are collected one kind at a time).
    n_jobs : int, default=None
    verbose : "auto" or int, default="auto"
        Threads (None: all cores) and progress, as in :func:`~sklearn_r2shap.shap_values`.

    Returns
    -------
    Explanation
        ``values`` of shape (n_rows, n_features) or (n_rows, n_features,
        n_outputs) in the model's raw (margin) space, ``base_values`` (the
        expected value, per row), ``data``, ``feature_names`` and, for
        several outputs, ``output_names`` (the classes).

    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from sklearn_r2shap import explain
    >>> iris = load_iris(as_frame=True)
    >>> model = RandomForestClassifier(n_estimators=5, max_depth=3, random_state=0)
    >>> e = explain(model.fit(iris.data, iris.target), iris.data.iloc[:20])
    >>> e.values.shape, e.base_values.shape, e.output_names.tolist()
    ((20, 4, 3), (20, 3), [0, 1, 2])
    >>> e[0, "petal length (cm)"].values.shape   # one row, one feature: one value per class
    (3,)
    """
    if feature_groups is not None and interactions:
        raise ValueError("feature_groups= gives the Shapley values of the groups; it cannot be "
                         "combined with interactions=True (interaction values are "
                         "per feature): pass one of them.")
    if background is not None and interactions:
        raise ValueError("interactions=True computes the path-dependent interaction "
                         "values; pass background=None with it.")
    call = prepare(model, X, feature_groups=feature_groups, background=background, n_jobs=n_jobs,
                   verbose=verbose)
    ensemble = call.ensemble
    (phi, *interaction), X, X_last = collect_rows(
        call, [semivalues_of] + ([_interaction_values] if interactions else []), X)
    game = "interventional" if background is not None else "path-dependent"
    if feature_groups is not None:
        names = call.players
        description = game + " SHAP values of feature groups"
        data = _group_data(X, feature_groups, names)
    else:
        names = call.names
        description = game + " SHAP values"
        data = None if background is not None else _dense(X_last)
    interaction = (_interaction_layout(interaction[0], ensemble.n_outputs) if interactions
                   else None)
    values, base_values = _shap_layout(phi, ensemble.n_outputs)
    output_names = None
    if ensemble.n_outputs > 1:
        classes = ensemble.info.get("classes")
        output_names = (np.asarray(classes) if classes is not None
                        and len(classes) == ensemble.n_outputs
                        else np.arange(ensemble.n_outputs))
    return Explanation(values, base_values, data=data, feature_names=names,
                       output_names=output_names, interaction_values=interaction,
                       row_index=_row_index(X, values.shape[0]), description=description)
