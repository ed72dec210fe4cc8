"""openenv_wire.py's assumptions about openenv-core (its module docstring), held against openenv-core itself:
another version that breaks one fails here, by name, rather than as a misread task elsewhere."""
import pytest

from shortlist.sources import openenv_wire as wire
from tests.conftest import needs_openenv

pytestmark = needs_openenv


def test_an_environment_without_its_own_metadata_reports_openenv_cores_default_which_is_no_version_of_its_own():
    from openenv.core.env_server.interfaces import Environment
    from openenv.core.env_server.types import EnvironmentMetadata, Observation, State

    class Stock(Environment):
        def reset(self, seed=None, episode_id=None, **kwargs):
            return Observation()

        def step(self, action, timeout_s=None, **kwargs):
            return Observation(done=True)

        @property
        def state(self):
            return State()
    default = Stock().get_metadata().model_dump()
    assert default["version"] == wire.DEFAULT_VERSION and wire.own_version(default) is None
    own = EnvironmentMetadata(name="Stock", description="Stock environment", version="2.1").model_dump()
    assert wire.own_version(own) == "2.1"


def test_a_tool_calling_environments_schema_is_told_apart_and_no_observations_metadata_crosses_the_wire():
    from fastapi.testclient import TestClient
    from openenv.core.env_server.serialization import serialize_observation
    from openenv.core.env_server.types import Observation

    import mcp_openenv
    import rg_openenv
    assert wire.is_tools(TestClient(mcp_openenv.app).get("/schema").json())
    assert not wire.is_tools(TestClient(rg_openenv.app).get("/schema").json())
    # why the question and the gold answer must be fields: metadata (where finqa_env puts them) is not sent
    assert "metadata" not in serialize_observation(Observation(metadata={"question": "q"}))["observation"]


def test_a_servers_refusal_is_said_in_its_own_words(served):
    async def wrong_field(made):
        await made.reset(seed=0)
        return await wire.step(made, "7", "llm_response", None)
    made = wire.client(served.url, False, 30.0, 4.0)
    with pytest.raises(wire.Refused, match=r"^it refused the answer sent as \{'llm_response': \.\.\.\}: Invalid "
                                           r"message \(VALIDATION_ERROR\)$") as e:
        wire.session(made, wrong_field, RuntimeError)
    assert e.value.stage == "step"
    assert wire.said(RuntimeError("Server error: boom (code: EXECUTION_ERROR)")) == "boom (EXECUTION_ERROR)"
