"""LoRA checkpoints a rerun can trust: written whole or not at all, and checked before resuming.

The Trainer writes a checkpoint into a staging folder (checkpoints/.saving); the bookkeeper adds its
counts (PROGRESS) and publish() renames it whole into checkpoints/checkpoint-N, and only then removes
the older one. A kill at any moment leaves the last whole checkpoint in place; resumable() removes
the staging folder and any checkpoint-N that is not whole (complete()) before a rerun resumes.
Nothing here imports torch: the runner reads PROGRESS on the driver."""
from __future__ import annotations

import json
import re
import shutil
import zipfile
from pathlib import Path

from shortlist import output


PROGRESS = "shortlist.json"  # inside each LoRA checkpoint: its step, the training seconds and scorer counts so far
STAGING = ".saving"  # inside checkpoints/: the Trainer's output_dir, where a checkpoint is written before it is whole
CHECKPOINT = re.compile(r"checkpoint-(\d+)")
# what resuming exactly needs from a checkpoint, beside PROGRESS: the Trainer's state, the LoRA weights, the
# optimizer, the schedule and the random state (without any one, Trainer resumes silently from less)
NEEDED = ("trainer_state.json", "adapter_config.json", "adapter_model.safetensors", "optimizer.pt", "scheduler.pt",
          "rng_state.pth")


def checkpoints_in(folder: Path) -> list[tuple[int, Path]]:
    """The checkpoint-N folders in a folder, by step."""
    if not folder.is_dir():
        return []
    return sorted((int(m.group(1)), p) for p in folder.iterdir() if (m := CHECKPOINT.fullmatch(p.name)) and p.is_dir())


def complete(path: Path, step: int) -> str | None:
    """Why a checkpoint folder cannot be resumed from exactly, or None when it can."""
    missing = [name for name in (*NEEDED, PROGRESS) if not (path / name).is_file()]
    if missing:
        return f"no {', '.join(missing)}"
    try:
        state, progress = (json.loads((path / name).read_text()) for name in ("trainer_state.json", PROGRESS))
        if not isinstance(state, dict) or state.get("global_step") != step:
            return f"trainer_state.json is not the state at step {step}"
        if not isinstance(progress, dict) or progress.get("step") != step or not isinstance(
                progress.get("train_s"), (int, float)) or not isinstance(progress.get("scoring"), dict):
            return f"{PROGRESS} is not the bookkeeping at step {step}"
        if not whole_safetensors(path / "adapter_model.safetensors"):
            return "adapter_model.safetensors is cut short"
        for name in ("optimizer.pt", "scheduler.pt", "rng_state.pth"):  # torch.save writes zip archives
            with zipfile.ZipFile(path / name) as archive:
                if archive.testzip() is not None:
                    return f"{name} is damaged"
    except (OSError, ValueError, KeyError, TypeError, IndexError, zipfile.BadZipFile) as e:  # a damaged header too
        return f"unreadable ({type(e).__name__})"
    return None


def whole_safetensors(path: Path) -> bool:
    """A safetensors file as long as its own header says: 8 bytes of header length, the header, the data."""
    size = path.stat().st_size
    with open(path, "rb") as f:
        length = int.from_bytes(f.read(8), "little")
        if size < 8 + length:
            return False
        header = json.loads(f.read(length))
    ends = [t["data_offsets"][1] for name, t in header.items() if name != "__metadata__"]
    return size == 8 + length + max(ends, default=0)


def resumable(checkpoints: Path, log=print) -> Path | None:
    """The newest whole checkpoint, if any. The staging folder, every checkpoint that is not whole (a
    kill or a full disk inside a save, or one written by an older version) and the older ones go."""
    shutil.rmtree(checkpoints / STAGING, ignore_errors=True)
    keep = None
    for step, path in reversed(checkpoints_in(checkpoints)):
        why = None if keep else complete(path, step)
        if keep is None and why is None:
            keep = path
            continue
        if why:
            log(f"removing {path.name}, which a rerun cannot resume from: {why}")
        remove(path)
    return keep


def publish(staged: Path, checkpoints: Path) -> Path:
    """A checkpoint written whole in staging, renamed into checkpoints/; then the older ones go."""
    dest = output.publish_folder(staged, checkpoints / staged.name)
    for _, path in checkpoints_in(checkpoints):
        if path != dest:
            remove(path)
    return dest


def remove(path: Path) -> None:
    if path.is_symlink():  # a link goes, not what it points to
        path.unlink()
    else:
        shutil.rmtree(path)
