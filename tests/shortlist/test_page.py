"""The report's look (shortlist/page.py): counts that agree with their noun, and tables that fit the page."""
import json
import os
import re
import shutil
import subprocess

import pytest

from shortlist import page


def test_a_count_of_one_is_singular():
    assert [page.count(n, "family", "families") for n in (0, 1, 2)] == ["0 families", "1 family", "2 families"]
    assert page.count(1, "significant gain") == "1 significant gain" and page.count(3, "row") == "3 rows"


MEASURE = ("<script>window.onload = function () { var d = document.documentElement, wide = [];"
           "document.querySelectorAll('table').forEach(function (t) { var r = t.getBoundingClientRect();"
           "if (r.right > d.clientWidth + 1) wide.push(Math.round(r.right)); });"
           "document.body.setAttribute('data-measure', JSON.stringify({scroll: d.scrollWidth, client: d.clientWidth,"
           " wide: wide})); }</script>")


@pytest.mark.skipif(shutil.which("chromium") is None and not os.environ.get("CI"),
                    reason="Debian's chromium is not installed here (CI installs it)")
@pytest.mark.parametrize("width", [1400, 1024])
def test_a_wide_table_stays_within_the_page(tmp_path, width):
    """The catalog's table (long specs, many columns) at a laptop's width: no table runs past the page."""
    spec = "letter_counting(" + ", ".join(f"option_{i}={i * 1000}" for i in range(12)) + ")"
    columns = ["rank", "family", "spec", "level", "verdict", "pass@1", "p(1-p)", "zero-std", "clipped", "guess",
               "ceiling", "why", "seconds", "sha256"]
    rows = [{c: (spec if c == "spec" else "a" * 64 if c == "sha256" else f"{c} {i}") for c in columns} for i in range(5)]
    html = page.page("catalog", page.table(rows)).replace("</head>", MEASURE + "</head>", 1)
    (tmp_path / "p.html").write_text(html)
    done = subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           "--disable-background-networking", "--disable-component-update", "--disable-sync",
                           f"--user-data-dir={tmp_path / 'profile'}", f"--window-size={width},900",
                           "--virtual-time-budget=3000", "--dump-dom", (tmp_path / "p.html").as_uri()],
                          check=True, capture_output=True, text=True, timeout=120)
    measured = json.loads(re.search(r'data-measure="([^"]*)"', done.stdout).group(1).replace("&quot;", '"'))
    assert measured["wide"] == [] and measured["scroll"] <= measured["client"], measured
