"""The paper's kind of tables from a sweep's trials, and their renderers.

A row is one finished trial: ``loss`` (a label, ``loss_label``), ``loss_name``, the
loss's parameters as ``param_<name>``, ``dataset``, ``variant``, ``seed`` and the
metrics (``eval_f1`` ... in percent); ``row_from_trial`` builds one from a trial's
config and final metrics. ``pivot_table`` gives mean, std and count over seeds per
cell plus the delta of the mean against a baseline row, e.g. losses × variants
(Table 8) or ``param_alpha`` × data sets (Table 10); ``paired_test`` tests each row
against the baseline over seeds and ``with_significance`` marks the cells it finds
significant; ``to_markdown``, ``to_csv``, ``to_latex``, ``to_html``, ``to_json`` and
``to_png`` render it, one module each (``markdown``, ``csv_json``, ``latex``,
``html_table``, ``plots``). ``paper_table`` does all of that in the paper's layout, with
its trials' two marks (``search_spaces.flags``: constant predictions, left out of the
statistics; below the data set's no-skill rule, kept in them) in their cells.
``with_budget_curves`` attaches the budget curves of a two-stage sweep's stage 1
(``budget``), which the renderers show under the table.
"""

from search_spaces.flags import below_no_skill_reason, degenerate_reason
from search_spaces.reports.budget import (
    budget_curves,
    expected_best,
    stage_one_is_random,
    with_budget_curves,
)
from search_spaces.reports.csv_json import to_csv, to_json
from search_spaces.reports.formats import STATS, ordered
from search_spaces.reports.grid import MARKS
from search_spaces.reports.html_table import to_html
from search_spaces.reports.latex import to_latex
from search_spaces.reports.markdown import to_markdown
from search_spaces.reports.paired import paired_test, with_significance
from search_spaces.reports.plots import plot_kind, plot_title, to_png
from search_spaces.reports.tables import (
    METRICS,
    failed_trials,
    final_rows,
    infer_layout,
    loss_label,
    paper_table,
    pivot_table,
    row_from_trial,
    with_failures,
)

__all__ = [
    "MARKS",
    "METRICS",
    "STATS",
    "below_no_skill_reason",
    "budget_curves",
    "degenerate_reason",
    "expected_best",
    "failed_trials",
    "final_rows",
    "infer_layout",
    "loss_label",
    "ordered",
    "paired_test",
    "paper_table",
    "pivot_table",
    "plot_kind",
    "plot_title",
    "row_from_trial",
    "stage_one_is_random",
    "to_csv",
    "to_html",
    "to_json",
    "to_latex",
    "to_markdown",
    "to_png",
    "with_budget_curves",
    "with_failures",
    "with_significance",
]
