"""Where jobs run (shortlist/placement.py)."""
import pytest

from shortlist import placement



@pytest.mark.parametrize("value, expected", [("1,3", ["1", "3"]), ("", []), ("-1", []), ("0", ["0"])])
def test_visible_gpus_follow_cuda_visible_devices(monkeypatch, value, expected):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", value)
    assert placement.visible_gpus() == expected
