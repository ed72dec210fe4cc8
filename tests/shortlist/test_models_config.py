"""The model checked before it loads: where it can train (shortlist/models/config.py)."""
import pytest

from shortlist.models import config as models


def test_a_real_model_without_a_gpu_is_one_line_with_the_step_to_take(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("SHORTLIST_CPU", "1")  # the environment variable it once read says nothing now
    with pytest.raises(models.ModelError) as e:
        models.check_device("HuggingFaceTB/SmolLM2-135M-Instruct")
    assert "\n" not in str(e.value) and "GPU T4 x2" in str(e.value) and "--set cpu=True" in str(e.value)
    models.check_device("tiny")  # the offline smoke model needs no GPU
    models.check_device("HuggingFaceTB/SmolLM2-135M-Instruct", cpu=True)  # the user asked for the CPU
    with pytest.raises(models.ModelError):
        models.check_device("/models/smollm2", cpu=False)


def test_with_a_gpu_any_model_may_train_and_without_one_it_is_refused(monkeypatch):
    import torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(models.ModelError, match="GPU"):
        models.check_device("Qwen/Qwen3-0.6B")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert models.check_device("Qwen/Qwen3-0.6B") is None  # the same model, once there is a GPU
