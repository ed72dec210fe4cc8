"""The fast engine's contract: it equals generate() or steps aside, says so, and is recorded."""
import types

import pytest
import torch

from shortlist import trainee as trainee_
from shortlist.generation import engine
from shortlist.generation import sampling

SMOKE = trainee_.resolve("qwen3(max_new_tokens=16)").replace(model="tiny").for_source("reasoning_gym")
QUESTIONS = [f"State the final answer to the following arithmetic problem: {a} + {b} =" for a, b in
             [(1, 2), (3, 4), (12, 7), (5, 5)]]


@pytest.fixture(autouse=True)
def fresh_process_state():
    engine.reset()  # as a new process starts
    yield
    engine.reset()


def sampler(loaded, fast: bool, batch_size: int = 4):
    return sampling.Sampler(loaded, SMOKE.replace(max_new_tokens=12), batch_size=batch_size, fast=fast)


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

    def broken(model, ids, mask, config, eos, **kw):
        out = real(model, ids, mask, config, eos, **kw)
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


# Four more, 8 rows. Where a test plants a tie it plants it relative to the tokens the reference
# actually picks on this machine (tiny's greedy answers differ between processors and builds), at
# STEP in chosen rows, so each asserts the check's behaviour rather than tiny's exact completions.
EIGHT = QUESTIONS + [f"State the final answer to the following arithmetic problem: {a} + {b} =" for a, b in
                     [(9, 9), (2, 8), (6, 1), (4, 4)]]
STEP = 1  # each row's second token (after tiny's '<answer>'): a step the engine decodes, not the prefill


def spare(picks: list[list[int]], vocab: int) -> int:
    """A token above every planted pick that the reference never picks: at an exact tie argmax keeps
    the lower id, so the reference keeps its own pick and only a nudged engine takes the spare one."""
    used = {t for row in picks for t in row}
    token = max(t for t in range(vocab) if t not in used)
    assert all(row[STEP] < token for row in picks), "no spare token above the picks at STEP"
    return token


@pytest.fixture
def fast_only(tiny_model, monkeypatch):
    """Hooks on tiny's lm_head for the duration of a test; each is told whether the fast engine is
    the one running (decode_static) and the decode step, so a test can make the two decoders
    compute different logits where it wants. Yields install, picks and vocab: picks are the reference's
    greedy tokens for EIGHT on this machine, each row up to and including its end."""
    running = {"fast": False, "step": -1}
    real = engine.decode_static

    def flagged(*args, **kw):
        running["fast"] = True
        try:
            return real(*args, **kw)
        finally:
            running["fast"] = False
    monkeypatch.setattr(engine, "decode_static", flagged)

    def count(module, args, kwargs):  # the prefill (the whole prompt) is step 0, each token after one more
        ids = kwargs["input_ids"] if "input_ids" in kwargs else args[0]
        running["step"] = 0 if ids.shape[-1] > 1 else running["step"] + 1
    handles = [tiny_model.model.register_forward_pre_hook(count, with_kwargs=True)]

    def install(hook):
        handles.append(tiny_model.model.lm_head.register_forward_hook(
            lambda module, args, logits: hook(logits.clone(), running["fast"], running["step"])))

    seen = []
    install(lambda logits, fast, step: seen.append(logits[:, -1].argmax(-1).tolist()) or logits)
    sampler(tiny_model, False, batch_size=8).complete(EIGHT, greedy=True)
    handles.pop().remove()
    engine.reset()
    ends = set(tiny_model.model.generation_config.eos_token_id or []) | {tiny_model.model.config.eos_token_id}
    picks = []
    for row in zip(*seen):
        end = next((i for i, t in enumerate(row) if t in ends), len(row) - 1)
        picks.append(list(row[:end + 1]))
    assert all(len(row) > STEP for row in picks), "tiny ended a row before STEP"
    yield types.SimpleNamespace(install=install, picks=picks, vocab=tiny_model.model.config.vocab_size)
    for handle in handles:
        handle.remove()


