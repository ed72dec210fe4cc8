"""proof/kernel.py: the engine a person names by hand (`papermill ... --engine shortlist`) is the batch's kernel."""
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from proof import kernel


def notebook(path: Path) -> Path:
    cells = [nbformat.v4.new_code_cell("out = ''", metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell("print('out', out, 'command', open('/proc/self/cmdline').read().split(chr(0)))")]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path.write_text(nbformat.writes(nb))
    return path


@pytest.mark.parametrize("engine", [[], ["--engine", kernel.NAME]])
def test_papermill_by_hand_on_the_projects_engine_says_nothing_of_tcp(tmp_path, engine):
    temp = Path(tempfile.mkdtemp(prefix="k", dir="/tmp"))  # an ipc socket's path must fit AF_UNIX's 108 bytes
    try:
        by_hand(tmp_path, temp, engine)
    finally:
        shutil.rmtree(temp, ignore_errors=True)


def by_hand(tmp_path, temp, engine):
    done = subprocess.run([sys.executable, "-m", "papermill", str(notebook(tmp_path / "nb.ipynb")),
                           str(tmp_path / "run.ipynb"), "-p", "out", "here", *engine],
                          capture_output=True, text=True, env=dict(os.environ, TMPDIR=str(temp)), timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ran = nbformat.read(tmp_path / "run.ipynb", as_version=4).cells[-1].outputs[0]["text"]
    assert "out here" in ran
    # the kernel started as a job's process: it dies with papermill (executors.launcher), ours only
    assert ("shortlist.executors.launcher" in ran) == bool(engine)
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


@pytest.mark.parametrize("first", ["import proof.kernel as k; k.Engine", "from proof.kernel import Engine",
                                   "import papermill.engines"])
def test_one_engine_class_whatever_is_imported_first(first):
    code = (f"{first}\nimport papermill.engines as e, proof.kernel as k\n"
            "print(e.papermill_engines.get_engine('shortlist') is k.Engine is k._engine())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"


@pytest.mark.parametrize("raised, status", [
    ("from shortlist.errors import OneLine\nraise OneLine('steps = 4 in the parameters cell: give a new out')", 2),
    ("raise ValueError('a bug, not a refusal')", 1)])
def test_a_refusal_in_a_cell_ends_papermill_by_hand_in_its_one_line(tmp_path, raised, status):
    cells = [nbformat.v4.new_code_cell("out = ''", metadata={"tags": ["parameters"]}),
             nbformat.v4.new_code_cell(raised)]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    (tmp_path / "nb.ipynb").write_text(nbformat.writes(nb))
    temp = Path(tempfile.mkdtemp(prefix="k", dir="/tmp"))  # an ipc socket's path must fit AF_UNIX's 108 bytes
    try:
        done = subprocess.run([sys.executable, "-m", "papermill", str(tmp_path / "nb.ipynb"),
                               str(tmp_path / "run.ipynb"), "--engine", kernel.NAME], capture_output=True, text=True,
                              env=dict(os.environ, TMPDIR=str(temp)), timeout=300)
    finally:
        shutil.rmtree(temp, ignore_errors=True)
    assert done.returncode == status, done.stderr[-2000:]
    if status == 2:  # the refusal's line is the command's last word: no traceback of papermill's around it
        assert done.stderr.strip().splitlines()[-1] == ("papermill: In [2]: OneLine: steps = 4 in the parameters "
                                                        "cell: give a new out")
        assert "Traceback" not in done.stderr and "PapermillExecutionError" not in done.stderr
    else:  # anything else keeps its whole story
        assert "Traceback (most recent call last)" in done.stderr and "a bug, not a refusal" in done.stderr
    # papermill still wrote the executed notebook, the error in it
    assert nbformat.read(tmp_path / "run.ipynb", as_version=4).cells[-1].outputs[-1]["output_type"] == "error"
