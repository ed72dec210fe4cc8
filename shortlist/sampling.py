"""Loading the trainee and drawing completions exactly as TRL's GRPOTrainer draws them.

One Sampler serves screening (k samples per task) and evaluation (one greedy answer per task).
Its GenerationConfig is built field by field as GRPOTrainer builds its own (trl 1.16,
grpo_trainer.py, the non-vLLM branch), and generate() merges it with the model's own
generation_config in the same way for both, so "whatever the model's generation_config says"
cannot leak in on one side only. tests/test_sampling.py builds both and compares.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from shortlist import tiny, trainee

SAMPLE_BATCH = 32  # sequences per generate() call: GRPO's own generation batch (4 prompts x 8)


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


def generation_config(model, tokenizer, greedy: bool = False,
                      max_new_tokens: int = trainee.MAX_NEW_TOKENS) -> GenerationConfig:
    """GRPOTrainer's GenerationConfig for the trainee's settings; greedy only flips do_sample."""
    return GenerationConfig(
        max_new_tokens=max_new_tokens, do_sample=not greedy, pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=eos_token_ids(model, tokenizer),
        temperature=trainee.TEMPERATURE, top_p=trainee.TOP_P, top_k=trainee.TOP_K, min_p=trainee.MIN_P,
        repetition_penalty=trainee.REPETITION_PENALTY, cache_implementation=None, disable_compile=True)


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


class Sampler:
    def __init__(self, loaded: Loaded, batch_size: int = SAMPLE_BATCH, max_new_tokens: int = trainee.MAX_NEW_TOKENS):
        if batch_size < 1 or max_new_tokens < 1:
            raise ValueError("sampling needs batch_size >= 1 and max_new_tokens >= 1")
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.batch_size, self.max_new_tokens = batch_size, max_new_tokens
        self.eos = eos_token_ids(self.model, self.tokenizer)

    @torch.no_grad()
    def complete(self, questions: list[str], k: int = 1, greedy: bool = False) -> list[list[str]]:
        """k completions per question (decoded, special tokens skipped), k consecutive copies per prompt."""
        config = generation_config(self.model, self.tokenizer, greedy, self.max_new_tokens)
        rows = [ids for ids in prompt_ids(self.tokenizer, questions) for _ in range(k)]
        texts: list[str] = []
        verbosity = transformers.utils.logging.get_verbosity()
        if greedy:  # greedy keeps GRPO's sampling fields, which transformers warns are unused
            transformers.utils.logging.set_verbosity_error()
        try:
            for start in range(0, len(rows), self.batch_size):
                ids, mask = left_pad(rows[start:start + self.batch_size], self.tokenizer.pad_token_id)
                out = self.model.generate(input_ids=ids.to(self.model.device),
                                          attention_mask=mask.to(self.model.device), generation_config=config)
                texts += self.tokenizer.batch_decode(completion_ids(out, ids.shape[1], self.eos),
                                                     skip_special_tokens=True)
        finally:
            transformers.utils.logging.set_verbosity(verbosity)
        return [texts[i * k:(i + 1) * k] for i in range(len(questions))]
