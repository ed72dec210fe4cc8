"""The report's look: nbconvert's JupyterLab page without its CDN scripts, so it opens offline.

The proof's report.html and the catalog's shortlist.html are both rendered here, from a notebook:
the report from its executed 03 notebook, the catalog from a one-cell notebook whose output is
the page's HTML. Same template, same stylesheet, one look.
"""
from __future__ import annotations

import html as html_
from pathlib import Path

TEMPLATES = Path(__file__).resolve().parent / "templates"  # report.html.j2: the lab template, offline


def count(n: int, one: str, many: str | None = None) -> str:
    """'1 family', '3 families': a count with its noun agreeing."""
    return f"{n} {one if n == 1 else many or one + 's'}"


def nbconvert_templates() -> str:
    """The folder holding nbconvert's own templates ("lab", "base"), looked up from where nbconvert is installed.

    nbconvert searches only jupyter_path(), which names sys.prefix: in a venv made with
    --system-site-packages (the Makefile's default) an nbconvert installed in the base Python is
    imported, but its templates under the base prefix are never found. CI failed on exactly that.
    """
    import nbconvert
    from jupyter_core.paths import jupyter_path
    installed = [parent / "share" / "jupyter" for parent in Path(nbconvert.__file__).parents]
    for root in installed + [Path(p) for p in jupyter_path()]:
        if (root / "nbconvert" / "templates" / "lab" / "conf.json").is_file():
            return str(root / "nbconvert" / "templates")
    raise FileNotFoundError(f"nbconvert's 'lab' template is in none of {[str(r) for r in installed]}: reinstall nbconvert")


def render(nb, title: str) -> str:
    """A notebook as the report's HTML page: no code, no prompts, nothing fetched from the network."""
    from nbconvert import HTMLExporter
    nb.metadata["title"] = title
    # "lab" is looked up under the base dirs; templates' own {% extends 'base/...' %} under the paths
    templates = nbconvert_templates()
    exporter = HTMLExporter(template_name="lab", exclude_input=True, exclude_input_prompt=True,
                            exclude_output_prompt=True, extra_template_paths=[str(TEMPLATES), templates],
                            extra_template_basedirs=[templates])
    exporter.template_file = "report.html.j2"
    page, _ = exporter.from_notebook_node(nb)
    return page


BOXES = {"banner": ("#fff3cd", "#e0a800"), "warning": ("#f8d7da", "#b02a37")}  # kind -> (background, edge)
TINY = ("It was made with the offline **tiny** test model (0.2 M parameters), so its numbers exercise the "
        "pipeline and say nothing about any real model.")
SMOKE = "**This is a smoke run, not a finding.**"


def markup(text: str) -> str:
    """Plain text as HTML, escaped, with **bold** spans made bold."""
    import re
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html_.escape(text, quote=False))


def prose(text: str, **code: str) -> str:
    """The project's own sentences as HTML: escaped, **bold** and *italic* kept, and each `{name}` filled
    with code[name] as escaped <code> text. Data goes in through `code` only, after the emphasis is made,
    so a '*' or a '<script>' in it is shown as typed (a Markdown cell would pass its HTML through live)."""
    import re
    text = re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html_.escape(text, quote=False))
    text = re.sub(r"\*([^*\s][^*]*?)\*", r"<i>\1</i>", text)
    return re.sub(r"\{(\w+)\}", lambda m: f"<code>{html_.escape(code[m.group(1)])}</code>" if m.group(1) in code
                  else m.group(0), text)


def box(kind: str, text: str) -> str:
    """A banner or a warning above a page's headline: text escaped, **bold** kept, warnings marked ⚠."""
    background, edge = BOXES[kind]
    mark = "⚠ " if kind == "warning" else ""
    return (f'<div class="shortlist-{kind}" style="background:{background};border-left:6px solid {edge};'
            f'padding:0.6rem 1rem;margin:0.6rem 0">{mark}{markup(text)}</div>')


def page(title: str, body: str) -> str:
    """An HTML fragment (already escaped where it holds text) as a page that looks like the report."""
    import nbformat
    cell = nbformat.v4.new_code_cell("", outputs=[nbformat.v4.new_output(
        "display_data", data={"text/html": f"<h1>{html_.escape(title)}</h1>{body}"})])
    return render(nbformat.v4.new_notebook(cells=[cell]), title)


def table(rows: list[dict], formats: dict | None = None) -> str:
    """An HTML table, every cell escaped (family specs, reasons and paths can hold '<'); None shows as –."""
    if not rows:
        return "<p>None.</p>"
    formats = formats or {}
    columns = list(rows[0])

    def cell(column, value):
        text = "–" if value is None else formats.get(column, "{}").format(value)
        return f"<td>{html_.escape(text)}</td>"
    head = "".join(f"<th>{html_.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(cell(c, r.get(c)) for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
