"""The fast decode engine, and the checks that keep it from ever being silently wrong.

decode_static() does what generate()'s sampling loop does, op for op, on a static KV cache whose
decode step replays as a CUDA graph. It leans on generate()'s private helpers (models/hf_internals.py), so
it is right only where it was checked: under transformers 5.17 it decoded 'The-----...' for every completion
(0 of 32 greedy completions equal to generate()'s), under 5.24 32 of 32. Hence two gates:
- a version gate: outside VERIFIED it is never used;
- a self-check: the first time it serves a model in a process, it decodes the batch greedily for
  CHECK_TOKENS tokens both ways and compares token ids. Where a row first differs, it reads both
  decoders' scores there (compare()): a near-tie, where the reference itself is indifferent to
  within TIE_RELATIVE of the logit scale and the two decoders computed the same scores to within
  that too, is fp32 rounding, recorded and counted; any other difference, or near-ties in more than
  MAX_TIED_SHARE of the rows, makes it say so in one line, and the process uses generate() from
  then on.
status() says which engine ran and why: over the whole process, or over one phase (phase() yields a
Record that counts only what is asked while it is open: an evaluation, a training); predictions.json,
each family result and the report record it.

Why TIE_RELATIVE = 2**-12. Two correct fp32 forwards of the same tokens differ only in the order of
their sums (cuBLAS tiles and split-K, fused or compiled norms, attention kernels, a static vs a
dynamic cache). One reduction of K terms in another order moves its result by about sqrt(K)
roundings, u = 2**-24 each, relative to its magnitude; K <= 4096 in every width here (Qwen3-0.6B's
MLP is 3072 wide), so sqrt(K) <= 2**6. A layer adds its own such error to the residual stream and
passes the incoming one on with a gain near one (residual plus norm), so the error grows about
linearly with depth: <= 2**5 for the <= 32 layers here (28 for Qwen3-0.6B, 30 for SmolLM2), and
about 2**1 for the several reductions a layer makes (attention, MLP, norms). So the logits of two
correct decoders are expected within 2**-24 * 2**6 * 2**5 * 2**1 = 2**-12 of the logit scale (the
largest |score| at that position, ~15-40 for a small LM: 4e-3 to 1e-2 in logits, a few thousand
ulps of the scale); this is an upper estimate, measured differences are usually far below it
(max_drift in each check says how far below: 1.6e-6 of the scale on the H200, SmolLM2 and the
Qwen3-0.6B shape, bench/results/engine_check.h200.drift.txt). A broken engine moves logits by a
sizeable share of the scale (a decode position off by one: 6% of it on the tiny model, 250
margins) and picks tokens the reference ranks clearly lower.
"""
from __future__ import annotations

import math
import sys
import time
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field

import torch
import transformers

from shortlist.generation import decode_attention
from shortlist.generation.multinomial import draw, refused, valid
from shortlist.models import hf_internals, precision

VERIFIED = ("5.24.0",)  # transformers versions on which decode_static equalled generate() token for token
CHECK_TOKENS = 24  # greedy tokens compared per row by the self-check
TIE_RELATIVE = 2 ** -12  # fp32 disagreement of two correct decoders, relative to the logit scale (above)
# A correct engine flips a row only where the top two logits sit within its actual rounding error, so
# in a few percent of rows at most (8 of 192 greedy rows of SmolLM2 in one CPU run, 0 of 896 on the H200): a
# quarter of the rows tied is not rounding, and a broken engine cannot hide behind "ties" in most rows
MAX_TIED_SHARE = 0.25
TIE_TOP = 4  # scores kept per row and step to judge a difference (the pair that flipped must be among them)
STOP_CHECK_EVERY = 16  # decode steps between looks at whether every row has finished (each look syncs the GPU)
# on a CPU a look costs nothing, and looking every step, as generate() does there, keeps the random stream
# exactly generate()'s (tests compare seeded samples)
LOOK_EVERY_ON_CPU = 1
# Processors that read only the scores of the current step: a static loop can apply them as they are
_STEP_ONLY = ("TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper")


