"""Commit Shortlist's predictions before any training, and hold training to them.

predictions.json records the trainee (every field, once), the proof's settings and seed ranges,
a fingerprint of every family's tasks, each family's held-out evaluation tasks (questions never
seen in training or screening: heldout.py) and whether the proof can judge the family at all, the
analysis declared in advance, the decode engine, package versions, the device and the time, and
each family's screen (its scorer audit included) and prediction; predictions.sha256 holds its digest. verified() refuses, in one line and before any model loads,
predictions that are missing, altered, or were committed under another trainee or other settings
than the ones training is asked to use; tasks_verified() refuses tasks that differ from the
committed ones.
"""
from __future__ import annotations

import hashlib
import json

from proof import analysis, files, heldout, rules
from proof import settings as settings_
from proof.settings import Settings
from shortlist import provenance, sources
from shortlist.sources import source as source_
from shortlist.errors import OneLine
from shortlist.rule import AUDIT_VERDICTS
from shortlist.trainee import Trainee

SCHEMA = 5
# what a report can read: schema 2 has no held-out record or audit, schema 3 chose unseen questions after the
# training draw (evidence.py re-analyses both as they were committed); schema 4 reserved every question by its
# text, kept no adapter and sealed nothing (proof/verify.py says which checks cannot run); schema 5 reserves by
# the question's meaning where its family has one (each reservation records its key: heldout.py), keeps each
# family's adapter and seals its files. Training reads this version's only: a result is made, and verified,
# under its commitment's schema
READABLE = (2, 3, 4, 5)
TRAINABLE = (SCHEMA,)
POLICIES = 4  # the first schema whose screens hold this version's audit and policies (evidence.py)


class CommitError(OneLine, RuntimeError):
    """Predictions that training must not use; the message is one line."""


class NotCommitted(CommitError):
    pass


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def family_tasks(settings: Settings, family, held: heldout.HeldOut | None = None) -> dict:
    """The family's training, prediction and evaluation tasks: drawn past its reserved questions
    (heldout.draw) when held is None, else the committed ones rebuilt. Also "heldout": the record."""
    family = sources.parse(family)
    if held is None:
        held, built = heldout.draw(family, settings)
    else:
        built = heldout.rebuild(family, held)
    return built | {"heldout": held}


TASK_SETS = ("train", "predict", "eval")
# what of a source's identity must be the same at training time: which server served the tasks (a package's
# version alone may change where the fingerprints do not), and how its answers were sent and its rewards
# scaled (an OpenEnv Reading: another action field or reward range scores the same tasks otherwise)
SERVED_BY = ("source", "url", "local", "env", "env_version", "reading")


def fingerprints(built: dict, family=None) -> dict:
    """The fingerprint of each task set; with the family, "source": what served them (source.identity())."""
    found = {name: sources.fingerprint(built[name]) for name in TASK_SETS}
    return found if family is None else found | {"source": source_.identity(sources.parse(family).source)}


def write(settings: Settings, screens: list[dict], model_source: dict, scoring: dict, engine: dict,
          tasks: dict, held: dict) -> str:
    """Write predictions.json, then its SHA-256; returns the digest. tasks: family key -> fingerprints();
    held: family key -> its HeldOut record."""
    judged = {key: _not_judged(settings, next(s for s in screens if s["family"] == key), held[key]) for key in held}
    plan = analysis.plan(settings)
    plan["power"] = rules.power(settings.profile.as_dict(), screens, judged)  # what the comparisons could show
    body = {"schema": SCHEMA, **provenance.stamp(), "model": model_source, "trainee": settings.profile.as_dict(),
            "settings": settings.protocol(), "source": settings.source.as_dict(), "families": list(settings.families),
            "seed_ranges": {k: [r.start, r.stop] for k, r in settings.seed_ranges().items()},
            "tasks": tasks,
            "heldout": {key: h.as_dict() for key, h in held.items()}, "not_judged": judged,
            "engine": engine, "scoring": scoring, "analysis": plan, "predictions": screens}
    data = (json.dumps(body, indent=1, allow_nan=False) + "\n").encode()
    files.write_bytes(files.predictions(settings.out), data)
    files.write_text(files.predictions_hash(settings.out), f"{digest(data)}  predictions.json\n")
    return digest(data)


