import json
import re
import subprocess
import sys

from shortlist.__main__ import main


def test_screen_prints_a_verdict_table_for_the_tiny_model(capsys, tmp_path):
    saved = tmp_path / "screens.json"
    assert main(["screen", "--model", "tiny", "--tasks", "4", "--trainee", "qwen3(group=4, max_new_tokens=12)",
                 "--families", "leg_counting(min_animals=1, max_animals=1, max_instances=2), chain_sum",
                 "--json", str(saved)]) == 0
    record = json.loads(saved.read_text())  # says what produced it, as every record of a run does
    assert record["model"]["name"] == "tiny" and record["trainee"]["group"] == 4
    assert record["settings"] == {"tasks": 4, "first_seed": 500, "batch": record["settings"]["batch"]}
    assert record["versions"]["torch"] and record["versions"]["transformers"] and "cuda" in record["device"]
    assert record["engine"]["engine"] in ("generate", "static") and record["scoring"]["deadline_s"] > 0 and len(record["screens"]) == 2
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("leg_counting", "chain_sum"))]
    assert len(rows) == 2 and "verdict" in out
    assert rows[1].split()[-2:] == ["too", "hard"]  # default chain_sum is far beyond the tiny model


def test_bad_input_is_one_line_and_exit_2_before_any_model_loads(no_model_loads, capsys, tmp_path):
    (tmp_path / "a_file").write_text("")
    for argv, fragment in ((["screen", "--families", "chan_sum"], "did you mean chain_sum"),
                           (["screen", "--trainee", "qwen3(group=1)"], "group=1"),
                           (["screen", "--tasks", "0"], "--tasks"),
                           (["screen", "--tasks", "1000000000"], "--tasks 1000000000: give 1..100,000"),
                           (["screen", "--first-seed", str(2**32)], "must lie in 0..4294967295"),
                           (["screen", "--first-seed", str(2**32 - 10)], "4294967286..4294967309 must lie in"),
                           (["screen", "--first-seed", "1" + "0" * 30], "--first-seed 1000000000000000000000000000000"),
                           (["screen", "--batch", str(1 << 30)], "--batch 1073741824"),
                           (["screen", "--families", "chain_sum(max_terms=2, max_terms=3)"], "max_terms is given twice"),
                           (["screen", "--model", "/no/such/dir"], "model folder /no/such/dir does not exist"),
                           (["screen", "--model", str(tmp_path)], "holds no config.json"),
                           (["screen", "--model", "tiny", "--json", "/proc/x/s.json"], "folder /proc/x does not exist"),
                           (["screen", "--model", "tiny", "--json", str(tmp_path)], "is a folder"),
                           (["screen", "--model", "tiny", "--json", str(tmp_path / "a_file" / "s.json")], "does not exist"),
                           (["screen", "--model", "tiny", "--trainee", "qwen3(max_new_tokens=4096)"], "leaves no room")):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and fragment in err and "\n" not in err, err


