"""A finished family checked again whenever it is used: by a rerun, before it counts as done, and by the report.

A result file holds everything needed to check it, and the commitment says what it must be:
- its statistics recomputed from its per-task scores (the seed's bootstrap again, improved, held);
- its saved answers re-scored by the sandboxed scorer against the committed tasks, each answer taken again
  from its completion by the committed trainee's extraction, and its baselines (the policies) measured again;
- its evaluation tasks the committed held-out ones, in order, none of them a training, prediction or skipped seed;
- its settings, trainee, model, prediction and predictions hash the committed ones, its evaluation before training
  the one work/<slug>/before.json kept (so before and after cannot be swapped), its scorer counts and engine
  records possible for the answers it holds;
- its files (before.json, the final adapter, the result) the ones its run sealed (proof/seal.py), so an edit made
  without running the family again is found even where every number agrees;
- its greedy answers the model's: drawn again from the committed model and the family's final adapter
  (proof/regenerate.py), so answers rewritten and scored again, however consistent, are found.
What a result must hold is its commitment's schema's (SINCE), never its own: an older run's (published without
work/, without adapters or seals) is checked without them, and unchecked() says which checks could not run.
What none of these sees: an edit of what nothing recomputes (a timing, a version, the reward curve) sealed again
with this version's own functions; `python -m proof verify --reproduce FAMILY` (reproduce.py) retrains the family
from the commitment for that. A result that fails is rejected (reject(): moved aside with the reasons, so a rerun
trains it again).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, fields
from pathlib import Path

from proof import adapter, commit, evidence, files, records, seal, settings as settings_, stats
from proof.records import Evaluation, FamilyResult
from shortlist import scoring, sources

# what a result must hold from the schema its predictions were committed under on (older runs were published
# without it): the commitment says which, never the result; each with what unchecked() calls it
SINCE = {"before": 4, "adapter": 5, "seal": 5}
CHECKS = {"before": "the evaluation before training against the before.json its run kept",
          "adapter": "the answers drawn again from the final adapter", "seal": "the seal of the family's files"}
RETRIES = 2  # a score that differs is asked again: a loaded machine can time an honest answer out
# answers a check made alone scores at once, at most: each keeps a process forked ahead per family (~12 MiB), and
# verify.baselines() requires the policies' every score again, so a machine oversubscribed into timeouts would call an
# honest result corrupt (measured: 16 at once on 2 CPUs timed out 11-51 of a battery's answers, 2 at once none)
ALONE_MOST = 16
REJECTED = ".rejected"  # families/<slug>.json.rejected, with its reasons in <slug>.json.rejected.why


@dataclass(frozen=True)
class Verdict:
    """What checking one result found: ok, or one line per reason, the file named in line()."""
    path: str
    reasons: tuple = ()
    unchecked: tuple = ()  # the checks that could not run (an older run's, a model this machine lacks), and why
    seconds: dict = field(default_factory=dict, compare=False)  # what the costly checks took: rescored, regenerated

    @property
    def ok(self) -> bool:
        return not self.reasons

    def line(self, out=None) -> str:
        """One line: the file (relative to the output folder, where one is given), then every reason."""
        path = Path(self.path).relative_to(Path(out).resolve()) if out is not None else self.path
        return f"{path}: " + "; ".join(self.reasons)


class LazyScorer:
    """One sandboxed Scorer for every family of a load, started only when something is scored."""

    def __init__(self, deadline_s: float, given=None, alone: bool = False):
        self.deadline_s, self._scorer, self._own, self.alone = deadline_s, given, given is None, alone

    def score(self, family, seeds, answers, retries: int = 0) -> list[float]:
        if self._scorer is None:
            from shortlist import process
            from shortlist.scoring import Scorer, scorer
            workers = min(process.cpus(), ALONE_MOST) if self.alone else scorer.WORKERS
            self._scorer = Scorer(workers=workers, deadline_s=self.deadline_s)
        return self._scorer.score(family, seeds, answers, retries)

    def close(self) -> None:
        if self._own and self._scorer is not None:
            self._scorer.close()
            self._scorer = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def scorer_for(body: dict, given=None, alone: bool = False) -> LazyScorer:
    """The committed deadline's scorer. alone: nothing else trains or scores on this machine meanwhile (a report,
    a batch's check before its jobs, `proof verify`), so every CPU it may use scores, up to ALONE_MOST: a report
    checks every answer and the policies again, ~2,700 answers a family (a job keeps scorer.WORKERS, several jobs
    sharing a machine)."""
    return LazyScorer(body["settings"].get("score_deadline_s", 1.0), given, alone)


def family(out, body: dict, sha: str, result: FamilyResult, scorer, model=None) -> Verdict:
    """Every check of one result against the commitment; re-scoring and drawing the answers again (the costly
    parts) only when the rest holds. model: a regenerate.Regenerator shared by a load (None: one for this call)."""
    path = str(files.result(Path(out).resolve(), result.slug))
    reasons = [*committed(body, sha, result), *statistics(body, result), *seeds(body, result),
               *before_file(out, body, sha, result), *counts(body, result), *engines(result),
               *sealed(out, body, sha, result)]
    unchecked, seconds, started = _unchecked(out, body, result), {}, time.perf_counter()
    if not reasons:
        reasons += rescored(body, result, scorer)
        seconds["rescored"], started = time.perf_counter() - started, time.perf_counter()
    if not reasons:
        why, could_not = regenerated(out, body, result, model)
        reasons, unchecked = reasons + why, unchecked + could_not
        seconds["regenerated"] = time.perf_counter() - started
    return Verdict(path, tuple(reasons), tuple(unchecked), seconds)


def _unchecked(out, body: dict, result: FamilyResult) -> list[str]:
    """The checks a run committed before they existed cannot have (one line each)."""
    schema = body.get("schema", 0)
    missing = [k for k, since in SINCE.items() if schema < since]
    if "before" in missing and (files.work(out, result.slug) / "before.json").exists():
        missing.remove("before")  # kept by the run anyway: checked (before_file)
    return [f"{CHECKS[k]} (committed under schema {schema}, before runs kept what it reads: schema {SINCE[k]})"
            for k in missing]


def sealed(out, body: dict, sha: str, result: FamilyResult) -> list[str]:
    """Its files are the ones its run sealed (proof/seal.py)."""
    return seal.check(sha, out, result.slug) if body.get("schema", 0) >= SINCE["seal"] else []


def regenerated(out, body: dict, result: FamilyResult, model=None) -> tuple[list[str], list[str]]:
    """Its greedy answers drawn again from what produced them (proof/regenerate.py): (reasons, checks that could
    not run here)."""
    if body.get("schema", 0) < SINCE["adapter"]:
        return [], []  # said by _unchecked
    folder = files.adapter(out, result.slug)
    if not adapter.kept(folder):
        return [f"no adapter in {folder.relative_to(Path(out))}: its answers cannot be drawn again from what "
                f"produced them"], []
    from proof import regenerate
    if model is None:
        with regenerate.Regenerator() as own:
            return own.check(out, body, result)
    return model.check(out, body, result)


def committed(body: dict, sha: str, result: FamilyResult) -> list[str]:
    """Its identity and protocol are the commitment's."""
    why = []
    if result.predictions_sha256 != sha:
        why.append("made against other predictions")
    if result.schema != body.get("schema"):  # what it must hold is the commitment's to say, never its own
        why.append(f"it says schema {result.schema}, but its predictions were committed under schema "
                   f"{body.get('schema')}")
    if result.family not in body["families"] or result.slug != sources.parse(result.family).slug:
        why.append(f"family {result.family!r} is not a committed one")
        return why
    if result.prediction != commit.prediction_for(body, result.family):
        why.append("its prediction is not the committed one")
    if settings_.committed_part(result.settings) != settings_.committed_part(body["settings"]):
        why.append("its settings are not the committed ones")
    if result.trainee != body["trainee"]:
        why.append("its trainee is not the committed one")
    ours, theirs = _model(result.model), _model(body.get("model", {}))
    if ours["name"] != theirs["name"] or (theirs["revision"] is not None and ours["revision"] != theirs["revision"]):
        why.append(f"its model ({ours}) is not the committed one ({theirs})")  # None committed: any revision since
    return why


