"""Several families' LoRA adapters on one base model, in one batch: each family's rows through its own adapter.

Issue 39's lever for generation. Today each family trains in a process of its own and generates its 32 rows
through its own merged copy of the model (proof/fast_grpo.InferenceCopy): 8 families under MPS spend 2.7 s of a
4.2 s step generating (bench/results/throughput.8mps100.h100.txt), each decode step a CUDA graph of small
kernels at 32 rows. Grouped, the 8 families' 256 rows decode together: the base weights are read once per token
for all of them, and each family's low-rank update is two batched matmuls over its own rows.

group() turns a plain model into one that serves F families: every adapted nn.Linear becomes a GroupedLoRA whose
forward is, for family f's rows,
    y = x W^T + b + scale * (x A_f^T) B_f^T
(PEFT's LoRA: A_f is lora_A's weight, r x in; B_f is lora_B's, out x r; scale = lora_alpha / r). The rows of a
batch are the families' in order, an equal number each (the batch is F groups of rows, of the size group() was
given: a batch split or padded by a caller is refused, never read as other families' rows), so one reshape gives each
family its rows and the whole forward has one shape: the engine (engine.decode_static) replays it as a CUDA graph.
The adapters are buffers written in place (load()), so a captured graph sees new weights without re-recording.

What it computes equals, row for row, each family's merged model (W + scale B_f A_f) up to fp32's order of sums:
tests/shortlist/test_grouped_lora.py holds it to that, logits and greedy completions. Sampled completions are then
the same distribution, not the same draws (one random stream serves all rows): a batched run's results are
equivalent to one family per process, not equal (bench/throughput.py's equivalence).
"""
from __future__ import annotations

import torch

Adapter = dict[str, tuple[torch.Tensor, torch.Tensor]]  # a plain model's module name -> (A: r x in, B: out x r)


class GroupedLoRA(torch.nn.Module):
    """An nn.Linear shared by `families` families, each with its own rank-r update: every batch is the families'
    rows_per_family rows each, in family order."""

    def __init__(self, base: torch.nn.Linear, families: int, rows_per_family: int, rank: int, scale: float):
        super().__init__()
        self.base, self.families, self.rows_per_family, self.scale = base, families, rows_per_family, scale
        weight = base.weight
        self.register_buffer("A", torch.zeros(families, rank, base.in_features, dtype=weight.dtype, device=weight.device))
        self.register_buffer("B", torch.zeros(families, base.out_features, rank, dtype=weight.dtype, device=weight.device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        if rows != self.families * self.rows_per_family:  # a batch split or padded would give rows another's update
            raise ValueError(f"a batch of {rows} rows where this grouped model serves exactly {self.families} families x "
                             f"{self.rows_per_family} rows, in family order")
        y = self.base(x)
        groups = x.reshape(self.families, -1, x.shape[-1])  # family f's rows, every position, one after another
        delta = torch.bmm(torch.bmm(groups, self.A.transpose(1, 2)), self.B.transpose(1, 2))
        return y + self.scale * delta.reshape(y.shape)


def group(model: torch.nn.Module, names: list[str], families: int, rows_per_family: int, rank: int,
          scale: float) -> torch.nn.Module:
    """The model (changed in place) with each named nn.Linear made a GroupedLoRA for `families` families of
    rows_per_family rows each, every adapter zero (each family the base model) until load() writes it."""
    modules = dict(model.named_modules())
    missing = [n for n in names if not isinstance(modules.get(n), torch.nn.Linear)]
    if missing:
        raise ValueError(f"not nn.Linear modules of this model: {', '.join(missing[:3])}")
    for name in names:
        parent, _, child = name.rpartition(".")
        setattr(modules[parent] if parent else model, child,
                GroupedLoRA(modules[name], families, rows_per_family, rank, scale))
    return model


@torch.no_grad()
def load(model: torch.nn.Module, family: int, adapter: Adapter) -> int:
    """Write one family's adapter (every grouped layer's A and B) in place; returns how many layers it wrote. A
    name the model does not group, or a shape it does not hold, is refused before anything is written."""
    layers = {name: m for name, m in model.named_modules() if isinstance(m, GroupedLoRA)}
    if set(adapter) != set(layers):
        odd = sorted(set(adapter) ^ set(layers))
        raise ValueError(f"the adapter and the grouped layers differ: {', '.join(odd[:3])}")
    for name, (a, b) in adapter.items():
        if a.shape != layers[name].A.shape[1:] or b.shape != layers[name].B.shape[1:]:
            raise ValueError(f"{name}: A {tuple(a.shape)}, B {tuple(b.shape)} where the layer holds "
                             f"{tuple(layers[name].A.shape[1:])}, {tuple(layers[name].B.shape[1:])}")
    for name, (a, b) in adapter.items():
        layers[name].A[family].copy_(a)
        layers[name].B[family].copy_(b)
    return len(adapter)


@torch.no_grad()
def merge(model: torch.nn.Module, adapter: Adapter, scale: float) -> torch.nn.Module:
    """A plain model (changed in place) with one adapter merged: W + scale * B A, as PEFT's merge does."""
    modules = dict(model.named_modules())
    for name, (a, b) in adapter.items():
        weight = modules[name].weight
        weight += scale * (b.to(weight.dtype) @ a.to(weight.dtype))
    return model


def linear_names(model: torch.nn.Module) -> list[str]:
    """The modules PEFT's target_modules="all-linear" adapts in a causal LM: every nn.Linear but the output head.
    PEFT adapts GPT-2-style Conv1D layers too; this does not group them, so such a model is refused, not served
    without the updates of those layers."""
    conv = [name for name, m in model.named_modules() if type(m).__name__ == "Conv1D"]
    if conv:
        raise ValueError(f"{type(model).__name__} has Conv1D layers ({conv[0]}, ...): grouped LoRA takes nn.Linear only")
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    return [name for name, m in model.named_modules() if isinstance(m, torch.nn.Linear) and m is not head]


def random_adapter(model: torch.nn.Module, names: list[str], rank: int, seed: int, spread: float = 0.02) -> Adapter:
    """An adapter of small random A and B (a trained one's size), for tests and the benchmark: nonzero B, so that
    each family's rows really go through their own update."""
    gen = torch.Generator().manual_seed(seed)
    modules = dict(model.named_modules())
    out = {}
    for name in names:
        lin = modules[name]
        weight = lin.base.weight if isinstance(lin, GroupedLoRA) else lin.weight
        a = torch.randn(rank, weight.shape[1], generator=gen) * spread
        b = torch.randn(weight.shape[0], rank, generator=gen) * spread
        out[name] = (a.to(weight.device, weight.dtype), b.to(weight.device, weight.dtype))
    return out
