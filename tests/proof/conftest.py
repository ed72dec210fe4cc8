"""Fixtures of the proof's tests: the smoke batch, run once, and output folders of made-up outcomes."""
import os
import pytest


@pytest.fixture(autouse=True)
def outside_a_notebook(monkeypatch):
    """Each test starts as a command line would: notebook.start() and settings.from_namespace() mark the process as
    a notebook's kernel (refusals then name the parameters cell, not flags), which used to leak into the next test
    on the same worker."""
    from proof import settings
    monkeypatch.setattr(settings, "_IN_NOTEBOOK", False)


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory):
    """The smoke batch (python -m proof run --preset smoke), run once into a temporary folder."""
    from proof import runner, settings
    s = settings.make("smoke", out=str(tmp_path_factory.mktemp("smoke") / "run"))
    log: list[str] = []
    outcome = runner.run(s, log=log.append)
    return s, outcome.report, log


@pytest.fixture(scope="session")
def regenerator():
    """One regenerate.Regenerator for a session's verifications: the tiny model loaded once."""
    from proof import regenerate
    with regenerate.Regenerator() as model:
        yield model


@pytest.fixture
def synthetic(tmp_path, monkeypatch):
    """An output folder of made-up outcomes, committed and written as the proof writes them.

    make({family: {"prediction": "improves" | "no change", "before": scores, "after": scores}})
    Optional per family: "screen" (fields of its screen), "before_answers"/"after_answers"
    (None: not extracted), "before_flags"/"after_flags" ((clipped, repetitive) for every answer), "timings" (more of
    its result's timings),
    "groups" (each evaluation task's distinct question), "baselines" (what policies earn, as
    shortlist.audit.constants() says; default: nothing); "failed": reason records a failed family.
    not_run=[...] adds committed families without a result. Its answers and baselines are made up, so
    they are not scored again, nor drawn again from a model (tests/proof/test_verify.py does both to a real
    run's); every other check of proof/verify.py applies, the seal of each family's files included."""
    from proof import commit, files, heldout, records, runner, seal, settings, train, verify
    monkeypatch.setattr(verify, "rescored", lambda *args: [])
    monkeypatch.setattr(verify, "regenerated", lambda *args: ([], []))  # no model made these answers
    site = tmp_path / "synthetic-site"  # ... nor in the kernels a report runs (03): their interpreter starts with this
    site.mkdir()
    (site / "sitecustomize.py").write_text("import proof.verify\nproof.verify.rescored = lambda *args: []\n"
                                           "proof.verify.regenerated = lambda *args: ([], [])\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    from proof.records import Evaluation
    from shortlist import sources
    from shortlist import screening
    from shortlist import rule

    def make(cases: dict, not_run: tuple = (), **overrides):
        n = len(next((c["before"] for c in cases.values() if "before" in c), range(24)))  # none finished: 24
        overrides = {"min_unseen": min(10, n)} | overrides  # a handful of tasks: the smoke's floor, or fewer
        s = settings.make("smoke", families=[*cases, *not_run], eval_n=n, out=str(tmp_path / "run"), **overrides)
        screens = []
        for key in s.families:
            case = cases.get(key, {})
            verdict = "improves" if case.get("prediction", "improves") == "improves" else "too hard"
            screens.append(screening.summarize(key, [[1.0, 0.0] * 4] * 8, 1.0, s.profile).as_dict()
                           | case.get("screen", {}) | {"verdict": verdict, "prediction": rule.prediction(verdict)})
        tasks = {key: {"predict": "0" * 64, "train": "0" * 64, "eval": "0" * 64} for key in s.families}
        seeds = list(range(s.eval_seed, s.eval_seed + n))
        held = {key: heldout.HeldOut(seeds, (), n, cases.get(key, {}).get("groups", range(n)), "0" * 64)
                for key in s.families}
        sha = commit.write(s, screens, {"name": "tiny", "path": "/synthetic", "revision": None}, {},
                           {"engine": "generate", "why": "synthetic", "checks": []}, tasks, held)
        body, _ = commit.verified(s)
        curve = [{"step": i + 1, "reward": 0.3, "reward_std": 0.2, "frac_reward_zero_std": 0.5,
                  "completion_length": 5.0, "clipped_ratio": 0.1} for i in range(s.steps)]
        for key, case in cases.items():
            path = files.result(s.out, sources.parse(key).slug)
            if "failed" in case:
                records.write(path, runner.failed(key, sha, case["failed"], "notebooks/x.ipynb"))
                continue
            evals = {}
            for part in ("before", "after"):
                answers = case.get(f"{part}_answers", [str(x) for x in case[part]])
                completions = ["no tags" if a is None else f"<answer>{a}</answer>" for a in answers]
                flags = case.get(f"{part}_flags", [(False, False)] * n)
                evals[part] = Evaluation(seeds, completions, answers, case[part], [c for c, _ in flags],
                                         [r for _, r in flags])
            nothing = {"answer": '"0"', "accuracy": 0.0, "mean": 0.0}
            after = list(evals["after"].answers)
            baselines = case.get("baselines", {"distinct_answers": len(set(after)) / n, "mode": nothing,
                                               "policy": nothing})
            engine = {"engine": "static", "why": None, "checks": []}
            result = train.outcome(s, key, sha, commit.prediction_for(body, key), evals["before"], evals["after"],
                                   curve, timings={"train_s": 1.0, "eval_before_s": 0.5, "eval_after_s": 0.5}
                                   | case.get("timings", {}),
                                   engine={"before": engine}, baselines=baselines, model=body["model"])
            files.write_json(files.work(s.out, sources.parse(key).slug) / "before.json",
                             {"predictions_sha256": sha, "evaluation": evals["before"].as_dict(), "seconds": 0.5,
                              "scoring": {}, "engine": engine})
            records.write(path, result)
            seal.write(sha, s.out, sources.parse(key).slug)
        return s
    return make