def _model(source: dict) -> dict:
    """What identifies a model (its local path is the machine's)."""
    return {k: source.get(k) for k in ("name", "revision")}


def statistics(body: dict, result: FamilyResult) -> list[str]:
    """Gain, interval, p, improved and held recomputed from the per-task scores (the seed's bootstrap)."""
    s = body["settings"]
    again = stats.paired_gain(result.before.scores, result.after.scores, s["bootstrap_n"])
    why, stored = [], {k: result.gain.get(k) for k in again}
    if stored != again:
        why.append(f"its gain/ci95/p ({stored}) disagree with its scores ({again})")
    improved = stats.improved(again, s["alpha"])
    if result.improved != improved:
        why.append("improved disagrees with its scores")
    if result.family in body["families"] and result.held != (
            improved == (commit.prediction_for(body, result.family)["prediction"] == "improves")):
        why.append("held disagrees with the committed prediction")
    return why


def seeds(body: dict, result: FamilyResult) -> list[str]:
    """The evaluation tasks are the committed held-out ones, in order; none is a seed training, prediction or
    the held-out search passed over (a run committed before held-out records: its evaluation range, in order)."""
    got = list(result.before.seeds)
    held = commit.held_out(body, result.family) if result.family in body["families"] else None
    if held is None:  # a run held out by seed only (schema 2) evaluated every seed of its range, in order
        low, high = body["seed_ranges"]["eval"]
        return [] if got == list(range(low, high)) else [
            f"its evaluation seeds are not the committed evaluation range [{low}, {high}) in order"]
    why = []
    if got != list(held.seeds):
        first = next((i for i, (a, b) in enumerate(zip(got, held.seeds)) if a != b), min(len(got), held.n))
        why.append(f"its evaluation tasks are not the committed ones in order ({len(got)} tasks, committed "
                   f"{held.n}; first difference at task {first})")
    banned = {"a training seed": set(held.train), "a prediction seed": set(held.predict),
              "a seed skipped as not held out": set(held.skipped)}
    for what, them in banned.items():
        hit = [x for x in got if x in them]
        if hit:
            why.append(f"its evaluation uses {what} ({hit[0]}{f' and {len(hit) - 1} more' if len(hit) > 1 else ''})")
    return why


