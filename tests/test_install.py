"""install.py, the install line of docs/kaggle.md and the Makefile: it must never replace the machine's torch.

Each test makes a bare venv holding a stand-in torch (a dist-info only, no download of real torch)
and runs `install.py --check` in it: pip's dry run against the package index with the pinned
requirements. Nothing is installed.
"""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# a CUDA build's version string, as a GPU image such as Kaggle's carries (local label included)
IMAGE_TORCH = "2.8.0+cu126"


def venv_with_torch(where: Path, version: str | None, requires: list[str] = ()) -> Path:
    """A bare venv (no system site-packages) whose only torch is a stand-in dist-info of this version."""
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    python = where / "bin" / "python"
    if version is not None:
        purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip()
        info = Path(purelib) / f"torch-{version}.dist-info"
        info.mkdir()
        lines = ["Metadata-Version: 2.1", "Name: torch", f"Version: {version}"]
        (info / "METADATA").write_text("\n".join(lines + [f"Requires-Dist: {r}" for r in requires]) + "\n")
        (info / "RECORD").write_text("")
        (info / "INSTALLER").write_text("pip\n")
    return python


def check(python: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(python), str(ROOT / "install.py"), "--check"], capture_output=True, text=True,
                          cwd=python.parents[2], timeout=600)


def test_with_the_images_torch_no_torch_or_nvidia_wheel_would_be_installed(tmp_path):
    done = check(venv_with_torch(tmp_path / "venv", IMAGE_TORCH))
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"torch {IMAGE_TORCH} stays" in done.stdout
    assert "no torch, triton or nvidia-* wheel would be installed" in done.stdout


def test_without_torch_it_says_to_install_torch_first_and_asks_pip_nothing(tmp_path):
    done = check(venv_with_torch(tmp_path / "venv", None))
    assert done.returncode == 2
    assert "install torch first" in done.stderr and "checked" not in done.stdout
    assert len(done.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_a_torch_whose_cuda_wheels_are_missing_is_refused_naming_them(tmp_path):
    # the stand-in's own requirement is not met, so pip would add an nvidia-* wheel: refused before installing
    python = venv_with_torch(tmp_path / "venv", IMAGE_TORCH, ['nvidia-nvtx-cu12==12.6.77; platform_system == "Linux"'])
    done = check(python)
    assert done.returncode == 2
    assert "nvidia-nvtx-cu12==12.6.77" in done.stderr and "nothing was installed" in done.stderr
    assert "checked" not in done.stdout


def test_only_torch_and_its_runtime_wheels_count_as_a_second_torch():
    sys.path.insert(0, str(ROOT))
    try:
        import install
    finally:
        sys.path.remove(str(ROOT))
    assert all(map(install.torch_stack, ["torch", "Triton", "nvidia-cublas-cu12", "nvidia_nccl_cu13"]))
    assert not any(map(install.torch_stack, ["torchvision", "transformers", "pytorch-lightning", "nvidia"]))


def test_pip_shows_its_lines_as_they_come_and_says_it_is_still_at_work_where_it_is_silent(capsys, monkeypatch):
    sys.path.insert(0, str(ROOT))
    try:
        import install
    finally:
        sys.path.remove(str(ROOT))
    monkeypatch.setattr(install, "SILENT_S", 0.3)
    quiet_then_done = "import time; print('Collecting x', flush=True); time.sleep(1.5); print('Successfully installed x')"
    rc, said = install.pip([sys.executable, "-c", quiet_then_done], "installing x")
    lines = capsys.readouterr().out.splitlines()
    assert rc == 0 and said.splitlines() == ["Collecting x", "Successfully installed x"]
    beat = [bool(re.fullmatch(r"  \.\.\. pip is still at work \(\d+ s\)", line)) for line in lines]
    assert [line for line, b in zip(lines, beat) if not b] == ["installing x...", "Collecting x",
                                                              "Successfully installed x"]
    between = beat[lines.index("Collecting x") + 1:lines.index("Successfully installed x")]
    assert len(between) >= 3 and all(between)  # pip's silence, said as it lasts
    rc, _ = install.pip([sys.executable, "-c", "import sys; print('kept'); sys.exit(3)"], "a dry run", show=False)
    assert rc == 3 and "kept" not in capsys.readouterr().out  # a dry run's lines are kept, not shown