@dataclass
class Record:
    """What the fast engine was asked and did over a stretch of a process: the whole process, or one phase."""
    requested: int = 0  # static-cache requests
    served: int = 0  # of them, those the static engine decoded
    checks: list = field(default_factory=list)  # the self-checks made meanwhile

    def status(self) -> dict:
        """Which engine served these requests, and why; the self-checks made meanwhile."""
        if not self.requested:
            why = "fast off: nothing asked for the static engine"
        else:
            why = gate() or (None if self.served else "a logits processor the static loop cannot run")
        return {"engine": "generate" if why else "static", "why": why, "transformers": transformers.__version__,
                "checks": list(self.checks), "fp32_precision": precision.state()}  # as it is when read


@dataclass
class _Process:
    """What holds for the whole process: the models whose check passed, the fallback once taken (why),
    the process's record, and the phases open now (each request counts in them and in the process's)."""
    checked: weakref.WeakSet = field(default_factory=weakref.WeakSet)
    fallback: str | None = None
    record: Record = field(default_factory=Record)
    phases: list = field(default_factory=list)

    def records(self) -> list[Record]:
        return [self.record, *self.phases]


_this = _Process()


@contextmanager
def quiet(greedy: bool = True):
    """Greedy keeps GRPO's sampling fields (only do_sample flips), which transformers warns are unused."""
    verbosity = transformers.utils.logging.get_verbosity()
    if greedy:
        transformers.utils.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.utils.logging.set_verbosity(verbosity)


def gate() -> str | None:
    """Why the fast engine may not run in this process, or None."""
    if transformers.__version__ not in VERIFIED:
        return (f"transformers {transformers.__version__} is not one the fast engine was verified on "
                f"({', '.join(VERIFIED)})")
    return _this.fallback


def usable(model) -> str | None:
    """Why the fast engine may not serve this model in this process, or None."""
    return gate() or hf_internals.check(model)


@contextmanager
def phase():
    """A phase's own Record (an evaluation, a training): it counts only the requests made while it is open."""
    record = Record()
    _this.phases.append(record)
    try:
        yield record
    finally:
        _this.phases.remove(record)


def status() -> dict:
    """Which engine served this process's static-cache requests, and why; the self-checks it made. A
    fallback, once taken, holds for the rest of the process."""
    return _this.record.status()


def reset() -> None:
    """Forget every check and fallback (tests; a new process starts this way)."""
    global _this
    _this = _Process()


def serve(model, ids: torch.Tensor, mask: torch.Tensor, config, eos: list[int]) -> list[list[int]] | None:
    """Completion ids from the fast engine, or None where generate() must serve this batch."""
    for record in _this.records():
        record.requested += 1
    if usable(model):
        return None
    if model not in _this.checked and not self_check(model, ids, mask, config, eos):
        return None
    decoded = decode_static(model, ids, mask, config, eos)
    if decoded is not None:
        for record in _this.records():
            record.served += 1
    return decoded


