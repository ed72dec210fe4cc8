"""torch.multinomial(probs, 1) without its waits: the sampled decode loop's draw (engine.py).

multinomial checks its input with two .item() calls (pytorch#108968), each a wait for the GPU at every
decode step. draw() is its own fast path for one sample, the same algorithm on the same random stream, so
the same tokens (the contract, matches_torch(): tests/shortlist/test_multinomial.py on the CPU, and
bench/decode_attention.py's draw_equals_multinomial on a GPU); refused() flags on the device the rows
multinomial would refuse, and valid() raises multinomial's refusal where the loop waits anyway (its looks,
its end).
"""
from __future__ import annotations

import math

import torch


def draw(probs: torch.Tensor) -> torch.Tensor:
    """One token per row, as torch.multinomial(probs, 1) draws it, without its checks: the same algorithm
    (argmax of probs / q, q ~ Exp(1): the Gumbel-max trick) on the same random stream, so the same tokens
    (tests). multinomial checks its input with two .item() calls, each a wait for the GPU; the loop checks
    refused() rows instead at its looks, where it waits anyway."""
    return (probs / torch.empty_like(probs).exponential_(1)).argmax(dim=-1)


def refused(probs: torch.Tensor) -> torch.Tensor:
    """Rows torch.multinomial would refuse: an inf, a nan or a negative probability, or none above 0."""
    return ~((probs.amax(dim=-1) < math.inf) & (probs.amin(dim=-1) >= 0)) | (probs.sum(dim=-1) == 0)


def valid(bad: bool) -> None:
    """Raise what generate() would have raised (torch.multinomial's own refusal) where a sampled row was invalid."""
    if bad:
        raise RuntimeError("the fast engine's sampling: probability tensor contains either `inf`, `nan` or element < 0, "
                           "or a row sums to 0 (torch.multinomial, and so generate(), refuses such scores)")


def matches_torch(device: str = "cpu", rows: int = 64, vocabulary: int = 151936, seed: int = 7) -> bool:
    """draw() against torch.multinomial(probs, 1) on this device: the same tokens from the same seed, and the
    same random state after (a draw that took more or fewer numbers from the stream would shift every later
    step's). Peaked rows (softmax of 4 x N(0, 1)) over a vocabulary of Qwen3's size by default."""
    probs = torch.softmax(4 * torch.randn(rows, vocabulary, generator=torch.Generator().manual_seed(0)), -1).to(device)
    torch.manual_seed(seed)
    theirs, after_theirs = torch.multinomial(probs, 1).squeeze(1), torch.rand(4, device=device)
    torch.manual_seed(seed)
    ours, after_ours = draw(probs), torch.rand(4, device=device)
    return bool(torch.equal(ours, theirs) and torch.equal(after_ours, after_theirs))
