"""What an adversary's edits to a finished family do: each applied to a copy of a finished output folder, then
the family checked as a rerun and the report check it (proof/verify.py); prints detected of tried, twice: with
the family's seal left as it was (an edit made without running the family again), and sealed again with the
project's own function (proof/seal.py), where only what verify.py recomputes or draws again can find it.

    python -m tests.proof.edits --out results/smoke    # a finished run (python -m proof run --preset smoke)

Each edit keeps the file a valid record wherever it can: the summaries, the gain, its interval and p,
improved and held are recomputed after the edit (resummarize), so only what verify.py recomputes from
elsewhere (the scorer, the commitment, before.json, the model and the adapter, the seal) can find it.
"the forgery" is issue 40's: every completion after training rewritten to the gold answer and scored again in
the sandbox, the baselines measured again, the summaries recomputed, with the project's own functions.
SEALED_ONLY names the edits that nothing but the seal can see (no check recomputes them; retraining the family,
`python -m proof verify --reproduce`, compares them). tests/proof/test_verify.py runs the same list.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

from proof import commit, evaluate, evidence, files, records, seal, stats, verify
from proof.records import Evaluation
from shortlist import audit, sources
from shortlist.trainee import Trainee


class Skip(Exception):
    """An edit this folder offers nothing to (no skipped seed, no unextracted answer)."""


def resummarize(record: dict, body: dict) -> dict:
    """The summaries and the seed's analysis made to agree with the edited lists, as a careful forger would."""
    for part in ("before", "after"):
        lists = {k: record[part][k] for k in ("seeds", "completions", "answers", "scores", "clipped", "repetitive")}
        record[part] = Evaluation(**lists).as_dict()
    s = body["settings"]
    record["gain"] = stats.paired_gain(record["before"]["scores"], record["after"]["scores"], s["bootstrap_n"])
    record["improved"] = stats.improved(record["gain"], s["alpha"])
    record["held"] = record["improved"] == (record["prediction"]["prediction"] == "improves")
    return record


def _permute(record: dict, order: list[int]) -> None:
    for part in ("before", "after"):
        for k in ("seeds", "completions", "answers", "scores", "clipped", "repetitive"):
            record[part][k] = [record[part][k][i] for i in order]


def _seed(record: dict, seed: int) -> None:
    for part in ("before", "after"):
        record[part]["seeds"][0] = seed


def _flip_score(record: dict, body: dict) -> None:
    record["after"]["scores"][0] = 1.0 - record["after"]["scores"][0]


def _forged(record: dict, body: dict) -> None:
    record["after"]["scores"] = [1.0] * len(record["after"]["scores"])


def _swap(record: dict, body: dict) -> None:
    if record["before"] == record["after"]:
        raise Skip("before and after are the same: swapping them changes nothing")
    record["before"], record["after"] = record["after"], record["before"]


def _prediction(record: dict, body: dict) -> None:
    p = record["prediction"]
    p["prediction"] = "no change" if p["prediction"] == "improves" else "improves"


def _committed_seed(record: dict, body: dict, which: str) -> None:
    held = commit.held_out(body, record["family"])
    if held is None:  # a run held out by seed only (schema 2): its seed ranges are all it committed
        pool = [body["seed_ranges"][which][0]] if which in ("train", "predict") else []
    else:
        pool = getattr(held, which)
    if not pool:
        raise Skip(f"no {which} seed committed")
    _seed(record, pool[0])


def _unextracted(record: dict, body: dict) -> None:
    nothing = sum(a is None for part in ("before", "after") for a in record[part]["answers"])
    if not nothing or "unextracted" not in record["scoring"]:
        raise Skip("no evaluation answer without an extraction")
    record["scoring"]["unextracted"] = nothing - 1


def _same_length(record: dict, body: dict) -> None:
    """A completion rewritten, length kept, to hold the other answer (right where it was wrong, or wrong where
    it was right); its saved answer made to match, its score kept."""
    after = record["after"]
    trainee = Trainee.from_dict(body["trainee"]).for_source(sources.parse(record["family"]).source)
    tasks = sources.parse(record["family"]).tasks(after["seeds"])
    for i, (c, task) in enumerate(zip(after["completions"], tasks)):
        gold = str(task["answer"])
        answer = gold if after["scores"][i] < 1.0 else gold + "0"
        new = (trainee.written(answer) + c)[:len(c)]
        if len(new) == len(c) and trainee.clean(new) == answer:
            after["completions"][i], after["answers"][i] = new, answer
            return
    raise Skip("no completion long enough to hold an answer")


