import pytest
import torch

from shortlist.generation import sampling
from shortlist.models import shapes
from shortlist import trainee

ASKED = trainee.QWEN3.for_source("reasoning_gym")  # the default trainee, as it asks Reasoning Gym's families

SMALL = {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 16}  # the same kind and vocabulary, a test's size


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A small model of the same recipe, built and loaded as the benchmark builds and loads the real one."""
    return sampling.load(str(shapes.ensure(tmp_path_factory.mktemp("shape") / "small", **SMALL)))


def test_config_is_qwen3_0_6b_as_published():
    c = shapes.config()
    assert (c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
            c.intermediate_size, c.vocab_size) == (1024, 28, 16, 8, 128, 3072, 151936)
    assert c.tie_word_embeddings and c.hidden_act == "silu" and not c.attention_bias
    assert (c.rope_parameters["rope_theta"], c.rms_norm_eps, c.max_position_embeddings) == (1_000_000, 1e-6, 40960)
    assert (c.bos_token_id, c.eos_token_id) == (151643, 151645)
    from transformers import Qwen3ForCausalLM
    with torch.device("meta"):
        model = Qwen3ForCausalLM(c)
    total = sum(p.numel() for p in model.parameters())
    assert total == 596_049_920 and total - 151936 * 1024 == 440_467_456  # "0.6B, 0.44B non-embedding"


def test_fields_make_the_published_files_byte_for_byte_in_size():
    import json
    # Qwen/Qwen3-0.6B lists config.json at 726 bytes and generation_config.json at 239 (sorted keys,
    # transformers 4.51's json.dumps): a field more or less, or a value of another length, would not match
    config = shapes.CONFIG | {"torch_dtype": "bfloat16", "transformers_version": "4.51.0"}
    generation = shapes.GENERATION | {"transformers_version": "4.51.0"}
    assert len(json.dumps(dict(sorted(config.items())), indent=2)) == 726
    assert len(json.dumps(dict(sorted(generation.items())), indent=4)) == 239


def test_every_id_the_model_can_emit_decodes(small):
    tok = small.tokenizer
    ids = list(range(small.model.config.vocab_size))
    assert len(tok) == len(ids) == 151936
    assert None not in tok.convert_ids_to_tokens(ids)
    assert all(isinstance(t, str) for t in tok.batch_decode([[i] for i in ids]))


def test_added_tokens_sit_at_qwen3s_ids(small):
    tok = small.tokenizer
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>"]) == \
        [151643, 151644, 151645, 151667, 151668]
    assert (tok.eos_token_id, tok.pad_token_id) == (151645, 151643)
    assert tok.decode([151667, 151645, 151700], skip_special_tokens=True) == "<think>"  # as Qwen3: think is text


def test_tokenizes_like_qwen_digits_apart_words_whole(small):
    tok = small.tokenizer
    assert tok.tokenize("12 + 7") == ["1", "2", "Ġ+", "Ġ", "7"]
    assert len(tok(ASKED.system_prompt)["input_ids"]) < 35  # ~1 token a word, as Qwen3's own


def test_chat_template_takes_enable_thinking(small):
    off = small.tokenizer.apply_chat_template(ASKED.messages("q"), add_generation_prompt=True, tokenize=False,
                                              enable_thinking=False)
    assert off.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_loads_with_qwen3s_generation_config_and_samples(small):
    g = small.model.generation_config
    assert (g.top_k, g.top_p, g.temperature, g.eos_token_id) == (20, 0.95, 0.6, [151645, 151643])
    sampler = sampling.Sampler(small, ASKED.replace(max_new_tokens=8))
    used = sampling.generation_config(small.model, small.tokenizer, sampler.trainee)
    assert (used.top_k, used.top_p, used.temperature) == (0, 1.0, 1.0)  # GRPO's, not the model's own
    draws = []
    for seed in (0, 0, 1):
        torch.manual_seed(seed)
        draws.append(sampler.complete(["What is 1 + 1?"], k=2))
    assert draws[0] == draws[1] and len(draws[0][0]) == 2  # the same seed draws the same samples
    assert draws[0] != draws[2]  # at temperature 1 over 151,936 tokens, another seed draws others