def before_file(out, body: dict, sha: str, result: FamilyResult) -> list[str]:
    """The evaluation before training is the one the run kept in work/<slug>/before.json. This version keeps one
    beside every result, so a result of it without one is refused (before and after could not be told apart);
    an older run's results, published without work/, are checked without it."""
    path = files.work(out, result.slug) / "before.json"
    try:
        stored = files.made_against(path, sha)
        kept = Evaluation.from_dict(stored["evaluation"]) if stored else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        return [f"{path} is unreadable ({type(e).__name__})"]
    if kept is None:
        return [f"no {path} made against these predictions: its evaluation before training cannot be checked"] \
            if body.get("schema", 0) >= SINCE["before"] else []
    why = []
    if kept != result.before:
        why.append(f"its evaluation before training is not the one in {path}"
                   + (" (before and after swapped)" if kept == result.after else ""))
    if stored.get("engine") != result.engine.get("before"):
        why.append(f"its engine record before training is not the one in {path}")
    return why


def counts(body: dict, result: FamilyResult) -> list[str]:
    """The scorer's counts are possible: whole numbers, none below 0, none above the answers scored, the answers
    between the two evaluations and everything the run could score, the unextracted at least the evaluations'."""
    from shortlist.scoring import ScoreCounts
    c, s, n = result.scoring, body["settings"], result.before.n
    known = {f.name for f in fields(ScoreCounts)}
    why = [f"scoring has an unknown count {k!r}" for k in sorted(set(c) - known)]
    for k in sorted(set(c) & known):
        v = c[k]
        whole = isinstance(v, int) and not isinstance(v, bool)
        if not (whole or (k == "seconds" and isinstance(v, float) and math.isfinite(v))) or v < 0:
            why.append(f"scoring {k}={v!r} is not a count")
    if why or not c:
        return why
    answers = c.get("answers", 0)
    most = 2 * n + s.get("steps", 0) * s.get("prompts_per_step", 0) * body["trainee"].get("group", 0)
    if not 2 * n <= answers <= most:
        why.append(f"scoring answers={answers} is not between the {2 * n} evaluated and the {most} the run could score")
    why += [f"scoring {k}={c[k]} is more than the {answers} answers scored"
            for k in sorted(set(c) & known - {"answers", "seconds"}) if c[k] > answers]
    if c.get("retried", 0) > 2 * n:
        why.append(f"scoring retried={c['retried']} is more than the {2 * n} evaluated answers, the only ones retried")
    unextracted = sum(a is None for e in (result.before, result.after) for a in e.answers)
    if c.get("unextracted", unextracted) < unextracted:
        why.append(f"scoring unextracted={c['unextracted']} is fewer than the {unextracted} evaluation answers "
                   f"with nothing extracted")
    return why


