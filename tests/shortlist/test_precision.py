"""fp32 stays fp32 (shortlist/models/precision.py): what turns TF32 on, that fp32() turns it off, that sampling checks."""
import pytest
import torch
import transformers

from shortlist.generation import engine, sampling
from shortlist.models import precision
from shortlist.trainee import QWEN3


def tf32_as_a_compiled_gpu_run_sets_it():
    """What transformers (the new API's root switch) and accelerate (the legacy cuBLAS flag) do, both."""
    torch.backends.fp32_precision = "tf32"
    torch.backends.cuda.matmul.allow_tf32 = True


@pytest.fixture
def restored():
    yield
    precision.fp32()  # whatever a test left, the process's other tests sample at fp32


def test_training_arguments_turn_tf32_on_for_a_compiled_run_unless_told_not_to(tmp_path, monkeypatch, restored):
    # the contract: transformers 5.24 enables TF32 where torch_compile is on, tf32 unset and the GPU has TF32
    # (faked here: this machine has no such GPU); tf32=False, as proof.train.grpo_config passes, keeps fp32
    from transformers import training_args
    from transformers.utils import import_utils
    monkeypatch.setattr(training_args, "is_torch_tf32_available", lambda: True)
    precision.fp32()
    for tf32, on in ((False, False), (None, True)):
        import_utils.enable_tf32.cache_clear()  # an lru_cache: a second call with the same flag does nothing
        transformers.TrainingArguments(output_dir=str(tmp_path), torch_compile=True, tf32=tf32, report_to=[],
                                       use_cpu=True)
        assert bool(precision.tf32_on()) == on, (tf32, precision.state())
    import_utils.enable_tf32.cache_clear()


def test_fp32_turns_every_switch_back_and_leaves_them_readable(restored):
    tf32_as_a_compiled_gpu_run_sets_it()
    assert "backends" in precision.tf32_on() and "cuda.matmul" in precision.tf32_on()
    precision.fp32()
    assert precision.tf32_on() == []
    assert set(precision.state().values()) == {precision.IEEE}
    # the legacy readers raise on a mix of the two APIs (torch >= 2.9): fp32() leaves none
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False
    assert torch.get_float32_matmul_precision() == "highest"


def test_check_is_one_line_naming_the_switches(restored):
    precision.fp32()
    precision.check("here")  # nothing on: no error
    tf32_as_a_compiled_gpu_run_sets_it()
    with pytest.raises(RuntimeError) as e:
        precision.check("eval before")
    assert str(e.value).startswith("eval before: fp32 matmuls would run as TF32 (") and "\n" not in str(e.value)
    assert "cuda.matmul" in str(e.value)


def test_tf32_on_reads_a_recorded_state():
    assert precision.tf32_on({"backends": "ieee", "cuda.matmul": "tf32"}) == ["cuda.matmul"]
    assert precision.tf32_on({"matmul": "high", "cuda.matmul.allow_tf32": False}) == ["matmul"]  # torch < 2.9
    assert precision.tf32_on({"backends": "none", "cuda.matmul": "ieee"}) == []


def test_sampling_refuses_to_draw_under_tf32_and_load_turns_it_off(tiny_model, restored):
    sampler = sampling.Sampler(tiny_model, QWEN3.replace(model="tiny", max_new_tokens=2).for_source("reasoning_gym"))
    tf32_as_a_compiled_gpu_run_sets_it()
    with pytest.raises(RuntimeError, match="^sampling: fp32 matmuls would run as TF32"):
        sampler.complete(["1 + 1 ="], greedy=True)
    sampling.load("tiny")  # what every process that samples does first
    assert precision.tf32_on() == []
    assert sampler.complete(["1 + 1 ="], greedy=True)


def test_the_engine_records_the_precision_with_each_phase(restored):
    precision.fp32()
    with engine.phase() as phase:
        pass
    assert phase.status()["fp32_precision"] == precision.state()
    assert set(phase.status()["fp32_precision"].values()) == {precision.IEEE}