def _answer(record: dict, body: dict) -> None:
    after = record["after"]
    after["answers"][0] = "x" if after["answers"][0] != "x" else "y"


def _baselines(record: dict, body: dict) -> None:
    if "policy" not in record.get("baselines", {}):
        raise Skip("no baselines recorded")
    record["baselines"]["policy"]["accuracy"] = 0.0 if record["baselines"]["policy"]["accuracy"] else 1.0
    record["baselines"]["mode"]["accuracy"] = 0.0 if record["baselines"]["mode"]["accuracy"] else 1.0


def _engine_before(record: dict, body: dict) -> None:
    e = record["engine"].get("before")
    if not isinstance(e, dict):
        raise Skip("no engine record of the evaluation before training")
    e["checks"] = [] if e.get("checks") else [{"rows": 8, "identical_rows": 8, "tokens": 8, "passed": True}]
    e["engine"], e["why"] = "static", None


def _engine_claims(record: dict, body: dict) -> None:
    """The fallback's reason left in place, the failed self-check it rests on removed."""
    record["engine"]["train"] = {"engine": "generate", "checks": [],
                                 "why": "the fast engine's greedy tokens differed from generate()'s in 3 of 32 rows"}


def _engine_serving(record: dict, body: dict) -> None:
    """A failed self-check kept, the fast engine named as serving anyway."""
    record["engine"]["after"] = {"engine": "static", "why": None,
                                 "checks": [{"rows": 32, "identical_rows": 29, "tokens": 24, "passed": False}]}


def _counts(name: str, value: int):
    def edit(record: dict, body: dict) -> None:
        record["scoring"][name] = value
    return edit


def _ci(record: dict, body: dict) -> None:
    record["gain"]["ci95"][0] -= 0.01


def _p(record: dict, body: dict) -> None:
    g = record["gain"]
    g["p"] = 0.5 if g["p"] <= body["settings"]["alpha"] else 0.0
    record["improved"] = stats.improved(g, body["settings"]["alpha"])
    record["held"] = record["improved"] == (record["prediction"]["prediction"] == "improves")


def _gold(record: dict, body: dict, wrong_only: bool = True):
    """(index, the gold answer written as the trainee writes one) of each task the model got wrong."""
    after = record["after"]
    tasks = sources.parse(record["family"]).tasks(after["seeds"])
    trainee = commit.asked(body, record["family"])
    return [(i, trainee.written(str(t["answer"]))) for i, t in enumerate(tasks)
            if t["answer"] is not None and (after["scores"][i] < 1.0 or not wrong_only)], trainee, tasks


def _completion_and_score(record: dict, body: dict) -> None:
    """One wrong completion rewritten to the gold answer, its answer taken from it and scored 1: every number
    holds together (the scorer agrees)."""
    wrong, trainee, _ = _gold(record, body)
    if not wrong:
        raise Skip("no wrong answer after training")
    i, text = wrong[0]
    after = record["after"]
    after["completions"][i], after["answers"][i], after["scores"][i] = text, trainee.clean(text), 1.0


def forge(record: dict, body: dict) -> None:
    """Issue 40's forgery: every completion after training rewritten to the gold answer and scored again in the
    sandbox, the baselines measured again (the project's own functions); the summaries follow (resummarize)."""
    from shortlist.scoring import Scorer
    _, trainee, tasks = _gold(record, body, wrong_only=False)
    after, key = record["after"], record["family"]
    completions = [trainee.written(str(t["answer"])) if t["answer"] is not None else c
                   for t, c in zip(tasks, after["completions"])]
    held = commit.held_out(body, key)
    with Scorer(deadline_s=body["settings"].get("score_deadline_s", 1.0)) as scorer:
        forged = evaluate.score(scorer, trainee, key, after["seeds"], completions, [False] * len(completions),
                                [False] * len(completions))
        frequent = audit.most_frequent_gold(evidence.CommittedTasks(body, key, held)["predict"])
        record["baselines"] = audit.constants(scorer, trainee, key, tasks, list(forged.answers), frequent)
    record["after"] = forged.as_dict()


