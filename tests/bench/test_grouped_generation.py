"""bench/grouped_generation.py on the tiny model: a grouped batch is one family's rows per family, served by the fast
engine after its self-check; N processes at once each time a family alone; the figures it reports are the ones it
timed."""
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_a_cpu_run_times_each_family_alone_and_all_of_them_grouped(tmp_path):
    families = "chain_sum(max_terms=2, max_digits=1), products(max_digits=1)"
    out = tmp_path / "grouped.json"
    subprocess.run([sys.executable, "bench/grouped_generation.py", "--model", "tiny", "--trainee",
                    "qwen3(max_new_tokens=8)", "--families", families, "--repeats", "2", "--processes", "2", "--json", str(out)],
                   cwd=ROOT, check=True, capture_output=True, timeout=600)
    found = json.loads(out.read_text())
    assert found["families"] == ["chain_sum(max_digits=1, max_terms=2)", "products(max_digits=1)"]
    assert found["rows_per_family"] == 4 * 8 and found["grouped"]["rows"] == 2 * 4 * 8
    assert all(a["rows"] == 32 and len(a["seconds"]) == 2 for a in found["alone"].values())
    assert found["alone_serial_s"] == round(sum(a["median_s"] for a in found["alone"].values()), 4)
    assert found["speedup_over_serial"] == round(found["alone_serial_s"] / found["grouped"]["median_s"], 2)
    concurrent = found["concurrent"]  # two processes at once, each a family alone, after both compiled
    assert (concurrent["processes"], concurrent["failed"], len(concurrent["members"])) == (2, 0, 2)
    assert [m["family"] for m in concurrent["members"]] == found["families"]
    assert all(m["engine"] == "static" and len(m["seconds"]) == 2 for m in concurrent["members"])
    assert not (tmp_path / "grouped.sync").exists()  # the members' meeting place is gone
    for side in ("alone_engine", "grouped_engine"):  # the grouped model passed the engine's own self-check
        assert found[side]["engine"] == "static" and found[side]["checks"], found[side]
        assert all(c["passed"] for c in found[side]["checks"])
