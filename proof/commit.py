"""Commit Shortlist's predictions before any training, and hold training to them.

predictions.json records the model, the trainee's settings and thresholds, the proof's settings
and seed ranges, the analysis declared in advance, package versions, the device and the time,
and each family's screen and prediction; predictions.sha256 holds its digest. verified()
refuses, in one line and before any model loads, predictions that are missing, altered, or were
committed under other settings than the ones training is asked to use.
"""
from __future__ import annotations

import hashlib
import json

from proof import analysis, files, provenance
from proof.settings import Settings
from shortlist import families as families_
from shortlist import trainee

SCHEMA = 1


class CommitError(RuntimeError):
    """Predictions that training must not use; the message is one line."""


class NotCommitted(CommitError):
    pass


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(settings: Settings, screens: list[dict], model_source: dict, scoring: dict) -> str:
    """Write predictions.json, then its SHA-256; returns the digest."""
    body = {"schema": SCHEMA, **provenance.stamp(), "model": model_source, "trainee": trainee.settings(),
            "settings": settings.protocol(), "families": list(settings.families),
            "seed_ranges": {k: [r.start, r.stop] for k, r in settings.seed_ranges().items()},
            "scoring": scoring, "analysis": analysis.plan(settings), "predictions": screens}
    data = (json.dumps(body, indent=1) + "\n").encode()
    files.write_bytes(files.predictions(settings.out), data)
    files.write_text(files.predictions_hash(settings.out), f"{digest(data)}  predictions.json\n")
    return digest(data)


def committed(out) -> tuple[dict, str]:
    """The predictions in an output folder and their digest, if they are there and unaltered."""
    path, hash_path = files.predictions(out), files.predictions_hash(out)
    if not path.exists() or not hash_path.exists():
        raise NotCommitted(f"no committed predictions in {out}: run 01_predict first (python -m proof run does)")
    data = path.read_bytes()
    recorded = (hash_path.read_text().split() or [""])[0]
    if digest(data) != recorded:
        raise CommitError(f"{path} does not match {hash_path.name} (sha256 {digest(data)[:12]}… vs "
                          f"recorded {recorded[:12]}…): the predictions changed after they were committed")
    return json.loads(data), recorded


def verified(settings: Settings, family: str | None = None) -> tuple[dict, str]:
    """The committed predictions and their digest, if they may be used with these settings."""
    body, recorded = committed(settings.out)
    if body["model"]["name"] != settings.model:
        raise CommitError(f"model {settings.model!r} differs from the committed {body['model']['name']!r}")
    for name, value in settings.protocol().items():
        if body["settings"].get(name) != value:
            raise CommitError(f"{name}={value!r} differs from the committed {name}={body['settings'].get(name)!r}; "
                              f"train with the settings the predictions were committed with")
    for name, value in trainee.settings().items():
        if body["trainee"].get(name) != value:
            raise CommitError(f"shortlist/trainee.py's {name} changed since the predictions were committed")
    if family is not None and families_.parse(family).key not in body["families"]:
        raise CommitError(f"{family} has no committed prediction; committed: {', '.join(body['families'])}")
    return body, recorded


def prediction_for(body: dict, family: str) -> dict:
    key = families_.parse(family).key
    return next(p for p in body["predictions"] if p["family"] == key)


def predict(settings: Settings, log=print) -> tuple[dict, str]:
    """Screen every family and commit the predictions; predictions already committed under these
    settings are kept, and predictions committed under others are never overwritten."""
    settings.validate()
    try:
        body, sha = verified(settings)
    except NotCommitted:
        pass
    except CommitError as e:
        raise CommitError(f"{settings.out} already holds other predictions ({e}); choose another out folder") from None
    else:
        if body["families"] != list(settings.families):
            raise CommitError(f"{settings.out} already holds predictions for other families "
                              f"({', '.join(body['families'])}); choose another out folder")
        log(f"kept the predictions committed at {body['written_at']} (sha256 {sha})")
        return body, sha

    from shortlist import compile_cache, sampling, screening, scoring
    compile_cache.use(files.compile_cache(settings.out))  # the families trained after this reuse it
    loaded = sampling.load(settings.model)
    sampler = sampling.Sampler(loaded, settings.sample_batch, settings.max_new_tokens, settings.fast)
    screens = []
    with scoring.Scorer(deadline_s=settings.score_deadline_s) as scorer:
        for family in settings.families:
            screen = screening.screen(sampler, scorer, family, settings.predict_tasks, settings.group,
                                      settings.predict_seed, settings.seed)
            screens.append(screen.as_dict() | {"scoring": vars(scorer.counts[family])})
            log(f"{family}: pass@1 {screen.pass1:.2f}, signal on correctness {screen.signal_correct:.2f} "
                f"-> {screen.verdict}")
        sha = write(settings, screens, loaded.source, scorer.settings())
    log(f"committed {files.predictions(settings.out)} (sha256 {sha})")
    return verified(settings)
