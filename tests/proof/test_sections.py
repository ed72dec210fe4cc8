"""The report's sections (proof/report/sections.py): one list that 03 shows by key, each section its caption,
its table and its figure, so that a new statistic is its computation and one entry."""
import re
from pathlib import Path

import nbformat

from proof import report
from proof.report import sections

REPORT = Path(__file__).resolve().parents[2] / "notebooks" / "03_report.ipynb"
HELD_UP, UP = [0.0] * 100 + [1.0] * 100, [1.0] * 200  # before, after: a gain


def test_the_report_notebook_shows_every_section_once_in_the_lists_order():
    nb = nbformat.read(REPORT, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert re.findall(r"report\.section\(r, '(\w+)'\)", code) == list(report.SECTIONS)


def test_a_new_entry_is_shown_with_its_caption_table_and_figure_and_nothing_else(synthetic, monkeypatch):
    import matplotlib.pyplot as plt
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    r = report.load(s.out)
    drawn = plt.figure()
    drawn.add_subplot().plot([0, 1])
    monkeypatch.setitem(sections.SECTIONS, "mine", sections.Section(
        "mine", lambda rep: f"{len(rep.done())} finished, read by {{extraction}}", lambda rep: "a table",
        lambda rep: drawn))
    caption, table, figure = report.section(r, "mine")
    assert caption.data.startswith("<p>1 finished, read by <code>") and caption.data.endswith("</code></p>")
    assert table == "a table" and figure.format == "png" and figure.data.startswith(b"\x89PNG")
    monkeypatch.setitem(sections.SECTIONS, "bare", sections.Section("bare", table=lambda rep: None))
    assert report.section(r, "bare") == []  # nothing to show: nothing displayed, not a None


def test_below_three_finished_families_the_correlations_section_is_one_sentence(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    [only] = report.section(report.load(s.out), "correlations")
    assert "Only 1 family finished: ranks need 3 at least, so no correlation or scatter is shown." in only.data