def plant_tie(planting, rows, nudge: float, gap: float = 0.0, lower: float = 0.0) -> int:
    """Logits where, at STEP in rows, a spare token is always gap margins below the row's best in
    both decoders (at gap 0 the reference keeps its own pick, the lower id), and the fast engine's
    spare token is nudge margins higher and its best lower margins lower, so that it picks the
    spare one where it outscores the best. Returns the spare token."""
    token = spare(planting.picks, planting.vocab)

    def hook(logits, fast, step):
        if step != STEP:
            return logits
        for row in rows:
            scores = logits[row]  # (positions, vocab); the last position is the one picked from
            margin = engine.TIE_RELATIVE * scores.abs().amax(-1)
            best = scores.masked_fill(torch.arange(scores.shape[-1]) == token, float("-inf")).argmax(-1, keepdim=True)
            scores[..., token] = scores.gather(-1, best).squeeze(-1) - gap * margin
            if fast:
                scores[..., token] += nudge * margin
                scores.scatter_add_(-1, best, -lower * margin[..., None])
        return logits
    planting.install(hook)
    return token


def test_a_near_tie_is_recorded_and_counted_and_the_engine_keeps_serving(tiny_model, fast_only):
    picks = fast_only.picks
    plant_tie(fast_only, [0], nudge=0.25)  # within the margin: what fp32 rounding can do
    reference = sampler(tiny_model, False, batch_size=8).complete(EIGHT, greedy=True)
    fast = sampler(tiny_model, True, batch_size=8).complete(EIGHT, greedy=True)
    assert fast[1:] == reference[1:] and fast[0] != reference[0]  # served by the engine, the tie resolved its way
    status = engine.status()
    assert status["engine"] == "static" and status["why"] is None
    check, = status["checks"]
    assert check["passed"] and (check["identical_rows"], check["tied_rows"], check["differing_rows"]) == (7, 1, 0)
    tie, = check["ties"]
    assert (tie["row"], tie["step"], tie["gap"]) == (0, STEP, 0.0) and 0 < tie["margin"] < 1e-2
    assert check["compared_tokens"] == sum(map(len, picks[1:])) + STEP  # the tied row counts up to its tie
    assert check["max_drift"] < engine.TIE_RELATIVE / 100  # where tokens agree the logits agree far more closely


def test_where_the_reference_is_indifferent_but_the_engine_computes_otherwise_it_fails(tiny_model, fast_only):
    picks = fast_only.picks
    token = plant_tie(fast_only, [0], nudge=4)  # the reference ties exactly; the engine is off by four margins
    assert sampler(tiny_model, True, batch_size=8).complete(EIGHT, greedy=True) == \
        sampler(tiny_model, False, batch_size=8).complete(EIGHT, greedy=True)
    status = engine.status()
    assert status["engine"] == "generate" and "differed from generate()'s in 1 of 8 rows" in status["why"]
    check, = status["checks"]
    assert not check["passed"] and check["tied_rows"] == 0
    assert [(d["row"], d["step"], d["gap"], d["ours"], d["theirs"]) for d in check["differences"]] == \
        [(0, STEP, 0.0, token, picks[0][STEP])]


def test_where_the_reference_is_not_indifferent_a_close_engine_still_fails(tiny_model, fast_only):
    # the reference prefers its pick by 1.5 margins; the engine's two scores are each 0.8 margins off,
    # the most a tie allows, in the direction that flips its pick: a difference the reference would not make
    plant_tie(fast_only, [0], nudge=0.8, gap=1.5, lower=0.8)
    sampler(tiny_model, True, batch_size=8).complete(EIGHT, greedy=True)
    check, = engine.status()["checks"]
    assert engine.status()["engine"] == "generate" and not check["passed"] and check["tied_rows"] == 0
    difference, = check["differences"]
    assert (difference["row"], difference["step"]) == (0, STEP) and difference["disagreement"] <= difference["margin"]
    assert difference["gap"] == pytest.approx(1.5 * difference["margin"], rel=1e-3)