def self_check(model, ids, mask, config, eos) -> bool:
    """Greedy, CHECK_TOKENS tokens, this batch (so the compiled shapes are the ones about to be used):
    the static engine against generate() with a dynamic cache, eager, both keeping their top scores
    per step. True if every row is identical or differs only at a near-tie (compare())."""
    started = time.perf_counter()
    steps = min(CHECK_TOKENS, config.max_new_tokens)
    with quiet():
        fast = _copy(config)
        fast.update(do_sample=False, max_new_tokens=steps)
        reference = _copy(fast)
        reference.update(cache_implementation=None, disable_compile=True, max_cache_len=None)
        ours_tops, theirs_tops = [], _Recorder()
        ours = decode_static(model, ids, mask, fast, eos, tops=ours_tops)
        if ours is None:  # a processor the loop cannot run: generate() serves, nothing to compare
            return False
        generated = model.generate(input_ids=ids, attention_mask=mask, generation_config=reference,
                                   logits_processor=transformers.LogitsProcessorList([theirs_tops]))
        theirs = completion_ids(generated, ids.shape[1], eos)
    findings, why = compare(ours, theirs, _lists(ours_tops), _lists(theirs_tops.tops))
    record = {"model": type(model).__name__, "tokens": steps, **findings,
              "seconds": round(time.perf_counter() - started, 3)}
    for kept in _this.records():
        kept.checks.append(record)
    if why:
        _this.fallback = why
        print(f"shortlist: {why}; using generate() for the rest of this process", file=sys.stderr, flush=True)
        return False
    _this.checked.add(model)
    return True


class _Recorder(transformers.LogitsProcessor):
    """Keeps the top scores of each step of generate()'s greedy loop and changes nothing. Passed
    last (generate() appends a caller's processors after its own; greedy adds no warpers), it sees
    the scores generate()'s argmax picks from."""

    def __init__(self):
        self.tops = []

    def __call__(self, input_ids, scores):
        self.tops.append(top_scores(scores))
        return scores


def top_scores(scores: torch.Tensor) -> tuple:
    """(values, ids) of a step's TIE_TOP best scores per row, best first, and each row's logit scale."""
    values, ids = scores.topk(min(TIE_TOP, scores.shape[-1]), dim=-1)
    return values, ids, scores.abs().amax(dim=-1)


def _lists(tops: list[tuple]) -> tuple[list, list, list]:
    """Steps of top_scores as nested lists [step][row]..., read on the CPU once."""
    return tuple(torch.stack([step[i] for step in tops]).tolist() for i in range(3))


def compare(ours: list[list[int]], theirs: list[list[int]], ours_tops: tuple,
            theirs_tops: tuple) -> tuple[dict, str | None]:
    """The check's findings, and why the engine fails it (None: it passes).

    A row identical to generate()'s is checked over all its tokens. A row that first differs at step
    t is a tie where, at t, the reference's own pick a and the engine's own pick b are both among
    each decoder's top TIE_TOP, every score is finite, the reference prefers a over b by at most the
    margin (TIE_RELATIVE of the reference's logit scale there) and each decoder's scores for a and b
    agree with the other's to within the margin. From a tie on the two sequences diverge for good,
    so the row counts as checked up to t (its t identical tokens, and its scores at t); any other
    difference (a clear margin, a pick that is not the engine's own top, garbage) fails, and so do
    ties in more than MAX_TIED_SHARE of the rows: a correct engine is near-tied rarely."""
    ties, differences, compared, drift = [], [], 0, 0.0
    for row, (mine, ref) in enumerate(zip(ours, theirs)):
        t = next((i for i, (x, y) in enumerate(zip(mine, ref)) if x != y), None)
        if t is None and len(mine) != len(ref):  # one stopped where the other went on: never a tie
            t = min(len(mine), len(ref))
        for step in range(len(mine) if t is None else t):
            drift = max(drift, _drift(ours_tops, theirs_tops, step, row))
        if t is None:
            compared += len(mine)
            continue
        tie, numbers = _near_tie(ours_tops, theirs_tops, t, row, mine, ref)
        entry = {"row": row, "step": t, **numbers}
        if tie:
            ties.append(entry)
            compared += t
        else:
            differences.append(entry | {"ours": mine[t] if t < len(mine) else None,
                                        "theirs": ref[t] if t < len(ref) else None})
    rows = len(ours)
    findings = {"rows": rows, "identical_rows": rows - len(ties) - len(differences), "tied_rows": len(ties),
                "differing_rows": len(differences), "compared_tokens": compared, "ties": ties,
                "differences": differences, "max_drift": drift, "tie_margin_relative": TIE_RELATIVE,
                "max_tied_share": MAX_TIED_SHARE}
    why = None
    if differences:
        why = f"the fast engine's greedy tokens differed from generate()'s in {len(differences)} of {rows} rows" + \
            (f" (and at near-ties in {len(ties)} more)" if ties else "")
    elif len(ties) > MAX_TIED_SHARE * rows:
        why = (f"the fast engine's greedy tokens differed from generate()'s at near-ties in {len(ties)} of {rows} "
               f"rows, more than the {MAX_TIED_SHARE:.0%} fp32 rounding explains")
    return findings | {"passed": why is None}, why


