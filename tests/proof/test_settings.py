import pytest

from proof import settings as settings_
from proof.settings import Settings, SettingsError
from shortlist import sources, trainee
from shortlist.errors import OneLine


def test_defaults_are_the_seeds_protocol():
    s = Settings().validate()
    assert (s.steps, s.group, s.prompts_per_step, s.lr, s.eval_n, s.predict_tasks) == (100, 8, 4, 5e-5, 200, 24)
    assert (s.lora_r, s.lora_alpha) == (16, 32)
    # the step's split is speed only (the seed's 4 x 8 accumulated; a step's gradient is the same sum): 8 x 4 here
    assert (s.batch_per_device, s.micro_batch, s.grad_accum) == (0, 8, 4)
    assert s.profile == trainee.QWEN3 and s.profile.max_new_tokens == 128
    # evaluation tasks: 200 reserved ones among the 20 x 200 seeds from 100,000; training and prediction walk
    # at most 4 x their count of seeds past reserved questions; the census sizes the share (heldout.py)
    assert s.seed_ranges() == {"train": range(0, 1600), "predict": range(10_000, 10_096),
                               "eval": range(100_000, 104_000), "census": range(200_000, 200_400)}
    assert (s.eval_n, s.eval_search, s.min_unseen, s.reserve, s.census_n) == (200, 20, 40, True, 400)
    before = s.replace(reserve=False, predict_seed=500)  # a run committed before reservation, re-analysed
    assert before.seed_ranges() == {"train": range(0, 400), "predict": range(500, 524), "eval": range(100_000, 104_000)}


@pytest.mark.parametrize("changes, fragment", [
    ({"trainee": "qwen3(group=1)"}, "group=1: must lie in 2..256"),
    ({"eval_n": 0}, "eval_n=0: must lie in 1..100000"),
    ({"batch_per_device": 3}, "batch_per_device=3 does not divide the 32 completions"),
    ({"trainee": "qwen3(group=3)", "prompts_per_step": 3, "batch_per_device": 2}, "does not divide the 9 completions"),
    ({"predict_seed": 1000}, "train seeds 0..1599 overlap predict seeds 1000..1095"),
    ({"train_seed": 99_990}, "train seeds 99990..101589 overlap eval seeds 100000..103999: move train_seed or eval_seed"),
    ({"predict_seed": 100_100}, "predict seeds 100100..100195 overlap eval seeds"),
    ({"census_seed": 100}, "train seeds 0..1599 overlap census seeds 100..499"),
    ({"census_n": 79}, "census_n=79 is below 2 x min_unseen=40"),
    ({"reserve_key": ""}, "reserve_key='': give 1 to 256 characters"),
    ({"lr": 0.0}, "lr=0.0: must be a number in [1e-08, 1]"),
    ({"lr": 5e-324}, "lr=5e-324: must be a number in [1e-08, 1] (below 1e-8, Adam's steps"),
    ({"lr": 1e309}, "lr=inf: not a finite number in [1e-08, 1]"),
    ({"lr": float("nan")}, "lr=nan: not a finite number in [1e-08, 1]"),
    ({"alpha": float("nan")}, "alpha=nan: not a finite number in [1e-06, 0.5]"),
    ({"alpha": 5e-324}, "alpha=5e-324: must be a number in [1e-06, 0.5]"),
    ({"equivalence_margin": 2.0}, "equivalence_margin=2.0: must be a number in [0.0001, 1]"),
    ({"equivalence_margin": 5e-324}, "equivalence_margin=5e-324"),
    ({"trainee": "qwen3(top_p=5e-324)"}, "top_p=5e-324: must lie in [0.001, 1]"),
    ({"out": "/"}, "out='/': the root folder"),
    ({"out": "/tmp/.."}, "out='/tmp/..': the root folder"),
    ({"out": "results\nrun"}, "out='results\\nrun': holds a control character"),
    ({"out": "results/\x1b[2Jx"}, "holds a control character"),
    ({"out": "results/" + "x" * 256}, "out: a folder name of 256 bytes"),
    ({"out": "results/" + "é" * 128}, "out: a folder name of 256 bytes"),
    ({"families": "chain_sum(max_terms=2, max_terms=3)"}, "max_terms is given twice"),
    ({"score_deadline_s": 1e309}, "score_deadline_s=inf"),
    ({"score_deadline_s": 0.1}, "score_deadline_s=0.1: give seconds in [0.25, 600]"),
    ({"score_deadline_s": 601.0}, "score_deadline_s=601.0"),
    ({"out": ""}, "out='': give a folder"),
    ({"out": "  "}, "out='  ': give a folder"),
    ({"out": "a\0b"}, "out: holds a NUL character"),
    ({"out": "x" * 5000}, "out: 5000 characters, longer than any path"),
    ({"steps": 4, "logging_steps": 5}, "logging_steps=5 exceeds steps=4"),
    ({"fast": 1}, "fast=1: must be bool"),
    ({"bootstrap_n": 1_000_000, "eval_n": 1000}, "bootstrap_n=1000000 x eval_n=1000: the bootstrap would hold"),
    ({"seed": -1}, "seed=-1: must lie in 0..4294967295"),
    ({"seed": 2**32}, "seed=4294967296"),
    ({"eval_seed": 2**32 - 100}, "eval seeds run to 4294971195, past the largest seed 4294967295"),
    ({"lora_alpha": 0}, "lora_alpha=0: must lie in 1.."),
    ({"lora_alpha": -8}, "lora_alpha=-8"),
    ({"trainee": "qwen3(max_new_tokens=100000)"}, "max_new_tokens=100000"),
    ({"trainee": "qwen4"}, "did you mean qwen3"),
    ({"families": "chan_sum"}, "did you mean chain_sum"),
    ({"families": ""}, "families"),
])
def test_each_bad_setting_is_one_line(changes, fragment):
    with pytest.raises(SettingsError) as e:
        settings_.make(**changes)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_unknown_names_and_presets():
    with pytest.raises(SettingsError, match="unknown setting 'stepz'"):
        settings_.make(stepz=3)
    with pytest.raises(SettingsError, match="unknown preset"):
        settings_.make("smok")


