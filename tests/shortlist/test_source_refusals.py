"""A source module that cannot serve is one line, and one source cannot spoil another's names."""
import argparse
import textwrap

import pytest

from shortlist import trainee
from shortlist.errors import OneLine
from shortlist.sources import flags, source


@pytest.fixture
def module(tmp_path, monkeypatch):
    """write(name, text): a source module importable under name, registered as a source of that name."""
    monkeypatch.syspath_prepend(str(tmp_path))

    def write(name, text):
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(text))
        source.register(name, name)
    yield write
    source.reset()


TOY = "from toy_source import *  # the toy source's protocol\n"


def test_options_that_are_no_literal_dict_are_one_line_at_the_command_line(module, capsys):
    module("computed", TOY + "OPTIONS = dict(toy_opt='x')\n")
    with pytest.raises(source.ChoiceError, match="OPTIONS must be a literal dict") as e:
        source.options("computed")
    assert "\n" not in str(e.value)
    with pytest.raises(SystemExit) as done:
        flags.add_arguments(argparse.ArgumentParser(prog="x"))
    assert done.value.code == 2 and "OPTIONS must be a literal dict" in capsys.readouterr().err


def test_annotated_options_are_read_as_plain_ones(module):
    module("annotated", TOY + "OPTIONS: dict = {'region': 'where it runs'}\n")
    assert source.options("annotated") == {"region": "where it runs"}


def test_an_option_a_command_already_has_is_refused_in_one_line(module, capsys):
    module("clash", TOY + "OPTIONS = {'out': 'a folder'}\n")
    p = argparse.ArgumentParser(prog="x")
    p.add_argument("--out")
    with pytest.raises(SystemExit) as done:
        flags.add_arguments(p)
    assert done.value.code == 2 and "its option 'out' is already a flag of this command" in capsys.readouterr().err


def test_a_registered_module_that_cannot_be_imported_is_one_line():
    source.register("missing", "no_such_package.no_such_module")
    try:
        with pytest.raises(OneLine, match="its module no_such_package.no_such_module cannot be imported"):
            source.get("missing")
        with pytest.raises(OneLine, match="cannot be imported"):
            source.options("missing")
    finally:
        source.reset()


def test_a_source_cannot_take_the_default_sources_extraction_names(module):
    module("thief", TOY + "EXTRACTORS = {'answer_tags': (str, str)}\nEXTRACTION = 'answer_tags'\n")
    with pytest.raises(trainee.TraineeError, match="'answer_tags' is already 'reasoning_gym''s"):
        trainee.QWEN3.for_source("thief")
    assert trainee.QWEN3.for_source(source.DEFAULT).extraction == "answer_tags"  # Reasoning Gym's still reads


def test_what_serves_on_this_machine_is_refused_when_jobs_run_on_a_cluster():
    chosen = source.Choice("openenv", {"env_local": "app.py:app"})
    with pytest.raises(source.ChoiceError, match="--env-local serves on this machine") as e:
        with chosen.serving(remote=True):
            pass
    assert "\n" not in str(e.value)


def test_a_name_already_taken_is_refused_and_the_same_module_again_changes_nothing():
    with pytest.raises(source.ChoiceError, match="source name 'openenv' is taken by shortlist.sources.openenv"):
        source.register("openenv", "toy_source")  # a built-in name: families spelled openenv.x keep their meaning
    assert source.SOURCES["openenv"] == "shortlist.sources.openenv"
    try:
        source.register("toy", "toy_source")
        loaded = source.get("toy")
        source.register("toy", "toy_source")  # the same module again: kept as imported
        assert source.get("toy") is loaded
        with pytest.raises(source.ChoiceError, match="'toy' is taken by toy_source: register final_source under"):
            source.register("toy", "final_source")
        with pytest.raises(source.ChoiceError, match="taken by toy_source"):  # a run's choice naming another module
            source.Choice(modules={"toy": "final_source"}).configure()
    finally:
        source.reset()
    assert "toy" not in source.SOURCES and set(source.SOURCES) == set(source.BUILT_IN)
    source.register("toy", "final_source")  # free again after reset()
    source.reset()
