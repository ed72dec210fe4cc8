"""proof/kernel.py: the engine a person names by hand (`papermill ... --engine shortlist`) is the batch's kernel."""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from proof import kernel


def notebook(path: Path) -> Path:
    cells = [nbformat.v4.new_code_cell("out = ''", metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell("import os\nprint('ran in', os.getcwd(), 'out', out)")]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.write_text(nbformat.writes(nb))
    return path


@pytest.mark.parametrize("engine", [[], ["--engine", kernel.NAME]])
def test_papermill_by_hand_on_the_projects_engine_says_nothing_of_tcp(tmp_path, engine):
    temp = Path(tempfile.mkdtemp(prefix="k", dir="/tmp"))  # an ipc socket's path must fit AF_UNIX's 108 bytes
    done = subprocess.run([sys.executable, "-m", "papermill", str(notebook(tmp_path / "nb.ipynb")),
                           str(tmp_path / "run.ipynb"), "-p", "out", "here", *engine],
                          capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(temp)), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ran = nbformat.read(tmp_path / "run.ipynb", as_version=4).cells[-1].outputs[0]["text"]
    assert "out here" in ran
    # ipykernel's warning is what the engine is for: papermill's default engine prints it (the reason), ours never
    assert ("running over TCP without encryption" in done.stderr) == (not engine)
    if engine:
        assert list(temp.iterdir()) == []  # its sockets' folder is gone with it


def test_the_batch_runs_notebooks_on_the_same_engine(monkeypatch, tmp_path):
    import papermill as pm

    from proof import runner
    seen = {}
    monkeypatch.setattr(pm, "execute_notebook", lambda *a, **kw: seen.update(kw))
    (tmp_path / "p.json").write_text("{}")
    runner.papermill(str(tmp_path / "nb.ipynb"), str(tmp_path / "run.ipynb"), str(tmp_path / "p.json"))
    from papermill.engines import papermill_engines
    assert seen["engine_name"] == kernel.NAME and papermill_engines.get_engine(kernel.NAME) is kernel.Engine
