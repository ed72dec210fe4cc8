"""The fast decode engine, and the checks that keep it from ever being silently wrong.

decode_static() does what generate()'s sampling loop does, op for op, on a static KV cache whose
decode step replays as a CUDA graph. It leans on generate()'s private helpers (hf_internals.py), so
it is right only where it was checked: under transformers 5.17 it decoded 'The-----...' for every completion
(0 of 32 greedy completions equal to generate()'s), under 5.24 32 of 32. Hence two gates:
- a version gate: outside VERIFIED it is never used;
- a self-check: the first time it serves a model in a process, it decodes the batch greedily for
  CHECK_TOKENS tokens both ways and compares token ids. On any mismatch it says so in one line
  and the process uses generate() from then on.
status() says which engine ran and why; predictions.json, each family result and the report
record it.
"""
from __future__ import annotations

import sys
import time
import weakref
from contextlib import contextmanager

import torch
import transformers

from shortlist.generation import hf_internals

VERIFIED = ("5.24.0",)  # transformers versions on which decode_static equalled generate() token for token
CHECK_TOKENS = 24  # greedy tokens compared per row by the self-check
STOP_CHECK_EVERY = 16  # decode steps between looks at whether every row has finished (each look syncs the GPU)
# Processors that read only the scores of the current step: a static loop can apply them as they are
_STEP_ONLY = ("TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper")

_checked: "weakref.WeakSet" = weakref.WeakSet()  # models whose check passed in this process
_state = {"fallback": None, "checks": [], "requested": 0, "served": 0}


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
    return _state["fallback"]


def usable(model) -> str | None:
    """Why the fast engine may not serve this model in this process, or None."""
    return gate() or hf_internals.check(model)


def status() -> dict:
    """Which engine served this process's static-cache requests, and why; the self-checks it made."""
    if not _state["requested"]:
        why = "fast off: nothing asked for the static engine"
    else:
        why = gate() or (None if _state["served"] else "a logits processor the static loop cannot run")
    engine = "generate" if why else "static"
    return {"engine": engine, "why": why, "transformers": transformers.__version__, "checks": list(_state["checks"])}


def reset() -> None:
    """Forget every check and fallback (tests; a new process starts this way)."""
    _checked.clear()
    _state.update(fallback=None, checks=[], requested=0, served=0)


def serve(model, ids: torch.Tensor, mask: torch.Tensor, config, eos: list[int]) -> list[list[int]] | None:
    """Completion ids from the fast engine, or None where generate() must serve this batch."""
    _state["requested"] += 1
    if usable(model):
        return None
    if model not in _checked and not self_check(model, ids, mask, config, eos):
        return None
    decoded = decode_static(model, ids, mask, config, eos)
    if decoded is not None:
        _state["served"] += 1
    return decoded


def self_check(model, ids, mask, config, eos) -> bool:
    """Greedy, CHECK_TOKENS tokens, this batch (so the compiled shapes are the ones about to be used):
    the static engine against generate() with a dynamic cache, eager. True if every token id agrees."""
    started = time.perf_counter()
    steps = min(CHECK_TOKENS, config.max_new_tokens)
    with quiet():
        fast = _copy(config)
        fast.update(do_sample=False, max_new_tokens=steps)
        reference = _copy(fast)
        reference.update(cache_implementation=None, disable_compile=True, max_cache_len=None)
        ours = decode_static(model, ids, mask, fast, eos)
        if ours is None:  # a processor the loop cannot run: generate() serves, nothing to compare
            return False
        theirs = completion_ids(model.generate(input_ids=ids, attention_mask=mask, generation_config=reference),
                                ids.shape[1], eos)
    same = sum(a == b for a, b in zip(ours, theirs))
    record = {"model": type(model).__name__, "rows": len(ours), "tokens": steps, "identical_rows": same,
              "seconds": round(time.perf_counter() - started, 3)}
    _state["checks"].append(record)
    if same != len(ours):
        _state["fallback"] = (f"the fast engine's greedy tokens differed from generate()'s in {len(ours) - same} "
                              f"of {len(ours)} rows")
        print(f"shortlist: {_state['fallback']}; using generate() for the rest of this process", file=sys.stderr,
              flush=True)
        return False
    _checked.add(model)
    return True


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
def decode_static(model, ids: torch.Tensor, mask: torch.Tensor, config, eos: list[int]) -> list[list[int]] | None:
    """generate()'s sampling loop, for a static cache, without its per-step Python.

    On an H200 generate() spends ~6 ms a decode step around a compiled forward that needs far less
    (SmolLM2-135M, 32 rows). This loop does what generate()'s _sample does, op for op (the same
    logits processors, built by generate()'s own _get_logits_processor; softmax and multinomial, or
    argmax; finished rows fed the pad token), with inputs of one shape so the forward replays as a
    CUDA graph, and it checks for the end every STOP_CHECK_EVERY steps instead of every step.
    Returns None where it cannot stand in for generate(): a processor that reads earlier tokens
    (repetition penalty, minimum length...)."""
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

    def pick(logits: torch.Tensor) -> torch.Tensor:
        scores = processors(ids, logits[:, -1].to(copy=True, dtype=torch.float32))
        if used.do_sample:
            return torch.multinomial(torch.nn.functional.softmax(scores, dim=-1), num_samples=1).squeeze(1)
        return torch.argmax(scores, dim=-1)

    # on a CPU a look costs nothing, and looking every step, as generate() does there, keeps the
    # random stream exactly generate()'s (tests compare seeded samples)
    look_every = 1 if ids.device.type == "cpu" else STOP_CHECK_EVERY
    logits = model(input_ids=ids, attention_mask=attention, position_ids=positions, cache=cache,
                   cache_position=torch.arange(width, device=ids.device), use_cache=True, logits_to_keep=1).logits
    token = pick(logits)
    unfinished = ~torch.isin(token, eos_ids)
    tokens, position = [token], positions[:, -1:] + 1
    for step in range(1, steps):
        if step % look_every == 0 and not bool(unfinished.any()):
            break
        logits = forward(input_ids=token[:, None], attention_mask=attention, position_ids=position, cache=cache,
                         cache_position=torch.tensor([width + step - 1], device=ids.device), use_cache=True).logits
        token = torch.where(unfinished, pick(logits), pad)
        unfinished &= ~torch.isin(token, eos_ids)
        tokens.append(token)
        position = position + 1
    return completion_ids(torch.cat([ids, torch.stack(tokens, dim=1)], dim=1), width, eos)
