"""Evaluation questions whose twin is trained, reserved by the text (schema 4) and by the meaning (schema 5).

    python bench/archive/meaning_twins.py --catalog examples/smollm2-22/catalog/shortlist.json \
        --families examples/smollm2-22/families.txt --out bench/results/meaning_twins.txt

For each spec of the committed selection, and each of the catalog's easiest rows (level 0, or a family's only
row), whose family has a meaning (shortlist/sources/meaning.py): the proof's own draw (heldout.draw, the
protocol's settings) twice, by the question's text and by its meaning, and the evaluation tasks (of eval_n)
one of whose training tasks asks the same question by its meaning: "3 * 7" evaluated and "7 * 3" trained.
Reserved by its meaning that count is 0 by construction; the bench shows it is, and what the text key cost.
Beside each: the distinct questions the census saw, the reserved ones, and whether the proof could judge the
family. A family without a meaning is reserved by its text both ways, so its count is 0 both ways: listed
at the end, not drawn. No model, no GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from proof import files, heldout, settings as settings_  # noqa: E402
from shortlist import sources  # noqa: E402
from shortlist.sources.meaning import QUESTION  # noqa: E402


def specs(catalog: str, families: str) -> list[str]:
    """The selection's specs, then the catalog's easiest rows, once each, in that order."""
    rows = json.loads(Path(catalog).read_text())["rows"]
    easiest = [r["spec"] for r in rows if r["level"] in (0, None)]
    chosen = [f.key for f in sources.parse_list(Path(families).read_text().strip())]
    return list(dict.fromkeys(chosen + [sources.parse(s).key for s in easiest]))


def measure(spec: str) -> dict:
    """Both draws of one spec: per key, the evaluation tasks with a trained twin and what the draw rests on."""
    family, s = sources.parse(spec), settings_.make(families=[spec])
    out = {"spec": spec, "key": family.meaning}
    for name, by_meaning in (("text", False), ("meaning", True)):
        held, built = heldout.draw(family, s, meaning=by_meaning)
        keyed = {n: family.tasks([t["seed"] for t in built[n]], keyed=True) for n in ("train", "eval")}
        trained = {t["meaning"] for t in keyed["train"]}
        out[name] = {"twins": sum(t["meaning"] in trained for t in keyed["eval"]), "eval": len(keyed["eval"]),
                     "census_distinct": held.reservation.distinct, "reserved": held.reserved,
                     "judged": heldout.judgeable(held, s.min_unseen) is None}
    return out


def table(rows: list[dict], command: str, unkeyed: list[str], seconds: float) -> str:
    head = (f"{'spec':<76} {'key':<22} {'twins/eval text':>15} {'twins/eval meaning':>18}  "
            f"{'census distinct t/m':>19} {'reserved t/m':>12} {'judged t/m':>10}")
    lines = [f"# {command}", f"# {seconds:.0f} s on a CPU; the protocol's settings (eval_n 200, 400 training tasks, "
             f"census 400); a twin: a training task asks the evaluation task's question by its meaning", head]
    for r in rows:
        t, m = r["text"], r["meaning"]
        yes = lambda b: "yes" if b else "no"  # noqa: E731
        lines.append(f"{r['spec']:<76} {r['key']:<22} {t['twins']:>7}/{t['eval']:<7} {m['twins']:>9}/{m['eval']:<8} "
                     f"{t['census_distinct']:>10}/{m['census_distinct']:<8} {t['reserved']:>6}/{m['reserved']:<5} "
                     f"{yes(t['judged']):>5}/{yes(m['judged'])}")
    lines.append(f"# reserved by the text both ways (no meaning registered; 0 twins by construction): {', '.join(unkeyed)}")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--catalog", required=True)
    ap.add_argument("--families", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    started, rows, unkeyed = time.time(), [], []
    for spec in specs(args.catalog, args.families):
        if sources.parse(spec).meaning == QUESTION:
            unkeyed.append(spec)
            continue
        rows.append(measure(spec))
        print(json.dumps(rows[-1]), flush=True)
    command = " ".join(["python bench/archive/meaning_twins.py"] + sys.argv[1:])
    files.write_text(Path(args.out), table(rows, command, unkeyed, time.time() - started))
    print(Path(args.out).read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