def _not_judged(settings: Settings, screen: dict, held: heldout.HeldOut) -> list[str]:
    """Why the proof cannot judge a family's verdict (committed before training, and never changed
    after it): its reward cannot tell (the audit's verdicts), or too few reserved evaluation questions.
    Such a family is still trained and reported, as a control, apart from the rule's tally."""
    return not_judged(screen, heldout.judgeable(held, settings.min_unseen))


def not_judged(screen: dict, few: str | None) -> list[str]:
    """The one rule for what the proof does not judge: an audit verdict, or too few evaluation questions."""
    why = []
    if screen["verdict"] in AUDIT_VERDICTS:
        why.append(f"{screen['verdict']} (ceiling {_share(screen.get('ceiling'))}, guess rate "
                   f"{_share(screen.get('guess'))} by {screen.get('guess_answer')})")
    return why + ([few] if few else [])


def _share(x) -> str:
    """A share measured on a few dozen tasks, at the precision it carries (0.92, not 0.9166666666666666)."""
    return f"{x:.2f}" if isinstance(x, float) else str(x)


def committed(out, readable: tuple = TRAINABLE) -> tuple[dict, str]:
    """The predictions in an output folder and their digest, if they are there and unaltered (and of
    a schema in readable: training reads those it can train, a report older ones too)."""
    path, hash_path = files.predictions(out), files.predictions_hash(out)
    if not path.exists() or not hash_path.exists():
        raise NotCommitted(f"no committed predictions in {out}: run 01_predict first (python -m proof run does)")
    data = path.read_bytes()
    recorded = (hash_path.read_text().split() or [""])[0]
    if digest(data) != recorded:
        raise CommitError(f"{path} does not match {hash_path.name} (sha256 {digest(data)[:12]}… vs "
                          f"recorded {recorded[:12]}…): the predictions changed after they were committed")
    try:
        body = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise CommitError(f"{path} is not JSON ({type(e).__name__}): it was not written by a commit") from None
    if not isinstance(body, dict):
        raise CommitError(f"{path} holds no JSON object: it was not written by a commit")
    if body.get("schema") not in readable:
        raise CommitError(f"{path} has schema {str(body.get('schema'))[:40]}, this version reads "
                          f"{' and '.join(map(str, readable))}: commit again into another out folder")
    _shaped(body, path)
    return body, recorded


def _shaped(body: dict, path) -> None:
    """Refuse, in one line, a hash-matching file that is not what commit() writes: what every reader
    of it (training, the report) takes for granted is there and of its kind."""
    def bad(why: str):
        raise CommitError(f"{path}: {why}: it was not written by a commit (its hash was recomputed)")
    for name in ("settings", "trainee", "families", "predictions"):
        if name not in body:
            bad(f"lacks {name}")
    for name in ("settings", "trainee"):
        if not isinstance(body[name], dict):
            bad(f"{name} must be an object")
    if not isinstance(body["families"], list) or not body["families"] or \
            not all(isinstance(f, str) for f in body["families"]):
        bad("families must be a list of family specs")
    if not isinstance(body["predictions"], list) or \
            not all(isinstance(p, dict) and isinstance(p.get("family"), str) for p in body["predictions"]):
        bad("predictions must be a list of screens, each naming its family")
    try:
        keys = [sources.parse(f).key for f in body["families"]]
    except sources.FamilyError as e:
        bad(f"families: {e}")
    screened = [p["family"] for p in body["predictions"]]
    for key in keys:
        if screened.count(key) != 1:
            bad(f"names {key}, which has {'no screen' if key not in screened else 'more than one screen'}")


