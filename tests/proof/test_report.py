import json
import os
import re
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from proof import commit, files, report, runner, seal

HELD_UP = [0.0] * 100 + [1.0] * 100  # before
UP = [1.0] * 200  # after: every task right


def test_headline_counts_held_failed_and_not_run(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP},
                   "leg_counting": {"prediction": "improves", "before": HELD_UP, "after": HELD_UP},
                   "basic_arithmetic": {"failed": "RuntimeError: boom"}}, not_run=["products"])
    r = report.load(s.out)
    assert report.headline(r) == ('**The rule held on 1 of 3 judged environments**; it said "improves" on every one, '
                                  'as always predicting "improves" would, so the two cannot be told apart.')
    text = report.statistics(r)  # the numbers behind it, in a section of their own
    assert text.startswith("The rule held on 1 of 3 judged specs (0.33, Wilson 95% CI 0.06–0.79; a Wilson interval")
    assert ("1 judged spec failed to train: counted as not held, against the rule on its side (basic_arithmetic)."
            in text)
    assert "Precision on \"improves\": 1 of 3 really learned" in text
    assert ("Of the 1 significant gain GRPO made: 1 real learning (more correct answers than before and than any "
            "policy that does not solve the task), 0 partial credit only, 0 matched by a policy.") in text
    assert report.confusion_text(r).endswith(" over 3 judged specs.")
    assert text.endswith(" (1 failed, 1 not run.)")
    same = text.split("It predicts as ")[1].split(" on every judged spec")[0]
    assert "'always improves'" in same and "'pass@1 > 0'" in same and "cannot come out either way" in text
    assert text.count("cannot come out either way") == 1  # each sentence once
    assert "No spec was predicted 'too hard' or 'already solved' or 'no signal'" in text


def sentences(text: str) -> list[str]:
    return [t for t in re.split(r"(?<=[.:;])\s+(?=[A-Z'*(])", text.replace("**", "")) if t]


def test_each_sentence_of_the_statistics_and_the_comparison_text_appears_once(synthetic):
    """Comparators that cannot disagree with the rule, and a family with no significant gain: each thing is said
    once (one sentence for all the comparators alike), and a family's line names what happened in words."""
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP},
                   "leg_counting": {"prediction": "improves", "before": HELD_UP, "after": HELD_UP},
                   "products": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    r = report.load(s.out)
    for text in (report.statistics(r), report.rules_text(r)):
        said = sentences(text)
        assert len(said) > 3 and len(said) == len(set(said)), text
    assert report.rules_text(r).count("as the rule on every judged spec") == 1  # all such comparators at once
    line = report.family_line(r, "leg_counting")
    assert "; no significant gain; did not hold." in line and "none" not in line


