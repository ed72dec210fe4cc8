import pytest

from shortlist import sampling, scoring, tiny


@pytest.fixture(scope="session")
def tiny_model():
    """The offline tiny trainee (built once per machine, then cached), loaded once per session.

    Read-only: a test that trains loads its own copy."""
    tiny.ensure()
    return sampling.load(tiny.NAME)


@pytest.fixture(scope="session")
def scorer():
    with scoring.Scorer(workers=2) as s:
        yield s


@pytest.fixture
def no_model_loads(monkeypatch):
    """Fail the test if anything loads a model: bad input must be refused before that."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")
    monkeypatch.setattr(sampling, "load", refuse)
    import transformers
    monkeypatch.setattr(transformers.AutoModelForCausalLM, "from_pretrained", refuse)
