"""A committed run re-analysed with this version: what it judges per side, what each comparison could
show at best, and which verdicts and outcomes this version reads otherwise than the run recorded.

    python bench/reanalyse.py examples/smollm2 examples/smollm2-22/proof --json bench/results/reanalysis.json

No model, no GPU: the audit and the policies are measured with the sandboxed scorer on the committed tasks
and saved answers (proof/evidence.py). "then" is what the run recorded or its own rule said: the committed
verdict, and the seed's 'improved' with a collapse excluded (the analysis before real learning); "now" is
this version's rule on the same screen, and real learning.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from proof import report, rules  # noqa: E402
from proof.report.load import power as power_of  # noqa: E402
from shortlist import output  # noqa: E402


def one(out: str) -> dict:
    r = report.load(out)
    power = power_of(r.body, r.evidence)
    verdicts = [{"family": k, "then": r.prediction(k)["verdict"], "now": r.evidence[k].verdict_now}
                for k in r.body["families"] if r.prediction(k)["verdict"] != r.evidence[k].verdict_now]
    outcomes = []
    for k, a in r.analyses.items():
        result = r.results[k]
        if a.real != result.improved:
            outcomes.append({"family": k, "recorded improved": result.improved, "real learning": a.real,
                             "learning": a.learning, "judged": a.judged})
    return {"out": out, "schema": r.body.get("schema"), "families": len(r.body["families"]),
            "finished": len(r.done()), "judged_per_side": power["sides"], "judged": power["judged"],
            "power": {name: {k: row[k] for k in ("disagree", "best_p", "best_p_holm")}
                      for name, row in power["comparisons"].items()},
            "power_recorded": "computed" not in power, "verdicts_changed": verdicts, "outcomes_changed": outcomes,
            "held": [r.across.held.k, r.across.held.n],
            "sides_outcome": {s: [v.k, v.n] for s, v in r.across.sides.items()},
            "comparisons": [{"rule": c.rule, "disagree": c.disagree,
                             "only_rule_only_other": None if c.mcnemar is None else
                             [c.mcnemar["only_first"], c.mcnemar["only_second"]],
                             "p": None if c.mcnemar is None else c.mcnemar["p"], "p_holm": c.p_holm}
                            for c in r.across.comparisons if c.rule != rules.RULE]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outs", nargs="+", help="committed output folders")
    ap.add_argument("--json", help="write the summaries here")
    args = ap.parse_args()
    found = [one(out) for out in args.outs]
    for f in found:
        print(json.dumps(f, indent=1))
    if args.json:
        output.write_json(Path(args.json), {"command": " ".join(sys.argv), "runs": found})
    return 0


if __name__ == "__main__":
    sys.exit(main())