def test_counts_of_one_read_in_the_singular(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    r = report.load(s.out)
    assert report.headline(r).startswith("**The rule held on 1 of 1 judged environment**; ")
    assert report.statistics(r).startswith("The rule held on 1 of 1 judged spec (")
    assert report.confusion_text(r).endswith(" over 1 judged spec.")


def test_a_run_where_no_family_has_finished_yet_still_reports(synthetic, tmp_path):
    """Predictions committed, every family still training (or not started): the report renders, and says so."""
    from proof import runner
    s = synthetic({}, not_run=["chain_sum", "leg_counting"])
    html = runner.report_again(s.out).read_text()
    assert "<b>No environment has finished training yet</b>, so there is nothing to judge.</p>" in html
    assert "No family has finished training yet: there is no outcome to judge. (2 not run.)" in html
    assert "there is nothing to compare yet" in html and "median (0.000)" not in html  # no median of no spec
    assert "<b>chain_sum</b>: predicted \"improves\" (improves); not run." in html  # no stray markdown


def test_the_report_again_is_refused_beside_a_run_writing_the_same_folder(synthetic, capsys):
    from proof.__main__ import main
    from shortlist import executors
    s = synthetic({}, not_run=["chain_sum"])
    with executors.one_run(s.out):
        assert main(["report", "--out", s.out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {s.out} is in use by another run (pid ") and "\n" not in err
    assert not files.report(s.out).exists()
    assert main(["report", "--out", s.out]) == 0 and files.report(s.out).exists()  # once it is free


def test_outcomes_table_says_why_a_family_has_no_outcome(synthetic):
    s = synthetic({"chain_sum": {"prediction": "no change", "before": HELD_UP, "after": HELD_UP},
                   "leg_counting": {"failed": "RuntimeError: boom"}}, not_run=["products"])
    rows = {row["family"]: row for row in (report.outcome_row(report.load(s.out), k) for k in s.families)}
    assert rows["chain_sum"]["improved"] == "no" and rows["chain_sum"]["gain [95% CI]"].startswith("+0.000")
    assert rows["leg_counting"]["status"] == "failed: RuntimeError: boom"
    assert rows["products"]["status"] == "not run"


def test_results_made_against_other_predictions_are_ignored(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    path = files.result(s.out, "chain_sum")
    files.write_json(path, files.read_json(path) | {"predictions_sha256": "0" * 64})
    assert report.load(s.out).results == {}


def test_figures_are_drawn_for_finished_families_only(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP},
                   "leg_counting": {"failed": "x"}})
    r = report.load(s.out)
    curves, forest = (report.SECTIONS[key].figure for key in ("curves", "forest"))
    assert len([ax for ax in curves(r).axes if ax.has_data()]) == 1
    assert len(forest(r).axes[0].get_yticklabels()) == 1


def test_rendered_when_jupyters_search_path_misses_nbconverts_install(smoke_run, tmp_path):
    # CI's failure: in a venv made with --system-site-packages, nbconvert imports from the base Python
    # while jupyter_path() names only the venv's prefix, where no templates are. A render in a process
    # whose sys.prefix is an empty folder recreates that.
    executed = files.notebooks(smoke_run[0].out) / runner.REPORT
    (tmp_path / "prefix").mkdir()
    script = ("import sys; sys.prefix = sys.argv[1]\n"
              "from proof import report; from pathlib import Path\n"
              "report.render(Path(sys.argv[2]), Path(sys.argv[3]))")
    env = {**os.environ, "HOME": str(tmp_path), "JUPYTER_PATH": "", "JUPYTER_DATA_DIR": str(tmp_path / "data")}
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "prefix"), str(executed), str(tmp_path / "r.html")],
                   check=True, env=env, cwd=tmp_path)
    assert (tmp_path / "r.html").read_text() == Path(smoke_run[1]).read_text()  # what the batch rendered


def test_the_top_says_what_could_make_the_numbers_wrong(synthetic):
    degenerate = [(True, True)] * 150 + [(False, False)] * 50
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP, "after_flags": degenerate,
                                 "screen": {"clipped": 0.9}}})
    r = report.load(s.out)
    html = report.top(r).data
    assert html.index("shortlist-banner") < html.index("shortlist-warning") < html.index("The rule held")
    assert "smoke run, not a finding" in html and "tiny" in html
    # one line for the family, its degenerate shares together, not a box per phase
    assert ("chain_sum: 90% of the screening samples were cut at max_new_tokens; 75% of the greedy answers after "
            "training were cut at max_new_tokens; 75% of the greedy answers after training were dominated by one "
            "repeated token.") in html
    assert html.count("shortlist-warning") == 1
    full = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}}, model="/m",
                     steps=100, predict_tasks=24, checkpoint_every=25)
    assert report.banner(report.load(full.out)) is None  # a real model at the protocol's size: no banner


