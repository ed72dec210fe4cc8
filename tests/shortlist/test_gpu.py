"""What only a GPU can show: the fast engine's CUDA graphs equal generate(), and its self-check runs.

Skipped without CUDA (CI has none); run on the GPU machine with `python -m pytest -q -m gpu`.
"""
import pytest
import torch

from shortlist import trainee as trainee_
from shortlist.generation import engine
from shortlist.generation import sampling

pytestmark = [pytest.mark.gpu, pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")]

QUESTIONS = [f"State the final answer to the following arithmetic problem: {a} + {b} =" for a, b in
             [(1, 2), (3, 4), (12, 7), (5, 5), (9, 9), (2, 8), (6, 1), (4, 4)]]


@pytest.fixture(scope="module")
def on_gpu():
    return sampling.load("tiny", on="cuda")


def test_cuda_graphs_decode_what_generate_decodes(on_gpu):
    engine.reset()
    who = trainee_.resolve("qwen3(max_new_tokens=16)").replace(model="tiny").for_source("reasoning_gym")
    fast = sampling.Sampler(on_gpu, who, batch_size=8, fast=True).complete(QUESTIONS, greedy=True)
    reference = sampling.Sampler(on_gpu, who, batch_size=8, fast=False).complete(QUESTIONS, greedy=True)
    assert fast == reference
    status = engine.status()
    assert status["engine"] == "static" and status["checks"][0]["identical_rows"] == 8


def test_auto_batch_stays_within_the_memory_this_process_may_use(on_gpu):
    free, _ = torch.cuda.mem_get_info()
    assert 1 <= sampling.auto_batch(on_gpu.model, 10**6, 256) <= 10**6
    assert sampling.auto_batch(on_gpu.model, 10, 256) == 10 or free < 1 << 30