def test_an_unreachable_hub_is_one_line_saying_what_to_do(no_model_loads, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # as on a machine without Internet, whatever this one has
    assert main(["screen", "--model", "Qwen/Qwen3-0.6B-not-cached"]) == 2
    err = capsys.readouterr().err.strip()
    assert "cannot reach the model hub" in err and "--model tiny on a command line" in err and "\n" not in err


def test_runs_as_a_module_and_families_lists_each_with_a_line_a_count_and_the_ones_that_do_not_build():
    out = subprocess.run([sys.executable, "-m", "shortlist", "families"], capture_output=True, text=True, check=True)
    lines = out.stdout.splitlines()
    listed = {line.split()[0]: line for line in lines if line.strip()}
    assert "[arithmetic] Generates simple arithmetic tasks using only + and - operators" in listed["chain_sum"]
    assert "Count Bits" not in listed["number_format"]  # a docstring copied from another family is not shown
    count = next(line for line in lines if "families build and can be screened" in line)
    built, total = map(int, re.match(r"(\d+) of (\d+) reasoning_gym families", count).groups())
    failing = lines[lines.index(count) + 1:]
    assert f"; {total - built} cannot:" in count and len(failing) == total - built >= 2
    assert "no level of its 5 builds (level 0: min_nodes must be >= 6)" in listed["knight_swap"]
    assert listed["composite"].split(None, 1)[1].startswith("does not build with its defaults")
    assert not any("Error" in line for line in failing)  # the source's words, not how it raised them
    assert built == len([line for line in lines[:lines.index(count)] if line.strip()])


def test_the_catalog_screens_every_family_into_one_folder_and_prints_its_wall_time(capsys, tmp_path, monkeypatch):
    from shortlist.catalog import run as catalog
    monkeypatch.setattr(catalog, "every_family", lambda source=None: ["chain_sum", "composite"])  # the catalog, cut short
    out = tmp_path / "catalog"
    assert main(["screen", "--all", "--model", "tiny", "--tasks", "2", "--trainee", "qwen3(group=2, max_new_tokens=8)",
                 "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert "1 family x level screens, 1 could not be built or screened" in captured.out
    assert captured.out.strip().splitlines()[-1].startswith("wall time: ")
    progress = [line for line in captured.err.splitlines() if line.startswith("cpu [")]
    assert len(progress) == 2 and any("composite: default failed to build" in line for line in progress)
    assert {p.name for p in out.iterdir()} >= {"shortlist.json", "shortlist.csv", "shortlist.html", "families"}


def test_bad_catalog_input_is_one_line_and_exit_2_before_any_model_loads(no_model_loads, capsys, tmp_path):
    (tmp_path / "a_file").write_text("")
    for argv, fragment in ((["--levels", "--families", "chain_sum(max_terms=2)"], "give the name alone"),
                           (["--levels", "--families", "chan_sum"], "did you mean chain_sum"),
                           (["--grid", "--families", "chain_sum(max_terms=2)"], "give the name alone"),
                           (["--all", "--grid", "--families", "chain_sum"], "--all screens every family"),
                           (["--all", "--families", "chain_sum"], "--all screens every family"),
                           (["--all", "--budget-min", "0"], "--budget-min"),
                           (["--all", "--json", str(tmp_path / "s.json")], "writes <out>/shortlist.json"),
                           (["--all", "--out", str(tmp_path / "a_file")], "is a file"),
                           (["--all", "--out", "/"], "--out='/': the root folder"),
                           (["--all", "--out", str(tmp_path / "a\nb")], "holds a control character"),
                           (["--all", "--out", str(tmp_path / ("x" * 256))], "a folder name of 256 bytes"),
                           (["--all", "--tasks", "1000000000"], "--tasks 1000000000"),
                           (["--levels", "--families", "chain_sum", "--first-seed", str(2**40)], "--first-seed"),
                           (["--out", str(tmp_path)], "go with --all, --levels or --grid")):
        assert main(["screen", "--model", "tiny", *argv]) == 2, argv
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and fragment in err and "\n" not in err, err


def test_a_refused_catalog_leaves_no_folder(no_model_loads, capsys, tmp_path, monkeypatch):
    """A model that cannot be had, or a cluster that cannot take the jobs: exit 2, and no --out made."""
    from shortlist import executors
    out = tmp_path / "catalog"
    assert main(["screen", "--all", "--model", "/no/such/model", "--out", str(out)]) == 2
    assert "model folder /no/such/model does not exist" in capsys.readouterr().err and not out.exists()

    def refuse(self, *args, **kwargs):
        raise executors.PlacementError("no node offers a GPU")
    monkeypatch.setattr(executors.Placement, "start", refuse)
    assert main(["screen", "--all", "--model", "tiny", "--out", str(out)]) == 2
    assert capsys.readouterr().err.strip() == "error: no node offers a GPU" and not out.exists()


HEAVY = ("reasoning_gym", "torch", "transformers", "numpy")


def help_of(module: str, *argv: str) -> tuple[str, list[str]]:
    """`python -m <module> <argv> --help` in a fresh interpreter: its text, and which heavy modules it imported."""
    code = ("import contextlib, io, json, runpy, sys\n"
            f"sys.argv = [{module!r}, *{list(argv)!r}, '--help']\n"
            "text = io.StringIO()\n"
            "with contextlib.redirect_stdout(text):\n"
            "    try:\n"
            f"        runpy.run_module({module!r}, run_name='__main__')\n"
            "    except SystemExit as e:\n"
            "        assert e.code in (0, None), e.code\n"
            f"print(json.dumps([text.getvalue(), [m for m in {HEAVY!r} if m in sys.modules]]))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    text, heavy = json.loads(done.stdout)
    return text, heavy


def test_screen_help_describes_the_command_and_shows_defaults_and_choices_without_importing_the_environments():
    text, heavy = help_of("shortlist", "screen")
    assert heavy == []  # argparse alone: no environment, no torch
    flat = " ".join(text.split())
    assert "print a verdict per family" in flat and "<out>/shortlist.{json,csv,html}" in flat
    assert "tasks per family (default: 24)" in flat and "GPU memory (default: 0)" in flat
    assert "--executor {local,ray}" in flat and "(default: qwen3)" in flat
    assert "spec column of <out>/shortlist.csv" in flat


def test_an_unknown_executor_is_refused_by_the_parser_with_exit_2(capsys):
    import pytest
    with pytest.raises(SystemExit) as e:
        main(["screen", "--all", "--executor", "slurm"])
    assert e.value.code == 2 and "invalid choice: 'slurm'" in capsys.readouterr().err
