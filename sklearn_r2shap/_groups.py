"""Feature groups as players (documentation page "Pipelines, Explanation results and IsolationForest", groups).

The game of a set T of groups is the game of the union of their members.
For the path-dependent game that is the game of the same trees in which a
split's *player* is its feature's group while its rule still reads the
feature's column (:meth:`TreeEnsemble.with_players`), so every kernel gives
the exact values of the groups -- not the sums of the members' values.

:func:`resolve_groups` turns ``feature_groups=`` (a mapping name -> columns, or
``"input"`` for a Pipeline: every output column of its steps to the input
column it came from) into one player per column.

Layer: public functions (helpers at the boundary). Imports ``_pipeline``, ``_model``,
``_validation``; never an estimator.
"""
import numbers
from dataclasses import replace

import numpy as np

from ._model import explainable_ensemble as _explained
from ._pipeline import _steps, has_transformers, unwrap
from ._validation import column_names, n_rows_features

__all__ = ["resolve_groups", "input_groups"]


def resolve_groups(feature_groups, n_features, names):
    """``(player_of_column, player_names)`` of ``feature_groups``.

    Players are the groups in the mapping's order, then every column in no
    group, in column order, as a player of its own (named by the column).

    Parameters
    ----------
    feature_groups : mapping of str to sequence of column names or indices
    n_features : int
    names : array of str or None
        The column names (for groups given by name).
    """
    if not hasattr(feature_groups, "items"):
        raise TypeError("feature_groups must be a mapping of group name to columns (names or "
                        f"indices), got {type(feature_groups).__name__}.")
    names = None if names is None else [str(n) for n in names]
    player = np.full(n_features, -1, dtype=np.int64)
    player_names = []
    for g, (group, columns) in enumerate(feature_groups.items()):
        if isinstance(columns, (str, numbers.Integral)):
            columns = [columns]
        columns = list(columns)
        if not columns:
            raise ValueError(f"group {group!r} has no columns.")
        for column in columns:
            if isinstance(column, str):
                if names is None or column not in names:
                    known = "X has no column names" if names is None else f"columns: {names}"
                    raise ValueError(f"group {group!r}: no column named {column!r} ({known}).")
                j = names.index(column)
            elif isinstance(column, numbers.Integral) and not isinstance(column, bool):
                j = int(column)
                if not 0 <= j < n_features:
                    raise ValueError(f"group {group!r}: column index {j} is out of range "
                                     f"[0, {n_features}).")
            else:
                raise TypeError(f"group {group!r}: a column is a name or an index, got "
                                f"{column!r}.")
            if player[j] >= 0:
                raise ValueError(f"column {names[j] if names else j!r} is in two groups "
                                 f"({player_names[player[j]]!r} and {group!r}); a column "
                                 "may be in at most one group.")
            player[j] = g
        player_names.append(group)
    for j in np.flatnonzero(player < 0):
        player[j] = len(player_names)
        player_names.append(names[j] if names is not None else f"x{j}")
    return player, player_names


# Transformers whose every output column is a function of one input column, in order
# (Normalizer is not: it scales a row by its norm over all columns).
_ELEMENTWISE = {
    "StandardScaler", "MinMaxScaler", "MaxAbsScaler", "RobustScaler", "PowerTransformer",
    "QuantileTransformer", "OrdinalEncoder", "Binarizer",
}


def _outputs_per_input(name, step, n_inputs):
    """For a fitted transformer: the input column (0..n_inputs-1) of each output
    column, or raise when an output is built from several inputs or unknown."""
    kind = type(step).__name__
    if isinstance(step, str) and step == "passthrough":
        return np.arange(n_inputs)
    if isinstance(step, str) and step == "drop":
        return np.zeros(0, dtype=np.int64)
    if kind == "OneHotEncoder":
        counts = getattr(step, "_n_features_outs", None)
        if counts is None:
            counts = [len(c) - (d is not None) for c, d in
                      zip(step.categories_, step.drop_idx_ if step.drop_idx_ is not None
                          else [None] * len(step.categories_))]
        return np.repeat(np.arange(n_inputs), counts)
    if kind == "KBinsDiscretizer" and step.encode != "ordinal":
        return np.repeat(np.arange(n_inputs), step.n_bins_)
    if kind == "SimpleImputer" and not step.add_indicator and len(
            step.get_feature_names_out()) == n_inputs:
        return np.arange(n_inputs)
    if kind in _ELEMENTWISE:
        return np.arange(n_inputs)
    if kind == "FunctionTransformer" and step.func is None:
        # the identity: how ColumnTransformer holds remainder="passthrough" when fitted
        return np.arange(n_inputs)
    if kind == "ColumnTransformer":
        return _column_transformer_inputs(step, n_inputs)
    if kind == "Pipeline":
        mapping = np.arange(n_inputs)
        for inner_name, inner in step.steps:
            if inner is None or (isinstance(inner, str) and inner == "passthrough"):
                continue
            mapping = mapping[_outputs_per_input(inner_name, inner, len(mapping))]
        return mapping
    raise ValueError(
        f"feature_groups='input': cannot tell which input column each output of step {name!r} "
        f"({kind}) comes from (a column may be built from several inputs); pass explicit "
        "feature_groups, a mapping of name to the transformed columns of each group.")


