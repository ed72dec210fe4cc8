"""Install Shortlist beside this machine's own torch, never over it.

    python <checkout>/install.py            # from any folder: check, then install
    python <checkout>/install.py --check    # only the check (a pip dry run); installs nothing
    python <checkout>/install.py --no-index --find-links <wheels>   # other arguments go to pip
    python <checkout>/install.py --cpu-torch   # without a torch, the CPU wheel first (the Makefile's setup)

A GPU image (Kaggle's) already has a CUDA torch. requirements.txt leaves torch out, but the pinned
packages require torch themselves, so a plain `pip install -r requirements.txt` may still pull
another torch and its nvidia-* wheels (several GB) that would replace the image's own. This script
pins torch to the installed version (a pip constraint), asks pip what it would install
(`--dry-run --report`), and refuses in one line, before anything is installed, if that includes
torch, triton or any nvidia-* wheel. Without torch it says to install torch first. It imports
nothing of this project (it runs before the project is installed) and refusals exit 2, as the
project's command lines do for bad input. pip's own lines show as they come, and where pip is silent
(its dry run, unpacking a large wheel) a line says every SILENT_S how long it has worked: no setup
is minutes of silence.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import json
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

CHECKOUT = Path(__file__).resolve().parent
CPU_TORCH = "torch==2.13.0"  # the Makefile's CPU wheel, for a machine without torch


SILENT_S = 15  # pip silent this long: a line says it is still at work


def pip(args: list[str], what: str, show: bool = True) -> tuple[int, str]:
    """pip, its lines shown as they come (show) or kept (the dry run's), with a line every SILENT_S seconds
    pip says nothing: its exit status and its output."""
    print(f"{what}...", flush=True)
    started = time.monotonic()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] + [lines.put(None)], daemon=True).start()
    kept = []
    while True:
        try:
            line = lines.get(timeout=SILENT_S)
        except queue.Empty:
            print(f"  ... pip is still at work ({time.monotonic() - started:.0f} s)", flush=True)
            continue
        if line is None:
            break
        kept.append(line)
        if show:
            print(line, end="", flush=True)
    return proc.wait(), "".join(kept)


class Refusal(Exception):
    """One line that says what is wrong and what to do; exits 2."""


def installed_torch() -> str:
    """The version of the torch this Python already has; a refusal saying how to get one if none."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        raise Refusal(f"no torch in {sys.executable}: install torch first, the build for this machine "
                      f"(a GPU's CUDA build from https://pytorch.org/get-started/locally/, or `{sys.executable} "
                      f"-m pip install {CPU_TORCH}` for the CPU), then run this again") from None


def has_torch() -> bool:
    try:
        installed_torch()
        return True
    except Refusal:
        return False


def torch_stack(name: str) -> bool:
    """torch itself, the triton compiler it ships with, or one of its CUDA runtime wheels."""
    name = name.lower().replace("_", "-")
    return name in ("torch", "triton") or name.startswith("nvidia-")


def pip_args(constraint: Path, extra: list[str] = ()) -> list[str]:
    """The install line: the pinned requirements and this checkout, torch held where it is."""
    return [sys.executable, "-m", "pip", "install", "-r", str(CHECKOUT / "requirements.txt"),
            "-c", str(constraint), "-e", str(CHECKOUT), *extra]


def dry_run(constraint: Path, torch: str, extra: list[str]) -> list[str]:
    """What pip would install, as 'name==version'; a refusal if the pins cannot sit beside this torch."""
    report = constraint.with_name("report.json")
    rc, said = pip(pip_args(constraint, extra) + ["--dry-run", "--quiet", "--report", str(report)],
                   f"asking pip what it would install beside torch {torch} (a dry run, nothing installed)", show=False)
    if rc != 0:
        sys.stderr.write(said)
        raise Refusal(f"the pinned packages do not install beside this machine's torch {torch} (pip's lines "
                      "above say which needs what): install a torch they accept, the build for this machine's "
                      "CUDA (https://pytorch.org/get-started/locally/), then run this again")
    wheels = json.loads(report.read_text())["install"]
    return [f"{w['metadata']['name']}=={w['metadata']['version']}" for w in wheels]


def check(workdir: Path, extra: list[str] = ()) -> Path:
    """The constraint file that holds torch, once the dry run shows nothing of torch's would be installed."""
    torch = installed_torch()
    constraint = workdir / "torch.txt"
    constraint.write_text(f"torch=={torch}\n")
    pulled = [w for w in dry_run(constraint, torch, list(extra)) if torch_stack(w.split("==")[0])]
    if pulled:
        raise Refusal(f"installing would replace or add to this machine's torch {torch}: {', '.join(pulled)}; "
                      "nothing was installed. Install those from the same source as this torch (its CUDA "
                      "build), or a torch whose own requirements are already met, then run this again")
    return constraint


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="install.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="only the dry run; install nothing")
    ap.add_argument("--cpu-torch", action="store_true", help=f"without a torch, install {CPU_TORCH} (the CPU wheel) "
                                                               "first; a torch already here stays")
    args, extra = ap.parse_known_args(argv)  # the rest is pip's: --no-index, --find-links <wheels>...
    if args.cpu_torch and not args.check and not has_torch():
        rc, _ = pip([sys.executable, "-m", "pip", "install", CPU_TORCH, *extra], f"installing {CPU_TORCH}, the CPU "
                    "wheel (this Python has no torch)")
        if rc:
            return rc
    with tempfile.TemporaryDirectory(prefix="shortlist-install-") as tmp:
        try:
            constraint = check(Path(tmp), extra)
        except Refusal as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        print(f"checked: torch {installed_torch()} stays; no torch, triton or nvidia-* wheel would be installed")
        if args.check:
            return 0
        return pip(pip_args(constraint, extra), "installing the pinned packages and this project")[0]


if __name__ == "__main__":
    sys.exit(main())
