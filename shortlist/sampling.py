"""Loading the trainee and drawing completions exactly as TRL's GRPOTrainer draws them.

One Sampler serves screening (k samples per task) and evaluation (one greedy answer per task).
Its GenerationConfig is built field by field as GRPOTrainer builds its own (trl 1.16,
grpo_trainer.py, the non-vLLM branch), and generate() merges it with the model's own
generation_config in the same way for both, so "whatever the model's generation_config says"
cannot leak in on one side only. tests/test_sampling.py builds both and compares.

The fast engine changes how tokens are computed, never which distribution they come from: a
static KV cache whose decode step replays as a CUDA graph on a GPU (decode_static), and batches
padded to one shape so that it compiles once. Only the engine
fields of the config differ (ENGINE_FIELDS). For GRPO, InferenceCopy keeps a plain copy of the
model being trained, with the LoRA weights merged in place each step.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from shortlist import tiny, trainee

SAMPLE_BATCH = 0  # sequences per generate() call; 0: as many as fit (auto_batch)
CPU_BATCH = 32  # GRPO's own generation batch (4 prompts x 8), what auto_batch takes without a GPU
MEMORY_SHARE = 0.4  # of the GPU memory this process can still take, what auto_batch lets the KV cache take
ENGINE_FIELDS = {"cache_implementation", "disable_compile", "max_cache_len"}  # how, not what, fast changes
CACHE_QUANTUM = 64  # static cache lengths are rounded up to this, so a new prompt length rarely recompiles


@dataclass
class Loaded:
    model: torch.nn.Module
    tokenizer: object
    source: dict  # what was loaded: name, local path, revision


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def load(name: str = trainee.MODEL, on: str | None = None) -> Loaded:
    """The trainee in fp32 (a T4 has no bf16; fp16 gives NaN losses with Qwen3), ready to sample."""
    transformers.utils.logging.disable_progress_bar()  # a bar per load would flood notebooks and logs
    path = str(tiny.ensure()) if name == tiny.NAME else name
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(on or device())
    model.eval()
    prepare(model, tokenizer)
    revision = tiny.fingerprint(tiny.path()) if name == tiny.NAME else getattr(model.config, "_commit_hash", None)
    return Loaded(model, tokenizer, {"name": name, "path": path, "revision": revision})


def prepare(model, tokenizer) -> None:
    """What GRPOTrainer does to the pair before it generates: a pad token, mirrored on the model."""
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model.config.get_text_config().pad_token_id = tokenizer.pad_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id


def eos_token_ids(model, tokenizer) -> list[int]:
    """Every eos id the model declares ends a completion, the tokenizer's first (as in TRL)."""
    ids = model.generation_config.eos_token_id
    ids = [] if ids is None else [ids] if isinstance(ids, int) else list(ids)
    return ids if tokenizer.eos_token_id in ids else [tokenizer.eos_token_id, *ids]


def generation_config(model, tokenizer, greedy: bool = False, max_new_tokens: int = trainee.MAX_NEW_TOKENS,
                      fast: bool = False, max_cache_len: int | None = None) -> GenerationConfig:
    """GRPOTrainer's GenerationConfig for the trainee's settings; greedy only flips do_sample, and
    fast only sets the engine: a static cache of max_cache_len, compiled where generate() can."""
    engine = {"cache_implementation": "static", "disable_compile": False, "max_cache_len": max_cache_len} if fast \
        else {"cache_implementation": None, "disable_compile": True}
    with quiet(greedy):
        return GenerationConfig(
            max_new_tokens=max_new_tokens, do_sample=not greedy, pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=eos_token_ids(model, tokenizer),
            temperature=trainee.TEMPERATURE, top_p=trainee.TOP_P, top_k=trainee.TOP_K, min_p=trainee.MIN_P,
            repetition_penalty=trainee.REPETITION_PENALTY, **engine)


@contextmanager
def quiet(greedy: bool):
    """Greedy keeps GRPO's sampling fields (only do_sample flips), which transformers warns are unused."""
    verbosity = transformers.utils.logging.get_verbosity()
    if greedy:
        transformers.utils.logging.set_verbosity_error()
    try:
        yield
    finally:
        transformers.utils.logging.set_verbosity(verbosity)


def prompt_ids(tokenizer, questions: list[str]) -> list[list[int]]:
    """Token ids of each question's chat prompt, tokenized as GRPOTrainer tokenizes them."""
    out = tokenizer.apply_chat_template([trainee.messages(q) for q in questions], add_generation_prompt=True,
                                        tokenize=True, return_dict=True, enable_thinking=trainee.ENABLE_THINKING)
    return out["input_ids"]


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


