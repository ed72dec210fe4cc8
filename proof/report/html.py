"""The report as a page: links to the executed notebooks, and report.html rendered from the executed 03."""
from __future__ import annotations

from html import escape
from pathlib import Path

from proof import files
from proof.report.load import Report, status
from shortlist import page, sources


def notebook_links(report: Report) -> str:
    """HTML links, relative to report.html, to each executed notebook; every name and status is text."""
    items = [("01_predict", "notebooks/01_predict.ipynb", "predictions")]
    for key in report.body["families"]:
        items.append((key, f"notebooks/02_train_family.{sources.parse(key).slug}.ipynb", status(report, key)))
    items.append(("03_report", "notebooks/03_report.ipynb", "this report"))
    return "<ul>" + "".join(f'<li><a href="{escape(href)}">{escape(name)}</a> — {escape(what)}</li>'
                            for name, href, what in items) + "</ul>"


def render(executed: Path, dest: Path) -> Path:
    """report.html from the executed 03 notebook: no code, no stderr, nothing fetched from the network."""
    import nbformat
    nb = nbformat.read(executed, as_version=4)
    nb.cells = [c for c in nb.cells if "kaggle" not in c.metadata.get("tags", [])]  # for the notebook's reader only
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = [o for o in cell.outputs if not (o.get("output_type") == "stream" and o.get("name") == "stderr")]
    files.write_text(dest, page.render(nb, "Shortlist: the proof"))
    return dest