def test_an_engine_that_stepped_aside_is_named_above_the_headline(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    path = files.result(s.out, "chain_sum")
    record = files.read_json(path)
    record["engine"]["train"] = {"engine": "generate", "why": "the fast engine's greedy tokens differed from "
                                 "generate()'s in 3 of 32 rows", "checks": [{"rows": 32, "identical_rows": 29,
                                                                           "tokens": 24, "seconds": 1.0}]}
    files.write_json(path, record)
    seal.write(commit.committed(s.out, commit.READABLE)[1], s.out, "chain_sum")  # sealed again: what is read
    warnings = report.warnings(report.load(s.out))
    assert warnings == ["The fast decode engine disagreed with generate() in chain_sum (train) and stepped aside: "
                        "the fast engine's greedy tokens differed from generate()'s in 3 of 32 rows."]


@pytest.mark.parametrize("train, cuda, said", [
    ({"engine": "static", "trainer": "fast", "fp32_precision": {"backends": "tf32", "cuda.matmul": "tf32"}}, True,
     "fp32 matmuls ran at reduced precision in chain_sum (train) (backends, cuda.matmul): not the fp32"),
    ({"engine": "static", "trainer": "fast"}, True,  # a GPU run from before the precision was recorded
     "1 of 1 families were trained on a GPU, compiled, by code that did not record its matmul precision"),
    ({"engine": "static", "trainer": "fast"}, False, None),  # on a CPU nothing compiled, and a CPU has no TF32
    ({"engine": "static", "trainer": "fast", "fp32_precision": {"backends": "ieee", "cudnn.conv": "tf32"}}, True,
     None)])
def test_a_run_trained_at_reduced_precision_or_not_saying_is_named_above_the_headline(synthetic, train, cuda, said):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    path = files.result(s.out, "chain_sum")
    record = files.read_json(path)
    record["engine"]["train"], record["device"]["cuda"] = train, cuda
    files.write_json(path, record)
    seal.write(commit.committed(s.out, commit.READABLE)[1], s.out, "chain_sum")
    warnings = report.warnings(report.load(s.out))
    assert [w for w in warnings if "precision" in w] == ([] if said is None else [w for w in warnings if said in w])
    assert said is None or len([w for w in warnings if said in w]) == 1


def test_evaluation_answers_scored_again_after_their_deadline_are_named(synthetic):
    """An evaluation scored on a loaded machine: its answers past the deadline were asked again (scoring.RETRIES),
    which the report says, so a reader knows the machine was loaded; none retried, nothing said."""
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    assert not [w for w in report.warnings(report.load(s.out)) if "scored again" in w]
    path = files.result(s.out, "chain_sum")
    record = files.read_json(path)
    record["scoring"] = {"answers": 400, "retried": 3}  # the synthetic run records no counts
    files.write_json(path, record)
    seal.write(commit.committed(s.out, commit.READABLE)[1], s.out, "chain_sum")
    said = [w for w in report.warnings(report.load(s.out)) if "scored again" in w]
    assert said == ["chain_sum: 3 evaluation answers passed the scoring deadline and were scored again (a loaded "
                    "machine)."]


def test_screening_answers_scored_again_are_named_beside_the_evaluations(synthetic):
    """The screen's answers are scored with retries too (its numbers are the committed verdict's): a loaded
    machine's retries there are said, with the evaluations' where both."""
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP,
                                 "screen": {"scoring": {"answers": 192, "retried": 5}}},
                   "leg_counting": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    said = [w for w in report.warnings(report.load(s.out)) if "scored again" in w]
    assert said == ["chain_sum: 5 screening answers passed the scoring deadline and were scored again (a loaded "
                    "machine)."]
    path = files.result(s.out, "chain_sum")
    files.write_json(path, files.read_json(path) | {"scoring": {"answers": 400, "retried": 3}})
    seal.write(commit.committed(s.out, commit.READABLE)[1], s.out, "chain_sum")
    said = [w for w in report.warnings(report.load(s.out)) if "scored again" in w]
    assert said == ["chain_sum: 5 screening and 3 evaluation answers passed the scoring deadline and were scored "
                    "again (a loaded machine)."]


def test_a_corrupt_result_is_shown_as_corrupt(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    path = files.result(s.out, "chain_sum")
    record = files.read_json(path)
    record["held"] = not record["held"]
    files.write_json(path, record)
    r = report.load(s.out)
    assert report.status(r, "chain_sum") == "corrupt result: RecordError: held disagrees with the prediction"
    assert r.done() == [] and "1 corrupt result" in report.statistics(r)
    assert any("its result file is corrupt" in w for w in report.warnings(r))


def test_the_report_of_a_corrupt_family_is_written_and_its_exit_status_says_so(synthetic, capsys):
    from proof.__main__ import main
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP},
                   "leg_counting": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    assert main(["report", "--out", s.out]) == 0 and runner.corrupt(s.out) == {}
    path = files.result(s.out, "chain_sum")
    files.write_json(path, files.read_json(path) | {"held": not files.read_json(path)["held"]})
    capsys.readouterr()
    assert main(["report", "--out", s.out]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("error: 1 family is corrupt (the report says so): chain_sum (RecordError: held disagrees with "
                   "the prediction)")
    assert "chain_sum: its result file is corrupt" in files.report(s.out).read_text()


def test_model_text_is_escaped_in_every_table(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP,
                                 "after_answers": ["<script>alert(1)</script>"] * 200}})
    html = report.examples_table(report.load(s.out)).to_html()
    assert "<script>" not in html and "&lt;answer&gt;&lt;script&gt;" in html


