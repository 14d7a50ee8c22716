"""Readable results: the shares table (text and HTML).

:class:`~sklearn_r2shap.R2Decomposition`, :class:`~sklearn_r2shap.CostEstimate`
and ``python -m sklearn_r2shap`` print their numbers through the functions
here, so a share is called a share, and the model's R^2 or D^2 its score,
wherever a user reads them (``doc/glossary.rst``).

Layer: ground floor. Imports nothing of the package.
"""
import html

import numpy as np

__all__ = ["shares_table", "shares_html"]

#: rows of a table before it is truncated (repr); ``str`` shows every feature
MAX_ROWS = 20


def score_short(score_name):
    """"R2" for R^2, "D2" for every D^2 (table headers)."""
    return "R2" if score_name == "r2" else "D2"


def _rows(names, shares, std_errors, score, max_rows):
    """(name, share, std.err or None, fraction) by decreasing share; the hidden count."""
    order = np.argsort(-np.asarray(shares, dtype=float), kind="mergesort")
    hidden = 0
    if max_rows is not None and len(order) > max_rows:
        hidden = len(order) - max_rows
        order = order[:max_rows]
    rows = []
    for j in order:
        error = None if std_errors is None or not np.isfinite(std_errors[j]) else std_errors[j]
        fraction = shares[j] / score if score else np.nan
        rows.append((str(names[j]), float(shares[j]), error, fraction))
    return rows, hidden


def _unsigned_zero(value):
    """``value``, or 0.0 where it shows as zero to four decimals: the
    unattributed part of an exact decomposition is a difference of sums,
    zero up to rounding of either sign, and is not shown as -0.0000."""
    return 0.0 if round(float(value), 4) == 0.0 else float(value)


def shares_table(names, shares, std_errors, score, unattributed, score_name="r2", *,
                 max_rows=None, score_label=None):
    """The shares table as text lines: feature, share, std.err, % of the score.

    Features by decreasing share, then the sum of the shares, the
    unattributed part and the model's score (they add up: sum + unattributed
    = score). With ``max_rows``, only the largest ``max_rows`` shares are
    listed and one line says how many are left out (the sum is over all).
    """
    short = score_short(score_name)
    width = max([12] + [len(str(n)) for n in names])
    rows, hidden = _rows(names, shares, std_errors, score, max_rows)
    lines = [f"{'feature':<{width}} {'share':>9} {'std.err':>9} {'% of ' + short:>8}"]
    for name, share, error, fraction in rows:
        error = "" if error is None else f"{error:.4f}"
        lines.append(f"{name:<{width}} {share:>9.4f} {error:>9} {fraction:>8.1%}")
    if hidden:
        lines.append(f"{f'... {hidden} more features (smaller shares)':<{width}}")
    lines.append(f"{'sum':<{width}} {float(np.sum(shares)):>9.4f}")
    lines.append(f"{'unattributed':<{width}} {_unsigned_zero(unattributed):>9.4f}")
    label = f"   {score_label}" if score_label and score_name != "r2" else ""
    lines.append(f"{'score (' + short + ')':<{width}} {score:>9.4f}{label}")
    return lines


def shares_html(caption, names, shares, std_errors, score, unattributed, score_name="r2", *,
                max_rows=MAX_ROWS, notes=()):
    """The shares table as an HTML table (notebooks' ``_repr_html_``)."""
    short = score_short(score_name)
    rows, hidden = _rows(names, shares, std_errors, score, max_rows)
    cell = '<td style="text-align:right">{}</td>'
    body = []
    for name, share, error, fraction in rows:
        body.append("<tr><th style=\"text-align:left\">{}</th>{}{}{}</tr>".format(
            html.escape(name), cell.format(f"{share:.4f}"),
            cell.format("" if error is None else f"{error:.4f}"),
            cell.format(f"{fraction:.1%}")))
    if hidden:
        body.append(f'<tr><td colspan="4"><i>... {hidden} more features (smaller shares)'
                    "</i></td></tr>")
    for label, value in (("sum", float(np.sum(shares))),
                         ("unattributed", _unsigned_zero(unattributed)),
                         (f"score ({short})", score)):
        body.append(f'<tr><th style="text-align:left">{label}</th>'
                    f"{cell.format(f'{value:.4f}')}<td></td><td></td></tr>")
    notes_html = "".join(f"<br><small>{html.escape(note)}</small>" for note in notes)
    return ("<div><table>"
            f"<caption style=\"text-align:left\">{html.escape(caption)}</caption>"
            "<thead><tr><th>feature</th><th>share</th><th>std.err</th>"
            f"<th>% of {short}</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>{notes_html}</div>")
