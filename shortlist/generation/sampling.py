"""Loading the trainee and drawing completions exactly as TRL's GRPOTrainer draws them.

One Sampler serves screening (k samples per task) and evaluation (one greedy answer per task).
Its GenerationConfig is built field by field as GRPOTrainer builds its own (trl 1.16,
grpo_trainer.py, the non-vLLM branch), and generate() merges it with the model's own
generation_config in the same way for both, so "whatever the model's generation_config says"
cannot leak in on one side only. tests/test_sampling.py builds both and compares.

The fast engine changes how tokens are computed, never which distribution they come from: a
static KV cache whose decode step replays as a CUDA graph on a GPU (engine.decode_static, which
checks itself against generate() and steps aside where it disagrees), and batches padded to one
shape so that it compiles once. Only the engine fields of the config differ (ENGINE_FIELDS). GRPO's
own use of the engine (a merged copy of the model being trained) is the proof's: proof/fast_grpo.py.

Every sample is also read for degeneration: cut at max_new_tokens (clipped), or dominated by one
repeated token (repetitive), so a broken engine or a collapsed model shows in every table.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from shortlist import defaults
from shortlist.generation import engine
from shortlist.models import hf_internals
from shortlist.generation.engine import completion_ids, quiet
from shortlist.models import memory, precision, tiny
from shortlist.models.config import ModelError, identity, model_config, positions
from shortlist.trainee import Trainee

SAMPLE_BATCH = defaults.SAMPLE_BATCH
CPU_BATCH = 32  # GRPO's own generation batch (4 prompts x 8), what auto_batch takes without a GPU
MEMORY_SHARE = 0.4  # of the GPU memory this process can still take, what auto_batch lets the KV cache take
ENGINE_FIELDS = {"cache_implementation", "disable_compile", "max_cache_len"}  # how, not what, fast changes
CACHE_QUANTUM = 64  # static cache lengths are rounded up to this, so a new prompt length rarely recompiles
REPETITIVE_MIN_TOKENS = 16  # shorter completions are never called repetitive
REPETITIVE_SHARE = 0.5  # a completion whose most common token is more than this share of it is repetitive


@dataclass
class Loaded:
    model: torch.nn.Module
    tokenizer: object
    source: dict  # what was loaded: name, local path, revision


def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def load(name: str, on: str | None = None) -> Loaded:
    """The trainee's model in fp32 (a T4 has no bf16; fp16 gives NaN losses with Qwen3), ready to sample."""
    transformers.utils.logging.disable_progress_bar()  # a bar per load would flood notebooks and logs
    model_config(name)
    memory.allocator()
    precision.fp32()  # the trainee is fp32: TF32 off, whatever an import or an earlier trainer turned on
    path = str(tiny.ensure()) if name == tiny.NAME else name
    tokenizer = tokenizer_of(name)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).to(on or device())
    model.eval()
    # frozen, as the engine's copy of a model in training is (proof/fast_grpo.py): sampling needs no gradients, LoRA
    # trains weights of its own, and a compiled graph is keyed by its inputs' requires_grad, so a process that
    # samples this model first finds in the compile cache the decode graph an earlier process's GRPO compiled
    model.requires_grad_(False)
    prepare(model, tokenizer)
    # the revision a commitment records and training checks (proof/commit.same_model): a local folder's is its files'
    return Loaded(model, tokenizer, {"name": name, "path": path, "revision": identity(name)["revision"]})


def tokenizer_of(name: str):
    """The trainee's tokenizer alone (no weights): what load() pairs with the model, and what a check that
    counts prompt tokens before any model loads reads."""
    return AutoTokenizer.from_pretrained(str(tiny.ensure()) if name == tiny.NAME else name)


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


def generation_config(model, tokenizer, trainee: Trainee, greedy: bool = False, fast: bool = False,
                      max_cache_len: int | None = None) -> GenerationConfig:
    """GRPOTrainer's GenerationConfig for the trainee; greedy only flips do_sample, and fast only
    sets the engine: a static cache of max_cache_len, compiled where generate() can."""
    engine_fields = {"cache_implementation": "static", "disable_compile": False, "max_cache_len": max_cache_len} \
        if fast else {"cache_implementation": None, "disable_compile": True}
    with quiet(greedy):
        return GenerationConfig(
            max_new_tokens=trainee.max_new_tokens, do_sample=not greedy, pad_token_id=tokenizer.pad_token_id,
            bos_token_id=tokenizer.bos_token_id, eos_token_id=eos_token_ids(model, tokenizer),
            **trainee.sampling(), **engine_fields)


def prompt_ids(tokenizer, trainee: Trainee, questions: list[str]) -> list[list[int]]:
    """Token ids of each question's chat prompt, tokenized as GRPOTrainer tokenizes them."""
    out = tokenizer.apply_chat_template([trainee.messages(q) for q in questions], add_generation_prompt=True,
                                        tokenize=True, return_dict=True, enable_thinking=trainee.enable_thinking)
    return out["input_ids"]