def completion_ids(generated: torch.Tensor, prompt_width: int, eos: list[int]) -> list[list[int]]:
    """Each completion up to and including its first eos, as TRL masks them."""
    out = []
    for row in generated[:, prompt_width:].tolist():
        end = next((i for i, t in enumerate(row) if t in eos), len(row) - 1)
        out.append(row[:end + 1])
    return out


@torch.no_grad()
def generate_ids(model, rows: list[list[int]], config: GenerationConfig, batch_size: int, pad_id: int,
                 eos: list[int], same_shape: bool = False) -> list[list[int]]:
    """Completion ids for each prompt row, batch by batch, left-padded.

    A config with a static cache goes through decode_static() where it can; anything else through
    generate(). same_shape pads the last batch with copies of its last row (their completions are
    dropped), so that a compiled engine sees one batch size only."""
    out: list[list[int]] = []
    with quiet(not config.do_sample):
        for start in range(0, len(rows), batch_size):
            batch = rows[start:start + batch_size]
            real = len(batch)
            if same_shape:
                batch = batch + [batch[-1]] * (batch_size - real)
            ids, mask = left_pad(batch, pad_id)
            ids, mask = ids.to(model.device), mask.to(model.device)
            decoded = decode_static(model, ids, mask, config, eos) if config.cache_implementation == "static" else None
            if decoded is None:
                decoded = completion_ids(model.generate(input_ids=ids, attention_mask=mask, generation_config=config),
                                         ids.shape[1], eos)
            out += decoded[:real]
    return out


# Processors that read only the scores of the current step: a static loop can apply them as they are
_STEP_ONLY = ("TemperatureLogitsWarper", "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper")
STOP_CHECK_EVERY = 16  # decode steps between looks at whether every row has finished (each look syncs the GPU)


@torch.no_grad()
def decode_static(model, ids: torch.Tensor, mask: torch.Tensor, config: GenerationConfig,
                  eos: list[int]) -> list[list[int]] | None:
    """generate()'s sampling loop, for a static cache, without its per-step Python.

    On an H200 generate() spends ~6 ms a decode step around a compiled forward that needs far less
    (SmolLM2-135M, 32 rows). This loop does what generate()'s _sample does, op for op (the same
    logits processors, built by generate()'s own _get_logits_processor; softmax and multinomial, or
    argmax; finished rows fed the pad token), with inputs of one shape so the forward replays as a
    CUDA graph, and it checks for the end every STOP_CHECK_EVERY steps instead of every step.
    Returns None where it cannot stand in for generate(): a processor that reads earlier tokens
    (repetition penalty, minimum length...)."""
    used, _ = model._prepare_generation_config(config)
    width = ids.shape[1]
    processors = model._get_logits_processor(generation_config=used, input_ids_seq_length=width, device=ids.device,
                                              model_kwargs={})
    if any(type(p).__name__ not in _STEP_ONLY for p in processors):
        return None
    rows, steps = ids.shape[0], used.max_new_tokens
    length = max(width + steps, used.max_cache_len or 0, getattr(model, "_previous_max_cache_length", 0))
    model._previous_max_cache_length = length
    key, cache = getattr(model, "_shortlist_cache", (None, None))
    if key == (rows, length):  # the same tensors again: a captured CUDA graph replays, nothing re-records
        cache.reset()
    else:
        cache = transformers.StaticCache(config=model.config, max_cache_len=length)
        model._shortlist_cache = ((rows, length), cache)
    attention = torch.ones(rows, length, dtype=mask.dtype, device=ids.device)  # future slots: causality hides them
    attention[:, :width] = mask
    positions = (mask.long().cumsum(-1) - 1).masked_fill(mask == 0, 0)  # as generate() derives them
    forward = model.get_compiled_call(used.compile_config) if model._valid_auto_compile_criteria(
        {"cache": cache}, used) else model.__call__
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


