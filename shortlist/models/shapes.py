"""The trainee's shape with random weights, built offline: what speed and memory are measured on.

Qwen3-0.6B cannot be downloaded on the GPU machine (no model hub) and its 2.4 GB of fp32 weights
cannot be carried there, so the benchmarks build this instead, from code, in seconds:
- the published Qwen3-0.6B config and generation_config, field for field (CONFIG, GENERATION).
  Checked against https://huggingface.co/Qwen/Qwen3-0.6B/raw/main/config.json as copied in
  https://huggingface.co/TensorStack/TextEncoder/blob/main/Qwen-3-06B/config.json, and by size:
  https://huggingface.co/Qwen/Qwen3-0.6B/tree/main lists config.json at 726 bytes and
  generation_config.json at 239, which CONFIG with torch_dtype "bfloat16" and
  transformers_version "4.51.0" makes in json.dumps(indent=2), and GENERATION with that version in
  json.dumps(indent=4). 596 M parameters, 440 M without the tied embedding, as Qwen's card says;
- seeded random weights. They never choose <|im_end|> on purpose (1 in 151936 per token), so
  every completion runs the full max_new_tokens: the worst case for time and memory;
- a byte-level BPE tokenizer with Qwen2's pre-tokenizer (digits one by one, words whole), trained
  for a few thousand merges on Reasoning Gym prompts so that prompts have about the real length,
  then filled with synthetic merges to Qwen3's 151643 ordinary tokens; Qwen3's 26 added tokens at
  Qwen3's ids (<|im_end|> = 151645); and the 267 embedding rows Qwen3 leaves without a token
  named <|reserved_k|>, so that every id the model can emit decodes;
- the chat template of the tiny model (Qwen3's, cut down: enable_thinking=False gives the empty
  think block).
Its completions mean nothing: it measures, it does not answer.
"""
from __future__ import annotations

import json
from pathlib import Path

from shortlist import output

NAME = "qwen3-0.6b-shape"
VERSION = 1  # bump when the recipe changes: the cache folder is keyed by it
CONFIG = {  # Qwen/Qwen3-0.6B config.json, less torch_dtype (the trainee runs in fp32) and the version
    "architectures": ["Qwen3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 1024,
    "initializer_range": 0.02, "intermediate_size": 3072, "max_position_embeddings": 40960, "max_window_layers": 28,
    "model_type": "qwen3", "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06, "rope_scaling": None, "rope_theta": 1000000, "sliding_window": None,
    "tie_word_embeddings": True, "use_cache": True, "use_sliding_window": False, "vocab_size": 151936}
GENERATION = {"bos_token_id": 151643, "do_sample": True, "eos_token_id": [151645, 151643], "pad_token_id": 151643,
              "temperature": 0.6, "top_k": 20, "top_p": 0.95}
ORDINARY = 151643  # byte-level BPE tokens, ids 0..151642
ADDED = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|object_ref_start|>", "<|object_ref_end|>", "<|box_start|>",
         "<|box_end|>", "<|quad_start|>", "<|quad_end|>", "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
         "<|image_pad|>", "<|video_pad|>", "<tool_call>", "</tool_call>", "<|fim_prefix|>", "<|fim_middle|>",
         "<|fim_suffix|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>", "<tool_response>", "</tool_response>",
         "<think>", "</think>"]  # Qwen3's, from 151643 on; the <|...|> ones are special (skipped when decoding)
PRE_TOKENIZER = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")  # Qwen2's split, which Qwen3 keeps
CORPUS_SEEDS = range(10_000_000, 10_000_050)  # far from every seed range the proof uses


def path() -> Path:
    return output.cache_root() / f"{NAME}-v{VERSION}"


def ensure(dest: Path | None = None, **build_options) -> Path:
    """The model's folder, built on first use (once, whichever processes ask together)."""
    return output.build_folder(Path(dest) if dest is not None else path(), lambda folder: build(folder, **build_options))


def config(**changes):
    """The published config as a transformers Qwen3Config (changes: a smaller shape, for tests)."""
    from transformers import Qwen3Config
    fields = {k: v for k, v in CONFIG.items() if k not in ("architectures", "model_type")} | changes
    return Qwen3Config(**fields, architectures=CONFIG["architectures"], pad_token_id=GENERATION["pad_token_id"])


def corpus() -> list[str]:
    from shortlist import sources, trainee
    from shortlist.sources import source
    return [trainee.QWEN3.for_source(source.DEFAULT).system_prompt] + [
        t["question"] for name in sources.DEFAULT for t in sources.parse(name).tasks(CORPUS_SEEDS)]


def tokenizer(text: list[str] | None = None):
    """A byte-level BPE whose ids fill the embedding: merges learned from text (Reasoning Gym's
    prompts by default), synthetic ones up to ORDINARY tokens, Qwen3's added tokens at Qwen3's ids,
    then the reserved ones (see the module's docstring)."""
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from shortlist.models import tiny
    split = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(PRE_TOKENIZER), behavior="isolated"),
                                     pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    learner = Tokenizer(models.BPE())
    learner.pre_tokenizer = split
    learner.train_from_iterator(corpus() if text is None else text, trainers.BpeTrainer(
        vocab_size=ORDINARY, show_progress=False, initial_alphabet=alphabet))
    learned = json.loads(learner.to_str())["model"]
    vocab, merges = learned["vocab"], [tuple(m) for m in learned["merges"]]
    for left in list(vocab):  # each token so far followed by each byte, until the count is reached
        for right in alphabet:
            if len(vocab) < ORDINARY and left + right not in vocab:
                vocab[left + right] = len(vocab)
                merges.append((left, right))
        if len(vocab) == ORDINARY:
            break
    bpe = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    bpe.pre_tokenizer = split
    bpe.decoder = decoders.ByteLevel()
    bpe.add_tokens([AddedToken(t, special=t.startswith("<|")) for t in ADDED])  # in order: Qwen3's ids
    reserved = CONFIG["vocab_size"] - bpe.get_vocab_size()
    bpe.add_tokens([AddedToken(f"<|reserved_{i}|>", special=True) for i in range(reserved)])
    return PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                   chat_template=tiny.CHAT_TEMPLATE)


def build(dest: Path, seed: int = 0, device: str | None = None, **changes) -> None:
    """Weights drawn on device (the GPU where there is one: seconds, not a minute of CPU), saved in
    fp32; changes make a smaller model of the same kind, for tests (the vocabulary stays)."""
    import torch
    import transformers
    from transformers import GenerationConfig, Qwen3ForCausalLM
    transformers.utils.logging.disable_progress_bar()
    cfg = config(**changes)
    tok = tokenizer()
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3ForCausalLM(cfg).float()
    model = model.to("cpu")  # saved from host memory, whatever drew it
    model.generation_config = GenerationConfig(**GENERATION)
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
