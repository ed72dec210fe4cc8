"""The committed notebooks: clean, parameterized with the library's names, and free of logic."""
import ast
from pathlib import Path

import nbformat
import pytest

from proof import settings as settings_

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("*.ipynb"))


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
def test_cells_hold_no_logic_the_library_lacks(path):
    nb = nbformat.read(path, as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "code" and "parameters" not in cell.metadata.get("tags", []):
            for node in ast.walk(ast.parse(cell.source)):
                assert not isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.For, ast.While, ast.If, ast.Lambda,
                                             ast.ListComp, ast.DictComp, ast.Try)), (path.name, cell.source)
