"""A tiny Qwen3-shaped trainee, built offline in seconds: the offline default and the tests' model.

There is no model hub here, so `--model tiny` means this: a 2-layer Qwen3 (about 0.2 M
parameters) with a byte-level BPE tokenizer trained on Reasoning Gym text, a chat template that
takes enable_thinking like Qwen3's, and Qwen3-0.6B's own generation_config (top_k=20, top_p=0.95,
temperature=0.6), so that sampling must override it exactly as TRL does. It is taught for a few
seconds to answer in the trainee's format, so its rewards vary and GRPO has something to move.
"""
from __future__ import annotations

import hashlib
import sys
import time
import os
from pathlib import Path

from shortlist import output
from shortlist.errors import OneLine

NAME = "tiny"
VERSION = 3  # bump when the recipe changes: the cache folder is keyed by it (3: built on BUILD_THREADS threads)
# torch's threads while it trains: 300 AdamW steps amplify another thread count's float order into other weights
# (1 thread gave another model than 2), so a Ray worker (OMP_NUM_THREADS=1) or a machine with more cores built a
# tiny unlike the one its run committed; 2 gives, on this project's 2-core machines, the weights versions 2 had
BUILD_THREADS = 2
TAUGHT = ("chain_sum(max_terms=2, max_digits=1)", "leg_counting(min_animals=1, max_animals=1, max_instances=2)",
          "basic_arithmetic(max_terms=2, max_digits=1, operators=['+', '-'], allow_parentheses=False, allow_negation=False)")
TEXT_ONLY = ("letter_counting", "word_sorting", "propositional_logic", "products")  # seen by the tokenizer only
SEEDS = range(10_000_000, 10_000_400)  # far from every seed range the proof uses
HEARTBEAT_S = 15  # a line at least this often while the build trains
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]
CHAT_TEMPLATE = (  # Qwen3's, cut down: an empty think block when enable_thinking is false
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{% endif %}")


def seed() -> int:
    """The seed tiny is built from: 0, unless SHORTLIST_TINY_SEED names another. CI builds a second
    tiny from another seed and reruns the tests that read model outputs on it, so that a test which
    passes only for the exact tokens one build produces (on one processor) fails there too."""
    text = os.environ.get("SHORTLIST_TINY_SEED", "0")
    if not text.isascii() or not text.isdigit():
        raise OneLine(f"SHORTLIST_TINY_SEED={text!r}: give a whole number (0 builds the default tiny)")
    return int(text)


def path() -> Path:
    """The cache folder of this build: keyed by the recipe's VERSION and, where not 0, the seed."""
    return output.cache_root() / (f"tiny-qwen3-v{VERSION}" + (f"-s{seed()}" if seed() else ""))


def ensure() -> Path:
    """The tiny model's folder, built on first use (once, whichever processes ask together)."""
    return output.build_folder(path(), build)


def fingerprint(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()[:16]


def _examples() -> tuple[list[dict], list[str]]:
    from shortlist import sources
    taught = [t | {"family": f} for f in sources.parse_list(list(TAUGHT)) for t in f.tasks(SEEDS)]
    text = [t["question"] for name in TEXT_ONLY for t in sources.parse(name).tasks(SEEDS[:100])]
    return taught, text


def _tokenizer(corpus: list[str]):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    bpe.train_from_iterator(corpus, trainers.BpeTrainer(vocab_size=2048, special_tokens=SPECIAL, show_progress=False,
                                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=SPECIAL[1:], chat_template=CHAT_TEMPLATE)
    tok.add_tokens(["<answer>", "</answer>"])  # ordinary tokens: decoding keeps them
    return tok


def build(dest: Path) -> None:
    import torch
    import transformers
    from transformers import GenerationConfig, Qwen3Config, Qwen3ForCausalLM

    from shortlist import trainee
    from shortlist.sources import source
    transformers.utils.logging.disable_progress_bar()  # save_pretrained's "Writing model shards" bar, on the console
    started = time.monotonic()
    say(f"building the tiny model, once for this machine, into {dest.parent} (about 30 s of CPU; minutes on a "
        f"busy machine): its examples and tokenizer first")
    taught, text = _examples()
    replies = [f"<answer>{t['answer']}</answer>" for t in taught]
    asked = trainee.QWEN3.for_source(source.DEFAULT)  # Reasoning Gym's families, as the default trainee asks them
    tok = _tokenizer([asked.system_prompt] + [t["question"] for t in taught] + replies + text)
    im_end, pad = tok.convert_tokens_to_ids("<|im_end|>"), tok.pad_token_id
    config = Qwen3Config(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=1024,
                         tie_word_embeddings=True, bos_token_id=None, eos_token_id=im_end, pad_token_id=pad)
    threads = torch.get_num_threads()
    torch.set_num_threads(BUILD_THREADS)
    torch.manual_seed(seed())
    model = Qwen3ForCausalLM(config)
    model.generation_config = GenerationConfig(  # Qwen3-0.6B's own, which sampling must override
        do_sample=True, temperature=0.6, top_k=20, top_p=0.95, eos_token_id=[im_end, pad], pad_token_id=pad)
    try:
        _teach(model, tok, taught, replies)
    finally:
        torch.set_num_threads(threads)
    model.save_pretrained(dest)
    tok.save_pretrained(dest)
    say(f"built the tiny model in {time.monotonic() - started:.0f} s")


def say(line: str) -> None:
    """A line on stderr while the build works (a person waits on it: issue 41, no silence over 30 s)."""
    print(line, file=sys.stderr, flush=True)


def _teach(model, tok, taught: list[dict], replies: list[str], steps: int = 300, batch: int = 32) -> None:
    """A few seconds of supervised training on (prompt, <answer>reply</answer>) pairs."""
    import torch

    from shortlist import trainee
    from shortlist.sources import source
    asked, rows = trainee.QWEN3.for_source(source.DEFAULT), []
    for task, reply in zip(taught, replies):
        prompt = tok.apply_chat_template(asked.messages(task["question"]), add_generation_prompt=True,
                                         enable_thinking=False, tokenize=True, return_dict=True)["input_ids"]
        answer = tok(reply, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
        rows.append((prompt + answer, [-100] * len(prompt) + answer))
    width = max(len(ids) for ids, _ in rows)
    ids = torch.tensor([r + [tok.pad_token_id] * (width - len(r)) for r, _ in rows])
    labels = torch.tensor([lab + [-100] * (width - len(lab)) for _, lab in rows])
    mask = (torch.arange(width)[None, :] < torch.tensor([len(r) for r, _ in rows])[:, None]).long()
    model.requires_grad_(True)  # every weight is taught, a loaded model's too (sampling.load freezes it)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(seed())
    model.train()
    said = time.monotonic()
    for step in range(steps):
        if time.monotonic() - said > HEARTBEAT_S:
            say(f"building the tiny model: training step {step} of {steps}")
            said = time.monotonic()
        pick = torch.randint(len(rows), (batch,), generator=generator)
        loss = model(input_ids=ids[pick], attention_mask=mask[pick], labels=labels[pick]).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
