"""The catalog's store: its files, each written whole or not at all (shortlist.output):

    <out>/families/<name>.json          one family's walk: what a rerun keeps
    <out>/shortlist.json, .csv, .html   the catalog: the numbers first, then the page
"""
from __future__ import annotations

import csv
import io
from pathlib import Path

from shortlist import output, page, screening
from shortlist.catalog.records import Catalog, Walk
from shortlist.errors import OneLine, one_line
from shortlist.models import tiny
from shortlist.trainee import Trainee


def walk_path(out, name: str) -> Path:
    return Path(out) / "families" / f"{name}.json"


def read_walk(out, name: str) -> Walk | None:
    try:
        return Walk.from_dict(output.read_json(walk_path(out, name)))
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError, OneLine):  # a file from an older layout, or damaged: screened again
        return None


def write_walk(out, walk: Walk) -> None:
    output.write_json(walk_path(out, walk.family), walk.as_dict())


CSV_COLUMNS = ("rank", "family", "level", "levels", "position", "spec", "status", "verdict", *(f for f, _, _ in screening.METRICS),
               "tasks", "k", "tasks_sha256", "seconds", "reason")


def write(out, catalog: Catalog) -> str | None:
    """shortlist.json and .csv first (the numbers), then the page; each written whole or not at all.
    Returns why the page could not be rendered (nbconvert missing, say), or None: the numbers stand."""
    out = Path(out)
    output.write_json(out / "shortlist.json", catalog.as_dict())
    output.write_text(out / "shortlist.csv", to_csv(catalog))
    try:
        output.write_text(out / "shortlist.html", to_html(catalog))
    except Exception as e:  # noqa: BLE001  a GPU machine's one run must not end in a traceback over a page
        return one_line(e)
    return None


def to_csv(catalog: Catalog) -> str:
    lines = [{"rank": rank, "status": "screened", **row.as_dict()} for rank, row in catalog.ordered()]
    lines += [{"family": f.family, "level": f.level, "spec": f.spec, "status": f"failed to {f.stage}",
               "reason": f.reason} for f in catalog.failures]
    lines += [{"family": u.family, "level": u.level, "status": "not reached", "reason": u.why} for u in catalog.unreached]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, CSV_COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(lines)
    return buffer.getvalue()


def to_html(catalog: Catalog) -> str:
    """One page, the report's look: what was found, then what failed and what was not reached."""
    import html
    a, t = catalog.about, Trainee.from_dict(catalog.about["trainee"])
    s = a["settings"]
    short = catalog.shortlist()
    parts = []
    if t.model == tiny.NAME:
        parts.append(page.box("banner", f"{page.SMOKE} {page.TINY}"))
    if catalog.unreached:
        parts.append(page.box("warning", f"{page.count(len(catalog.unreached), 'family was', 'families were')} not screened to the end: see the "
                                         f"last table."))
    stop = "until two in a row are below the band"
    levels = (f"up its wider grid (below and between its curriculum's levels) {stop}" if s.get("grid")
              else f"up its curriculum {stop}" if s["walk"] else "at its easiest level that builds")
    parts.append(f"<p>{html.escape(a['model']['name'])} as <b>{html.escape(t.profile)}</b>: {s['tasks']} tasks × "
                 f"{t.group} samples (seeds {s['first_seed']}..{s['first_seed'] + s['tasks'] - 1}) per family × level, "
                 f"each family {levels}. <b>{len(short)} of {s['families']} families</b> have a level where GRPO can "
                 f"learn (verdict <i>improves</i>), ranked by mean p(1−p). {len(catalog.rows)} family × level screens, "
                 f"{a['wall_s']:.0f} s of wall time.</p><p>{html.escape(a['rule'])}.</p>")
    shown = ("pass1", "passk", "mean", "signal_correct", "learnability", "extracted", "clipped")
    rows = [{"rank": rank, "family": r.family, "level": r.level, "position": r.position, "spec (proof run --families)": r.spec,
             "verdict": r.screen.verdict, **screening.labelled(r.screen.as_dict(), shown)} for rank, r in catalog.ordered()]
    parts.append("<h2>Every family × level screened</h2>" + page.table(rows, screening.formats(t.group, shown)))
    parts.append("<h2>Could not be built or screened</h2>" + page.table(
        [{"family": f.family, "level": f.level, "spec": f.spec, "failed to": f.stage, "why": f.reason}
         for f in catalog.failures]))
    parts.append("<h2>Not reached</h2>" + page.table(
        [{"family": u.family, "from level": u.level, "why": u.why} for u in catalog.unreached]))
    about = [("model", f"{a['model']['name']} (revision {a['model']['revision']})"),
             ("trainee", ", ".join(f"{k} = {v!r}" for k, v in a["trainee"].items())),
             ("settings", ", ".join(f"{k} = {v}" for k, v in s.items())),
             ("versions", ", ".join(f"{k} {v}" for k, v in a["versions"].items() if v)),
             ("workers", "; ".join(f"{w['label']}: {w['device']}, engine {w['engine'].get('engine', '–')}, "
                                   f"{w['screened']} screened, {w['kept']} kept" for w in a["workers"]) or "–"),
             ("written", a["written_at"])]
    parts.append("<h2>What made it</h2>" + page.table([{"": k, "value": v} for k, v in about]))
    return page.page("Shortlist: the catalog", "".join(parts))
