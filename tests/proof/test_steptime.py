"""proof/steptime.py: a step's seconds split into generation, scoring and the rest."""
import time

import pytest

from proof import steptime


def test_a_steps_parts_add_up_and_the_rest_is_what_they_leave():
    clock = steptime.StepClock()
    for gen in (0.3, 0.01, 0.01):
        clock.begin()
        with clock.part("generation_s"):
            time.sleep(gen)
        with clock.part("scoring_s"):
            time.sleep(0.005)
        with clock.part("scoring_s"):  # a step may score twice (gradient accumulation): summed
            time.sleep(0.005)
        time.sleep(0.02)
        clock.end()
    first, later = clock.steps[0], clock.steps[1:]
    assert first["generation_s"] >= 0.3 and all(s["scoring_s"] >= 0.01 for s in clock.steps)
    for s in clock.steps:
        assert s["rest_s"] >= 0.02 and abs(s["step_s"] - s["generation_s"] - s["scoring_s"] - s["rest_s"]) < 1e-9
    summary = clock.summary()
    assert summary["steps"] == 3 and summary["first"]["generation_s"] >= 0.3
    assert 0.01 <= summary["median"]["generation_s"] < 0.3  # the first step is not in the median
    assert set(summary["median"]) == {"step_s", "generation_s", "scoring_s", "rest_s"} and len(later) == 2


def test_no_step_no_median_and_a_stray_end_is_ignored():
    clock = steptime.StepClock()
    clock.end()
    assert clock.summary() == {"steps": 0, "first": None, "median": None}
    clock.begin()
    clock.end()
    assert clock.summary()["steps"] == 1 and clock.summary()["median"] is None


def test_a_part_that_raises_is_still_timed_and_an_unknown_part_is_refused():
    clock = steptime.StepClock()
    clock.begin()
    with pytest.raises(RuntimeError):
        with clock.part("scoring_s"):
            time.sleep(0.01)
            raise RuntimeError("a scorer died")
    clock.end()
    assert clock.steps[0]["scoring_s"] >= 0.01
    with pytest.raises(ValueError, match="one of generation_s, scoring_s"):
        with clock.part("training_s"):
            pass