def test_an_unknown_name_to_set_is_refused_in_one_line_that_names_it_and_the_close_ones(tmp_path, capsys):
    from proof.__main__ import main
    out = tmp_path / "out"
    assert main(["run", "--preset", "smoke", "--out", str(out), "--set", "n_eval=40"]) == 2
    err = capsys.readouterr().err
    assert err == "error: --set 'n_eval=40': unknown setting 'n_eval'; did you mean eval_n or eval_seed?\n"
    assert not out.exists()
    with pytest.raises(SettingsError, match="unknown setting 'zzzz'; settings: trainee, model, families"):
        settings_.parse_override("zzzz=1")  # nothing close: every name
    with pytest.raises(SettingsError, match="unknown setting 'stepz'; did you mean steps"):
        settings_.make(stepz=3)  # a notebook's or the library's keyword: the same words


def test_run_help_gives_each_settings_own_help_and_the_range_it_is_then_held_to():
    import dataclasses
    from tests.shortlist.test_cli import help_of
    text, heavy = help_of("proof", "run")
    assert heavy == []
    flat = " ".join(text.split())
    for f in dataclasses.fields(settings_.Settings):
        assert " ".join(f.metadata["help"].split()) in flat, f.name
    assert "steps=100: GRPO steps per family; in 1..100000 " in flat
    assert "lr=5e-05: LoRA's learning rate; in [1e-08, 1] " in flat and "fast=True: " in flat
    for name, (low, high) in settings_.INTS.items():  # the range shown is the one validate() refuses past
        assert f"{name}={settings_.DEFAULTS[name]!r}: " in flat and f"; in {low}..{high}" in flat
        for bad in (low - 1, high + 1):
            with pytest.raises(SettingsError, match=f"^{name}={bad}: must lie in {low}..{high}$"):
                settings_.make(**{name: bad})
    for name, (low, high) in settings_.FLOATS.items():
        assert f"; in [{low:g}, {high:g}]" in flat
        for bad, why in ((low / 2, settings_.WHY[name]), (high * 2, settings_.WHY_HIGH[name])):
            with pytest.raises(SettingsError, match=f"must be a number in \\[{low:g}, {high:g}\\]") as e:
                settings_.make(**{name: bad})
            assert why and str(e.value).endswith(f"({why})")  # the bound that was broken, explained


def test_smoke_preset_is_offline_and_small():
    s = settings_.make("smoke")
    assert s.profile.model == "tiny" and len(s.families) == 2 and s.steps <= 5 and s.profile.max_new_tokens == 16


def test_the_trainee_is_resolved_once_with_the_model_put_in():
    s = settings_.make(trainee="smollm2", model="/models/smol")
    assert s.profile == trainee.SMOLLM2.replace(model="/models/smol")
    assert settings_.make(trainee="smollm2").profile.model == trainee.SMOLLM2.model
    assert "trainee" not in s.protocol() and "model" not in s.protocol()  # recorded resolved, once


def test_families_are_canonical_keys():
    s = settings_.make(families="chain_sum(max_terms=2,max_digits=1), leg_counting")
    assert s.families == ("chain_sum(max_digits=1, max_terms=2)", "leg_counting")