def test_a_token_the_engine_itself_ranks_lower_fails_even_within_the_margin(tiny_model, fast_only, monkeypatch):
    token = plant_tie(fast_only, [0], nudge=0, gap=0.5)  # both decoders: the pick half a margin above
    flagged = engine.decode_static

    def swapped(*args, **kw):  # ... and the engine emits the spare token all the same, where its scores say not
        out = flagged(*args, **kw)
        out[0][STEP] = token
        return out
    monkeypatch.setattr(engine, "decode_static", swapped)
    sampler(tiny_model, True, batch_size=8).complete(EIGHT, greedy=True)
    check, = engine.status()["checks"]
    assert engine.status()["engine"] == "generate" and check["tied_rows"] == 0
    difference, = check["differences"]
    assert (difference["row"], difference["step"], difference["ours"]) == (0, STEP, token)
    assert difference["gap"] <= difference["margin"] and difference["disagreement"] < difference["margin"] / 100


def test_ties_in_more_than_a_quarter_of_the_rows_fail(tiny_model, fast_only):
    plant_tie(fast_only, [2, 3, 7], nudge=0.25)  # each one a tie, but in 3 of 8 rows
    sampler(tiny_model, True, batch_size=8).complete(EIGHT, greedy=True)
    status = engine.status()
    assert status["engine"] == "generate" and "at near-ties in 3 of 8 rows, more than the 25%" in status["why"]
    check, = status["checks"]
    assert not check["passed"] and [t["row"] for t in check["ties"]] == [2, 3, 7] and check["differing_rows"] == 0


def test_a_wrong_logit_with_a_clear_margin_fails(tiny_model, fast_only):
    def wrong(logits, fast, step):  # the fast engine's '8' a tenth of the logit scale too high
        if fast:
            logits[..., 28] += 0.1 * logits.abs().amax(-1)
        return logits
    fast_only.install(wrong)
    sampler(tiny_model, True, batch_size=8).complete(EIGHT, greedy=True)
    status = engine.status()
    check, = status["checks"]
    assert status["engine"] == "generate" and not check["passed"] and check["tied_rows"] == 0
    assert check["differing_rows"] >= 1 and all(d["ours"] == 28 for d in check["differences"])
    # the engine's own scores are a tenth of the scale (about 400 margins) off: what the test plants, on any build
    # (the reference's gap between its pick and '8' is whatever a build's weights make it, up to that tenth)
    assert all(d["disagreement"] > 10 * d["margin"] for d in check["differences"])


def test_a_shifted_position_fails(tiny_model, monkeypatch):
    real = engine.decode_static

    def one_further(module, args, kwargs):  # a decode step's position one too far, as an off-by-one would
        step = kwargs["position_ids"].shape[-1] == 1  # (a shift of every position, prompt too, RoPE cannot see)
        return args, kwargs | {"position_ids": kwargs["position_ids"] + 1} if step else kwargs

    def shifted(model, ids, mask, config, eos, **kw):
        hook = model.register_forward_pre_hook(one_further, with_kwargs=True)
        try:
            return real(model, ids, mask, config, eos, **kw)
        finally:
            hook.remove()
    monkeypatch.setattr(engine, "decode_static", shifted)
    sampler(tiny_model, True, batch_size=8).complete(EIGHT, greedy=True)
    status = engine.status()
    check, = status["checks"]
    assert status["engine"] == "generate" and not check["passed"] and check["differing_rows"] >= 1
    assert check["tied_rows"] == 0  # even where the reference was close to indifferent, the numbers were not close
    assert all(d["disagreement"] is None or d["disagreement"] > d["margin"] for d in check["differences"])


def test_garbage_logits_fail(tiny_model, fast_only):
    def garbage(logits, fast, step):  # the fast engine's first row computes NaN
        if fast:
            logits[0] = float("nan")
        return logits
    fast_only.install(garbage)
    sampler(tiny_model, True, batch_size=8).complete(EIGHT, greedy=True)
    check, = engine.status()["checks"]
    assert engine.status()["engine"] == "generate" and not check["passed"] and check["identical_rows"] == 7
    assert [(d["row"], d["step"], d["disagreement"]) for d in check["differences"]] == [(0, 0, None)]


