"""The report as a reader's browser lays it out (headless Chromium at a laptop's 1024 px and a desktop's 1400 px):
no table wider than its box unless it scrolls inside it, no word or spec broken where it must not be, numbers whole.
The measurements are tests/fixtures/report_layout.js's."""
import html as html_
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import matplotlib.image
import pytest

from proof import report, runner

HELD_UP = [0.0] * 100 + [1.0] * 100  # before
UP = [1.0] * 200  # after: every task right
CHROMIUM = pytest.mark.skipif(shutil.which("chromium") is None and not os.environ.get("CI"),
                              reason="Debian's chromium is not installed here (CI installs it)")


@CHROMIUM
def test_report_renders_in_headless_chromium(smoke_run, tmp_path):
    png = tmp_path / "report.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    f"--user-data-dir={tmp_path / 'profile'}", "--window-size=1280,2000", f"--screenshot={png}",
                    Path(smoke_run[1]).resolve().as_uri()], check=True, capture_output=True, timeout=120)
    image = matplotlib.image.imread(png)
    assert image.shape[:2] == (2000, 1280)
    ink = (image[..., :3].mean(axis=2) < 0.5).mean(axis=1)  # share of dark pixels per row
    assert (ink > 0.001).sum() > 400  # text, tables and figures down the page, not a blank or error page
    # the smoke banner, amber (#fff3cd), sits above the headline within the first screen
    amber = (abs(image[..., 0] - 1.0) < 0.02) & (abs(image[..., 1] - 243 / 255) < 0.02) & \
        (abs(image[..., 2] - 205 / 255) < 0.02)
    rows = amber.sum(axis=1) > 600  # rows where most of the page width is banner
    assert rows[:700].sum() > 30 and not rows[700:].any()


LAYOUT = Path(__file__).resolve().parents[1] / "fixtures" / "report_layout.js"


def layout(html: Path, width: int, tmp_path: Path) -> dict:
    """The page laid out by headless Chromium at this window width (tests/fixtures/report_layout.js): the words
    of table cells broken across lines, the number cells (class num) on more than one line, the specs broken
    other than after a comma, and each table's width against its box's."""
    page = tmp_path / f"layout-{width}.html"
    page.write_text(html.read_text().replace("</body>", f"<script>{LAYOUT.read_text()}</script></body>"))
    done = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},2000", "--dump-dom",
                           page.resolve().as_uri()], check=True, capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="shortlist-layout">([^<]*)</pre>', done.stdout)
    assert found, done.stdout[-2000:]
    return json.loads(html_.unescape(found.group(1)))


LONG_SPECS = ["basic_arithmetic(allow_negation=False, allow_parentheses=False, max_digits=1, max_terms=2, "
              "operators=['+', '-'])", "chain_sum(max_digits=1, max_terms=2)", "products(max_digits=1)"]


@CHROMIUM
def test_report_tables_wrap_between_words_and_keep_numbers_whole_at_1024_and_1400_px(synthetic, tmp_path):
    """The widest tables (12-16 columns) with the longest specs: no word of any cell is broken across lines,
    a spec breaks only after a comma, no cell of numbers takes two lines, and no table runs past its box."""
    cases = {LONG_SPECS[0]: {"prediction": "improves", "before": HELD_UP, "after": UP},
             LONG_SPECS[1]: {"prediction": "improves", "before": HELD_UP, "after": HELD_UP},
             LONG_SPECS[2]: {"prediction": "no change", "before": HELD_UP, "after": HELD_UP}}
    html = runner.report_again(synthetic(cases).out)
    assert 'class="data row0 col0"' in html.read_text() and " num" in html.read_text()
    for width in (1024, 1400):
        found = layout(html, width, tmp_path)
        assert found["cells"] > 100  # every table is there
        assert found["broken"] == [] and found["wrapped"] == [], (width, found)
        assert found["specs"] == [] and found["specBreaks"] > 0, (width, found)  # specs broke, after commas only
        assert overflowing(found) == [], (width, found)


def overflowing(found: dict) -> list:
    """The tables that run past their box, or are wider than it without scrolling inside it, and the page
    itself if it scrolls sideways."""
    bad = [t for t in found["tables"] if t["right"] > t["boxRight"] + 1
           or (t["content"] > t["width"] + 1 and t["overflow"] not in ("auto", "scroll"))]
    return bad + ([found["page"]] if found["page"]["scroll"] > found["page"]["client"] else [])


@CHROMIUM
def test_the_smoke_report_fits_its_page_at_1024_and_1400_px(smoke_run, tmp_path):
    """The report a first run makes, as issue 41 found it: at 1024 px a table wider than the page scrolls in its
    own box; at 1400 px every table fits whole (the predictions table's 16 columns cut "prediction" before);
    its specs break only after a comma."""
    for width in (1024, 1400):
        found = layout(Path(smoke_run[1]), width, tmp_path)
        assert len(found["tables"]) > 10 and overflowing(found) == [], (width, found)
        assert found["broken"] == found["wrapped"] == found["specs"] == [], (width, found)
    assert [t for t in found["tables"] if t["content"] > t["width"] + 1] == [], found  # 1400 px: none scrolls


def test_number_cells_are_marked_and_specs_may_break_only_after_their_commas(synthetic):
    s = synthetic({LONG_SPECS[0]: {"prediction": "improves", "before": HELD_UP, "after": UP}})
    html = report.outcomes_table(report.load(s.out)).to_html()
    # a part up to each comma kept whole, the text escaped once (a quote is &#39;, not &amp;#39;)
    assert '<span class="w">basic_arithmetic(allow_negation=False,</span> <span class="w">allow_parentheses' in html
    assert '<span class="w">operators=[&#39;+&#39;,</span> <span class="w">&#39;-&#39;])</span>' in html
    assert "&amp;" not in html
    cells = dict(re.findall(r'class="data row0 (col\d+)( num)?" >', html))
    assert cells["col0"] == "" and cells["col2"] == " num"  # the family is words, the task count a number
    assert re.search(r'class="data row0 col\d+ num" >0\.500 → 1\.000<', html)  # accuracy before → after


def test_a_spec_typed_without_spaces_may_still_break_after_its_commas():
    from proof.report.tables import spec_cell
    assert spec_cell("chain_sum(a=1,b=2)") == '<span class="w">chain_sum(a=1,</span><wbr><span class="w">b=2)</span>'
    assert spec_cell("leg_counting") == '<span class="w">leg_counting</span>'


def test_a_models_answers_are_marked_text_that_may_break_anywhere(synthetic):
    s = synthetic({LONG_SPECS[0]: {"prediction": "improves", "before": HELD_UP, "after": UP}})
    html = report.examples_table(report.load(s.out)).to_html()
    header = re.findall(r'<th [^>]*class="col_heading level0 (col\d+)" >([^<]+)<', html)
    marked = dict(re.findall(r'class="data row0 (col\d+)( text)?" >', html))
    assert {name for col, name in header if marked.get(col) == " text"} == {"before", "after"}
