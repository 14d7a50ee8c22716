"""Spark: exact SHAP values of Spark DataFrames, and a Spark ML Transformer.

The public functions accept a Spark DataFrame in place of in-memory rows
(documentation page "Spark"): :func:`~sklearn_r2shap.shap_values` and the
other per-row explanations return a lazy Spark DataFrame of the columns kept
and the values, computed partition by partition on the executors
(:mod:`sklearn_r2shap._execution.spark`). This module holds what only Spark
users need:

- :class:`SparkRows`: a Spark DataFrame with its feature columns, the
  columns to keep, the output column and the layout named;
- :class:`ShapTransformer`: a ``pyspark.ml`` Transformer of the SHAP values
  (``setInputCols`` / ``setOutputCol``, ``transform``, ``transformSchema``)
  that sits in a ``pyspark.ml.Pipeline`` after the user's feature stages.

Importing it imports pyspark (``pip install "sklearn-r2shap[spark]"``); the
rest of the package never does unless a Spark DataFrame is given.

Layer: estimators (it calls the public functions). Imports the public
functions, ``_execution``, ``_model`` and the ground floor.
"""
from ._errors import import_optional
from ._execution import spark as _spark
from ._execution.spark import SparkRows
from ._model import explainable_ensemble
from ._pipeline import final_step
from .attributions import shap_values

_ml = import_optional("pyspark.ml", "sklearn_r2shap.spark")
_param = import_optional("pyspark.ml.param", "sklearn_r2shap.spark")
_shared = import_optional("pyspark.ml.param.shared", "sklearn_r2shap.spark")
_pyspark = import_optional("pyspark", "sklearn_r2shap.spark")

__all__ = ["SparkRows", "ShapTransformer", "tree_model"]


def _is_xgboost_spark_model(model):
    return (type(model).__module__.split(".")[:2] == ["xgboost", "spark"]
            and hasattr(model, "get_booster"))


def tree_model(model):
    """The Python tree model behind ``model``: an XGBoost PySpark model
    (``SparkXGBRegressorModel``, ``SparkXGBClassifierModel``) read through
    its booster (``get_booster()``), any other model as is."""
    if _is_xgboost_spark_model(model):
        return model.get_booster()
    return model


def _default_input_cols(model):
    """An XGBoost PySpark model's ``features_cols`` (None if not set)."""
    if _is_xgboost_spark_model(model) and model.hasParam("features_cols"):
        if model.isDefined("features_cols"):
            columns = model.getOrDefault("features_cols")
            return list(columns) if columns else None
    return None


class ShapTransformer(_ml.Transformer, _shared.HasInputCols, _shared.HasOutputCol):
    """Exact SHAP values of every row, as a Spark ML Transformer.

    ``transform`` keeps every column of the DataFrame and appends the
    path-dependent SHAP values of the model (those of
    :func:`~sklearn_r2shap.shap_values`, bit for bit): one array column
    (the features' values, the expected value last; an array per output
    for a model of several outputs) or, with ``layout="columns"``, one
    double column per feature named ``<outputCol>_<feature>`` and
    ``<outputCol>_expected_value``. The model is converted once on the
    driver and broadcast once; the rows are explained on the executors,
    batch by batch through Arrow.

    Parameters
    ----------
    model : fitted tree model
        A scikit-learn, XGBoost, LightGBM or CatBoost model (a Python
        object), or an XGBoost PySpark model (``SparkXGBRegressorModel``,
        ``SparkXGBClassifierModel``: read through ``get_booster()``).
    inputCols : list of str, optional
        The feature columns in the model's feature order (numeric). Default:
        the model's feature names (an XGBoost PySpark model's
        ``features_cols``).
    outputCol : str, default="shap_values"
    layout : {"array", "columns"}, default="array"
    nJobs : int, optional
        OpenMP threads per Spark task (None: one; Spark runs a task per core).

    Examples
    --------
    A Spark session is needed; the page "Spark" of the documentation runs
    this example (its test starts a local session)::

        from pyspark.ml import Pipeline
        from sklearn_r2shap.spark import ShapTransformer

        stage = ShapTransformer(model=model, inputCols=["x0", "x1", "x2"])
        explained = Pipeline(stages=[stage]).fit(df).transform(df)
    """

    layout = _param.Param(_param.Params._dummy(), "layout",
                          "'array' (one array column) or 'columns' (one column per feature)",
                          typeConverter=_param.TypeConverters.toString)
    nJobs = _param.Param(_param.Params._dummy(), "nJobs",
                         "OpenMP threads per Spark task (None: one)")

    @_pyspark.keyword_only
    def __init__(self, *, model=None, inputCols=None, outputCol="shap_values", layout="array",
                 nJobs=None):
        super().__init__()
        self._setDefault(outputCol="shap_values", layout="array", nJobs=None)
        kwargs = dict(self._input_kwargs)
        self.model = kwargs.pop("model", None)
        self._set(**kwargs)

    @_pyspark.keyword_only
    def setParams(self, *, inputCols=None, outputCol="shap_values", layout="array", nJobs=None):
        """Set the parameters given by keyword."""
        return self._set(**self._input_kwargs)

    def setInputCols(self, value):
        """The feature columns, in the model's feature order."""
        return self._set(inputCols=value)

    def setOutputCol(self, value):
        """The values' column (its prefix with ``layout="columns"``)."""
        return self._set(outputCol=value)

    def setLayout(self, value):
        """"array" or "columns"."""
        return self._set(layout=value)

    def getLayout(self):
        return self.getOrDefault(self.layout)

    def setModel(self, model):
        """The fitted tree model explained."""
        self.model = model
        return self

    def _input_cols(self):
        if self.isDefined(self.inputCols):
            return list(self.getInputCols())
        return _default_input_cols(self.model)

    def _tree_model(self):
        if self.model is None:
            raise ValueError("ShapTransformer has no model: pass model= or call setModel.")
        return tree_model(self.model)

    def transformSchema(self, schema):
        """The schema ``transform`` returns for a DataFrame of ``schema``:
        every column, then the values (checked: the feature columns exist and
        are numeric, the output columns are new)."""
        ensemble = explainable_ensemble(final_step(self._tree_model()))
        input_cols = self._input_cols()
        if input_cols is None:
            names = ensemble.feature_names
            if names is None:
                raise ValueError("Set inputCols: the model has no feature names.")
            input_cols = [str(name) for name in names]
        _spark.check_input_types(schema, input_cols)
        if len(input_cols) != ensemble.n_features:
            raise ValueError(f"inputCols names {len(input_cols)} columns, but the model "
                             f"({ensemble.model_type}) expects {ensemble.n_features} features.")
        width = (ensemble.n_features + 1,)
        shape = width if ensemble.n_outputs == 1 else (ensemble.n_outputs,) + width
        return _spark.result_schema(schema, schema.fieldNames(), shape, self.getOutputCol(),
                                    self.getLayout(), input_cols)

    def _transform(self, dataset):
        n_jobs = self.getOrDefault(self.nJobs)
        rows = SparkRows(dataset, input_cols=self._input_cols(), keep_cols=None,
                         output_col=self.getOutputCol(), layout=self.getLayout())
        return shap_values(self._tree_model(), rows, n_jobs=None if n_jobs is None
                           else int(n_jobs), verbose=0)

