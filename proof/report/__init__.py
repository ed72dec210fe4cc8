"""The report: what the notebooks display, and the HTML that nbconvert renders from 03.

    load      an output folder read back, recomputed and analysed (load.py)
    prose     the banner, warnings, headline, family lines and captions (prose.py)
    tables    every table, and each figure through figures.py (tables.py)
    figures   the figures themselves, matplotlib (figures.py)
    html      the notebook links and report.html (html.py)
A new statistic goes into proof/analysis.py and shows in one table here; a new figure is one function
in figures.py and one wrapper in tables.py (both here).
"""
from proof.report.html import notebook_links, render
from proof.report.load import Report, load, status
from proof.report.prose import (banner, caption, confusion_text, family_line, headline, measured_here, rules_text,
                                shown, top, warnings)
from proof.report.tables import (audit_table, confusion_table, correlations_section, correlations_table,
                                 curves_figure, equivalence_table, examples_table, family_summary, forest_figure,
                                 format_table, heldout_table, learning_table, outcome_row, outcomes_table,
                                 plan_table, power_table, predictions_table, provenance_table, rules_table,
                                 runs_table, scatter_figure, scoring_table, sides_table)

__all__ = ["Report", "audit_table", "banner", "caption", "confusion_table", "confusion_text", "correlations_section",
           "correlations_table", "curves_figure", "equivalence_table", "examples_table", "family_line",
           "family_summary", "forest_figure", "format_table", "headline", "heldout_table", "learning_table", "load",
           "measured_here", "notebook_links", "outcome_row", "outcomes_table", "plan_table", "power_table",
           "predictions_table", "provenance_table", "render", "rules_table", "rules_text", "runs_table",
           "scatter_figure", "scoring_table", "shown", "sides_table", "status", "top", "warnings"]
