"""The scorer audit of a committed catalog, without a model: each row's ceiling and guess rate on the
tasks it was screened on, and the verdict the rule gives once the audit comes first.

    python bench/audit_catalog.py examples/catalog-smollm2/shortlist.json --out bench/results/audit_catalog.smollm2.json

A catalog screened before the audit existed says what its verdicts would have been with it: how many
change, and to what. (The model's own numbers are the catalog's: pass@1, mean, signal.)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from shortlist import audit, output, rule, sources  # noqa: E402
from shortlist.scoring import Scorer  # noqa: E402
from shortlist.trainee import Trainee  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("catalog")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    body = json.loads(Path(args.catalog).read_text())
    trainee = Trainee.from_dict(body["trainee"])
    s = body["settings"]
    seeds = range(s["first_seed"], s["first_seed"] + s["tasks"])
    rows, started = [], time.time()
    with Scorer(deadline_s=s.get("score_deadline_s", 1.0)) as scorer:
        for r in body["rows"]:
            family = sources.parse(r["spec"])
            a = audit.audit(scorer, trainee.for_source(family.source), family, family.tasks(seeds))
            now = rule.verdict(trainee, r["pass1"], r["mean"], r["signal_correct"], a.ceiling, a.guess.accuracy)
            rows.append({"spec": r["spec"], "family": r["family"], "level": r["level"], "pass1": r["pass1"],
                         "ceiling": a.ceiling, "golds": a.golds, "guess": a.guess.accuracy, "guess_mean": a.guess.mean,
                         "guess_answer": a.guess.answer, "verdict_then": r["verdict"], "verdict_now": now})
            print(f"{r['spec'][:70]:70s} ceiling {a.ceiling} guess {a.guess.accuracy:.2f} ({a.guess.answer[:30]}) "
                  f"{r['verdict']} -> {now}", flush=True)
    changes = Counter((r["verdict_then"], r["verdict_now"]) for r in rows if r["verdict_then"] != r["verdict_now"])
    summary = {"catalog": args.catalog, "trainee": trainee.as_dict(), "rows": len(rows),
               "changed": sum(changes.values()), "changes": [{"from": a, "to": b, "rows": n} for (a, b), n in
                                                            sorted(changes.items())],
               "verdicts_then": Counter(r["verdict_then"] for r in rows), "verdicts_now": Counter(r["verdict_now"] for r in rows),
               "seconds": round(time.time() - started, 1), "audited": rows}
    output.write_json(Path(args.out), summary)
    print(json.dumps({k: v for k, v in summary.items() if k != "audited"}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