def engines(result: FamilyResult) -> list[str]:
    """Each phase's engine record holds together: a failed self-check means generate() served the phase, and a
    fallback for a disagreement is recorded where some self-check failed."""
    why, failed_somewhere, claimed = [], False, []
    for phase, e in result.engine.items():
        if not isinstance(e, dict) or not isinstance(e.get("checks", []), list) or not all(
                isinstance(c, dict) for c in e.get("checks", [])):
            why.append(f"its engine record of {phase} is malformed")
            continue
        failed = [c for c in e.get("checks", []) if not c.get("passed", c.get("identical_rows") == c.get("rows"))]
        failed_somewhere |= bool(failed)
        if failed and e.get("engine") != "generate":
            why.append(f"its engine record of {phase} has a failed self-check yet names {e.get('engine')!r} as serving")
        if "differed from generate()" in str(e.get("why") or ""):
            claimed.append(phase)
    if claimed and not failed_somewhere:
        why.append(f"its engine record of {', '.join(claimed)} says the fast engine disagreed, but no self-check "
                   f"failed")
    return why


def rescored(body: dict, result: FamilyResult, scorer) -> list[str]:
    """Each saved answer taken again from its completion and scored again in the sandbox, against the committed
    tasks; the baselines (policies on the same tasks, after training) measured again."""
    trainee = commit.asked(body, result.family)  # as the family was screened, whatever its source says now
    why = []
    for part, e in (("before", result.before), ("after", result.after)):
        answers = [trainee.clean(c) for c in e.completions]
        wrong = [i for i, (a, b) in enumerate(zip(answers, e.answers)) if a != b]
        if wrong:
            why.append(f"{part}: {len(wrong)} saved answers are not what the trainee's extraction takes from their "
                       f"completions (first at task {wrong[0]})")
            continue
        again = _scored(scorer, result.family, list(e.seeds), answers, list(e.scores))
        differ = [i for i, (a, b) in enumerate(zip(again, e.scores)) if abs(a - b) > 1e-9]
        if differ:
            why.append(f"{part}: {len(differ)} of {e.n} scores differ when the answers are scored again (first at task "
                       f"{differ[0]}: saved {e.scores[differ[0]]}, scored {again[differ[0]]})")
    if not why and "policy" in result.baselines:
        why += baselines(body, result, trainee, scorer)
    return why