@pytest.mark.parametrize("text, expected", [
    ("steps=3", ("steps", 3)), ("lr=1e-4", ("lr", 1e-4)), ("lr=1", ("lr", 1.0)), ("model=tiny", ("model", "tiny")),
    ("trainee=qwen3(max_new_tokens=16)", ("trainee", "qwen3(max_new_tokens=16)")),
    ("eval-n=20", ("eval_n", 20)), ("families=chain_sum, leg_counting", ("families", "chain_sum, leg_counting")),
])
def test_parse_override(text, expected):
    assert settings_.parse_override(text) == expected


@pytest.mark.parametrize("text", ["steps=three", "steps=3.5", "nosuch=1", "steps"])
def test_parse_override_refuses(text):
    with pytest.raises(SettingsError):
        settings_.parse_override(text)


@pytest.mark.parametrize("families", [5, 5.0, [5], ["chain_sum", None], {"chain_sum": 1}, b"chain_sum"])
def test_a_notebook_parameter_of_the_wrong_type_is_one_line(families):
    """papermill hands a notebook whatever its parameters say: families=5 raised TypeError in Settings."""
    from proof import notebook
    with pytest.raises(SettingsError) as e:
        notebook.start({"families": families, "model": "tiny"})
    assert str(e.value).startswith(f"families={str(families)[:80]}: give family specs") and "\n" not in str(e.value)


def test_from_namespace_takes_only_setting_names():
    s = settings_.from_namespace({"steps": 7, "model": "tiny", "families": ["leg_counting"], "unrelated": 1})
    assert (s.steps, s.profile.model, s.families) == (7, "tiny", ("leg_counting",))


def test_protocol_leaves_out_where_how_fast_and_the_source_which_each_familys_tasks_record():
    assert set(Settings().as_dict()) - set(Settings().protocol()) == {"out", "families", "sample_batch", "fast",
                                                                      "cpu", "trainee", "model", "source",
                                                                      "batch_per_device"}
    older = Settings().protocol() | {"batch_per_device": 4, "sample_batch": 64}  # what older commitments recorded
    assert settings_.committed_part(older) == Settings().protocol()



def test_the_source_is_a_checked_value_that_goes_and_comes_back_whole():
    from shortlist.sources import source
    given = {"name": "reasoning_gym", "options": {}, "modules": {"toy": "toy_source"}}
    try:
        s = settings_.make(source=given)
        assert s.source == source.Choice(modules={"toy": "toy_source"}) and s.as_dict()["source"] == given
        assert settings_.make(**s.as_dict()).source == s.source and source.SOURCES["toy"] == "toy_source"
    finally:
        source.reset()
    for bad, why in (({"name": "nowhere"}, "unknown; sources"), ({"nmae": "openenv"}, "give a source's name"),
                     ({"options": {"env_url": "x"}}, "--env-url is not an option of --source reasoning_gym")):
        with pytest.raises(OneLine, match=why):
            settings_.make(source=bad)
    with pytest.raises(settings_.SettingsError, match="--source and its options"):
        settings_.parse_override("source=openenv")


def test_a_catalog_row_goes_to_the_proof_as_it_is():
    from proof import heldout
    from shortlist.catalog import walk
    built = [walk.build(name, level, 500, 3) for name, level in (("chain_sum", 0), ("chain_sum", 1), ("leg_counting", 0))]
    specs = [b.where.spec for b in built]  # what a catalog row's spec is
    s = settings_.make(families=specs, predict_tasks=3, predict_seed=500, train_seed=1000)
    assert list(s.families) == specs  # taken unchanged, as `proof run --families "<spec>, <spec>"` takes them
    assert settings_.make(families=", ".join(specs)).families == s.families
    for b in built:  # its prediction tasks are the screened seeds, but for those whose question is reserved
        held, tasks = heldout.draw(b.where.spec, s)
        screened = {t["seed"]: t for t in sources.parse(b.where.spec).tasks(range(500, 503))}
        task = lambda t: {k: v for k, v in t.items() if k != "meaning"}  # noqa: E731  the key it was reserved by rides along
        assert all(screened[t["seed"]] == task(t) for t in tasks["predict"] if t["seed"] in screened)


