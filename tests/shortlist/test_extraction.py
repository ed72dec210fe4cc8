"""Per-source answer conventions (shortlist/extraction.py): a source asks and reads its families its own way
where the trainee leaves that to it, a trainee's own setting overrides every source, and each screen records
what its family was asked and read with."""
import re

import pytest

import final_source  # tests/fixtures/sources/final_source.py
from shortlist import extraction, screening, sources, trainee
from shortlist.generation.sampling import Samples
from shortlist.sources import source
from shortlist.trainee import QWEN3, TraineeError


@pytest.fixture
def final():
    source.register("final", "final_source")
    yield sources.parse("final.echo")
    source.reset()


class Replies:
    """A sampler that answers each toy question ("Repeat the number n.") with "FINAL: n", and keeps the
    messages it was asked with."""

    def __init__(self, trainee_):
        self.trainee, self.asked = trainee_, []

    def sample(self, questions, k=1, greedy=False, trainee=None):
        asking = trainee or self.trainee
        self.asked += [asking.messages(q) for q in questions]
        texts = [["FINAL: " + re.search(r"(\d+)", q).group(1)] * k for q in questions]
        flags = [[False] * k for _ in questions]
        return Samples(texts, flags, flags)


def test_a_source_with_its_own_convention_is_asked_and_read_its_way(final, scorer):
    sampler = Replies(QWEN3.replace(group=2))
    s = screening.screen_tasks(sampler, scorer, final, final.tasks(range(4)))
    assert {m[0]["content"] for m in sampler.asked} == {final_source.SYSTEM_PROMPT}
    assert (s.system_prompt, s.extraction) == (final_source.SYSTEM_PROMPT, "final_line")  # recorded
    assert s.pass1 == 1.0 and s.extracted == 1.0 and s.ceiling == 1.0  # the gold, written FINAL: n, reads back
    assert {"system_prompt", "extraction"} <= set(s.as_dict())  # what predictions.json and the catalog hold


def test_a_trainees_own_setting_overrides_the_sources(final, scorer):
    sampler = Replies(QWEN3.replace(group=2, system_prompt="Be brief.", extraction="answer_tags"))
    s = screening.screen_tasks(sampler, scorer, final, final.tasks(range(4)))
    assert {m[0]["content"] for m in sampler.asked} == {"Be brief."}
    assert (s.system_prompt, s.extraction) == ("Be brief.", "answer_tags")
    assert s.pass1 == 0.0 and s.extracted == 0.0  # "FINAL: n" holds no <answer> tags
    assert s.ceiling == 1.0  # the gold, written in tags, reads back through the trainee's own extraction


def test_a_source_that_declares_nothing_is_asked_as_the_default_sources(final):
    from reasoning_gym.utils import SYSTEM_PROMPTS
    source.register("toy", "toy_source")  # the fixture's reset() forgets it with "final"
    rg, toy = QWEN3.for_source("reasoning_gym"), QWEN3.for_source("toy")
    assert (rg.system_prompt, rg.extraction) == (toy.system_prompt, toy.extraction) == (SYSTEM_PROMPTS["direct"],
                                                                                      "answer_tags")
    assert QWEN3.replace(extraction="last_number").for_source("final").extraction == "last_number"
    assert QWEN3.replace(extraction="last_number").for_source("final").system_prompt == final_source.SYSTEM_PROMPT


def test_an_extraction_a_source_brings_is_validated_by_name(final, monkeypatch):
    monkeypatch.delitem(extraction.EXTRACTORS, "final_line", raising=False)  # as in a process that never read it
    monkeypatch.delitem(extraction._BROUGHT, "final_line", raising=False)
    t = trainee.resolve("qwen3(extraction='final_line')")  # the registered sources are looked through
    assert t.clean("so FINAL: 12") == "12" and t.written("3") == "FINAL: 3"
    with pytest.raises(TraineeError) as e:
        trainee.resolve("qwen3(extraction='final_lines')")
    assert "unknown extraction 'final_lines'; use one of" in str(e.value) and "final_line" in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("attribute, value, fragment", [
    ("EXTRACTION", "nope", "source 'final': EXTRACTION: unknown extraction 'nope'"),
    ("EXTRACTION", 3, "source 'final': SYSTEM_PROMPT and EXTRACTION must be strings"),
    ("EXTRACTORS", {"whole": (str, str)}, "source 'final': extraction 'whole' is already 'shortlist''s"),
    ("EXTRACTORS", {"final_line": len}, "EXTRACTORS['final_line'] must be a (read, write) pair"),
    ("SYSTEM_PROMPT", "x" * 40_000, "system_prompt='xxx"),
])
def test_a_source_whose_convention_cannot_be_used_is_one_line(final, monkeypatch, attribute, value, fragment):
    monkeypatch.setattr(final_source, attribute, value)
    with pytest.raises(TraineeError) as e:
        QWEN3.for_source("final")
    assert fragment in str(e.value) and "\n" not in str(e.value)
