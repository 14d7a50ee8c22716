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
