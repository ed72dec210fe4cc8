"""A family's final LoRA adapter, kept in the run folder, and the trained model made from it again.

train() keeps work/<slug>/adapter/ once training ends: PEFT's adapter_config.json and adapter_model.safetensors
(a few MB at r=16 on a 135M model), written whole (staged beside it, then renamed into place). merged() puts it
back into a copy of the base model as the evaluation after training had it: the LoRA weights merged into the base
weights (PEFT's merge_and_unload, the arithmetic of fast_grpo.InferenceCopy), so that the evaluation's greedy
answers can be drawn again from what produced them (proof/regenerate.py).
"""
from __future__ import annotations

import shutil
from pathlib import Path

from shortlist import output

FILES = ("adapter_config.json", "adapter_model.safetensors")  # what is kept: PEFT's model card is not


def save(trainer, dest: Path) -> Path:
    """The trainer's LoRA adapter as it ends, into dest (replacing one there); a full disk is one line."""
    dest = Path(dest)
    staged = dest.with_name(dest.name + ".saving")
    shutil.rmtree(staged, ignore_errors=True)
    try:
        trainer.accelerator.unwrap_model(trainer.model, keep_torch_compile=False).save_pretrained(str(staged))
        for extra in [p for p in staged.iterdir() if p.name not in FILES]:
            shutil.rmtree(extra) if extra.is_dir() else extra.unlink()
        return output.publish_folder(staged, dest)
    except Exception as e:
        shutil.rmtree(staged, ignore_errors=True)
        if output.disk_full(e):
            raise output.full(dest, f"the adapter {dest}", "its last checkpoint") from None
        raise


def kept(folder: Path) -> bool:
    return all((Path(folder) / name).is_file() for name in FILES)


def merged(model, folder: Path):
    """A copy of the base model with the adapter in folder merged into its weights, ready to sample."""
    from peft import PeftModel

    from proof.trl_internals import renamed_alias
    from shortlist.models import hf_internals
    with renamed_alias():
        trained = PeftModel.from_pretrained(hf_internals.plain_copy(model), str(folder)).merge_and_unload()
    trained.eval()
    return trained
