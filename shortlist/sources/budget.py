"""The budget a config of a family must build within, where its source does not define that config itself.

The rule: a config the source defines itself (its defaults, a curriculum level) is taken as it is; any other
one builds the task of seed 0 first, in a forked process held to BUILD_MEMORY bytes of memory more than this
process maps and BUILD_CPU_S seconds of CPU (BUILD_WALL_S of wall time as a backstop), into a question of at
most QUESTION_MAX characters, and, past QUESTION_FLOOR, of at most QUESTION_GROWTH times the longest question the
family's own configs ask (seed 0 of its defaults and of its hardest level, built the same way). A size no
machine can build (chain_sum(max_terms=1000000000) grew to a MemoryError after 72 s) is then refused within
that budget, and a size that builds but asks what nothing in the family asks (letter_counting(min_words=
100000000): 50,322 characters, 347 times its hardest level's) in one line too, naming the settings beyond the
family's own curriculum. No magnitude cap would do: some families are exponential in a small number, and others
take values up to 2**31 at their own levels (count_bits); nor would one length for every family: circuit_logic's
own level 3 asks 54,787 characters (bench/results/question_length.cpu.txt).
"""
from __future__ import annotations

import functools
import math
import os
import resource
import select
import signal
import time

from shortlist import process
from shortlist.errors import one_line
from shortlist.sources import source as source_

# The budget for building one task of a config the source does not define itself (module docstring): twice
# the slowest seed-0 task of any Reasoning Gym family's hardest level, measured on the project's CPU machine
# (zebra_puzzles, 10.4 s of CPU; every other family under 3 s; jugs' hardest runs 169 s and then fails),
# and memory well above what any took (the whole process, Reasoning Gym imported, peaked at 228 MB
# building all of them)
BUILD_MEMORY = 512 << 20  # bytes of address space beyond what this process already maps
BUILD_CPU_S = 20
BUILD_WALL_S = 120  # a backstop behind the CPU limit: a loaded machine, a task that waits
QUESTION_MAX = 1_000_000  # characters: ~250k tokens, beyond the context of any model trained here (Qwen3-0.6B: 32k)
# a config beyond the family's own may ask this many times the longest question its own configs ask (a harder
# level of a family lengthens its question a few times over its curriculum: letter_counting's levels ask 49-163
# characters), and at least QUESTION_FLOOR characters (~1,000 tokens) whatever they ask
QUESTION_GROWTH = 16
QUESTION_FLOOR = 4_000


def levels(source: str, name: str) -> tuple:
    """The configs a source defines itself for a family: each curriculum level's overrides."""
    src, found = source_.get(source), []
    for at in range(src.levels(name)):
        try:
            found.append(src.level(name, at))
        except Exception:  # noqa: BLE001  a level that cannot be written as a config is not one of these
            pass
    return tuple(found)


def own_configs(source: str, name: str) -> tuple:
    return ({},) + levels(source, name)


def beyond(source: str, name: str, config: dict) -> list[str]:
    """The numeric settings of a config larger than any level of the family's curriculum gives them."""
    largest = {}
    for level in levels(source, name):
        for key, value in level.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                largest[key] = max(largest.get(key, 0), abs(value))
    return sorted(key for key, value in config.items() if isinstance(value, (int, float))
                  and not isinstance(value, bool) and abs(value) > largest.get(key, math.inf if largest else 0))


def too_long(source: str, name: str, chars: int) -> str | None:
    """Why a question of chars characters is more than the family may ask (module docstring), or None."""
    if chars > QUESTION_MAX:
        return f"one task's question is {chars:,} characters long (at most {QUESTION_MAX:,})"
    if chars <= QUESTION_FLOOR:
        return None
    own = own_longest(source, name)
    if own is not None and chars > QUESTION_GROWTH * own:
        return (f"one task's question is {chars:,} characters long, {chars / max(own, 1):,.0f} times the longest its "
                f"own configs ask ({own:,}; at most {QUESTION_GROWTH} times, or {QUESTION_FLOOR:,} characters)")
    return None


@functools.cache
def own_longest(source: str, name: str) -> int | None:
    """The longest question of seed 0 at the family's defaults and its hardest level (None: neither built
    within the budget, so only QUESTION_MAX holds)."""
    configs = [{}] + list(levels(source, name)[-1:])
    built = [chars for chars in (build(source, name, c) for c in configs) if isinstance(chars, int)]
    return max(built) if built else None


def build(source: str, name: str, config: dict) -> str | int | None:
    """How many characters the question of seed 0 has (an int), or why it cannot be built within the budget
    (module docstring), or None where nothing could be tried here.

    A fork of this process builds it (Reasoning Gym is already imported here; the hash seed does not
    matter for whether it builds), under rlimits of its own, and replies on a pipe."""
    if not hasattr(os, "fork"):
        return None
    read, write = os.pipe()
    try:
        pid = os.fork()
    except OSError:  # no process to spare (RLIMIT_NPROC, memory): the family's own validate() has judged it
        os.close(read)
        os.close(write)
        return None
    if pid == 0:  # the child: whatever happens, it ends here, never in the caller's code
        try:
            os.close(read)
            os.write(write, _build_one(source, name, config)[:4096])
        finally:
            os._exit(0)
    os.close(write)
    reply, deadline = b"", time.monotonic() + BUILD_WALL_S
    try:
        while True:
            ready, _, _ = select.select([read], [], [], max(0.0, deadline - time.monotonic()))
            chunk = os.read(read, 4096) if ready else None
            if not chunk:
                break
            reply += chunk
    finally:
        os.close(read)
        if not reply:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        _, status = os.waitpid(pid, 0)
    if reply.startswith(b"ok "):
        return int(reply.split()[1])
    if reply == b"memory" or os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGSEGV:
        return f"one task needs more than {BUILD_MEMORY >> 20} MiB of memory to build"
    if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
        return f"one task takes more than {BUILD_CPU_S} s of CPU to build"
    if not reply:
        return f"one task did not build within {BUILD_WALL_S} s"
    return f"building one task fails: {reply.decode('utf-8', 'replace').removeprefix('error ')}"


def _build_one(source: str, name: str, config: dict) -> bytes:
    """In the forked child: the task of seed 0 under the budget's rlimits, as a reply for the parent."""
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):  # the parent's handlers are not this child's
            signal.signal(sig, signal.SIG_DFL)
        process.to_devnull(0, 1, 2)  # what a family prints while it builds is not the parent's output
        _limit(resource.RLIMIT_AS, _mapped() + BUILD_MEMORY)
        _limit(resource.RLIMIT_CPU, BUILD_CPU_S)
        _limit(resource.RLIMIT_CORE, 0)
        return b"ok %d" % len(str(source_.get(source).entry(name, config, 0)["question"]))
    except MemoryError:
        return b"memory"
    except BaseException as e:  # noqa: BLE001  the parent says why, in one line
        return b"error " + one_line(e).encode("utf-8", "replace")


def _limit(which: int, value: int) -> None:
    _, hard = resource.getrlimit(which)
    resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))


def _mapped() -> int:
    """Bytes of address space this process maps now (its limit is set above it)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def refusal(source: str, name: str, config: dict) -> str | None:
    """Why config is beyond the budget, ending in the settings to lower, or None (a config the source defines
    itself, or one that builds within it)."""
    if config in own_configs(source, name):
        return None
    why = build(source, name, config)
    if isinstance(why, int):  # it built: a question of that many characters
        why = too_long(source, name, why)
    if not why:
        return None
    return f"{why}; lower {' or '.join(beyond(source, name, config) or sorted(config))}"
