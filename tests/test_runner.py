"""The papermill batch, in the style of papermill's own tests: real notebooks, executed end to end."""
import re
import shutil
from pathlib import Path

import nbformat
import pytest

from proof import files, runner
from proof.__main__ import main
from shortlist import families

REAL = Path(runner.NOTEBOOKS)


def fixture_notebooks(tmp_path: Path, failing: str) -> Path:
    """The real notebooks, with 01 or 02 made to fail (for one family) after its parameters."""
    folder = tmp_path / "notebooks"
    shutil.copytree(REAL, folder)
    name = runner.PREDICT if failing == "predict" else runner.TRAIN
    nb = nbformat.read(folder / name, as_version=4)
    at = next(i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])) + 1
    condition = "True" if failing == "predict" else f"family.startswith({failing!r})"
    nb.cells.insert(at, nbformat.v4.new_code_cell(f"if {condition}:\n    raise RuntimeError('boom')"))
    nbformat.write(nb, folder / name)
    return folder


def test_smoke_report_shows_every_table_figure_and_the_hash(smoke_run):
    s, html_path, _ = smoke_run
    html = Path(html_path).read_text()
    sha = files.predictions_hash(s.out).read_text().split()[0]
    assert "The rule held on" in html and sha in html
    for header in ("Predictions, committed before training", "Outcomes on the held-out tasks",
                   "Real learning, or partial credit?", "What the answers looked like", "judged properly",
                   "Reward during training", "Gains with their 95% confidence intervals", "The rule against simpler rules",
                   "Screening signals against the gains", "The reward itself", "The analysis, as declared before training",
                   "Provenance", "Executed notebooks"):
        assert header in html
    for key in s.families:
        assert html.count(key) >= 3  # predictions table, outcomes table, figure title or link
    assert re.search(r"<th[^>]*>\s*held\s*</th>", html)
    assert len(re.findall(r'<img[^>]*src="data:image/png;base64,', html)) == 3  # curves, forest, scatter: inline
    assert "held (equivalent)" in html  # the smoke's "too hard" family, judged by the equivalence test
    assert "def " not in html and "from proof import" not in html  # code hidden


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


def test_parameters_are_injected(smoke_run):
    s, _, _ = smoke_run
    key = s.families[0]
    nb = nbformat.read(files.notebooks(s.out) / f"02_train_family.{families.parse(key).slug}.ipynb", as_version=4)
    injected = [c for c in nb.cells if "injected-parameters" in c.metadata.get("tags", [])]
    assert len(injected) == 1
    assert f"family = {key!r}" in injected[0].source.replace('"', "'") and f"steps = {s.steps}" in injected[0].source
    assert files.read_json(files.result(s.out, families.parse(key).slug))["settings"]["steps"] == s.steps


def test_progress_is_logged_per_step(smoke_run):
    _, _, log = smoke_run
    assert any(line.startswith("01_predict") for line in log) and any("03_report" in line for line in log)


def test_a_resumed_run_redoes_only_the_missing_family(smoke_run, tmp_path):
    s, _, _ = smoke_run
    copy = s.replace(out=str(tmp_path / "run"))
    shutil.copytree(s.out, copy.out)
    gone, kept = (families.parse(k).slug for k in copy.families)
    files.result(copy.out, gone).unlink()
    kept_nb = files.notebooks(copy.out) / f"02_train_family.{kept}.ipynb"
    before = kept_nb.stat().st_mtime_ns
    log: list[str] = []
    runner.run(copy, log=log.append)
    assert any(line.startswith("01_predict: kept") for line in log)
    assert [line for line in log if ": started" in line] == [f"02 {copy.families[0]}: started"]
    assert kept_nb.stat().st_mtime_ns == before
    assert files.read_json(files.result(copy.out, gone))["status"] == "done"


def test_a_failing_family_is_recorded_and_the_others_go_on(tmp_path):
    from proof import settings as settings_
    s = settings_.make("smoke", out=str(tmp_path / "run"))
    notebooks = fixture_notebooks(tmp_path, failing="basic_arithmetic")
    html = runner.run(s, notebooks=notebooks, log=lambda *_: None)
    failed_key, done_key = s.families[1], s.families[0]
    failed = files.read_json(files.result(s.out, families.parse(failed_key).slug))
    assert failed["status"] == "failed" and failed["reason"] == "RuntimeError: boom"
    assert files.read_json(files.result(s.out, families.parse(done_key).slug))["status"] == "done"
    executed = nbformat.read(Path(s.out) / failed["notebook"], as_version=4)
    assert any(o.get("output_type") == "error" for c in executed.cells for o in c.get("outputs", []))
    assert "failed: RuntimeError: boom" in Path(html).read_text()


def test_a_failed_predict_stops_the_batch_in_one_line(tmp_path):
    from proof import settings as settings_
    s = settings_.make("smoke", out=str(tmp_path / "run"))
    with pytest.raises(RuntimeError, match=r"^01_predict failed: RuntimeError: boom \(see .*01_predict.ipynb\)$"):
        runner.run(s, notebooks=fixture_notebooks(tmp_path, failing="predict"), log=lambda *_: None)


@pytest.mark.parametrize("value, expected", [("1,3", ["1", "3"]), ("", []), ("-1", []), ("0", ["0"])])
def test_visible_gpus_follow_cuda_visible_devices(monkeypatch, value, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert runner.visible_gpus() == expected


@pytest.mark.parametrize("argv, fragment", [
    (["run", "--set", "steps=three"], "steps"),
    (["run", "--preset", "smoke", "--set", "group=1"], "group=1"),
    (["run", "--preset", "smoke", "--families", "chan_sum"], "did you mean chain_sum"),
    (["run", "--preset", "smoke", "--set", "steps=200"], "overlap"),
])
def test_cli_refuses_bad_settings_in_one_line(no_model_loads, capsys, argv, fragment):
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and fragment in err and "\n" not in err