def _near_tie(ours_tops, theirs_tops, t: int, row: int, mine: list[int], ref: list[int]) -> tuple[bool, dict]:
    """Whether the first difference, at step t, is a tie, and what it is: the reference's gap between
    its pick and ours, how far apart the two decoders' scores of those two tokens are (disagreement),
    and the margin (None where a number is missing: a token beyond a decoder's top, not finite)."""
    if t >= len(mine) or t >= len(ref):
        return False, {"gap": None, "disagreement": None, "margin": None}
    a, b = ref[t], mine[t]
    theirs_a, theirs_b, theirs_best, scale = _scores(theirs_tops, t, row, a, b)
    ours_a, ours_b, ours_best, _ = _scores(ours_tops, t, row, a, b)
    margin = TIE_RELATIVE * scale if _finite(scale) else None
    gap = theirs_a - theirs_b if _finite(theirs_a, theirs_b) else None
    apart = max(abs(ours_a - theirs_a), abs(ours_b - theirs_b)) if _finite(ours_a, ours_b, theirs_a, theirs_b) \
        else None
    tie = (None not in (margin, gap, apart) and theirs_a == theirs_best and ours_b == ours_best
           and 0 <= gap <= margin and apart <= margin)
    return tie, {"gap": gap, "disagreement": apart, "margin": margin}


def _scores(tops, step: int, row: int, *tokens: int) -> tuple:
    """Each token's score at (step, row) where it is among the kept top ones (else None), the best
    score and the logit scale; None throughout where the decoder made no such step."""
    values, ids, scale = tops
    if step >= len(values):
        return (None,) * (len(tokens) + 2)
    kept = dict(zip(ids[step][row], values[step][row]))
    return (*(kept.get(token) for token in tokens), values[step][row][0], scale[step][row])


def _drift(ours_tops, theirs_tops, step: int, row: int) -> float:
    """How far apart the two decoders' best scores are where they picked the same token, relative
    to the logit scale (0 where either lacks the step or a number is not finite)."""
    if step >= len(ours_tops[0]) or step >= len(theirs_tops[0]):
        return 0.0
    ours, theirs, scale = ours_tops[0][step][row][0], theirs_tops[0][step][row][0], theirs_tops[2][step][row]
    return abs(ours - theirs) / scale if _finite(ours, theirs, scale) and scale > 0 else 0.0


def _finite(*numbers) -> bool:
    return all(n is not None and math.isfinite(n) for n in numbers)


def _copy(config):
    import copy
    return copy.deepcopy(config)


def completion_ids(generated: torch.Tensor, prompt_width: int, eos: list[int]) -> list[list[int]]:
    """Each completion up to and including its first eos, as TRL masks them."""
    out = []
    for row in generated[:, prompt_width:].tolist():
        end = next((i for i, t in enumerate(row) if t in eos), len(row) - 1)
        out.append(row[:end + 1])
    return out


@torch.no_grad()
def decode_static(model, ids: torch.Tensor, mask: torch.Tensor, config, eos: list[int],
                  tops: list | None = None) -> list[list[int]] | None:
    """_decode_static with a single new token's attention as two matmuls (decode_attention.py)."""
    with decode_attention.engaged(model):
        return _decode_static(model, ids, mask, config, eos, tops)


