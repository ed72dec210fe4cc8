"""torch.compile's work kept on disk, so that a machine compiles once, not once per process.

Every family of the proof runs in a fresh papermill kernel, and each one used to compile the same
decode step and the same LoRA training pass again (~180 s before the first fast GRPO step on an
H200). use(folder) points torch's persistent caches at one folder that every process of a run
shares, the run's own (<out>/work/compile), so a later family, a resumed run or a notebook run by
hand finds what the first one compiled:
- Inductor's FX graph cache (the generated code) and AOTAutograd's cache (forward and backward
  graphs), both switched on explicitly;
- Triton's kernel cache (the compiled GPU binaries);
- Dynamo's profile of which dimensions turned out dynamic ("PGO", keyed by a job id), so a later
  process compiles the dynamic graph at once instead of a static one first and a dynamic one after.
Dynamo still traces the Python each process (a cache hit skips what comes after tracing), and CUDA
graphs are recorded again; counts() tells hits from misses. Directory caches, not
torch.compiler.save/load_cache_artifacts: a family killed half-way has already written what it
compiled, and two families on two GPUs share the folder (entries are written atomically).
Call use() before anything compiles; it also sets the environment, so worker processes agree.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

JOB_ID = "shortlist"  # names Dynamo's profile inside the folder; the folder itself is per run


def use(folder) -> Path:
    """Keep this process's (and its children's) compiled artefacts in folder; returns it."""
    import torch
    import torch._functorch.config
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    os.environ.update(TORCHINDUCTOR_CACHE_DIR=str(folder / "inductor"), TRITON_CACHE_DIR=str(folder / "triton"),
                      TORCHINDUCTOR_FX_GRAPH_CACHE="1", TORCHINDUCTOR_AUTOGRAD_CACHE="1",
                      TORCH_COMPILE_JOB_ID=JOB_ID)
    torch._functorch.config.enable_autograd_cache = True
    if hasattr(torch.compiler.config, "job_id"):  # local PGO is on where a job id names the profile
        torch.compiler.config.job_id = JOB_ID
    # Inductor reads the environment when it is imported (1.3 s, paid only where something compiles);
    # if it already was, set it directly, and forget anything memoized about the old folder
    inductor = sys.modules.get("torch._inductor.config")
    if inductor is not None:
        inductor.fx_graph_cache = True
    utils = sys.modules.get("torch._inductor.utils")
    if utils is not None and hasattr(utils, "clear_caches"):
        utils.clear_caches()
    return folder


def counts() -> dict:
    """Cache hits, misses and bypasses so far in this process, and graphs Dynamo compiled."""
    from torch._dynamo.utils import counters
    inductor, autograd = counters["inductor"], counters["aot_autograd"]
    return {"fx_graph": {k: inductor[f"fxgraph_cache_{k}"] for k in ("hit", "miss", "bypass")},
            "autograd": {k: autograd[f"autograd_cache_{k}"] for k in ("hit", "miss", "bypass")},
            "graphs": counters["stats"]["unique_graphs"]}