def verified(settings: Settings, family: str | None = None) -> tuple[dict, str]:
    """The committed predictions and their digest, if they may be used with these settings."""
    body, recorded = committed(settings.out)
    ours = settings.profile.as_dict()
    where = files.predictions(settings.out)
    way_out = f"or give a new {settings_.spoken_name('out')} to commit new predictions there ({where} holds these)"
    for name, value in ours.items():
        if body["trainee"].get(name) != value and not _left_to_the_same(settings, body, name):
            theirs = body["trainee"].get(name)
            restore = settings_.spoken("model", theirs) if name == "model" else f"the trainee's {name}={theirs!r}"
            raise CommitError(f"trainee {name}={value!r} differs from the committed {name}="
                              f"{body['trainee'].get(name)!r}: restore it ({restore}), {way_out}")
    for name, value in settings.protocol().items():
        if body["settings"].get(name) != value:
            raise CommitError(f"{name}={value!r} differs from the committed {name}={body['settings'].get(name)!r}: "
                              f"restore it ({settings_.spoken(name, body['settings'].get(name))}), {way_out}")
    if family is not None and sources.parse(family).key not in body["families"]:
        raise CommitError(f"{family} has no committed prediction; committed: {', '.join(body['families'])}")
    if family is not None:
        _asked_as_screened(settings, body, sources.parse(family), way_out)
    return body, recorded


def other_revision(recorded: str | None, here: str | None) -> bool:
    """Whether two revisions of a model are known to differ: None (not recorded, or a hub model the hub cache holds
    no snapshot of) compares with nothing."""
    return recorded is not None and here is not None and recorded != here


def same_model(settings: Settings, body: dict, here: dict) -> None:
    """Refuse, in one line and before the model loads, to train another model than the one the predictions were
    screened on: a hub model at another commit, a local folder whose files changed. A commitment that recorded no
    revision (made before 2026-12-06, when local folders and hub models read as None) cannot be compared."""
    theirs = (body.get("model") or {}).get("revision")
    if other_revision(theirs, here["revision"]):
        restore = "restore the committed files, or " if here["revision"].startswith("files:") else ""  # a hub's moved on
        raise CommitError(f"the model {here['name']} is revision {here['revision']} here, not the committed {theirs}: "
                          f"{restore}give a new {settings_.spoken_name('out')} to commit new predictions for this "
                          f"one ({files.predictions(settings.out)} holds these)")


def _left_to_the_same(settings: Settings, body: dict, name: str) -> bool:
    """Whether the trainee leaves a convention (system_prompt, extraction) to the sources that the committed
    trainee set outright to what every committed family's source declares: the same asking, from a run
    committed before trainees left them to the source."""
    if name not in ("system_prompt", "extraction") or getattr(settings.profile, name) is not None:
        return False
    used = {sources.parse(key).source for key in body["families"]}
    return all(getattr(settings.profile.for_source(s), name) == body["trainee"].get(name) for s in used)


def _asked_as_screened(settings: Settings, body: dict, family, way_out: str) -> None:
    """Refuse, in one line, to train a family asked or read otherwise than it was screened: a trainee that
    leaves them to the source takes its convention, which the source's code could change after the commit."""
    screen, asked = prediction_for(body, family.key), settings.profile.for_source(family.source)
    for name in ("system_prompt", "extraction"):
        if screen.get(name) is not None and screen[name] != getattr(asked, name):
            now = repr(getattr(asked, name))
            raise CommitError(f"{family.key}: the trainee now asks with {name}={now[:60]} but the family was "
                              f"screened with {screen[name]!r:.60}: its source's convention changed; {way_out}")