def left_pad(rows: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.tensor([[pad_id] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


@torch.no_grad()
def generate_ids(model, rows: list[list[int]], config: GenerationConfig, batch_size: int, pad_id: int,
                 eos: list[int], same_shape: bool = False) -> list[list[int]]:
    """Completion ids for each prompt row, batch by batch, left-padded.

    A config with a static cache goes through the fast engine where it can (engine.serve, which
    checks itself first); anything else, and whatever the engine declines, through generate(). same_shape pads the last batch with copies of its last row (their completions are
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
            decoded = engine.serve(model, ids, mask, config, eos) if config.cache_implementation == "static" else None
            if decoded is None:
                decoded = completion_ids(model.generate(input_ids=ids, attention_mask=mask,
                                                        generation_config=reference(config)), ids.shape[1], eos)
            out += decoded[:real]
    return out


def reference(config: GenerationConfig) -> GenerationConfig:
    """The same config on generate()'s own engine: a dynamic cache, nothing compiled (TRL's)."""
    if config.cache_implementation != "static":
        return config
    import copy
    plain = copy.deepcopy(config)
    plain.update(cache_implementation=None, disable_compile=True, max_cache_len=None)
    return plain


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
    free, _ = torch.cuda.mem_get_info(device)
    allocated = torch.cuda.memory_allocated(device)
    available = min(free + torch.cuda.memory_reserved(device), memory.cap_bytes(device)) - allocated
    return max(0, available)


def release(model) -> None:
    """Give back the static cache sampling keeps on a model (sized to fill MEMORY_SHARE: GBs on a
    T4) once the model will not sample again at that size, and collect what is no longer held."""
    import gc
    hf_internals.release(model)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def cache_length(rows: list[list[int]], max_new_tokens: int) -> int:
    need = max(len(r) for r in rows) + max_new_tokens
    return -(-need // CACHE_QUANTUM) * CACHE_QUANTUM


def degeneration(ids: list[int], max_new_tokens: int, eos: list[int]) -> tuple[bool, bool]:
    """(clipped, repetitive) for one completion's token ids."""
    clipped = len(ids) >= max_new_tokens and (not ids or ids[-1] not in eos)
    body = [t for t in ids if t not in eos]
    repetitive = len(body) >= REPETITIVE_MIN_TOKENS and \
        Counter(body).most_common(1)[0][1] > REPETITIVE_SHARE * len(body)
    return clipped, repetitive


@dataclass
class Samples:
    """k completions per question, k consecutive copies per prompt, and how each one ended."""
    texts: list[list[str]]
    clipped: list[list[bool]] = field(default_factory=list)  # cut at max_new_tokens
    repetitive: list[list[bool]] = field(default_factory=list)  # one token makes up most of it

    def flat(self, name: str) -> list:
        return [x for group in getattr(self, name) for x in group]


class Sampler:
    def __init__(self, loaded: Loaded, trainee: Trainee, batch_size: int = SAMPLE_BATCH, fast: bool = True,
                 min_cache_len: int = 0):
        if batch_size < 0 or min_cache_len < 0:
            raise ValueError("sampling needs batch_size >= 0 (0: auto) and min_cache_len >= 0")
        self.model, self.tokenizer, self.trainee = loaded.model, loaded.tokenizer, trainee
        self.batch_size, self.fast = batch_size, fast
        # a static cache at least this long: many families of different prompt lengths then share one
        # compiled shape (the catalog sets it per length tier); the samples are the same, only padded
        self.min_cache_len = min_cache_len
        self.eos = eos_token_ids(self.model, self.tokenizer)

    def sample(self, questions: list[str], k: int = 1, greedy: bool = False, trainee: Trainee | None = None) -> Samples:
        """k samples per question, asked as trainee asks (the sampler's own, or it as it asks one
        source's families: Trainee.for_source)."""
        trainee = trainee or self.trainee
        precision.check("sampling")  # every evaluation and screen draws at full fp32
        rows = [ids for ids in prompt_ids(self.tokenizer, trainee, questions) for _ in range(k)]
        new = trainee.max_new_tokens
        limit = positions(self.model.config)
        if limit is not None and max(map(len, rows)) + new > limit:
            raise ModelError(f"a prompt of {max(map(len, rows))} tokens plus max_new_tokens={new} exceeds the "
                             f"{limit} positions the model holds: lower the trainee's max_new_tokens")
        length = max(cache_length(rows, new), self.min_cache_len)
        config = generation_config(self.model, self.tokenizer, trainee, greedy, self.fast,
                                   length if self.fast else None)
        batch = self.batch_size or auto_batch(self.model, len(rows), length)
        ids = generate_ids(self.model, rows, config, batch, self.tokenizer.pad_token_id, self.eos,
                           same_shape=self.fast)
        texts = self.tokenizer.batch_decode(ids, skip_special_tokens=True)
        ends = [degeneration(row, new, self.eos) for row in ids]

        def grouped(items):
            return [items[i * k:(i + 1) * k] for i in range(len(questions))]
        return Samples(grouped(texts), grouped([c for c, _ in ends]), grouped([r for _, r in ends]))

    def complete(self, questions: list[str], k: int = 1, greedy: bool = False,
                 trainee: Trainee | None = None) -> list[list[str]]:
        """k completions per question (decoded, special tokens skipped), k consecutive copies per prompt."""
        return self.sample(questions, k, greedy, trainee).texts