def _decode_static(model, ids: torch.Tensor, mask: torch.Tensor, config, eos: list[int],
                   tops: list | None = None) -> list[list[int]] | None:
    """generate()'s sampling loop, for a static cache, without its per-step Python.

    On an H200 generate() spends ~6 ms a decode step around a compiled forward that needs far less
    (SmolLM2-135M, 32 rows). This loop does what generate()'s _sample does, op for op (the same
    logits processors, built by generate()'s own _get_logits_processor; softmax and multinomial's
    draw (multinomial.draw()), or argmax; finished rows fed the pad token), with inputs of one shape so the forward replays as a
    CUDA graph, and it checks for the end every STOP_CHECK_EVERY steps instead of every step.
    Returns None where it cannot stand in for generate(): a processor that reads earlier tokens
    (repetition penalty, minimum length...). With tops (a list), each step's top_scores of the
    scores it picks from are appended to it, for the self-check."""
    used = hf_internals.prepared(model, config)
    width = ids.shape[1]
    processors = hf_internals.processors(model, used, width, ids.device)
    if any(type(p).__name__ not in _STEP_ONLY for p in processors):
        return None
    rows, steps = ids.shape[0], used.max_new_tokens
    # the same shape again: the same tensors, so a captured CUDA graph replays and nothing re-records
    cache, length = hf_internals.static_cache(model, rows, max(width + steps, used.max_cache_len or 0))
    attention = torch.ones(rows, length, dtype=mask.dtype, device=ids.device)  # future slots: causality hides them
    attention[:, :width] = mask
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)  # as generate() derives them
    forward = hf_internals.forward(model, used, cache)
    pad = torch.tensor(used.pad_token_id, device=ids.device)
    eos_ids = torch.tensor(eos, device=ids.device)

    invalid = torch.zeros(rows, dtype=torch.bool, device=ids.device)  # rows torch.multinomial would refuse

    def pick(logits: torch.Tensor) -> torch.Tensor:
        scores = processors(ids, logits[:, -1].to(copy=True, dtype=torch.float32))
        if tops is not None:
            tops.append(top_scores(scores))
        if used.do_sample:
            probs = torch.nn.functional.softmax(scores, dim=-1)
            invalid.logical_or_(refused(probs))
            return draw(probs)
        return torch.argmax(scores, dim=-1)

    look_every = LOOK_EVERY_ON_CPU if ids.device.type == "cpu" else STOP_CHECK_EVERY
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, cache=cache,
                   cache_position=torch.arange(width, device=ids.device), use_cache=True, logits_to_keep=1).logits
    token = pick(logits)
    unfinished = ~torch.isin(token, eos_ids)
    # the slot each step writes, kept on the device and advanced there: a tensor made from a Python number each
    # step is a blocking host-to-device copy, which would make the host wait for the GPU every step and add the
    # loop's own time to the GPU's instead of hiding it (transformers 5.24's static cache finds its slot itself
    # and ignores this one for Llama- and Qwen3-like models; a model that reads it gets the right one)
    tokens, position, slot = [token], positions[:, -1:] + 1, torch.arange(width, width + 1, device=ids.device)
    for step in range(1, steps):
        if step % look_every == 0:  # one wait for the GPU: both flags at once
            going, bad = torch.stack([unfinished.any(), invalid.any()]).tolist()
            valid(bad)
            if not going:
                break
        logits = forward(input_ids=token[:, None], attention_mask=attention, position_ids=position, cache=cache,
                         cache_position=slot, use_cache=True).logits
        token = torch.where(unfinished, pick(logits), pad)
        unfinished &= ~torch.isin(token, eos_ids)
        tokens.append(token)
        position, slot = position + 1, slot + 1
    valid(bool(invalid.any()))
    return completion_ids(torch.cat([ids, torch.stack(tokens, dim=1)], dim=1), width, eos)
