"""The proof's smoke run through an OpenEnv server, to its report: python -m proof run --preset smoke --source
openenv --env-local rg_openenv.py:app, the server started and stopped by the run, every notebook's kernel and
scorer reading the tasks and rewards from it. Its predictions record the server; its report shows the families."""
import json
import os
import re

import pytest

from proof import files, records
from proof.__main__ import main as proof_main
from shortlist.sources import source
from tests.conftest import FIXTURE_SOURCES, chosen, needs_openenv

APP = os.path.join(FIXTURE_SOURCES, "rg_openenv.py") + ":app"


@needs_openenv
@pytest.mark.slow  # a second smoke batch (the first is tests/proof/conftest.py's smoke_run): make test-slow, CI
def test_the_proofs_smoke_run_through_an_openenv_server_reaches_its_report(tmp_path, capsys):
    out = tmp_path / "run"
    try:
        assert proof_main(["run", "--preset", "smoke", "--source", "openenv", "--env-local", APP, "--out", str(out)]) == 0
    finally:
        chosen(None)
    body = json.loads(files.predictions(out).read_text())
    keys = [p["family"] for p in body["predictions"]]
    assert keys == ["openenv.chain_sum(max_digits=1, max_terms=2)", "openenv.leg_counting"]  # the preset's, served
    for key in keys:
        served = body["tasks"][key]["source"]
        assert served["source"] == "openenv" and served["local"] == APP and served["env"] == "rg_openenv"
    results = [records.read(path) for path in sorted((out / "families").glob("*.json"))]  # the server is gone now
    assert len(results) == 2 and all(isinstance(r, records.FamilyResult) for r in results)
    html = files.report(out).read_text()
    text = re.sub(r"<[^>]+>", "", html)
    assert "The rule held on" in html and all(text.count(key) >= 3 for key in keys)
    assert "Traceback" not in html and source.current().name == source.DEFAULT
    assert not [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
