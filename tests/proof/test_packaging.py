"""An install that is not editable (what a Ray node's `pip install .` makes) holds every package the proof
needs: one made into a fresh folder, with no checkout on its path, renders the smoke run's report by itself.
The editable install the suite runs from would hide a package that pyproject.toml leaves out."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import nbformat

from proof import runner

ROOT = Path(__file__).resolve().parents[2]


def checkout_copy(dest: Path) -> Path:
    """The files a checkout holds (tracked, or new and not ignored), copied as they are now, links as links:
    the install builds from this copy, so that its build folders never land in the working tree."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for rel in filter(None, listed):
        src, to = ROOT / rel, dest / rel
        if not src.exists() and not src.is_symlink():  # deleted in the working tree, not yet in the index
            continue
        to.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            to.symlink_to(os.readlink(src))
        else:
            shutil.copy2(src, to)
    return dest


def fresh_python(where: Path) -> tuple[Path, Path]:
    """A venv without this project: its own site-packages first, then this interpreter's for the dependencies
    (a .pth line adds a folder, never the editable install's finder that folder's own .pth would start)."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True)
    python = where / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ours = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()] or [sysconfig.get_paths()["purelib"]]
    (site / "dependencies.pth").write_text("\n".join(ours) + "\n")
    return python, site


def test_a_non_editable_install_into_a_fresh_folder_renders_the_smoke_report(smoke_run, tmp_path):
    s, html, _ = smoke_run
    python, site = fresh_python(tmp_path / "venv")
    built = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                            "--no-index", "--target", str(site), str(checkout_copy(tmp_path / "checkout"))],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr[-2000:]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": ""}
    where = subprocess.run([str(python), "-c", "import proof.report, shortlist; print(proof.report.__file__)"],
                           capture_output=True, text=True, cwd=tmp_path, env=env)
    assert where.returncode == 0 and Path(where.stdout.strip()).is_relative_to(site), where.stderr[-2000:]
    run = shutil.copytree(s.out, tmp_path / "run")
    (run / "report.html").unlink()
    done = subprocess.run([str(python), "-m", "proof", "report", "--out", str(run)], capture_output=True, text=True,
                          cwd=tmp_path, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == f"report: {run / 'report.html'}"
    page = (run / "report.html").read_text()
    assert all(key in page for key in s.families) and "did the verdicts hold?" in page
    assert runner.failure(nbformat.read(run / "notebooks" / "03_report.ipynb", as_version=4)) is None


def test_pyproject_finds_every_package_of_the_tree():
    """The fast half of the test above: every folder with an __init__.py is a package pyproject ships."""
    import tomllib

    from setuptools import find_packages
    include = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]["include"]
    found = set(find_packages(str(ROOT), include=include))
    every = {str(p.parent.relative_to(ROOT)).replace("/", ".") for top in ("shortlist", "proof")
             for p in (ROOT / top).rglob("__init__.py")}
    assert {"proof.report", "shortlist.executors"} <= every and every <= found, sorted(every - found)
