"""Plots (matplotlib is optional: imported only when a plot is asked for).

Layer: ground floor (matplotlib imported when a plot is drawn). Imports
``_errors``.
"""
import numpy as np

from ._errors import import_optional


def plot_bars(values, errors, names, *, ax=None, max_features=20, xlabel="", title=""):
    """Horizontal bars of ``values`` (largest on top) with ``errors`` as error bars.

    Returns the matplotlib Axes.
    """
    plt = import_optional("matplotlib.pyplot", "Plotting")
    values = np.asarray(values, dtype=float)
    order = np.argsort(-values, kind="mergesort")[:max_features][::-1]
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 0.35 * len(order) + 1.2 + 0.2 * title.count("\n")))
    positions = np.arange(len(order))
    xerr = None if errors is None else np.asarray(errors, dtype=float)[order]
    colors = ["tab:blue" if v >= 0 else "tab:red" for v in values[order]]
    ax.barh(positions, values[order], xerr=xerr, color=colors, capsize=3)
    ax.set_yticks(positions)
    ax.set_yticklabels([str(names[j]) for j in order])
    ax.axvline(0.0, color="black", linewidth=0.8)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title, fontsize="medium")
    return ax


def plot_heatmap(matrix, names, *, ax=None, max_features=20, label="", title=""):
    """A symmetric (features, features) matrix as a heatmap, the features of
    the largest row sums of absolute values first (at most ``max_features``).

    Returns the matplotlib Axes.
    """
    plt = import_optional("matplotlib.pyplot", "Plotting")
    matrix = np.asarray(matrix, dtype=float)
    order = np.argsort(-np.abs(matrix).sum(axis=1), kind="mergesort")[:max_features]
    shown = matrix[np.ix_(order, order)]
    if ax is None:
        size = 0.4 * len(order) + 2.0
        _, ax = plt.subplots(figsize=(size + 1.0, size))
    limit = float(np.max(np.abs(shown), initial=0.0)) or 1.0
    low = -limit if np.any(shown < 0) else 0.0
    image = ax.imshow(shown, cmap="RdBu_r" if low < 0 else "viridis", vmin=low, vmax=limit)
    ax.figure.colorbar(image, ax=ax, label=label)
    ticks = np.arange(len(order))
    ax.set_xticks(ticks)
    ax.set_xticklabels([str(names[j]) for j in order], rotation=90)
    ax.set_yticks(ticks)
    ax.set_yticklabels([str(names[j]) for j in order])
    if title:
        ax.set_title(title, fontsize="medium")
    return ax