def test_the_micro_batches_families_trained_at_are_shown_beside_the_committed_settings(synthetic):
    s = synthetic({"chain_sum": {"before": HELD_UP, "after": UP, "timings": {"batch_per_device": [4]}},
                   "leg_counting": {"before": HELD_UP, "after": UP, "timings": {"batch_per_device": [4, 16]}},
                   "basic_arithmetic": {"before": HELD_UP, "after": UP}})
    html = report.provenance_table(report.load(s.out)).to_html()
    assert "micro-batch (speed only)" in html
    assert "4 (1 family), 4 and 16 (1 family), not recorded (1 family)" in html


def test_a_p_value_no_resample_reached_shows_below_the_resolution_not_zero(synthetic):
    s = synthetic({"products": {"before": [0.0] * 20, "after": [1.0] * 20},
                   "chain_sum": {"before": [0.0, 1.0] * 10, "after": [1.0, 0.0] * 10}})
    r = report.load(s.out)
    assert r.results["products"].gain["p"] == 0.0
    html = report.outcomes_table(r).to_html()
    assert "&lt; 0.001" in html  # the smoke preset's 2,000 resamples: 1/2000, written with a p's 3 decimals
    cells = re.findall(r'class="data row\d col[67](?: num)?" >([^<]*)<', html)
    # 2,000 resamples (the smoke preset): p < 1/2000; Holm over two families doubles the bound, still < 0.001
    assert cells[:2] == ["&lt; 0.001", "&lt; 0.001"] and all(re.fullmatch(r"[01]\.\d{3}", c) for c in cells[2:])


def test_figures_of_long_family_specs_draw_without_a_layout_warning(synthetic):
    # the H200 run's 03 warned "Tight layout not applied": a 100-character spec as a y tick label
    long = "basic_arithmetic(allow_negation=False, allow_parentheses=False, max_digits=1, max_terms=2, " \
           "operators=['+', '-'])"
    s = synthetic({long: {"before": HELD_UP, "after": UP}, "chain_sum": {"before": HELD_UP, "after": UP}})
    r = report.load(s.out)
    curves, forest = (report.SECTIONS[key].figure for key in ("curves", "forest"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for fig in (forest(r), curves(r)):
            fig.canvas.draw()
    assert max(len(line) for t in forest(r).axes[0].get_yticklabels()
               for line in t.get_text().splitlines()) <= 40


def test_a_corrupt_records_reason_reaches_the_page_as_text(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    path = files.result(s.out, "chain_sum")
    files.write_json(path, files.read_json(path) | {"status": "<img src=x onerror=alert(1)>"})
    links = report.notebook_links(report.load(s.out))
    assert "<img" not in links and "&lt;img src=x onerror=alert(1)&gt;" in links



def test_no_data_text_reaches_the_page_as_markup(synthetic):
    """A trainee's extraction is text a user typed: the captions name it as escaped code, and report.html
    carries no script from it (nbconvert passes a Markdown cell's raw HTML through live)."""
    hostile = "regex:<answer>(.*?)</answer>(?:<script>alert(1)</script>)?"
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}},
                  trainee=f"qwen3(max_new_tokens=16, extraction={hostile!r})")
    r = report.load(s.out)
    escaped = "regex:&lt;answer&gt;(.*?)&lt;/answer&gt;(?:&lt;script&gt;alert(1)&lt;/script&gt;)?"
    for section in ("audit", "format"):
        assert f"<code>{escaped}</code>" in report.caption(r, section).data
    html = runner.report_again(s.out).read_text()
    assert "<script>alert" not in html and f"<code>{escaped}</code>" in html


def test_the_report_notebook_puts_no_text_through_markdown():
    """Every sentence 03 displays goes through page.prose (escaped); a Markdown() of data would render its HTML."""
    import nbformat
    nb = nbformat.read(Path(__file__).parents[2] / "notebooks" / "03_report.ipynb", as_version=4)
    assert not [c.source for c in nb.cells if c.cell_type == "code" and "Markdown" in c.source]


def test_prose_keeps_its_emphasis_and_shows_data_as_typed():
    from shortlist import page
    assert page.prose("*ceiling* and **bold** read by {x}", x="<b>*a*</b>") == \
        "<i>ceiling</i> and <b>bold</b> read by <code>&lt;b&gt;*a*&lt;/b&gt;</code>"


