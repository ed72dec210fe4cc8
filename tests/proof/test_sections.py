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


def test_the_runs_section_says_what_the_reports_own_checks_of_each_result_took(synthetic, monkeypatch):
    """Where a report's time goes (issue 39: 03 took 277 s for 8 families on an H100): the answers scored again
    and drawn again, per family, and the evidence gathered, timed by the load that did them."""
    import time

    from proof import verify
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    monkeypatch.setattr(verify, "rescored", lambda *args: (time.sleep(0.2), [])[1])
    r = report.load(s.out)
    spent = r.checking["chain_sum"]
    assert spent["rescored"] >= 0.2 and 0 <= spent["regenerated"] < 0.2 and r.checking["evidence"] >= 0
    frame = sections.SECTIONS["runs"].table(r).data
    assert frame.loc[0, "report: scored again (s)"] == spent["rescored"]
    assert frame.loc[0, "report: drawn again (s)"] == spent["regenerated"]
    caption = sections.caption(r, "runs").data
    assert f"({sum(spent.values()):.0f} s in all; gathering the evidence" in caption
