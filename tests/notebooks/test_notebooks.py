"""The committed notebooks: clean, parameterized with the library's names, and free of logic."""
import ast
from pathlib import Path

import nbformat
import pytest

from proof import settings as settings_

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


def test_the_three_notebooks_are_there():
    assert [p.name for p in NOTEBOOKS] == ["01_predict.ipynb", "02_train_family.ipynb", "03_report.ipynb"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_without_outputs_and_with_a_kernelspec(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_parameters_cell_speaks_the_librarys_names_and_defaults(path):
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1
    values: dict = {}
    exec(cells[0].source, {}, values)
    expected = settings_.Settings().as_dict()
    if path.name.startswith("02"):
        assert values.pop("family") in expected["families"]
    if path.name.startswith("03"):
        assert values.pop("publish") is True  # Run All by hand writes report.html
    assert values == expected


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_parameters_cell_is_written_from_settings_and_only_its_own_lines_differ(path, tmp_path):
    """One source for the three cells: Settings' defaults and help (python -m proof.notebook writes them)."""
    from proof import notebook
    nb = nbformat.read(path, as_version=4)
    [cell] = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert cell.source == (notebook.parameters() + notebook.own(cell.source)).rstrip("\n")
    assert notebook.own(cell.source).count("\n") == (0 if path.name.startswith("01") else 1)  # family, publish
    stale = tmp_path / path.name
    stale.write_text(path.read_text().replace("steps = 100  #", "steps = 7  #"))  # a cell edited by hand
    assert notebook.write_parameters(stale) and stale.read_text() == path.read_text()
    assert not notebook.write_parameters(stale)  # as Settings writes it: left alone


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_cells_hold_no_logic_the_library_lacks(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" not in cell.metadata.get("tags", []):
            for node in ast.walk(ast.parse(cell.source)):
                assert not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.If, ast.Lambda,
                                             ast.ListComp, ast.DictComp, ast.Try)), (path.name, cell.source)


def test_papermill_reads_every_parameter_of_every_notebook(caplog):
    from papermill.inspection import _infer_parameters
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        for cell in nb.cells:
            cell.metadata.setdefault("tags", [])
        names = [p.name for p in _infer_parameters(nb)]
        assert set(settings_.names()) <= set(names), path.name
    assert "Unable to parse" not in caplog.text


def run_all(path: Path, values: dict, dest: Path) -> nbformat.NotebookNode:
    """Run All, as by hand: the parameters cell edited in place, nbclient, no papermill injection."""
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    lines = cell.source.splitlines()
    for name, value in values.items():  # what a user would type over the defaults
        at = next(i for i, line in enumerate(lines) if line.startswith(f"{name} = "))
        lines[at] = f"{name} = {value!r}"
    cell.source = "\n".join(lines)
    NotebookClient(nb, kernel_name="python3", timeout=600, resources={"metadata": {"path": str(path.parent)}}).execute()
    nbformat.write(nb, dest)
    return nb


def test_run_all_by_hand_01_then_02_then_03_gives_the_report(tmp_path, tiny_model):
    # tiny_model: built before 01 runs, so that 01's stderr holds no "waiting for process N, which is building
    # tiny" (another test's build, on this machine's empty cache): the line is right there, but not 01's own
    from proof import files, records
    from shortlist import sources
    family = "chain_sum(max_digits=1, max_terms=2)"
    values = {"model": "tiny", "trainee": "qwen3(max_new_tokens=8)", "families": [family],
              "out": str(tmp_path / "run"), "steps": 2, "predict_tasks": 4, "eval_n": 8, "min_unseen": 4, "logging_steps": 1,
              "checkpoint_every": 0, "bootstrap_n": 200}
    books = {p.name: p for p in NOTEBOOKS}
    for name in ("01_predict.ipynb", "02_train_family.ipynb", "03_report.ipynb"):
        extra = {"family": family} if name.startswith("02") else {}
        nb = run_all(books[name], values | extra, tmp_path / name)
        errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
        stderr = [o["text"] for c in nb.cells for o in c.get("outputs", []) if o.get("name") == "stderr"]
        assert errors == [] and stderr == [], (name, errors, stderr)  # no error, no warning
        shown = [o for o in nb.cells[-1].get("outputs", []) if o.get("output_type") == "execute_result"]
        assert shown == [], (name, shown)  # the last cell leaves no stray value (a PosixPath)
    result = records.read(files.result(tmp_path / "run", sources.parse(family).slug))
    assert isinstance(result, records.FamilyResult) and result.settings["steps"] == 2
    html = files.report(tmp_path / "run").read_text()  # 03's last cell wrote it, as the batch would
    assert 'class="shortlist-headline"' in html and "smoke run, not a finding" in html
    assert result.predictions_sha256 in html
    from proof import verify
    assert verify.record(tmp_path / "run") == []  # what the kernels kept by hand is sealed as the batch's is
    import re
    links = re.findall(r'<a href="([^"#]+\.ipynb)"', html)
    assert len(links) == 3 and all((tmp_path / "run" / link).is_file() for link in links)  # every link resolves
    kept = nbformat.read(tmp_path / "run" / links[1], as_version=4)  # 02 as its kernel ran it
    assert any("train.train_family(run)" in c.source for c in kept.cells)
    assert "8.000000" not in html and re.search(r">\s*8\s*<", html)  # counts are integers, as the batch shows them


def kaggle_lines(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    cell = next(c for c in nb.cells if "kaggle" in c.metadata.get("tags", []))
    import re
    return re.findall(r"`!((?:pip install|python \S*install\.py)[^`]*)`", cell.source)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_the_kaggle_install_line_works_from_any_folder(path, tmp_path):
    """Kaggle's notebooks run in /kaggle/working, not in the clone: the lines (Internet on, and off from a
    dataset of wheels) are install.py by the clone's path, which keeps Kaggle's torch (tests/test_install.py),
    and nothing it installs may be relative to the folder it is typed in."""
    import subprocess
    import sys
    root = Path(__file__).resolve().parents[2]
    lines = kaggle_lines(path)
    assert lines and all(line.startswith("python /kaggle/working/shortlist/install.py") for line in lines), lines
    sys.path.insert(0, str(root))
    try:
        import install
    finally:
        sys.path.remove(str(root))
    # from another folder, pip resolves every requirement of the line: -r's and -e's paths included (no
    # download: --dry-run --no-deps stops at the requirements themselves)
    constraint = tmp_path / "torch.txt"
    constraint.write_text("")
    done = subprocess.run(install.pip_args(constraint, ["--dry-run", "--no-deps", "--no-build-isolation"]),
                          cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr  # -e <clone>: a Python project, found from any folder
    assert not any(line.strip() in ("-e .", "-e.") for line in (root / "requirements.txt").read_text().splitlines())


def test_run_all_on_a_machine_without_a_gpu_stops_in_its_first_cell_with_the_one_step_to_take(tmp_path, monkeypatch):
    """A real model on a CPU-only session, as Kaggle starts one (there the hub gives Qwen3-0.6B's config; here,
    offline, a local folder stands in for a model that can be had): 01 stops before any model loads or any
    file is written, saying what to do; the tiny model runs (the test above)."""
    import nbclient
    import torch

    from shortlist.models import tiny
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    books = {p.name: p for p in NOTEBOOKS}
    model = str(tiny.ensure())  # a folder holding config.json and weights: not the name 'tiny'
    with pytest.raises(nbclient.exceptions.CellExecutionError) as e:
        run_all(books["01_predict.ipynb"], {"out": str(tmp_path / "run"), "model": model}, tmp_path / "01.ipynb")
    assert f"ModelError: no GPU here for model {model!r}: turn one on (Kaggle: Settings > Accelerator" in str(e.value)
    assert "model = 'tiny' in a notebook's parameters, --preset smoke on the command line" in str(e.value)
    assert not (tmp_path / "run").exists()


def test_the_smoke_parameters_file_is_the_smoke_preset_as_papermill_reads_it():
    """docs/proof.md runs one notebook at a time with `papermill -f notebooks/smoke.yaml`: the preset's settings,
    written by python -m proof.notebook, so a change to the preset that is not written there fails here."""
    import yaml
    from proof import notebook, settings as settings_
    path = NOTEBOOKS[0].parent / "smoke.yaml"
    assert path.read_text() == notebook.preset_parameters("smoke")
    read = yaml.safe_load(path.read_text())  # as papermill reads a parameters file
    assert settings_.make(**read).as_dict() == settings_.make("smoke").as_dict()