def _outside_the_answer(record: dict, body: dict) -> None:
    """A completion's text outside its answer edited: its answer, score and flags unchanged."""
    after = record["after"]
    trainee = commit.asked(body, record["family"])
    for i, c in enumerate(after["completions"]):
        if trainee.clean("x" + c) == after["answers"][i] and not after["clipped"][i]:
            after["completions"][i] = "x" + c
            return
    raise Skip("no completion whose answer survives a character before it")


def _flag(name: str):
    def edit(record: dict, body: dict) -> None:
        record["after"][name][0] = not record["after"][name][0]
    return edit


def _within_range(record: dict, body: dict) -> None:
    """A scorer count moved within what its answers allow."""
    c = record["scoring"]
    if "timeouts" not in c or c["timeouts"] >= c.get("answers", 0):
        raise Skip("no room for one more timeout")
    c["timeouts"] += 1


def _curve(record: dict, body: dict) -> None:
    if not record["reward_curve"] or record["reward_curve"][-1].get("reward") is None:
        raise Skip("no logged reward")
    record["reward_curve"][-1]["reward"] = round(record["reward_curve"][-1]["reward"] + 0.25, 6)


def _model(record: dict, body: dict) -> None:
    record["model"] = record["model"] | {"revision": "0" * 40 if record["model"].get("revision") != "0" * 40 else "1"}


# name -> (edit of the result record, whether the summaries and the analysis are recomputed after it)
EDITS = {
    "ci95 edited": (_ci, False),
    "p edited (improved and held to match)": (_p, False),
    "one per-task score edited, summaries recomputed": (_flip_score, True),
    "a forged result (every task right), summaries recomputed": (_forged, True),
    "before and after swapped, summaries recomputed": (_swap, True),
    "prediction edited, held recomputed": (_prediction, True),
    "settings edited": (lambda r, b: r["settings"].update(lr=r["settings"]["lr"] * 2), False),
    "trainee edited": (lambda r, b: r["trainee"].update(max_new_tokens=r["trainee"]["max_new_tokens"] + 1), False),
    "tasks reordered, summaries recomputed": (lambda r, b: _permute(r, list(range(len(r["after"]["seeds"])))[::-1]),
                                              True),
    "evaluation starts at a training seed": (lambda r, b: _committed_seed(r, b, "train"), True),
    "evaluation starts at a seed skipped as not held out": (lambda r, b: _committed_seed(r, b, "skipped"), True),
    "scoring answers 12345": (_counts("answers", 12345), False),
    "scoring exceptions 12345": (_counts("exceptions", 12345), False),
    "scoring timeouts -1": (_counts("timeouts", -1), False),
    "scoring retried more than the evaluations' answers": (
        lambda r, b: r["scoring"].update(retried=2 * len(r["before"]["scores"]) + 1), False),
    "scoring unextracted below the evaluations' own": (_unextracted, False),
    "a completion edited to the same length, its answer to match": (_same_length, True),
    "a saved answer edited, summaries recomputed": (_answer, True),
    "baselines edited (hiding a collapse)": (_baselines, False),
    "engine record before training edited (self-check hidden)": (_engine_before, False),
    "engine record of training: a disagreement whose self-check was removed": (_engine_claims, False),
    "engine record after training: a failed self-check, the fast engine serving": (_engine_serving, False),
    "a completion rewritten to the gold answer, with its answer and score": (_completion_and_score, True),
    "the forgery: every completion the gold answer, scored again, baselines measured again": (forge, True),
    "a completion's text outside its answer edited": (_outside_the_answer, True),
    "a clipped flag flipped, summaries recomputed": (_flag("clipped"), True),
    "a repetitive flag flipped, summaries recomputed": (_flag("repetitive"), True),
    "the model's revision edited": (_model, False),
    "reward curve edited": (_curve, False),
    "timings edited": (lambda r, b: r["timings"].update(train_s=r["timings"]["train_s"] * 2 + 1), False),
    "versions edited": (lambda r, b: r["versions"].update(torch="0.0.0"), False),
    "device edited": (lambda r, b: r["device"].update(name="another device"), False),
    "scoring timeouts one more, within range": (_within_range, False),
}
# what nothing but the seal can see, once sealed again (nothing recomputes it; --reproduce compares it)
SEALED_ONLY = ("reward curve edited", "timings edited", "versions edited", "device edited",
               "scoring timeouts one more, within range")


