"""Tasks built as a process with PYTHONHASHSEED=0 builds them, whatever this process's hash seed.

Some Reasoning Gym families iterate over sets of strings while generating a task
(isomorphic_strings, knight_swap, polynomial_multiplication, ransom_note, word_ladder), so the task
for a seed depends on the interpreter's hash seed: a Jupyter kernel started by hand and a scoring
process would disagree on what was asked. Python fixes the hash seed when the interpreter starts,
so a process that does not run with PYTHONHASHSEED=0 asks a helper that does: one per process,
started on first use, JSON lines in and out. Any source's tasks are built this way.

    python -c "from shortlist.sources.tasks import main; main()"    # the helper (build() starts it)
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading

from shortlist import process
from shortlist.errors import OneLine, one_line
from shortlist.sources.meaning import QUESTION, MeaningError
from shortlist.sources import source as source_

_helper: subprocess.Popen | None = None
_lock = threading.Lock()


def fixed() -> bool:
    """True when this interpreter runs with PYTHONHASHSEED=0 (the only seed without randomization)."""
    return sys.flags.hash_randomization == 0


class Refused(OneLine, RuntimeError):
    """A task the builder refused in one line (a key function that cannot read it: sources/meaning.py)."""
    exit_code = 1


def build(source: str, name: str, config: dict, seeds: list[int], keyed: bool = False) -> list[dict]:
    """{"seed", "question", "answer"} for each seed, as every process of the project builds them; keyed:
    with "meaning", the key each is reserved by, where its source keys the family otherwise than by its text."""
    if fixed() or source_.remote(source):  # a server's tasks do not depend on this process's hash seed
        return _build(source, name, config, seeds, keyed)
    with _lock:
        helper = _start()
        helper.stdin.write(json.dumps({"source": source_.as_request(source), "name": name, "config": config,
                                       "seeds": seeds, "keyed": keyed}) + "\n")
        helper.stdin.flush()
        reply = json.loads(helper.stdout.readline() or '{"error": "the task builder died"}')
    if "error" in reply:
        if reply.get("refused"):  # the line says it all (it names the family)
            raise Refused(reply["error"])
        raise RuntimeError(f"building {name} tasks: {reply['error']}")
    return reply["tasks"]


def entry(source: str, name: str, config: dict, seed: int) -> dict:
    """The source's entry (question, answer, metadata) for a seed: call it where the hash seed is 0."""
    return source_.get(source).entry(name, config, seed)


def meaning(source: str, name: str) -> str:
    """Which key a family's questions are reserved by: its source's meaning(), else the text."""
    src = source_.get(source)
    return src.meaning(name) if hasattr(src, "meaning") else QUESTION


def _build(source: str, name: str, config: dict, seeds: list[int], keyed: bool = False) -> list[dict]:
    """Each task as the project keeps it; where it carries no gold answer, "valid": an answer its
    source knows to be valid (the source's optional known_answer()), or None: the audit checks the
    ceiling with it. keyed, and the family keyed by its meaning: "meaning", its key (build())."""
    src, tasks = source_.get(source), []
    keyed = keyed and meaning(source, name) != QUESTION
    entries = src.entries(name, config, seeds) if hasattr(src, "entries") else (
        entry(source, name, config, seed) for seed in seeds)
    for seed, task in zip(seeds, entries):
        kept = {"seed": seed, "question": task["question"], "answer": task["answer"]}
        if task["answer"] is None and hasattr(src, "known_answer"):
            kept["valid"] = src.known_answer(name, config, task)
        if keyed:
            kept["meaning"] = _meaning(src, name, config, task, seed)
        tasks.append(kept)
    return tasks


def _meaning(src, name: str, config: dict, task: dict, seed: int) -> str:
    """A task's key from its source's meaning_of(); one that raises, or gives no key, is one line."""
    try:
        found = src.meaning_of(name, config, task)
    except Exception as e:  # noqa: BLE001  a task the key cannot read (another version of the source?)
        found, why = None, one_line(e, 160)
    else:
        why = None if isinstance(found, str) and found else f"it gave {str(found)[:60]!r}, not a non-empty string"
    if why:
        raise MeaningError(f"{name}: its meaning key {src.meaning(name)} cannot read the task of seed {seed} ({why}); "
                           f"is its source another version than the key was written for?")
    return found


def _start() -> subprocess.Popen:
    global _helper
    if _helper is None or _helper.poll() is not None:
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's shortlist wins
        path = os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])
        _helper = subprocess.Popen([sys.executable, "-c", "from shortlist.sources.tasks import main; main()"],
                                   text=True, encoding="utf-8",
                                   stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                   env={**os.environ, "PYTHONHASHSEED": "0", "PYTHONPATH": path})
        process.close_at_exit(_helper, _stop)
    return _helper


STOP_S = 10.0  # what the helper gets to end once its stdin closes, before it is killed


def _stop(helper: subprocess.Popen) -> None:
    """The helper ends once its stdin closes (main()); one that has not within STOP_S (a loaded machine,
    a build that does not return) is killed, so that this process exits without a traceback."""
    if helper.poll() is None:
        helper.stdin.close()
        try:
            helper.wait(STOP_S)
        except subprocess.TimeoutExpired:
            helper.kill()
            helper.wait()


def main() -> None:
    assert fixed(), "the task builder must run with PYTHONHASHSEED=0"
    # its parent's Ctrl-C (a kernel shut down by papermill sends the group SIGINT) is the parent's to
    # handle: the helper ends when the parent closes its stdin, or dies with it, without a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    sys.stdout = sys.stderr  # some families print while they build; the protocol owns the real stdout
    for line in sys.stdin:
        request = json.loads(line)
        try:
            source_.from_request(request["source"])
            reply = {"tasks": _build(request["source"][0], request["name"], request["config"], request["seeds"],
                                     request.get("keyed", False))}
        except Exception as e:  # noqa: BLE001  the caller raises it, in its own process
            reply = {"error": one_line(e), "refused": isinstance(e, OneLine)}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()

