"""What every notebook's first cell does: settings from its parameters, paths from the repository root.

A notebook runs with notebooks/ as its working directory when opened by hand and wherever papermill
puts it in the batch, so a relative `out` is taken from the repository root in both. A bad setting
is refused here, in one line (shortlist.errors), before anything else runs.
"""
from __future__ import annotations

import dataclasses
import json
import re
import warnings
from pathlib import Path

from proof import settings as settings_

ROOT = Path(__file__).resolve().parent.parent  # the repository: notebooks/, proof/, shortlist/
# the parameters cell's first lines; Settings writes the rest of its shared part (parameters())
HEADER = ("# Parameters: the names of proof.settings.Settings, the same in the library and in\n"
          "# `python -m proof run --set name=value`. Defaults are the seed's protocol on Qwen3-0.6B.\n"
          "# Written from proof/settings.py by `python -m proof.notebook`; the lines after the settings are\n"
          "# this notebook's own.\n")


def start(namespace: dict) -> settings_.Settings:
    """Settings from a notebook's globals (its parameters cell, after papermill's injection). Called
    before anything imports transformers, so that the kernel's warning filter is in place first."""
    # tqdm.auto, which transformers imports, warns in a Jupyter kernel without ipywidgets that it cannot
    # draw widget bars; every progress bar is off in this project, so it would only add noise to each notebook
    warnings.filterwarnings("ignore", message="IProgress not found")
    out = namespace.get("out")  # an empty out is refused by make(), not taken for the repository root
    if isinstance(out, str) and out.strip() and not Path(out).expanduser().is_absolute():
        namespace = {**namespace, "out": str(ROOT / out)}
    return settings_.from_namespace(namespace)


def keep(settings: settings_.Settings, name: str, family: str | None = None) -> None:
    """The last cell of 01 and 02: the notebook, as this kernel ran it, saved under the run's folder, so
    that Run All by hand leaves what the batch leaves and the report's links resolve. A kernel does not
    see its own notebook file, so this is what it knows: every cell it ran, in order, with each cell's
    result (tables and figures); printed lines are not kept. It is sealed against the committed predictions
    (proof/seal.py), as the batch seals what it executes, whose notebook, written after the kernel ends,
    replaces it. Returns nothing: the last cell of a notebook shows no stray value."""
    from IPython import get_ipython
    import nbformat

    from proof import files
    from shortlist import sources
    shell = get_ipython()
    if shell is None:  # not in a kernel
        return
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"display_name": "Python 3", "language": "python", "name": "python3"}
    nb.metadata["shortlist"] = {"saved_by": "the kernel (Run All by hand): cells and their results, not printed lines"}
    results = shell.user_ns.get("Out", {})
    for number, source in enumerate(shell.user_ns.get("In", [])[1:], start=1):
        cell = nbformat.v4.new_code_cell(source, execution_count=number)
        if number in results:
            data, metadata = shell.display_formatter.format(results[number])
            cell.outputs = [nbformat.v4.new_output("execute_result", data=data, metadata=metadata,
                                                   execution_count=number)]
        nb.cells.append(cell)
    stem = name if family is None else f"{name}.{sources.parse(family).slug}"
    dest = files.notebooks(settings.out) / f"{stem}.ipynb"
    files.write_text(dest, nbformat.writes(nb))
    from proof import commit, seal
    try:
        _, sha = commit.committed(settings.out)
    except commit.NotCommitted:  # 01 stopped before it committed: nothing to seal against
        return
    seal.notebook(settings.out, sha, dest)


def parameters() -> str:
    """The part of every notebook's parameters cell that Settings writes: each setting at its default (as
    a kernel is handed it: Settings.as_dict()), with its help. One source for the three notebooks."""
    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(settings_.Settings)}
    if clash := [name for name, text in helps.items() if "=" in text]:  # papermill reads no line with two
        raise ValueError(f"the help of setting {clash[0]} holds '=': papermill could not read its parameters line")
    values = settings_.Settings().as_dict()
    return HEADER + "".join(f"{name} = {value!r}  # {helps[name]}\n" for name, value in values.items())


def own(source: str) -> str:
    """A parameters cell's own lines: those that set a name that is not a setting (02's family)."""
    names = set(settings_.names())
    return "".join(line + "\n" for line in source.splitlines()
                   if (m := re.match(r"(\w+) = ", line)) and m.group(1) not in names)


def write_parameters(path: Path) -> bool:
    """Rewrite a notebook's parameters cell as parameters() and its own lines; True where it changed. The
    notebook's JSON is edited as it is written (indent 1), so nothing else in the file moves."""
    book = json.loads(Path(path).read_text(encoding="utf-8"))
    cell = next(c for c in book["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    old = "".join(cell["source"])
    new = (parameters() + own(old)).rstrip("\n")
    if new == old:
        return False
    cell["source"] = new.splitlines(keepends=True)
    Path(path).write_text(json.dumps(book, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return True


def preset_parameters(name: str) -> str:
    """A preset (proof/settings.py: PRESETS) as papermill's parameters file (`papermill -f notebooks/<name>.yaml`,
    JSON being YAML): one notebook at a time under the preset's settings, as `proof run --preset` runs them."""
    values = settings_.make(name).as_dict()
    preset = {k: values[k] for k in settings_.PRESETS[name]}
    return json.dumps(preset, indent=1) + "\n"


PRESET_FILES = ("smoke",)  # notebooks/<name>.yaml, written by `python -m proof.notebook`


if __name__ == "__main__":  # python -m proof.notebook: every notebook's parameters cell, from Settings
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        print(f"{notebook.name}: {'rewritten' if write_parameters(notebook) else 'as Settings writes it'}")
    for name in PRESET_FILES:
        (ROOT / "notebooks" / f"{name}.yaml").write_text(preset_parameters(name))
        print(f"{name}.yaml: written from the preset")