# Inputs once accepted, or refused by a traceback, through the command line: each is now refused in one
# line that names the setting, before any model loads or anything is written. {self} is a trainee file
# that extends itself.
ONCE_ACCEPTED = [
    (["--families", "chain_sum(max_terms=1e309)"], "families: chain_sum: max_terms=inf: not a finite number"),
    (["--families", "chain_sum(max_terms=1000000000)"], "chain_sum(max_terms=1000000000): one task "),
    (["--families", "chain_sum(max_terms=2.5)"], "families: chain_sum: max_terms=2.5: must be int"),
    (["--families", "chain_sum(max_digits='x')"], "families: chain_sum: max_digits='x': must be int"),
    (["--trainee", "{self}"], "extends itself"),
    (["--trainee", f"qwen3(top_k={10**30})"], "top_k=1000000000000000000000000000000: must be 0 (off) or up to"),
    (["--trainee", "qwen3(top_k=1e30)"], "top_k=1e+30: must be int"),
    (["--trainee", "qwen3(temperature=1e308)"], "temperature=1e+308: must lie in [0.01, 10.0]"),
    (["--set", "score_deadline_s=5e-324"], "score_deadline_s=5e-324: give seconds in [0.25, 600]"),
    (["--set", "score_deadline_s=0.000001"], "score_deadline_s=1e-06: give seconds in [0.25, 600]"),
    (["--trainee", f"qwen3(system_prompt={'x' * 10_000_000!r})"], "system_prompt='xxx"),
    (["--trainee", "qwen3(extraction='regex:(a+)+$')"], "extraction 'regex:(a+)+$': more than"),
    (["--set", "out="], "out='': give a folder"),
    (["--set", "lr=nan"], "lr=nan: not a finite number in [1e-08, 1]"),
    (["--set", "lr=inf"], "lr=inf: not a finite number in [1e-08, 1]"),
    (["--set", "lr=-infinity"], "lr=-inf: not a finite number in [1e-08, 1]"),
    (["--set", "lr=5e-324"], "lr=5e-324: must be a number in [1e-08, 1]"),
    (["--set", "lr=5"], "lr=5.0: must be a number in [1e-08, 1] (above 1, each Adam step"),
    (["--trainee", "qwen3(top_p=5e-324)"], "top_p=5e-324: must lie in [0.001, 1]"),
    (["--families", "chain_sum(max_terms=2, max_terms=3)"], "max_terms is given twice"),
    (["--set", "out=/"], "out='/': the root folder"),
    (["--set", "out=a\nb"], "holds a control character"),
    (["--set", "out=" + "x" * 300], "a folder name of 300 bytes"),
    (["--set", "steps=" + "9" * 5000], "is not an int"),
]


@pytest.mark.parametrize("args, fragment", ONCE_ACCEPTED, ids=[f"{a[0]} {a[1][:40]}" for a, _ in ONCE_ACCEPTED])
def test_each_input_once_accepted_is_one_line_before_anything_is_written(args, fragment, tmp_path, capsys,
                                                                            monkeypatch, no_model_loads):
    import json

    from proof import runner
    from proof.__main__ import main

    def accepted(*_, **__):
        raise AssertionError("accepted: the run would have started")
    monkeypatch.setattr(runner, "run", accepted)
    looped = tmp_path / "looped.json"
    looped.write_text(json.dumps({"extends": str(looped)}))
    out = tmp_path / "run"
    args = [a.replace("{self}", str(looped)) for a in args]
    where = [] if any(a.startswith("out=") for a in args) else ["--out", str(out)]
    assert main(["run", "--preset", "smoke", *where, *args]) == 2
    err = capsys.readouterr().err
    assert fragment in err and err.count("\n") == 1 and err.startswith("error: ")
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["looped.json"]


def test_run_and_report_help_describe_the_commands_and_list_every_setting_with_its_default_without_the_environments():
    from tests.shortlist.test_cli import help_of
    text, heavy = help_of("proof", "run")
    assert heavy == []
    flat = " ".join(text.split())
    assert "01_predict once" in flat and "--executor {local,ray}" in flat
    for name, value in settings_.DEFAULTS.items():  # each setting, with its default, from the record itself
        shown = {"families": "families (as --families)", "source": "source (as --source and its options)"}
        assert shown.get(name, f"{name}={value!r}") in flat, name
    text, heavy = help_of("proof", "report")
    assert heavy == [] and "Rebuild <out>/report.html from an output folder alone" in " ".join(text.split())


@pytest.mark.parametrize("changes, micro", [({}, 8), ({"trainee": "qwen3(group=6)"}, 8), ({"trainee": "qwen3(group=5)"}, 5),
                                            ({"trainee": "qwen3(group=3)", "prompts_per_step": 3}, 3),
                                            ({"trainee": "qwen3(group=7)", "prompts_per_step": 1}, 7),
                                            ({"batch_per_device": 16}, 16)])
def test_batch_per_device_0_is_the_most_up_to_8_that_divides_a_step(changes, micro):
    s = settings_.make(**changes)
    assert s.micro_batch == micro and s.grad_accum * micro == s.prompts_per_step * s.group