def _scored(scorer, key: str, seeds: list, answers: list, saved: list) -> list[float]:
    """Scores again; those that differ from the saved ones asked again, up to RETRIES times (a timeout on a
    loaded machine is not a forgery; a forged score differs every time)."""
    scores = scorer.score(key, seeds, answers, retries=scoring.RETRIES)
    for _ in range(RETRIES):
        differ = [i for i, (a, b) in enumerate(zip(scores, saved)) if abs(a - b) > 1e-9]
        if not differ:
            break
        for i, value in zip(differ, scorer.score(key, [seeds[i] for i in differ], [answers[i] for i in differ],
                                                       retries=scoring.RETRIES)):
            scores[i] = value
    return scores


def baselines(body: dict, result: FamilyResult, trainee, scorer) -> list[str]:
    """The policies measured again on the committed evaluation tasks, beside the answers after training."""
    from shortlist import audit
    held = commit.held_out(body, result.family)
    tasks = sources.parse(result.family).tasks(list(result.before.seeds))
    if held is not None and sources.fingerprint(tasks) != held.sha256:
        return ["its evaluation tasks, built here, differ from the committed ones (another reasoning-gym?)"]
    frequent = audit.most_frequent_gold(evidence.CommittedTasks(body, result.family, held)["predict"])
    for _ in range(1 + RETRIES):
        again = audit.constants(scorer, trainee, result.family, tasks, list(result.after.answers), frequent)
        if _close(again, result.baselines):
            return []
    return [f"its baselines ({result.baselines}) are not what the policies score on its tasks ({again})"]


def _close(a, b) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) < 1e-9
    return a == b


def reject(out, slug: str, verdict: Verdict) -> Path:
    """A result that failed, moved aside whole with its reasons beside it (and the evaluation before training it
    rested on, and its seal), so that it is kept for a look and a rerun trains the family again; returns where
    it went."""
    path = files.result(out, slug)
    aside = path.with_name(path.name + REJECTED)
    files.write_text(aside.with_name(aside.name + ".why"), "\n".join(verdict.reasons) + "\n")
    path.replace(aside)
    for kept in (files.work(out, slug) / "before.json", seal.path(out, slug)):
        if kept.exists():
            kept.replace(kept.with_name(kept.name + REJECTED))
    return aside


def done(out, body: dict, sha: str, key: str, scorer, log=print, model=None) -> FamilyResult | None:
    """The family's result if it is finished and verifies; one that fails is rejected, with one line said."""
    result = records.read(files.result(out, sources.parse(key).slug), sha)
    if not isinstance(result, FamilyResult):
        return None
    verdict = family(out, body, sha, result, scorer, model)
    if verdict.ok:
        return result
    aside = reject(out, result.slug, verdict)
    log(f"{key}: its result failed verification, so it runs again ({verdict.line()}); kept as {aside}")
    return None


def folder(out, sample: int | None = None) -> dict:
    """Every committed family of an output folder checked, nothing moved aside (`python -m proof verify`):
    family key -> its Verdict, or the one line saying why it has none to check (not run, failed, unreadable)."""
    from proof import regenerate
    body, sha = commit.committed(out, commit.READABLE)
    found = {}
    with scorer_for(body, alone=True) as scorer, regenerate.Regenerator(sample) as model:
        for key in body["families"]:
            result = records.read(files.result(out, sources.parse(key).slug), sha)
            found[key] = family(out, body, sha, result, scorer, model) if isinstance(result, FamilyResult) else \
                "not run" if result is None else f"{result.status}: {result.reason}"
    return found


def record(out, report: bool = True) -> list[str]:
    """The run's executed notebooks (and, with report, 03 and report.html) against their seals (proof/seal.py:
    notebooks), for a run committed under a schema that seals them; one line each."""
    body, sha = commit.committed(out, commit.READABLE)
    return seal.notebooks(out, sha, report) if body.get("schema", 0) >= SINCE["seal"] else []
