import os
import sys

# a source of environments from outside the package (tests/fixtures/sources): importable here, in the task
# builder and in the scoring processes, which take PYTHONPATH from this process
FIXTURE_SOURCES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "sources")
sys.path.insert(0, FIXTURE_SOURCES)
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [FIXTURE_SOURCES, os.environ.get("PYTHONPATH")]))

if os.environ.get("PYTEST_XDIST_WORKER"):  # two workers on two cores: one thread each, kernels included
    os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402

from shortlist import scoring  # noqa: E402
from shortlist.generation import sampling  # noqa: E402
from shortlist.models import tiny  # noqa: E402


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group into the test's id
def pytest_collection_modifyitems(items):
    """Every test that reads the smoke run goes to one xdist worker, so the batch runs once."""
    for item in items:
        if "smoke_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("smoke"))


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
