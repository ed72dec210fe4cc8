"""bench/decode_attention.py on the tiny model: each side's figures are its own timed calls, both sides really ran
the fast engine (a side that fell back to generate() would time something else), and greedy rows are compared."""
import json
import os
import subprocess
import sys
from pathlib import Path

from shortlist import provenance

ROOT = Path(__file__).resolve().parents[2]


def test_a_cpu_run_times_sdpa_against_decode_attention(tmp_path):
    out = tmp_path / "a.json"
    subprocess.run([sys.executable, "bench/decode_attention.py", "--model", "tiny", "--rows", "8", "--tokens", "6",
                    "--repeats", "2", "--json", str(out)], cwd=ROOT, check=True, capture_output=True, timeout=600,
                   env=os.environ | {"SHORTLIST_COMMIT": "abc1234"})
    found = json.loads(out.read_text())
    assert found["commit"] == "abc1234" and found["rows"] == 8 and found["max_new_tokens"] == 6
    assert found["versions"]["shortlist code"] == provenance.code()  # what ran, whatever the commit field says
    for side in found["sides"].values():
        assert side["engine"] == "static" and side["checks"] and all(c["passed"] for c in side["checks"])
        assert len(side["call_s"]) == 2 and min(side["call_s"]) <= side["median_call_s"] <= max(side["call_s"])
        assert side["ms_per_decode_step"] > 0 and max(side["decode_steps"]) <= 6
        # .item() and bool() reads: a handful a call, fewer than multinomial's 2 a step alone; the looks' .tolist()
        # are not among them. Waits for a GPU are counted on one only
        assert 0 < side["reads_back_per_call"] < 2 * max(side["decode_steps"]) and side["syncs_per_call"] is None
    assert found["draw_equals_multinomial"] is True
    sdpa, ours = (found["sides"][n]["ms_per_decode_step"] for n in ("sdpa", "decode_attention"))
    assert found["speedup"] == round(sdpa / ours, 3)
    assert found["greedy_rows_equal"] == 8 and found["greedy_first_difference"] == []
