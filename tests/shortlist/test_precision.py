"""fp32 stays fp32 (shortlist/models/precision.py): what turns TF32 on, fp32() turning it off, the checks."""
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
    try:
        for tf32, on in ((False, False), (None, True)):
            import_utils.enable_tf32.cache_clear()  # an lru_cache: a second call with the same flag does nothing
            transformers.TrainingArguments(output_dir=str(tmp_path), torch_compile=True, tf32=tf32, report_to=[],
                                           use_cpu=True)
            assert bool(precision.reduced()) == on, (tf32, precision.state())
    finally:
        import_utils.enable_tf32.cache_clear()


def test_fp32_turns_every_switch_back_and_leaves_them_readable(restored):
    tf32_as_a_compiled_gpu_run_sets_it()
    assert "backends" in precision.reduced() and "cuda.matmul" in precision.reduced()
    precision.fp32()
    assert precision.reduced(only=None) == []
    assert set(precision.state().values()) == {precision.IEEE}  # torch >= 2.9: the new API's switches, every one
    # the legacy readers raise on a mix of the two APIs (torch >= 2.9): fp32() leaves none
    assert torch.backends.cuda.matmul.allow_tf32 is False and torch.backends.cudnn.allow_tf32 is False
    assert torch.get_float32_matmul_precision() == "highest"


def test_check_is_one_line_naming_the_switches(restored):
    precision.fp32()
    precision.check("here")  # nothing on: no error
    tf32_as_a_compiled_gpu_run_sets_it()
    with pytest.raises(RuntimeError) as e:
        precision.check("eval before")
    assert str(e.value).startswith("eval before: fp32 matmuls would run at reduced precision, TF32 or bf16 (")
    assert "\n" not in str(e.value)
    assert "cuda.matmul" in str(e.value)


def test_reduced_reads_a_recorded_state_and_checks_matmuls_only():
    assert precision.reduced({"backends": "ieee", "cuda.matmul": "tf32"}) == ["cuda.matmul"]
    assert precision.reduced({"matmul": "high", "cuda.matmul.allow_tf32": False}) == ["matmul"]  # torch < 2.9
    assert precision.reduced({"backends": "none", "cuda.matmul": "ieee"}) == []
    assert precision.reduced({"mkldnn.matmul": "bf16"}) == ["mkldnn.matmul"]  # a CPU's reduced precision
    # cuDNN's convolutions are "tf32" in a fresh process: recorded, not a refusal (an LM has none)
    fresh = {"backends": "none", "cuda.matmul": "none", "cudnn.conv": "tf32", "cudnn.rnn": "tf32"}
    assert precision.reduced(fresh) == [] and precision.reduced(fresh, only=None) == ["cudnn.conv", "cudnn.rnn"]


def test_a_fresh_process_samples_without_calling_fp32_first(tmp_path):
    # a user's own Sampler over a model they loaded themselves: cuDNN's defaults are no reason to refuse
    import subprocess
    import sys
    code = ("import torch; from shortlist.models import precision; precision.check('fresh'); "
            "print(sorted(precision.state().items()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr


def test_sampling_refuses_to_draw_under_tf32_and_load_turns_it_off(tiny_model, restored):
    sampler = sampling.Sampler(tiny_model, QWEN3.replace(model="tiny", max_new_tokens=2).for_source("reasoning_gym"))
    tf32_as_a_compiled_gpu_run_sets_it()
    with pytest.raises(RuntimeError, match="^sampling: fp32 matmuls would run at reduced precision"):
        sampler.complete(["1 + 1 ="], greedy=True)
    sampling.load("tiny")  # what every process that samples does first
    assert precision.reduced() == []
    assert sampler.complete(["1 + 1 ="], greedy=True)


def test_the_engine_records_the_precision_with_each_phase(restored):
    precision.fp32()
    with engine.phase() as phase:
        pass
    assert phase.status()["fp32_precision"] == precision.state()
    assert set(phase.status()["fp32_precision"].values()) == {precision.IEEE}