def _recommitted(out, data: bytes) -> None:
    """predictions.json replaced, its hash recomputed: only what the file holds can refuse it now."""
    import hashlib
    (Path(out) / "predictions.json").write_bytes(data)
    (Path(out) / "predictions.sha256").write_text(hashlib.sha256(data).hexdigest() + "  predictions.json\n")


@pytest.mark.parametrize("edit, fragment", [
    (lambda body: b"\x00not json{", "is not JSON"),
    (lambda body: b"[1, 2]", "holds no JSON object"),
    (lambda body: json.dumps({k: v for k, v in body.items() if k != "settings"}).encode(), "lacks settings"),
    (lambda body: json.dumps(body | {"settings": [1]}).encode(), "settings must be an object"),
    (lambda body: json.dumps(body | {"predictions": body["predictions"][:1]}).encode(),
     "names leg_counting, which has no screen"),
    (lambda body: json.dumps(body | {"families": [5]}).encode(), "families must be a list of family specs"),
    (lambda body: json.dumps(body | {"families": ["chan_sum"]}).encode(), "chan_sum"),
    (lambda body: json.dumps(body | {"predictions": [1, 2]}).encode(), "predictions must be a list of screens"),
], ids=["garbage", "a list", "no settings", "settings a list", "a family without a screen", "a family not text",
        "an unknown family", "screens not objects"])
def test_a_report_on_predictions_that_hash_right_but_are_not_a_commitment_is_one_line(synthetic, capsys, edit,
                                                                                     fragment):
    from proof.__main__ import main
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}}, not_run=["leg_counting"])
    body = json.loads((Path(s.out) / "predictions.json").read_text())
    _recommitted(s.out, edit(body))
    assert main(["report", "--out", s.out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and fragment in err and "\n" not in err, err
    assert not (Path(s.out) / "report.html").exists()


def _report_command(out, *, read_only: bool = False) -> subprocess.CompletedProcess:
    """python -m proof report in a process of its own, bounded: a lock that blocks fails the test, not the suite.
    read_only: the folder mounted read-only (as root, in a mount namespace of its own; else its modes)."""
    command = [sys.executable, "-m", "proof", "report", "--out", str(out)]
    if read_only and os.geteuid() == 0:
        if shutil.which("unshare") is None:
            pytest.skip("no unshare(1) to mount the folder read-only")
        command = ["unshare", "-m", "sh", "-c", 'mount --make-rprivate / && mount --bind "$1" "$1" && '
                   'mount -o remount,ro,bind "$1" "$1" && shift && exec "$@"', "sh", str(out), *command]
    elif read_only:
        for path in [Path(out), *Path(out).rglob("*")]:
            path.chmod(path.stat().st_mode & ~0o222)
    return subprocess.run(command, capture_output=True, text=True, timeout=120, cwd=Path(__file__).parents[2])


def test_a_report_on_a_read_only_finished_folder_is_one_line(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    files.write_json(Path(s.out) / "lock.json", {"pid": 1})  # a finished run leaves its lock behind
    (Path(s.out) / "lock").touch()
    done = _report_command(s.out, read_only=True)
    assert done.returncode == 2 and done.stderr.startswith(f"error: cannot write into {s.out}")
    assert done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("kind", ["lock.json a folder", "lock a FIFO", "lock a folder"])
def test_a_lock_that_is_no_regular_file_is_one_line_and_never_blocks(synthetic, kind):
    s = synthetic({}, not_run=["chain_sum"])
    name = kind.split()[0]
    if kind.endswith("FIFO"):
        os.mkfifo(Path(s.out) / name)
    else:
        (Path(s.out) / name).mkdir()
    done = _report_command(s.out)
    assert done.returncode == 2 and done.stderr.startswith(f"error: {Path(s.out) / name}: ")
    assert done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize("out, fragment", [("x" * 256, "a folder name of 256 bytes"),
                                           ("a\nb", "holds a control character"), ("/", "the root folder")],
                         ids=["long name", "newline", "root"])
def test_a_report_on_an_out_no_run_could_have_is_one_line(out, fragment, capsys):
    from proof.__main__ import main
    assert main(["report", "--out", out]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --out") and fragment in err and "\n" not in err, err