def auto_batch(model, rows: int, length: int) -> int:
    """How many sequences one call takes: all of them if their static cache fits in MEMORY_SHARE of
    the memory this process can still take (available_memory), else as many as do. Measured on an
    H200 (bench/results): evaluating 200 tasks in one batch of 200 took 0.31 s against 0.72-0.94 s
    in batches of 32; a T4 holds far fewer."""
    if model.device.type != "cuda":
        return min(rows, CPU_BATCH)
    text = model.config.get_text_config()
    heads = getattr(text, "num_key_value_heads", None) or text.num_attention_heads
    head_dim = getattr(text, "head_dim", None) or text.hidden_size // text.num_attention_heads
    per_row = 2 * text.num_hidden_layers * heads * head_dim * length * model.dtype.itemsize + 8 * text.vocab_size
    return max(1, min(rows, int(available_memory(model.device) * MEMORY_SHARE // per_row)))


def available_memory(device) -> int:
    """Bytes this process can still allocate on a GPU: what the GPU has free plus what torch holds
    unused, and no more than a per-process memory fraction leaves (set_per_process_memory_fraction:
    a T4's 15 GB on a bigger GPU, or a share of one), less what this process already uses."""
    free, total = torch.cuda.mem_get_info(device)
    allocated = torch.cuda.memory_allocated(device)
    available = free + torch.cuda.memory_reserved(device) - allocated
    fraction = getattr(torch.cuda, "get_per_process_memory_fraction", None)  # torch >= 2.9
    if fraction is not None:
        available = min(available, int(fraction(device) * total) - allocated)
    return max(0, available)


def release(model) -> None:
    """Give back the static cache sampling keeps on a model (sized to fill MEMORY_SHARE: GBs on a
    T4) once the model will not sample again at that size, and collect what is no longer held."""
    import gc
    model.__dict__.pop("_shortlist_cache", None)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def cache_length(rows: list[list[int]], max_new_tokens: int) -> int:
    need = max(len(r) for r in rows) + max_new_tokens
    return -(-need // CACHE_QUANTUM) * CACHE_QUANTUM


class Sampler:
    def __init__(self, loaded: Loaded, batch_size: int = SAMPLE_BATCH, max_new_tokens: int = trainee.MAX_NEW_TOKENS,
                 fast: bool = True):
        if batch_size < 0 or max_new_tokens < 1:
            raise ValueError("sampling needs batch_size >= 0 (0: auto) and max_new_tokens >= 1")
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.batch_size, self.max_new_tokens, self.fast = batch_size, max_new_tokens, fast
        self.eos = eos_token_ids(self.model, self.tokenizer)

    def complete(self, questions: list[str], k: int = 1, greedy: bool = False) -> list[list[str]]:
        """k completions per question (decoded, special tokens skipped), k consecutive copies per prompt."""
        rows = [ids for ids in prompt_ids(self.tokenizer, questions) for _ in range(k)]
        length = cache_length(rows, self.max_new_tokens)
        config = generation_config(self.model, self.tokenizer, greedy, self.max_new_tokens, self.fast,
                                   length if self.fast else None)
        batch = self.batch_size or auto_batch(self.model, len(rows), length)
        ids = generate_ids(self.model, rows, config, batch, self.tokenizer.pad_token_id, self.eos,
                           same_shape=self.fast)
        texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
        return [texts[i * k:(i + 1) * k] for i in range(len(questions))]


class InferenceCopy:
    """A plain copy of a model that GRPO trains with LoRA, kept equal to the adapted model.

    Generating through the PEFT model runs every LoRA layer as extra small kernels; this copy runs
    W + scale * B @ A as one weight. sync() writes the merged weights in place, so a compiled
    engine (CUDA graphs hold pointers) sees them without recompiling. Only LoRA-adapted weights
    change during training, so only those are copied."""

    # a compiled forward is bound to the model it was made for, and a static cache is its own: not copied
    NOT_COPIED = ("_compiled_call", "_last_compile_config", "_shortlist_cache")

    def __init__(self, model):
        import copy
        kept = {name: model.__dict__.pop(name) for name in self.NOT_COPIED if name in model.__dict__}
        try:
            self.model = copy.deepcopy(model).eval()
        finally:
            model.__dict__.update(kept)
        for p in self.model.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def sync(self, peft_model) -> int:
        """Copy the merged weights of every LoRA layer; returns how many were copied."""
        from peft.tuners.lora import LoraLayer
        targets = dict(self.model.named_modules())
        copied = 0
        for name, module in peft_model.named_modules():
            if isinstance(module, LoraLayer) and hasattr(module, "base_layer"):
                target = targets[name.removeprefix("_orig_mod.").removeprefix("base_model.model.")]
                merged = module.base_layer.weight.detach().clone()
                for adapter in module.active_adapters:
                    if adapter in module.lora_A:
                        merged += module.get_delta_weight(adapter).to(merged.dtype)
                target.weight.copy_(merged)
                copied += 1
        return copied
