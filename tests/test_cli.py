import subprocess
import sys

from shortlist.__main__ import main


def test_screen_prints_a_verdict_table_for_the_tiny_model(capsys):
    assert main(["screen", "--model", "tiny", "--tasks", "4", "--group", "4", "--max-new-tokens", "12",
                 "--families", "leg_counting(min_animals=1, max_animals=1, max_instances=2), chain_sum"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith(("leg_counting", "chain_sum"))]
    assert len(rows) == 2 and "verdict" in out
    assert rows[1].split()[-2:] == ["too", "hard"]  # default chain_sum is far beyond the tiny model


def test_bad_input_is_one_line_and_exit_2_before_any_model_loads(no_model_loads, capsys):
    for argv in (["screen", "--families", "chan_sum"], ["screen", "--group", "1"], ["screen", "--tasks", "0"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error: ") and "\n" not in err


def test_runs_as_a_module():
    out = subprocess.run([sys.executable, "-m", "shortlist", "families"], capture_output=True, text=True, check=True)
    assert "chain_sum" in out.stdout.split()