def _column_transformer_inputs(transformer, n_inputs):
    mapping = np.full(len(transformer.get_feature_names_out()), -1, dtype=np.int64)
    all_columns = np.arange(n_inputs)
    for part, step, columns in transformer.transformers_:
        out = transformer.output_indices_[part]
        if out.stop == out.start:
            continue
        chosen = all_columns[_column_indices(transformer, columns, n_inputs)]
        mapping[out] = chosen[_outputs_per_input(part, step, len(chosen))]
    if np.any(mapping < 0):
        raise ValueError("feature_groups='input': could not map every output column of the "
                         "ColumnTransformer to an input column; pass explicit feature_groups.")
    return mapping


def _column_indices(transformer, columns, n_inputs):
    """The input columns a ColumnTransformer part reads (names, indices, masks, slices)."""
    names = getattr(transformer, "feature_names_in_", None)
    if callable(columns):
        raise ValueError("feature_groups='input': a callable column selector cannot be mapped "
                         "back; pass explicit feature_groups.")
    if isinstance(columns, (str, numbers.Integral)):
        columns = [columns]
    if isinstance(columns, slice):
        if isinstance(columns.start, str) or isinstance(columns.stop, str):
            raise ValueError("feature_groups='input': a slice of column names cannot be mapped "
                             "back; pass explicit feature_groups.")
        return np.arange(n_inputs)[columns]
    columns = np.asarray(columns)
    if columns.dtype == bool:
        return np.flatnonzero(columns)
    if columns.dtype.kind in "iu":
        return columns.astype(np.int64)
    lookup = {str(n): j for j, n in enumerate(names)} if names is not None else {}
    return np.array([lookup[str(c)] for c in columns], dtype=np.int64)


def input_groups(pipeline, input_names):
    """``feature_groups="input"``: a mapping input column name -> transformed column indices."""
    transformers, _ = _steps(pipeline)
    n_inputs = len(input_names)
    mapping = np.arange(n_inputs)
    for name, step in transformers:
        mapping = mapping[_outputs_per_input(name, step, len(mapping))]
    feature_groups = {}
    for j, column in enumerate(mapping):
        feature_groups.setdefault(str(input_names[column]), []).append(j)
    return feature_groups


def players(model, feature_groups, n_features, names, input_names, n_inputs):
    """``(player_of_column, player_names)`` of ``feature_groups`` for the last step of
    ``model`` (:func:`resolve_groups`), ``"input"`` read from the input
    columns (``input_names``, or x0, x1, ... for ``n_inputs`` unnamed ones)."""
    if isinstance(feature_groups, str):
        if feature_groups != "input":
            raise ValueError("feature_groups must be a mapping or 'input', got "
                             f"{feature_groups!r}.")
        if input_names is None:
            input_names = np.array([f"x{j}" for j in range(
                n_features if n_inputs is None else n_inputs)])
        if has_transformers(model):
            feature_groups = input_groups(model, input_names)
        else:
            feature_groups = {str(n): [j] for j, n in enumerate(input_names)}
    return resolve_groups(feature_groups, n_features, names)


def grouped_model(model, X, feature_groups, ensemble_of=None):
    """``(ensemble with the groups as players, rows, player names)`` of a model
    (or Pipeline: its last step and transformed rows) and ``feature_groups``;
    ``ensemble_of(last step)`` gives the ensemble (default: its own)."""
    input_names, n_inputs = column_names(X), n_rows_features(X)[1]
    last, rows, names = unwrap(model, X)
    ensemble = _explained(last) if ensemble_of is None else ensemble_of(last)
    if names is None:
        names = column_names(rows)
    if names is None:
        names = ensemble.feature_names
    player, player_names = players(model, feature_groups, ensemble.n_features, names, input_names,
                                   n_inputs)
    return ensemble.with_players(player), rows, player_names


def input_columns_of_players(model, X, feature_groups, player_names):
    """For a selector: the input columns (of X) each player stands for, or None
    when players are not sets of input columns (explicit groups of the columns
    a Pipeline's steps make)."""
    n_inputs = n_rows_features(X)[1]
    inputs = column_names(X)
    inputs = [f"x{j}" for j in range(n_inputs)] if inputs is None else [str(n) for n in inputs]
    if has_transformers(model):
        if not (isinstance(feature_groups, str) and feature_groups == "input"):
            return None
        return [np.array([inputs.index(str(name))]) for name in player_names]
    if isinstance(feature_groups, str):  # "input" without transforming steps: the columns
        return [np.array([inputs.index(str(name))]) for name in player_names]
    player, _ = resolve_groups(feature_groups, n_inputs, inputs)
    return [np.flatnonzero(player == k) for k in range(len(player_names))]


def restrict_decomposition(result, player_names):
    """An R2Decomposition of a grouped ensemble with its null players (the
    columns beyond the groups, which no split credits) dropped."""
    k = len(player_names)

    def cut(values, axis=0):
        if values is None:
            return None
        return values[:, :k] if axis == 1 else values[:k]

    return replace(result, shares=cut(result.shares),
                   std_errors=cut(result.std_errors), local=cut(result.local, axis=1),
                   mc_std_errors=cut(result.mc_std_errors),
                   feature_names=np.asarray(player_names, dtype=object))


def restrict_interactions(result, player_names):
    """An R2Interactions of a grouped ensemble with its null players dropped
    (as :func:`restrict_decomposition`)."""
    k = len(player_names)
    local = None if result.local is None else result.local[:, :k, :k]
    return replace(result, shares=result.shares[:k, :k], std_errors=result.std_errors[:k, :k],
                   local=local,
                   decomposition=restrict_decomposition(result.decomposition, player_names))
