"""The model checked before it loads: where it can train (shortlist/models/config.py)."""
import pytest

from shortlist.models import config as models


def test_a_real_model_without_a_gpu_is_one_line_with_the_step_to_take(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("SHORTLIST_CPU", "1")  # the environment variable it once read says nothing now
    with pytest.raises(models.ModelError) as e:
        models.check_device("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert "\n" not in str(e.value) and "GPU T4 x2" in str(e.value) and "--set cpu=True" in str(e.value)
    models.check_device("tiny")  # the offline smoke model needs no GPU
    models.check_device("HuggingFaceTB/SmolLM2-135M-Instruct", cpu=True)  # the user asked for the CPU
    with pytest.raises(models.ModelError):
        models.check_device("/models/smollm2", cpu=False)


def test_with_a_gpu_any_model_may_train_and_without_one_it_is_refused(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(models.ModelError, match="GPU"):
        models.check_device("Qwen/Qwen3-0.6B")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert models.check_device("Qwen/Qwen3-0.6B") is None  # the same model, once there is a GPU


def test_a_hub_models_revision_is_the_commit_its_cached_config_sits_under(tmp_path):
    """transformers 5 dropped config._commit_hash, so every hub model read as revision None and a commitment
    could not tell one commit from the next: the revision is read from the hub cache's snapshots/<commit>/."""
    import os
    import shutil
    import subprocess
    import sys

    from shortlist.models import tiny
    repo = tmp_path / "hub" / "models--fake--tiny"
    for commit in ("a" * 40, "b" * 40):
        (repo / "snapshots" / commit).mkdir(parents=True)
        shutil.copy(tiny.ensure() / "config.json", repo / "snapshots" / commit / "config.json")
    (repo / "refs").mkdir()
    code = ("import sys; from pathlib import Path; from shortlist.models import config\n"
            "for commit in 'ab':\n"
            "    Path(sys.argv[1]).write_text(commit * 40)\n"
            "    print(config.identity('fake/tiny')['revision'])\n")
    env = dict(os.environ, HF_HUB_CACHE=str(tmp_path / "hub"), HF_HUB_OFFLINE="1")
    ran = subprocess.run([sys.executable, "-c", code, str(repo / "refs" / "main")], env=env, capture_output=True,
                         text=True, timeout=120)
    assert ran.stdout.split() == ["a" * 40, "b" * 40], ran.stderr[-2000:]


def test_a_local_folders_revision_is_its_model_files_not_a_readme_beside_them(tmp_path):
    import shutil

    from shortlist.models import tiny
    folder = tmp_path / "model"
    shutil.copytree(tiny.ensure(), folder)
    first = models.identity(str(folder))["revision"]
    (folder / "README.md").write_text("# notes\n")
    (folder / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    assert models.identity(str(folder))["revision"] == first
    (folder / "tokenizer_config.json").write_text((folder / "tokenizer_config.json").read_text() + " ")
    assert models.identity(str(folder))["revision"] != first


def test_a_local_folders_digest_is_reused_only_while_its_files_are_unchanged(tmp_path, monkeypatch):
    """identity() keeps a folder's digest for the next ask (a family asks three times) and hashes again when a
    weights file changes at the same size: rewritten in place, its mtime set back (cp -p), or another file with the
    same size and times moved over it (rsync -a, tar). The commit check must see a changed weight byte."""
    import hashlib
    import os
    import shutil
    import time

    from shortlist.models import tiny
    folder = tmp_path / "model"
    shutil.copytree(tiny.ensure(), folder)
    later = time.time() + 60  # the files are old by then: their stat is trusted
    monkeypatch.setattr(time, "time", lambda: later)
    hashed = []
    real = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda *a: hashed.append(1) or real(*a))
    first = models.identity(str(folder))["revision"]
    assert models.identity(str(folder))["revision"] == first and len(hashed) == 1
    weights = next(p for p in folder.iterdir() if p.suffix == ".safetensors")
    times = (weights.stat().st_atime_ns, weights.stat().st_mtime_ns)
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one bit of the last weight, the file's size unchanged
    weights.write_bytes(bytes(data))
    os.utime(weights, ns=times)  # and its mtime set back, as cp -p would
    second = models.identity(str(folder))["revision"]
    assert second != first and len(hashed) == 2
    other = tmp_path / "other.safetensors"
    data[-1] ^= 1  # the original bytes again, moved over it with the same times
    other.write_bytes(bytes(data))
    os.utime(other, ns=times)
    os.replace(other, weights)
    assert models.identity(str(folder))["revision"] == first and len(hashed) == 3


def test_a_folder_written_moments_ago_is_hashed_every_time(tmp_path, monkeypatch):
    """A file whose mtime or ctime is within 2 s of now is not trusted to its stat (a coarse clock can give a
    rewrite the same times), so the digest is computed again."""
    import hashlib
    import shutil

    from shortlist.models import tiny
    folder = tmp_path / "model"
    shutil.copytree(tiny.ensure(), folder)
    hashed = []
    real = hashlib.sha256
    monkeypatch.setattr(hashlib, "sha256", lambda *a: hashed.append(1) or real(*a))
    assert models.identity(str(folder)) == models.identity(str(folder)) and len(hashed) == 2
