"""A family trained again from its commitment, and every number its result records compared with the new one's:
`python -m proof verify --out OUT --reproduce FAMILY`.

What no other check can see (proof/verify.py: an edit of the reward curve or the scorer counts, sealed again with
the project's own functions) differs here. The family is trained in a scratch folder under the run's own
(work/<slug>/reproduce, removed after), under the run's lock, from a copy of its predictions. On a CPU the tiny
model's training is deterministic and every number must be the same; on a GPU, sampled GRPO is not bit for bit,
and the differences say how far a second run lands. Timings, versions, the device and the time are not compared.
"""
from __future__ import annotations

import shutil
import sys
from proof import commit, files, records
from proof.records import FamilyResult
from shortlist import executors, sources
from shortlist.errors import OneLine
from shortlist.models import config as models

UNTIMED = "step_time"  # the reward curve's one timing
# the scorer's counts that depend on the clock and the machine's load, not on the answers (a count absent from an
# older result is 0)
LOADED = ("seconds", "retried")


class ReproduceError(OneLine, RuntimeError):
    """A family that cannot be trained again here; the message is one line."""


def _progress(line: str) -> None:
    """The retraining's progress, on stderr: stdout carries the comparison's findings alone."""
    print(line, file=sys.stderr, flush=True)


def reproduce(out, key: str, log=_progress) -> list[str]:
    """The family trained again from the commitment: every difference from its recorded result, one line each."""
    from proof import runner, train
    settings, sha = runner.committed_settings(out)
    family = sources.parse(key)
    if family.key not in settings.families:
        raise ReproduceError(f"{key} is not a committed family of {settings.out}: give one of "
                             f"{', '.join(settings.families)}")
    # the committed model, checked here so that a refusal names this run's folder, not the scratch one
    theirs = (commit.committed(settings.out)[0].get("model") or {}).get("revision")
    here = models.identity(settings.profile.model)
    if commit.other_revision(theirs, here["revision"]):
        raise ReproduceError(f"{family.key} cannot be trained again on another model: {here['name']} is revision "
                             f"{here['revision']} here, not the {theirs} committed in {files.predictions(settings.out)}")
    recorded = records.read(files.result(settings.out, family.slug), sha)
    if not isinstance(recorded, FamilyResult):
        raise ReproduceError(f"{family.key} has no finished result in {settings.out} to compare with")
    micro = recorded.timings.get("batch_per_device")  # a speed setting: not committed, recorded by the result
    if isinstance(micro, list) and len(micro) == 1:  # logged means (entropy) are taken per micro-batch
        settings = settings.replace(batch_per_device=micro[0])
    scratch = files.work(settings.out, family.slug) / "reproduce"
    with executors.one_run(settings.out):
        shutil.rmtree(scratch, ignore_errors=True)
        try:
            for where in (files.predictions, files.predictions_hash):
                files.write_bytes(where(scratch), where(settings.out).read_bytes())
            again = train.run_family(settings.replace(out=str(scratch)), family.key, log)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return differences(recorded, again)


def differences(recorded: FamilyResult, again: FamilyResult) -> list[str]:
    """Every recorded number of the first that the second does not repeat (timings aside)."""
    why = []
    for part in ("before", "after"):
        a, b = getattr(recorded, part), getattr(again, part)
        for name in ("seeds", "completions", "answers", "scores", "clipped", "repetitive"):
            x, y = getattr(a, name), getattr(b, name)
            differ = [i for i in range(max(len(x), len(y))) if i >= min(len(x), len(y)) or x[i] != y[i]]
            if differ:
                i = differ[0]
                why.append(f"{part}: {len(differ)} of {a.n} {name} differ (first at task {i}: recorded "
                           f"{_short(x, i)}, again {_short(y, i)})")
    for name in ("gain", "improved", "held", "baselines", "prediction"):
        if getattr(recorded, name) != getattr(again, name):
            why.append(f"{name}: recorded {getattr(recorded, name)}, again {getattr(again, name)}")
    untimed = [[{k: v for k, v in row.items() if k != UNTIMED} for row in r.reward_curve] for r in (recorded, again)]
    if untimed[0] != untimed[1]:
        step = next((i for i, (a, b) in enumerate(zip(*untimed)) if a != b), min(map(len, untimed)))
        why.append(f"reward_curve: differs from logged row {step} on (recorded {len(untimed[0])} rows, again "
                   f"{len(untimed[1])})")
    counts = [{k: v for k, v in r.scoring.items() if k not in LOADED and v} for r in (recorded, again)]
    if counts[0] != counts[1]:
        why.append(f"scoring: recorded {counts[0]}, again {counts[1]}")
    identity = [{k: r.model.get(k) for k in ("name", "revision")} for r in (recorded, again)]
    if identity[0]["name"] != identity[1]["name"] or commit.other_revision(*(i["revision"] for i in identity)):
        why.append(f"model: recorded {identity[0]}, again {identity[1]}")
    return why


def _short(values: tuple, i: int) -> str:
    return repr(values[i])[:60] if i < len(values) else "nothing"