def _swap_and_hide(out, key: str) -> None:
    """Before and after swapped, and the before.json that would show it removed."""
    apply(out, key, "before and after swapped, summaries recomputed")
    before = files.work(out, sources.parse(key).slug) / "before.json"
    if not before.exists():
        raise Skip("no before.json to remove")
    before.unlink()


def _older(schema: int):
    """Marked as a result of an older schema (checked without its before.json there), its before.json removed."""
    def edit(out, key: str) -> None:
        path = files.result(out, sources.parse(key).slug)
        record = json.loads(path.read_text())
        record["schema"] = schema
        files.write_json(path, record)
        before = files.work(out, sources.parse(key).slug) / "before.json"
        if not before.exists():
            raise Skip("no before.json to remove")
        before.unlink()
    return edit


FOLDER_EDITS = {"before and after swapped, before.json removed": _swap_and_hide,  # name -> edit of (out, key)
                "marked schema 3, before.json removed": _older(3), "marked schema 2, before.json removed": _older(2)}
ALL = (*EDITS, *FOLDER_EDITS)


def apply(out, key: str, name: str, reseal: bool = False) -> None:
    """One edit of ALL to the family's result in out, in place (Skip: nothing in it to edit); reseal: the family's
    files sealed again after it, as a forger with the project's own functions would."""
    body, sha = commit.committed(out, commit.READABLE)
    if name in FOLDER_EDITS:
        FOLDER_EDITS[name](out, key)
    else:
        path = files.result(out, sources.parse(key).slug)
        record = json.loads(path.read_text())
        edit, again = EDITS[name]
        edit(record, body)
        files.write_json(path, resummarize(record, body) if again else record)
    if reseal:
        seal.write(sha, out, sources.parse(key).slug)


def detected(out, key: str, scorer, model=None) -> str | None:
    """Why the family's result is not used as sound (the first reason), or None where it would be."""
    try:
        body, sha = commit.committed(out, commit.READABLE)
    except commit.CommitError as e:
        return str(e)
    result = records.read(files.result(out, sources.parse(key).slug), sha)
    if not isinstance(result, records.FamilyResult):
        return "not a finished result" if result is None else f"corrupt: {result.reason}"
    verdict = verify.family(out, body, sha, result, scorer, model)
    return None if verdict.ok else verdict.reasons[0]


def main(argv=None) -> int:
    from proof import regenerate
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="a finished output folder (it is copied, never changed)")
    args = ap.parse_args(argv)
    try:
        body, _ = commit.committed(args.out, commit.READABLE)
    except commit.CommitError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    tally, missed = {False: [0, 0], True: [0, 0]}, {False: set(), True: set()}  # reseal -> [found, tried], names
    with tempfile.TemporaryDirectory(prefix="shortlist-edits-") as scratch, verify.scorer_for(body) as scorer, \
            regenerate.Regenerator() as model:
        for reseal in (False, True):
            for key in body["families"]:
                for name in ALL:
                    copy = Path(scratch) / "out"
                    shutil.rmtree(copy, ignore_errors=True)
                    shutil.copytree(args.out, copy, ignore=shutil.ignore_patterns("checkpoints", "compile", "notebooks"))
                    try:
                        apply(copy, key, name, reseal)
                    except Skip as e:
                        print(f"skipped  {key}: {name} ({e})")
                        continue
                    why = detected(copy, key, scorer, model)
                    tally[reseal][0] += why is not None
                    tally[reseal][1] += 1
                    if why is None:
                        missed[reseal].add(name)
                    print(f"{'detected' if why else 'MISSED  '} {key}: {name}{', sealed again' if reseal else ''}"
                          + (f": {why}" if why else ""))
    for reseal, (found, tried) in tally.items():
        print(f"{found}/{tried} edits detected ({'sealed again' if reseal else 'the seal left as it was'})")
    return 0 if not missed[False] and missed[True] <= set(SEALED_ONLY) else 1


if __name__ == "__main__":
    sys.exit(main())
