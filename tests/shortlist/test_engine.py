"""The fast engine's contract: it equals generate() or steps aside, says so, and is recorded."""
import pytest
import torch

from shortlist import trainee as trainee_
from shortlist.generation import engine
from shortlist.generation import sampling

SMOKE = trainee_.resolve("qwen3(max_new_tokens=16)").replace(model="tiny")
QUESTIONS = [f"State the final answer to the following arithmetic problem: {a} + {b} =" for a, b in
             [(1, 2), (3, 4), (12, 7), (5, 5)]]


@pytest.fixture(autouse=True)
def fresh_process_state():
    engine.reset()  # as a new process starts
    yield
    engine.reset()


def sampler(loaded, fast: bool, **changes):
    return sampling.Sampler(loaded, SMOKE.replace(max_new_tokens=12, **changes), batch_size=4, fast=fast)


def test_a_healthy_engine_checks_itself_once_per_model_and_is_recorded(tiny_model):
    fast = sampler(tiny_model, True)
    assert fast.complete(QUESTIONS, greedy=True) == sampler(tiny_model, False).complete(QUESTIONS, greedy=True)
    fast.complete(QUESTIONS, k=2)
    status = engine.status()
    assert status["engine"] == "static" and status["why"] is None
    assert len(status["checks"]) == 1  # the first batch only: the model is trusted from then on
    check = status["checks"][0]
    assert check["identical_rows"] == check["rows"] == 4 and check["tokens"] == 12 and check["seconds"] >= 0


def corrupt(monkeypatch):
    """An engine whose tokens go wrong after the first, as decode_static did under transformers 5.17."""
    real = engine.decode_static

    def broken(model, ids, mask, config, eos):
        out = real(model, ids, mask, config, eos)
        return None if out is None else [row[:1] + [7] * (len(row) - 1) for row in out]
    monkeypatch.setattr(engine, "decode_static", broken)


def test_a_broken_engine_falls_back_is_recorded_and_gives_the_reference_results(tiny_model, monkeypatch, capfd):
    corrupt(monkeypatch)
    reference_greedy = sampler(tiny_model, False).complete(QUESTIONS, greedy=True)
    torch.manual_seed(5)
    reference_samples = sampler(tiny_model, False).complete(QUESTIONS, k=4)
    assert sampler(tiny_model, True).complete(QUESTIONS, greedy=True) == reference_greedy
    torch.manual_seed(5)
    assert sampler(tiny_model, True).complete(QUESTIONS, k=4) == reference_samples
    status = engine.status()
    assert status["engine"] == "generate" and "differed from generate()'s in 4 of 4 rows" in status["why"]
    assert [c["identical_rows"] for c in status["checks"]] == [0]  # checked once; the process then kept off it
    err = capfd.readouterr().err
    assert err.count("shortlist: the fast engine's greedy tokens differed") == 1 and len(err.strip().splitlines()) == 1


def test_outside_the_verified_transformers_the_reference_runs(tiny_model, monkeypatch):
    monkeypatch.setattr(engine.transformers, "__version__", "5.17.0")
    called = []
    monkeypatch.setattr(engine, "decode_static", lambda *a: called.append(1))
    assert sampler(tiny_model, True).complete(QUESTIONS, greedy=True) == \
        sampler(tiny_model, False).complete(QUESTIONS, greedy=True)
    assert called == [] and engine.status()["engine"] == "generate"
    assert "transformers 5.17.0 is not one the fast engine was verified on" in engine.status()["why"]


def test_fast_off_is_recorded_as_such(tiny_model):
    sampler(tiny_model, False).complete(QUESTIONS[:1], greedy=True)
    assert engine.status()["engine"] == "generate" and engine.status()["why"].startswith("fast off")


def test_the_pinned_transformers_is_the_verified_one():
    from pathlib import Path
    pins = (Path(__file__).resolve().parents[2] / "requirements.txt").read_text().split()
    assert f"transformers=={engine.VERIFIED[-1]}" in pins


@pytest.mark.parametrize("ids, clipped, repetitive", [
    ([5, 6, 2], False, False),  # ended with eos
    ([5] * 11 + [2], False, False),  # short: never called repetitive
    ([9] * 20, True, True),  # 'The-----...': cut and one token
    ([9, 8] * 10, True, False),  # cut, but no single token dominates
    ([9] * 17 + [1, 2], False, True),  # ended, yet mostly one token
])
def test_degeneration_is_read_from_token_ids(ids, clipped, repetitive):
    assert sampling.degeneration(ids, 20, [2]) == (clipped, repetitive)