def test_a_row_cut_short_is_a_difference_not_a_tie():
    # two steps of one row, the same scores from both decoders: 5 then 9 is each step's clear best
    tops = ([[[2.0, 1.0]], [[2.0, 1.0]]], [[[5, 9]], [[9, 5]]], [[2.0], [2.0]])
    assert engine.compare([[5, 9]], [[5, 9]], tops, tops)[0]["passed"]
    findings, why = engine.compare([[5]], [[5, 9]], tops, tops)  # the engine stopped where generate() went on
    assert not findings["passed"] and findings["differences"][0]["step"] == 1 and "in 1 of 1 rows" in why


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


class _MadeFromNumbers(torch.overrides.TorchFunctionMode):
    """Counts torch.tensor() calls made by engine.py's own code: on a GPU each is a blocking copy to the device."""

    def __init__(self):
        super().__init__()
        self.made = 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        import sys
        if func is torch.tensor and sys._getframe(1).f_code.co_filename == engine.__file__:
            self.made += 1
        return func(*args, **(kwargs or {}))


def _batch(loaded, new: int, greedy: bool):
    """The smoke questions, left-padded, and a config of `new` tokens (sampled as GRPO does unless greedy)."""
    config = sampling.generation_config(loaded.model, loaded.tokenizer, SMOKE.replace(max_new_tokens=new),
                                        **({"greedy": True, "fast": True} if greedy else {}))
    ids, mask = sampling.left_pad(sampling.prompt_ids(loaded.tokenizer, SMOKE, QUESTIONS), loaded.tokenizer.pad_token_id)
    return ids, mask, config


def test_the_decode_loop_makes_no_tensor_from_a_python_number_per_step(tiny_model):
    """A tensor made from Python numbers inside the loop makes the host wait for the GPU every step
    (a blocking host-to-device copy), so the loop's own time adds to the GPU's instead of hiding behind it.
    The count must not grow with the number of steps."""
    made = {}
    for new in (4, 12):
        ids, mask, config = _batch(tiny_model, new, greedy=True)
        with _MadeFromNumbers() as counter:
            out = engine.decode_static(tiny_model.model, ids, mask, config, eos=[])  # no end: every step is decoded
        assert all(len(row) == new for row in out)
        made[new] = counter.made
    assert made[4] == made[12] == 2, made  # the pad and eos ids, once a call


def _waits(loaded, new: int, monkeypatch) -> int:
    """How often one sampled decode of `new` steps read a number back from its tensors (aten::_local_scalar_dense,
    behind .item() and bool(): on a GPU each is a wait for it), looks at the end left out."""
    monkeypatch.setattr(engine, "LOOK_EVERY_ON_CPU", 10 ** 6)
    ids, mask, config = _batch(loaded, new, greedy=False)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        out = engine.decode_static(loaded.model, ids, mask, config, eos=[])
    assert config.do_sample and all(len(row) == new for row in out)
    return sum(e.name == "aten::_local_scalar_dense" for e in profile.events())


def test_the_sampled_decode_loop_does_not_wait_for_the_device_per_step(tiny_model, monkeypatch):
    """torch.multinomial checks its input with two .item() calls; the loop draws as it does without them."""
    assert _waits(tiny_model, 4, monkeypatch) == _waits(tiny_model, 12, monkeypatch) > 0  # the last look only


@pytest.mark.parametrize("poison", [float("nan"), float("-inf")])
def test_scores_multinomial_would_refuse_raise_as_generate_would(tiny_model, poison):
    """nan scores give nan probabilities, all -inf a row that sums to 0 (after softmax: nan too): generate()'s
    multinomial raises; the loop must not sample garbage from them."""
    ids, mask, config = _batch(tiny_model, 6, greedy=False)
    hook = tiny_model.model.lm_head.register_forward_hook(lambda module, args, out: torch.full_like(out, poison))
    try:
        with pytest.raises(RuntimeError, match="probability tensor contains"):
            engine.decode_static(tiny_model.model, ids, mask, config, eos=[])
        with pytest.raises(RuntimeError, match="probability tensor contains"):
            torch.multinomial(torch.softmax(torch.full((2, 5), poison), dim=-1), 1)  # what generate() meets
    finally:
        hook.remove()
