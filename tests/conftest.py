import importlib.util
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


def pytest_configure(config):
    """The tiny model built once, before xdist starts its workers (on CI's empty cache: the build's lines then
    come here, not in whichever test first loads it, whose stderr some tests read)."""
    if not hasattr(config, "workerinput") and not config.option.collectonly:
        tiny.ensure()


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


# --- an OpenEnv server (tests/fixtures/sources/rg_openenv.py), for the tests of sources/openenv.py ---
OPENENV = importlib.util.find_spec("openenv") is not None
# openenv-core is an optional extra: without it these tests skip, except in CI, which installs it (.ci/run)
needs_openenv = pytest.mark.skipif(not OPENENV and not os.environ.get("CI"),
                                   reason="openenv-core, an optional extra, is not installed here (CI installs it)")
# likewise Ray, for --executor ray; a local Ray cluster takes ~10 s to start here: its tests are marked slow
RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not RAY and not os.environ.get("CI"),
                               reason="Ray, an optional extra, is not installed here (CI installs it)")


class OpenEnvServer:
    """A fixture server (rg_openenv.py, or another script of tests/fixtures/sources) as a process of its own on
    127.0.0.1, on a free port; stop() kills it."""

    def __init__(self, *flags: str, script: str = "rg_openenv.py"):
        import socket
        import subprocess
        import tempfile
        import time
        import urllib.request
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        self.log = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(FIXTURE_SOURCES, script), str(self.port), *flags],
            env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": os.pathsep.join([root, os.environ["PYTHONPATH"]])},
            stdout=subprocess.DEVNULL, stderr=self.log)  # a file: a pipe nobody reads would fill and stall it
        for _ in range(600):  # its imports take seconds on a loaded machine
            try:
                urllib.request.urlopen(self.url + "/health", timeout=1).close()
                return
            except OSError:
                if self.process.poll() is not None:
                    self.log.seek(0)
                    raise RuntimeError(f"the OpenEnv server exited: {self.log.read().decode()[-2000:]}")
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("the OpenEnv server did not answer within 120 s")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        self.log.close()


@pytest.fixture(scope="session")
def openenv_server():
    """One Reasoning Gym server for the session (its URL); each test names it with served()."""
    if not OPENENV:
        pytest.fail("openenv-core is not installed: pip install -e '.[openenv]' (make openenv)")
    server = OpenEnvServer()
    yield server
    server.stop()


@pytest.fixture
def served(openenv_server):
    """The session's server named for this test as the run's source choice names it (configured here; the
    processes the test starts get it with what they are handed); forgotten after."""
    chosen(openenv_server.url)
    yield openenv_server
    chosen(None)


def chosen(url: str | None, **reading):
    """--source openenv --env-url url and the options of its reading (env_action_field=...), configured in this
    process (None: Reasoning Gym, no server named)."""
    from shortlist.sources import source
    if url is None:
        source.Choice("openenv").configure()  # forgets the server
        return source.Choice().configure()
    return source.Choice("openenv", {"env_url": url, **reading}).configure()
