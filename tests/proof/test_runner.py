"""The papermill batch, in the style of papermill's own tests: real notebooks, executed end to end."""
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from proof import checkpoint, files, runner
from proof.__main__ import main
from shortlist import sources


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "notebooks"  # papermill's style: notebooks as files


def test_smoke_report_shows_every_table_figure_and_the_hash(smoke_run):
    s, html_path, _ = smoke_run
    html = Path(html_path).read_text()
    sha = files.predictions_hash(s.out).read_text().split()[0]
    assert "The rule held on" in html and sha in html
    # issue 41: the answer in one sentence without the statistics, its words defined where first read (the smoke's
    # guessable chain_sum: in the terms under the headline, before its line), the statistics a section below
    headline = re.search(r'<p class="shortlist-headline">(.*?)</p>', html).group(1)
    assert len(re.findall(r"\.(?:\s|$)", headline)) == 1 and not re.search(r"Wilson|McNemar|Holm|best possible", headline)
    assert html.lower().index("guessable") == html.index("<i>Guessable</i>") + len("<i>")
    assert html.index("shortlist-headline") < html.index("The answer in numbers") < html.index("Holm's adjustment")
    for header in ("Predictions, committed before training", "Outcomes on the held-out tasks",
                   "Real learning, or partial credit?", "What the answers looked like", "judged properly",
                   "Reward during training", "Gains with their 95% confidence intervals", "The rule against simpler rules",
                   "Screening signals against the gains", "The reward itself", "The analysis, as declared before training",
                   "Provenance", "Executed notebooks"):
        assert header in html
    text = re.sub(r"<[^>]+>", "", html)  # a table's spec is split by the spans and <wbr> that say where it may break
    for key in s.families:
        assert text.count(key) >= 3  # predictions table, outcomes table, figure title or link
    assert re.search(r"<th[^>]*>\s*judgement\s*</th>", html) and "The rule on both sides" in html
    # curves and forest inline; the scatter and the correlations need 3 families, smoke has 2: a sentence says so
    assert len(re.findall(r'<img[^>]*src="data:image/png;base64,', html)) == 2
    assert "Only 2 families finished: ranks need 3 at least" in html
    # the smoke's "too hard" family scores 0 before and after on every task: no spread, no equivalence claimed
    assert "held (equivalence cannot be judged)" in html and "cannot be judged: SD 0" in html
    assert "def " not in html and "from proof import" not in html  # code hidden
    assert "report.load" not in html and "Traceback" not in html and "Warning" not in html
    assert "On Kaggle" not in html  # the notebook reader's instructions stay in the notebooks


def test_report_opens_offline(smoke_run):
    html = Path(smoke_run[1]).read_text()
    assert not re.search(r'(src|href)\s*=\s*["\']\s*(https?:)?//', html)
    assert not re.search(r"url\(\s*['\"]?(https?:)?//|@import", html)


def test_executed_notebooks_are_small_kept_and_stamped(smoke_run):
    s, _, _ = smoke_run
    sha = files.predictions_hash(s.out).read_text().split()[0]
    executed = sorted(files.notebooks(s.out).glob("*.ipynb"))
    assert len(executed) == 2 + len(s.families) and not list(files.notebooks(s.out).glob("*.partial.ipynb"))
    for path in executed:
        assert path.stat().st_size < 1_000_000
        meta = nbformat.read(path, as_version=4).metadata["shortlist"]
        assert meta["predictions_sha256"] == sha and meta["model"] == "tiny" and "versions" in meta
        assert meta["trainee"] == s.profile.as_dict()