def tasks_verified(body: dict, family, built: dict) -> None:
    """Refuse, in one line, tasks that are not the ones the predictions were committed against."""
    key = sources.parse(family).key
    now, committed_ = fingerprints(built, key), body["tasks"][key]
    served = {k: committed_.get("source", {}).get(k) for k in SERVED_BY}
    if "source" in committed_ and served != {k: now["source"].get(k) for k in SERVED_BY}:
        raise CommitError(f"{key}: its tasks come from {_served(now['source'])} here, committed from "
                          f"{_served(committed_['source'])}: serve them as they were committed (--env-url, --env-local), "
                          "or commit anew")
    for name, sha in committed_.items():
        if name == "source":
            continue
        if now[name] != sha:
            raise CommitError(f"{key}: the {name} tasks built here differ from the committed ones (sha256 "
                              f"{now[name][:12]}… vs {sha[:12]}…); "
                              + ("is reasoning-gym another version?" if sources.parse(key).source == source_.DEFAULT
                                 else "does its server serve other tasks for the same seeds?"))
    why = heldout.breaches(built["heldout"], key, built) if built.get("heldout") is not None else []
    if why:  # read by the key the reservation was drawn by: a key that differs between processes, a bad draw
        raise CommitError(f"{key}: its tasks do not keep the committed reservation ({'; '.join(why)}): commit anew")


def _served(identity: dict) -> str:
    return ", ".join(f"{k} {identity.get(k)}" for k in SERVED_BY if identity.get(k) is not None)


def held_out(body: dict, family: str) -> heldout.HeldOut | None:
    """The committed evaluation tasks of a family (None in a schema-2 run, which had none)."""
    record = body.get("heldout", {}).get(sources.parse(family).key)
    return heldout.HeldOut.from_dict(record) if record else None


def prediction_for(body: dict, family: str) -> dict:
    key = sources.parse(family).key
    return next(p for p in body["predictions"] if p["family"] == key)


def asked(body: dict, family: str) -> Trainee:
    """The committed trainee as it asked and read a family when it was screened: the system prompt and
    extraction its screen records (its source may declare others since), else its source's (a run
    committed before screens recorded them). What re-reads a finished run's answers reads them so."""
    screen = prediction_for(body, family)
    recorded = {name: screen[name] for name in ("system_prompt", "extraction") if screen.get(name) is not None}
    return Trainee.from_dict(body["trainee"]).replace(**recorded).for_source(sources.parse(family).source)


def predict(settings: Settings, log=print) -> tuple[dict, str]:
    """Screen every family and commit the predictions; predictions already committed under these
    settings are kept, and predictions committed under others are never overwritten."""
    try:
        body, sha = verified(settings)
    except NotCommitted:
        pass
    except CommitError as e:
        raise CommitError(f"{settings.out} already holds other predictions: {e}") from None
    else:
        if body["families"] != list(settings.families):
            raise CommitError(f"{settings.out} already holds predictions for other families "
                              f"({', '.join(body['families'])}): give a new --out for these families")
        log(f"kept the predictions committed at {body['written_at']} (sha256 {sha})")
        return body, sha

    from shortlist import screening, scoring
    from shortlist.generation import compile_cache, engine, sampling
    from shortlist.models import config as models
    trainee = settings.profile
    models.check_fits(models.model_config(trainee.model), trainee)  # a model that cannot be had, named first
    models.check_device(trainee.model, settings.cpu)  # no GPU for a real model (Run All on a CPU session): the step to take
    files.check_writable(settings.out)
    built = {key: family_tasks(settings, key) for key in settings.families}  # the tasks before the model
    compile_cache.use(files.compile_cache(settings.out))  # the families trained after this reuse it
    loaded = sampling.load(trainee.model)
    sampler = sampling.Sampler(loaded, trainee, settings.sample_batch, settings.fast)
    with scoring.Scorer(deadline_s=settings.score_deadline_s) as scorer:
        with engine.phase() as screened:  # the screens' own engine record, whatever else this kernel ran
            screens = screening.screen_all(sampler, scorer, settings.families, seed=settings.seed, log=log,
                                           rows={key: b["predict"] for key, b in built.items()})
        sha = write(settings, [s.as_dict() for s in screens], loaded.source, scorer.settings(), screened.status(),
                    {key: fingerprints(b, key) for key, b in built.items()}, {key: b["heldout"] for key, b in built.items()})
    log(f"committed {files.predictions(settings.out)} (sha256 {sha})")
    return verified(settings)
