import json
import subprocess
import sys
from pathlib import Path

import pytest

from shortlist.generation import compile_cache

ROOT = Path(__file__).resolve().parents[2]
# a compiled matmul, forward and backward, at three batch sizes: one extern kernel, so the CPU
# compiles in about a second (no C++ to build), and counts() reports what the caches did
SCRIPT = """
import json, sys
from shortlist.generation import compile_cache
compile_cache.use(sys.argv[1])
import torch, torch._inductor.config
torch._inductor.config.compile_threads = 1
f = torch.compile(lambda x, w: torch.mm(x, w))
w = torch.randn(16, 16, requires_grad=True)
for rows in (8, 12, 20):
    f(torch.randn(rows, 16), w).backward(torch.ones(rows, 16))
print(json.dumps(compile_cache.counts()))
"""


def compile_in_a_new_process(folder) -> dict:
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(folder)], capture_output=True, text=True, cwd=ROOT,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(folder)}, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_second_process_hits_what_the_first_compiled(tmp_path):
    folder = tmp_path / "out" / "work" / "compile"
    first = compile_in_a_new_process(folder)
    assert first["fx_graph"]["miss"] > 0 and first["fx_graph"]["hit"] == 0 and first["autograd"]["miss"] > 0
    assert first["graphs"] == 2  # a static graph, then a dynamic one once the batch size changed
    assert (folder / "inductor" / "fxgraph").is_dir() and (folder / "inductor" / "aotautograd").is_dir()
    second = compile_in_a_new_process(folder)
    assert second["fx_graph"] == {"hit": first["fx_graph"]["miss"] // 2, "miss": 0, "bypass": 0}
    assert second["autograd"] == {"hit": 1, "miss": 0, "bypass": 0}
    assert second["graphs"] == 1  # Dynamo's profile said the batch is dynamic: no static graph first


# the evaluation's first decode graph in a warm process: frozen weights (sampling.load freezes them), sampled at one
# batch size, then at another (GRPO's rows), so that Dynamo's profile marks the batch dynamic; the next process,
# reading that profile, compiles the dynamic graph at the first size at once, and finds it in both caches
FROZEN = """
import json, sys
from shortlist.generation import compile_cache
compile_cache.use(sys.argv[1])
import torch, torch._inductor.config
torch._inductor.config.compile_threads = 1
layer = torch.nn.Linear(16, 16, bias=False).requires_grad_(False)
f = torch.compile(lambda x: layer(x))
with torch.no_grad():
    for arg in sys.argv[2:]:  # rows, or rows+ for weights that require grad (a model load() did not freeze)
        layer.weight.requires_grad_(arg.endswith("+"))
        f(torch.randn(int(arg.rstrip("+")), 16))
print(json.dumps(compile_cache.counts()))
"""


def test_a_warm_process_finds_the_graph_a_frozen_model_compiled_at_another_batch_size(tmp_path):
    def run(*rows):
        done = subprocess.run([sys.executable, "-c", FROZEN, str(tmp_path / "c"), *map(str, rows)],
                              capture_output=True, text=True, cwd=ROOT, check=True,
                              env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "HOME": str(tmp_path)})
        return json.loads(done.stdout.strip().splitlines()[-1])
    cold = run(91, 32)
    assert cold["graphs"] == 2 and cold["fx_graph"]["miss"] == 2
    warm = run(91)
    assert warm["graphs"] == 1
    assert warm["fx_graph"]["miss"] == 0 and warm["autograd"]["miss"] == 0, warm
    assert warm["fx_graph"]["hit"] == 1 and warm["autograd"]["hit"] == 1
    # why sampling.load freezes: the same graph over weights that require grad is another cache entry
    assert run("91+")["autograd"]["miss"] == 1


def test_use_points_this_process_and_its_children_at_the_folder(tmp_path, monkeypatch):
    import torch
    import torch._functorch.config
    import torch._inductor.config
    for name in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_FX_GRAPH_CACHE",
                 "TORCHINDUCTOR_AUTOGRAD_CACHE", "TORCH_COMPILE_JOB_ID"):
        monkeypatch.setenv(name, "-")  # recorded, so that the test leaves the environment as it found it
        monkeypatch.delenv(name)
    monkeypatch.setattr(torch._inductor.config, "fx_graph_cache", False)
    monkeypatch.setattr(torch._functorch.config, "enable_autograd_cache", False)
    monkeypatch.setattr(torch.compiler.config, "job_id", None)
    folder = compile_cache.use(tmp_path / "c")
    from torch._inductor.runtime.cache_dir_utils import cache_dir
    assert Path(cache_dir()) == folder / "inductor"
    assert torch._inductor.config.fx_graph_cache and torch._functorch.config.enable_autograd_cache
    child = subprocess.run([sys.executable, "-c", "import os; print(os.environ['TRITON_CACHE_DIR'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert child == str(folder / "triton")


def test_a_catalog_worker_compiles_into_the_catalog_folder(tmp_path, monkeypatch, no_model_loads):
    from shortlist.catalog import run as catalog
    from shortlist import trainee
    from shortlist.catalog import walk
    p = catalog.plan(trainee.resolve("qwen3").replace(model="tiny"), ["chain_sum"], out=str(tmp_path / "cat"))
    used = []
    monkeypatch.setattr(compile_cache, "use", used.append)
    with pytest.raises(AssertionError, match="a model was loaded"):
        walk.Screener(p).screen(None)
    assert used == [tmp_path / "cat" / "compile"]