def test_parameters_are_injected(smoke_run):
    s, _, _ = smoke_run
    key = s.families[0]
    nb = nbformat.read(files.notebooks(s.out) / f"02_train_family.{sources.parse(key).slug}.ipynb", as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    assert f"family = {key!r}" in injected[0].source.replace('"', "'") and f"steps = {s.steps}" in injected[0].source
    assert files.read_json(files.result(s.out, sources.parse(key).slug))["settings"]["steps"] == s.steps


def test_progress_is_logged_per_step(smoke_run):
    s, _, log = smoke_run
    assert any(line.startswith("01_predict: done (") for line in log) and any("03_report" in line for line in log)
    # what the terminal shows of each family (papermill prints the kernel's lines): one line per logged
    # step, with the family, reward, seconds per step and the time left
    key = s.families[0]
    nb = nbformat.read(files.notebooks(s.out) / f"02_train_family.{sources.parse(key).slug}.ipynb", as_version=4)
    text = "".join(o.get("text", "") for c in nb.cells if c.cell_type == "code" for o in c.outputs)
    lines = [line for line in text.splitlines() if line.startswith(f"{key} step ")]
    assert len(lines) == s.steps // s.logging_steps, text[-2000:]
    assert re.fullmatch(rf"{re.escape(key)} step {s.steps}/{s.steps}: reward \d\.\d{{3}} .*, \d+\.\d s/step, "
                        r"evaluation next", lines[-1]), lines[-1]
    # the family's last line says what was measured, not "held: False" before the report has judged anything
    recorded = [line for line in text.splitlines() if line.startswith(f"{key}: predicted ")]
    assert len(recorded) == 1 and "held:" not in recorded[0], recorded
    assert recorded[0].endswith("recorded, the report judges whether the verdict held")


def test_a_failing_family_is_recorded_the_others_go_on_and_the_exit_status_says_so(smoke_run, tmp_path, monkeypatch,
                                                                                   capsys):
    done, _, _ = smoke_run
    s = done.replace(out=str(tmp_path / "run"))
    shutil.copytree(done.out, s.out)  # 01 and the first family are there: the rerun tries the second
    failed_key, done_key = s.families[1], s.families[0]
    files.result(s.out, sources.parse(failed_key).slug).unlink()
    monkeypatch.setattr(runner, "THE_NOTEBOOKS", runner.Notebooks(train=FIXTURES / "broken.ipynb"))
    assert main(["run", "--preset", "smoke", "--out", s.out]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err == f"error: 1 of 2 families did not finish: {failed_key} (RuntimeError: boom)"
    html = files.report(s.out)
    failed = files.read_json(files.result(s.out, sources.parse(failed_key).slug))
    assert failed["status"] == "failed" and failed["reason"] == "RuntimeError: boom"
    assert files.read_json(files.result(s.out, sources.parse(done_key).slug))["status"] == "done"
    executed = nbformat.read(Path(s.out) / failed["notebook"], as_version=4)
    assert any(o.get("output_type") == "error" for c in executed.cells for o in c.get("outputs", []))
    assert "failed: RuntimeError: boom" in Path(html).read_text()


def test_a_failed_predict_stops_the_batch_in_one_line(tmp_path):
    from proof import settings as settings_
    s = settings_.make("smoke", out=str(tmp_path / "run"))
    with pytest.raises(RuntimeError, match=r"^01_predict failed: RuntimeError: boom \(see .*01_predict.ipynb\)$"):
        runner.run(s, notebooks=runner.Notebooks(predict=FIXTURES / "broken.ipynb"), log=lambda *_: None)


@pytest.mark.parametrize("argv, fragment", [
    (["run", "--set", "steps=three"], "steps"),
    (["run", "--preset", "smoke", "--trainee", "qwen3(group=1)"], "group=1"),
    (["run", "--preset", "smoke", "--set", "seed=-1"], "seed=-1"),
    (["run", "--preset", "smoke", "--set", "lr=1e309"], "lr=inf"),
    (["run", "--preset", "smoke", "--trainee", "qwen4"], "did you mean qwen3"),
    (["run", "--preset", "smoke", "--families", "chan_sum"], "did you mean chain_sum"),
    (["run", "--preset", "smoke", "--set", "census_seed=10"], "overlap"),
])
def test_cli_refuses_bad_settings_in_one_line(no_model_loads, capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and fragment in err and "\n" not in err


def test_a_batch_killed_mid_training_resumes_to_the_uninterrupted_result(smoke_run, tmp_path, capfd):
    """SIGKILL to the batch's process group after a mid-training checkpoint, then a rerun: the family's
    metrics, counts and timings are those of an uninterrupted run (the smoke run's own). The console says
    where it resumed, and shows each logged step after it (the kernel's lines, not only its notebook's)."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from proof import records
    s, _, _ = smoke_run
    key = s.families[0]
    slug = sources.parse(key).slug
    done = records.read(files.result(s.out, slug))
    copy = s.replace(out=str(tmp_path / "run"))
    shutil.copytree(s.out, copy.out)  # the same commitment and the other family's result: only this one is redone
    files.result(copy.out, slug).unlink()
    shutil.rmtree(files.work(copy.out, slug))
    other_nb = files.notebooks(copy.out) / f"02_train_family.{sources.parse(s.families[1]).slug}.ipynb"
    other_nb_written = other_nb.stat().st_mtime_ns
    # 02 made to stop for two minutes after saving checkpoint 2 of 4: the kill lands there, mid-training
    script = ("from proof import runner, settings\n"
              f"runner.run(settings.make('smoke', out={copy.out!r}), "
              f"notebooks=runner.Notebooks(train={str(FIXTURES / '02_pauses_mid_training.ipynb')!r}))")
    env = dict(os.environ, SHORTLIST_TEST_PAUSE_AT="2", SHORTLIST_TEST_PID_FILE=str(tmp_path / "kernel.pid"))
    batch = subprocess.Popen([sys.executable, "-c", script], start_new_session=True, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, env=env)
    progress = files.work(copy.out, slug) / "checkpoints" / "checkpoint-2" / checkpoint.PROGRESS
    deadline = time.time() + 240
    while not (tmp_path / "kernel.pid").exists() and time.time() < deadline and batch.poll() is None:
        time.sleep(0.2)
    assert progress.exists(), "the batch never reached its mid-training checkpoint"
    os.killpg(batch.pid, signal.SIGKILL)
    batch.wait()
    kernel = int((tmp_path / "kernel.pid").read_text())
    for _ in range(50):  # the kernel watches its parent and exits once the batch is gone
        try:
            os.kill(kernel, 0)
        except ProcessLookupError:
            break
        time.sleep(0.2)
    else:
        os.kill(kernel, signal.SIGKILL)
        raise AssertionError("the family's kernel outlived the killed batch")
    assert records.read(files.result(copy.out, slug)) is None  # killed before the family ended
    paused_train_s = files.read_json(progress)["train_s"]

    log: list[str] = []
    capfd.readouterr()
    assert runner.run(copy, log=log.append).failed == {}
    console = capfd.readouterr().out.splitlines()
    assert f"{key}: resumed at step 2 of {s.steps} (from " in "\n".join(console)
    assert [line.split(":")[0] for line in console if line.startswith(f"{key} step ")] == \
        [f"{key} step {n}/{s.steps}" for n in range(3, s.steps + 1, s.logging_steps)]
    assert any(line.startswith("01_predict: kept") for line in log)
    assert [line for line in log if ": started" in line] == [f"02 {key}: started"]  # the other family was kept
    assert other_nb.stat().st_mtime_ns == other_nb_written
    again = records.read(files.result(copy.out, slug))
    assert isinstance(again, records.FamilyResult) and again.timings["resumed_at_step"] == 2
    def no_clock(curve):
        return [{k: v for k, v in row.items() if k != "step_time"} for row in curve]
    assert (again.before, again.after, again.gain, no_clock(again.reward_curve)) == \
        (done.before, done.after, done.gain, no_clock(done.reward_curve))
    assert {k: v for k, v in again.scoring.items() if k != "seconds"} == \
        {k: v for k, v in done.scoring.items() if k != "seconds"}
    saved = files.read_json(progress.parent.parent / "checkpoint-4" / checkpoint.PROGRESS)
    assert again.timings["train_s"] >= saved["train_s"] > paused_train_s > 0
    assert again.timings["eval_before_s"] > 0 and again.timings["seconds_per_step"] == again.timings["train_s"] / s.steps


@pytest.mark.parametrize("out, fragment", [("a_file", "is a file; give a folder"), ("/proc/x", "cannot write into /proc/x")])
def test_an_output_folder_that_cannot_be_written_is_one_line_before_any_work(no_model_loads, capsys, tmp_path, out,
                                                                              fragment):
    (tmp_path / "a_file").write_text("")
    target = str(tmp_path / out) if out == "a_file" else out
    assert main(["run", "--preset", "smoke", "--out", target]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and fragment in err and "\n" not in err


def test_a_missing_model_is_one_line_before_any_work(no_model_loads, capsys, tmp_path):
    assert main(["run", "--preset", "smoke", "--model", "/no/such/model", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("error: model folder /no/such/model does not exist: give a folder holding config.json and "
                   "weights, a hub name, or the tiny model, offline (model = 'tiny' in a notebook, --model tiny on a "
                   "command line)")
    assert not (tmp_path / "run").exists()  # nor a lock: the folder is made once the inputs are known good


@pytest.mark.parametrize("model, fragment", [("hub", "cannot reach the model hub for 'Qwen/Qwen3-0.6B-typo'"),
                                             ("folder", "no GPU here for model")])
def test_a_refused_model_writes_nothing_into_a_new_out(no_model_loads, capsys, tmp_path, monkeypatch, model, fragment):
    """A hub name that cannot be had (here: offline), or a real model on a machine without a GPU: exit 2, one
    line, and no folder, no lock left behind."""
    import torch

    from shortlist.models import tiny
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    name = "Qwen/Qwen3-0.6B-typo" if model == "hub" else str(tiny.ensure())  # a folder: not the name 'tiny'
    assert main(["run", "--preset", "smoke", "--model", name, "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and fragment in err and "\n" not in err
    assert not (tmp_path / "run").exists()


def test_a_cluster_that_cannot_take_the_jobs_leaves_no_folder(no_model_loads, tmp_path, monkeypatch):
    from proof import settings as settings_
    from shortlist import executors

    def refuse(self, *args, **kwargs):
        raise executors.PlacementError("no node offers a GPU")
    monkeypatch.setattr(executors.Placement, "start", refuse)
    with pytest.raises(executors.PlacementError):
        runner.run(settings_.make("smoke", out=str(tmp_path / "run")), log=lambda *_: None)
    assert not (tmp_path / "run").exists()
    (tmp_path / "kept").mkdir()  # a folder that was there before the run stays
    with pytest.raises(executors.PlacementError):
        runner.run(settings_.make("smoke", out=str(tmp_path / "kept")), log=lambda *_: None)
    assert (tmp_path / "kept").is_dir()


def test_a_finished_run_leaves_no_holder_behind(smoke_run):
    s, _, _ = smoke_run
    assert not (Path(s.out) / "lock.json").exists()  # it would name a pid that has ended


def test_a_missing_model_is_named_before_a_difference_from_committed_predictions(smoke_run, capsys, tmp_path):
    """A folder committed with the tiny model, rerun with a model that does not exist: the model is the problem."""
    s, _, _ = smoke_run
    out = tmp_path / "run"
    out.mkdir()
    for name in ("predictions.json", "predictions.sha256"):
        shutil.copy(Path(s.out) / name, out / name)
    assert main(["run", "--preset", "smoke", "--model", "/no/such/model", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip().startswith("error: model folder /no/such/model does not exist")
    assert main(["run", "--preset", "smoke", "--set", "steps=6", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"error: steps=6 differs from the committed steps={s.steps}: restore it (--set steps={s.steps}), or give a "
        f"new --out to commit new predictions there ({out / 'predictions.json'} holds these)")


def test_papermill_refuses_a_bad_parameter_in_one_line_in_the_first_cell(tmp_path):
    dest = tmp_path / "01.ipynb"
    reason = runner.execute(runner.Notebooks().predict, dest, {"model": "tiny", "seed": -1, "out": str(tmp_path / "run")})
    assert reason == "SettingsError: seed=-1: must lie in 0..4294967295"
    nb = nbformat.read(dest, as_version=4)
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert len(errors) == 1 and errors[0]["traceback"] == [reason]  # the line, not a screen of traceback
    assert not (tmp_path / "run").exists()


def test_a_profile_registered_in_this_process_reaches_the_notebooks_kernel(tmp_path):
    from proof import commit, settings as settings_
    from shortlist import trainee
    mine = trainee.register(trainee.QWEN3.replace(profile="registered_here", model="tiny", max_new_tokens=4,
                                                  group=2))
    try:
        s = settings_.make("smoke", trainee="registered_here", families=["chain_sum(max_terms=2, max_digits=1)"],
                           predict_tasks=2, out=str(tmp_path / "run"))
        reason = runner.execute(runner.Notebooks().predict, tmp_path / "01.ipynb", runner.kernel_parameters(s))
        assert reason is None
        body, _ = commit.verified(s)
        assert body["trainee"] == mine.as_dict()
    finally:
        trainee.PROFILES.pop("registered_here")
