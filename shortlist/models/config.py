"""Where the trainee's model comes from, checked before anything loads or is written.

Every foreseeable failure of a load is one line that says what to do instead: a folder that is
not there or holds no config.json, a hub that cannot be reached, a completion budget the model
cannot hold. Only the config is read here, never the weights, and torch is not imported, so the
check costs a second where the load would cost a minute.
"""
from __future__ import annotations

from pathlib import Path

from shortlist.models import tiny
from shortlist.errors import OneLine


class ModelError(OneLine, RuntimeError):
    """A model that cannot be loaded; the message is one line and says what to do instead."""


# the way to the offline model, spelled as each place where a model is given spells it
TINY_HINT = "the tiny model, offline (model = 'tiny' in a notebook, --model tiny on a command line)"


def check_device(name: str, cpu: bool = False) -> None:
    """A model other than the tiny one trains for hours without a GPU: a session without one (Kaggle's
    default accelerator is none) is told, in one line, the one step to take, before anything runs.
    cpu: the run was told to train it on the CPU anyway (the proof's setting `cpu`)."""
    if name == tiny.NAME or cpu:
        return
    import torch
    if torch.cuda.is_available():
        return
    raise ModelError(f"no GPU here for model {name!r}: turn one on (Kaggle: Settings > Accelerator > GPU T4 x2), "
                     "or try the pipeline offline on the tiny model (its numbers mean nothing): model = 'tiny' in "
                     "a notebook's parameters, --preset smoke on the command line (the smoke run, minutes), or "
                     "train it on the CPU anyway (hours): cpu = True in a notebook's parameters, --set cpu=True on "
                     "the command line")


def _is_path(name: str) -> bool:
    return name.startswith(("/", "./", "../", "~")) or Path(name).expanduser().exists() or name.count("/") > 1


def model_config(name: str):
    """The model's config, read without its weights: every foreseeable failure of a load, as one
    line, before anything is written (a folder that is not there, a hub that cannot be reached)."""
    if name == tiny.NAME:
        name = str(tiny.ensure())
    elif _is_path(name):
        folder = Path(name).expanduser()
        if not folder.is_dir():
            raise ModelError(f"model folder {name} does not exist: give a folder holding config.json and weights, "
                             f"a hub name, or {TINY_HINT}")
        if not (folder / "config.json").is_file():
            raise ModelError(f"model folder {name} holds no config.json: is it a Hugging Face model folder?")
    elif not _hub_reachable() and not _cached(name):  # not a minute of retries to learn what one try tells
        raise ModelError(f"cannot reach the model hub for {name!r} and it is not in the local cache: turn the "
                         f"Internet on (Kaggle: Settings > Internet), give a local folder, or use {TINY_HINT}")
    import transformers
    from huggingface_hub.utils import logging as hf_logging
    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # the hub logs each failed request: the one line below says it all
    try:
        return transformers.AutoConfig.from_pretrained(name)
    except Exception as e:  # noqa: BLE001  the hub's errors are many and long; what to do is the same
        first = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
        raise ModelError(f"cannot load {name!r} from the model hub ({first}). Turn the Internet on (Kaggle: "
                         f"Settings > Internet), give a local folder, or use {TINY_HINT}") from None
    finally:
        hf_logging.set_verbosity(verbosity)


def _hub_reachable(timeout: float = 3.0) -> bool:
    import os
    import socket
    from urllib.parse import urlparse
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT", "https://huggingface.co"))
    try:
        socket.create_connection((url.hostname, url.port or 443), timeout=timeout).close()
        return True
    except OSError:
        return False


def _cached(name: str) -> bool:
    from huggingface_hub import try_to_load_from_cache
    try:
        return isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001  a name the hub would refuse is not cached either
        return False


def positions(config) -> int | None:
    """How many tokens the model can hold (prompt and completion together), if its config says."""
    return getattr(config.get_text_config(), "max_position_embeddings", None)


def check_fits(config, trainee) -> None:
    """Refuse, in one line, a completion budget the model cannot hold whatever the prompt."""
    limit = positions(config)
    if limit is not None and trainee.max_new_tokens >= limit:
        raise ModelError(f"the trainee's max_new_tokens={trainee.max_new_tokens} leaves no room for a prompt in the "
                         f"{limit} positions {trainee.model} holds")


_DIGESTS: dict[str, tuple] = {}  # a local folder -> (its files' stats, their digest)


def identity(name: str) -> dict:
    """The model's name and revision, without loading it: tiny's fingerprint, a local folder's files
    hashed (a folder has no commit), a hub model's commit as its config names it."""
    import hashlib
    import time
    if name == tiny.NAME:
        return {"name": name, "revision": tiny.fingerprint(tiny.ensure())}
    folder = Path(name).expanduser()
    if folder.is_dir():
        files = sorted(p for p in folder.iterdir() if p.is_file() and not _not_the_model(p.name))
        # a family asks up to three times (load, commit check, result). The digest is reused only while every
        # file's stat is the one it was made from: a rewrite changes ctime (which utime cannot set back), a file
        # moved in (cp -p, rsync -a, tar) changes the inode; and a file written within the last 2 s is never
        # trusted to its stat (a coarse clock could give its next rewrite the same times: git's "racily clean")
        stats = tuple((p.name, (st := p.stat()).st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) for p in files)
        racy = any(time.time() - max(st[2], st[3]) / 1e9 < 2 for st in stats)
        key = str(folder.resolve())
        if racy or _DIGESTS.get(key, (None,))[0] != stats:
            digest = hashlib.sha256()
            for path in files:
                digest.update(path.name.encode() + b"\0")
                with open(path, "rb") as f:
                    for block in iter(lambda: f.read(1 << 24), b""):
                        digest.update(block)
            _DIGESTS[key] = (stats, "files:" + digest.hexdigest()[:16])
        return {"name": name, "revision": _DIGESTS[key][1]}
    from shortlist.models import hf_internals  # the hub cache's snapshot folder, read by transformers' helpers
    model_config(name)  # fetched (or found in the cache) first, as loading it would
    return {"name": name, "revision": hf_internals.revision(name)}


def _not_the_model(filename: str) -> bool:
    """A file of a model folder that no loader reads: a README, a licence, git's or the hub's dotfiles."""
    return filename.startswith(".") or filename.lower().endswith((".md", ".txt.license")) or \
        filename.upper().startswith(("LICENSE", "LICENCE", "NOTICE"))
