"""The report: what the notebooks display, and the HTML that nbconvert renders from 03.

    load      an output folder read back, recomputed and analysed (load.py)
    sections  the report's sections, each a caption, a table and a figure, which 03 shows by key (sections.py)
    cautions  what could make the numbers wrong, above the headline: the banner and the warnings (cautions.py)
    prose     the one-sentence headline, its terms and statistics, family lines and the sentences tables need
              (prose.py)
    tables    every table (tables.py)
    figures   the figures themselves, matplotlib (figures.py)
    html      the notebook links and report.html (html.py)
A new statistic goes into proof/analysis.py and shows as one entry of sections.SECTIONS (its caption, and
its table from tables.py); a new figure is one function in figures.py and one entry there.
"""
from proof.report.html import notebook_links, render
from proof.report.load import Report, load, status
from proof.report.cautions import banner, measured_here, warnings
from proof.report.prose import confusion_text, family_line, headline, rules_text, shown, statistics, terms, top
from proof.report.sections import SECTIONS, Section, caption, section
from proof.report.tables import (audit_table, confusion_table, correlations_table, equivalence_table, examples_table,
                                 family_summary, format_table, heldout_table, learning_table, outcome_row,
                                 outcomes_table, plan_table, power_table, predictions_table, provenance_table,
                                 rules_table, runs_table, scoring_table, sides_table)

__all__ = ["Report", "SECTIONS", "Section", "audit_table", "banner", "caption", "confusion_table", "confusion_text",
           "correlations_table", "equivalence_table", "examples_table", "family_line", "family_summary",
           "format_table", "headline", "heldout_table", "learning_table", "load", "measured_here", "notebook_links",
           "outcome_row", "outcomes_table", "plan_table", "power_table", "predictions_table", "provenance_table",
           "render", "rules_table", "rules_text", "runs_table", "scoring_table", "section", "shown", "sides_table",
           "statistics", "status", "terms", "top", "warnings"]
