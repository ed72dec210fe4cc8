"""Both command lines, python -m shortlist and python -m proof, held to one behaviour: the same refusals, one
Placement built once, the same default trainee, the same source flags. Tests that cross from shortlist to proof."""
import socket
import subprocess
import sys

import pytest

from shortlist import executors, trainee
from shortlist.__main__ import main as shortlist_main
from shortlist.sources import flags, source
from shortlist.trainee import QWEN3
from tests.conftest import needs_ray


@pytest.mark.parametrize("value", ["²", "٣", "１"])
def test_a_per_gpu_of_non_ascii_digits_is_one_line_in_both_commands(value, capsys, no_model_loads, tmp_path):
    """str.isdigit() holds for '²' (which int() then refused with a traceback) and int() reads '٣' as 3."""
    from proof.__main__ import main as proof_main
    for main, argv in ((shortlist_main, ["screen", "--all", "--model", "tiny", "--out", str(tmp_path / "c")]),
                       (proof_main, ["run", "--preset", "smoke", "--out", str(tmp_path / "p")])):
        assert main([*argv, "--per-gpu", value]) == 2
        err = capsys.readouterr().err.strip()
        assert err == f"error: --per-gpu {value}: give a whole number of jobs per GPU, 1 to 64, or auto"
    assert list(tmp_path.iterdir()) == []


@needs_ray
@pytest.mark.parametrize("command", [["shortlist", "screen", "--all", "--model", "tiny"],
                                     ["proof", "run", "--preset", "smoke"]], ids=["catalog", "proof"])
def test_a_ray_address_where_nothing_answers_is_one_quiet_line_and_writes_nothing(command, tmp_path):
    """ray.init retries such an address for minutes, printing its log; the command had not returned after 120 s."""
    out = tmp_path / "out"
    with socket.socket() as s:  # a port of this machine that nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    done = subprocess.run([sys.executable, "-m", *command, "--out", str(out), "--executor", "ray", "--address",
                           f"127.0.0.1:{port}"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == (f"error: cannot join a Ray cluster at --address 127.0.0.1:{port}: nothing answers there "
                           f"(Connection refused) (start one with `ray start --head`)\n")
    assert not out.exists()


@pytest.mark.parametrize("command", ["shortlist", "proof"])
def test_each_command_line_builds_its_placement_once(command, monkeypatch, tmp_path, no_model_loads):
    """Both main()s built one for the source's serving() and another for the run: a Ray head probed twice."""
    from proof import runner
    from proof.__main__ import main as proof_main
    from shortlist.__main__ import main as shortlist_main
    built, handed = [], []
    real = executors.from_args
    monkeypatch.setattr(executors, "from_args", lambda args: built.append(real(args)) or built[-1])
    monkeypatch.setattr(runner, "run", lambda settings, where=None: handed.append(where) or runner.Outcome(tmp_path, {}))
    if command == "proof":
        assert proof_main(["run", "--preset", "smoke", "--out", str(tmp_path / "p"), "--per-gpu", "2"]) == 0
        assert handed == built and built[0].per_gpu == 2
    else:  # refused after the placement is read: --tasks 0
        assert shortlist_main(["screen", "--all", "--model", "tiny", "--out", str(tmp_path / "c"), "--tasks", "0"]) == 2
    assert len(built) == 1


def test_both_command_lines_and_the_settings_default_to_the_one_default_trainee():
    from proof import settings
    from shortlist import defaults
    from shortlist.__main__ import _parser
    assert trainee.resolve(defaults.TRAINEE) is QWEN3
    assert _parser().parse_args(["screen"]).trainee == settings.DEFAULTS["trainee"] == defaults.TRAINEE


OPTIONED = '''"""A source that takes an option of its own."""
OPTIONS = {"level_cap": "the highest level this source serves"}
VERSION = "1"
taken = {}
def configure(level_cap=None): taken.update(level_cap=level_cap)
def names(): return ["count"]
def settings(family): return set()
def validate(family, config): pass
def entry(family, config, seed): return {"question": str(seed), "answer": str(seed)}
def scorer(family, config): return lambda answer, task: float(answer == task["answer"])
def levels(family): return 1
def level(family, at): return {}
def preload(): pass
'''


def test_a_source_modules_options_are_flags_of_both_command_lines(tmp_path, monkeypatch):
    from proof.__main__ import _parser as proof_parser
    from shortlist.__main__ import _parser as shortlist_parser
    (tmp_path / "optioned_source.py").write_text(OPTIONED)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(source, "SOURCES", dict(source.SOURCES))
    source.register("optioned", "optioned_source")
    for parser, argv in ((shortlist_parser(), ["screen"]), (proof_parser(), ["run"])):
        args = parser.parse_args([*argv, "--source", "optioned", "--level-cap", "3"])
        assert flags.choice(args).options == (("level_cap", "3"),)
        with pytest.raises(source.ChoiceError, match="--level-cap goes with --source optioned"):
            flags.choice(parser.parse_args([*argv, "--level-cap", "3"]))
    assert "optioned_source" not in sys.modules  # the flags were read from its text: --help imports no source
    try:
        source.Choice("optioned", {"level_cap": "3"}).configure()
        assert source.get("optioned").taken == {"level_cap": "3"}
        with pytest.raises(source.ChoiceError, match="--env-url is not an option of --source optioned"):
            source.Choice("optioned", {"env_url": "http://x"}).configure()
    finally:
        source.reset()
        source.Choice().configure()
