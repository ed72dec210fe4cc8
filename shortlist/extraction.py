"""How a completion's answer is taken out of it, and how each source's families are asked for one.

An extraction is named: a built-in (BUILT_IN), `regex:<pattern>`, or a name a source brings in its
optional EXTRACTORS, {name: (read, write)}: read(completion) -> the answer or None (it scores 0),
write(answer) -> that answer written the way the trainee is asked to write it (the audit reads the
gold answer back through it). A source's names are registered when it is read here (convention(),
or an extraction name not known yet: the registered sources are looked through in turn), so a
trainee's extraction is validated by name however it was given. Reasoning Gym brings "answer_tags"
(its own extract_answer: the text inside the last <answer> tags).

A source's convention is its optional SYSTEM_PROMPT and EXTRACTION: how its families are asked and
read where the trainee leaves those to the source. A source that declares neither is asked and read
as the default source's families are (Reasoning Gym's "direct" prompt and answer tags: the
convention OpenEnv's reasoning_gym_env expects too).
"""
from __future__ import annotations

import functools
import re

import regex as regex_  # transformers' own dependency: a search that stops at a timeout, which re's cannot

from shortlist import regex_groups
from shortlist.errors import OneLine, one_line


class ExtractionError(OneLine, ValueError):
    """An extraction that cannot be used; the message is one line."""


THINK = re.compile(r"<think>.*?</think>", re.DOTALL)  # thinking is removed before any extraction reads
_ANSWER_LINE = re.compile(r"answer\s*(?:is)?\s*:\s*(.+)", re.IGNORECASE)
_NUMBER = re.compile(r"-?\d+(?:,\d{3})*(?:\.\d+)?")


def _answer_line(text: str) -> str | None:
    found = _ANSWER_LINE.findall(text)
    return found[-1].strip().strip("*. ") or None if found else None


def _last_number(text: str) -> str | None:
    found = _NUMBER.findall(text)
    return found[-1].replace(",", "") if found else None


def _whole(text: str) -> str | None:
    return text.strip() or None


def _answer_line_written(answer: str) -> str:
    return f"Answer: {answer}"


def _as_is(answer: str) -> str:
    return answer


BUILT_IN = {  # name -> (read, write)
    "answer_line": (_answer_line, _answer_line_written),  # the text after the last "Answer:"
    "last_number": (_last_number, _answer_line_written),  # the last number (numeric families only), asked on a line
    "whole": (_whole, _as_is),  # the whole completion, stripped (a source whose reply is the answer)
}
EXTRACTORS = dict(BUILT_IN)  # and the names the sources read so far brought
_BROUGHT: dict[str, str] = {}  # name -> the source that brought it


def register(name: str, read, write, by: str) -> None:
    """A source's own extraction under its name; a name another source or a built-in holds is refused."""
    if not name.isidentifier():
        raise ExtractionError(f"source {by!r}: extraction name {name!r}: use letters, digits and _ only")
    if not (callable(read) and callable(write)):
        raise ExtractionError(f"source {by!r}: extraction {name!r} must be a (read, write) pair of functions")
    holder = "shortlist" if name in BUILT_IN else _BROUGHT.get(name, by)
    if holder != by:
        raise ExtractionError(f"source {by!r}: extraction {name!r} is already {holder!r}'s")
    EXTRACTORS[name], _BROUGHT[name] = (read, write), by


def bring(name: str, module) -> None:
    """Register the extractions a source module brings (its optional EXTRACTORS)."""
    for extraction, pair in dict(getattr(module, "EXTRACTORS", {})).items():
        if not (isinstance(pair, tuple) and len(pair) == 2):
            raise ExtractionError(f"source {name!r}: EXTRACTORS[{extraction!r}] must be a (read, write) pair")
        register(extraction, *pair, by=name)


def _look_up(name: str) -> None:
    """Read the registered sources until one brings the name (a source that cannot load brings none)."""
    from shortlist.sources import source as source_
    for src in [source_.DEFAULT] + [s for s in source_.SOURCES if s != source_.DEFAULT]:  # the default's names first
        if name in EXTRACTORS:
            return
        try:
            module = source_.get(src)
        except Exception:  # noqa: BLE001  its families fail loudly where they are named; here it brings nothing
            continue
        bring(src, module)


def _pair(name: str):
    if name.startswith("regex:"):
        return _by_pattern(name[len("regex:"):]), _as_is
    if name not in EXTRACTORS:
        _look_up(name)
    if name not in EXTRACTORS:
        raise ExtractionError(f"unknown extraction {name!r}; use one of {', '.join(EXTRACTORS)} or regex:<pattern>")
    return EXTRACTORS[name]


def extractor(name: str):
    """The function named by an extraction: read(completion) -> answer or None. A regex's answer is its
    last match (its first group if it has one)."""
    return _pair(name)[0]


def written(name: str, answer: str) -> str:
    """An answer written the way an extraction asks for one: in <answer> tags, on an "Answer:" line (also
    what a last-number reader is asked for), as it is for a regex or the whole completion."""
    return _pair(name)[1](answer)


def clean(name: str, text: str) -> str | None:
    """The answer in a completion (thinking removed), or None when it holds none: it scores 0."""
    return extractor(name)(THINK.sub("", text))


def convention(name: str) -> tuple[str, str]:
    """(system prompt, extraction) a source's families are asked and read with where the trainee leaves
    them to the source: its SYSTEM_PROMPT and EXTRACTION, each the default source's where it has none."""
    from shortlist.sources import source as source_
    module, default = source_.get(name), source_.get(source_.DEFAULT)
    bring(source_.DEFAULT, default)  # first: another source cannot take the default source's names
    bring(name, module)
    prompt = getattr(module, "SYSTEM_PROMPT", None)
    extraction = getattr(module, "EXTRACTION", None)
    prompt = default.SYSTEM_PROMPT if prompt is None else prompt
    extraction = default.EXTRACTION if extraction is None else extraction
    if not isinstance(prompt, str) or not isinstance(extraction, str):
        raise ExtractionError(f"source {name!r}: SYSTEM_PROMPT and EXTRACTION must be strings")
    try:
        extractor(extraction)
    except ExtractionError as e:
        raise ExtractionError(f"source {name!r}: EXTRACTION: {e}") from None
    return prompt, extraction


# A `regex:` extraction runs the user's pattern on every completion, and a pattern that backtracks
# (nested quantifiers such as (a+)+$) takes exponential time on a completion that nearly matches it; Python's
# re cannot be stopped. So patterns run through the `regex` module (re's syntax) with a timeout: a completion
# whose extraction passes REGEX_TIMEOUT_S holds no answer (it scores 0). A pattern that passes
# REGEX_PROBE_TIMEOUT_S on any of a few texts such a pattern chokes on (runs of one kind of character, 4,096
# long, that end in a mismatch) is refused when the trainee is made, in one line; the timeout bounds what the
# probes do not catch. regex's timeouts count this process's CPU time, so a loaded machine does not trip them.
REGEX_TIMEOUT_S = 0.1  # per completion: a sound pattern takes microseconds on the longest completion
REGEX_PROBE_TIMEOUT_S = 0.25  # per probe text: 4,096 characters take a sound pattern well under a millisecond
REGEX_MAX = 1_000  # characters in a pattern
REGEX_RUNS = ("a", "0", " ", "\n", "a0 ", "<answer>", ".,", "ab")  # and each letter or digit the pattern names


def _probes(source: str) -> list[str]:
    runs = dict.fromkeys([*REGEX_RUNS, *sorted({c for c in source if c.isalnum()})[:16]])
    return [run * (4096 // len(run)) + "\x00!" for run in runs]


@functools.lru_cache(maxsize=64)
def _by_pattern(source: str):
    """A pattern compiled and probed once, however many completions it reads."""
    name = f"regex:{source}"
    if len(source) > REGEX_MAX:
        raise ExtractionError(f"extraction regex: a pattern of {len(source):,} characters (at most {REGEX_MAX:,})")
    try:
        pattern = regex_.compile(source, regex_.DOTALL)
    except (regex_.error, ValueError, OverflowError, RecursionError) as e:
        raise ExtractionError(f"extraction {name!r}: {one_line(e)}") from None
    if pattern.groups and regex_groups.first_group_optional(source):
        raise ExtractionError(f"extraction {name!r}: a match can leave its first group unset (the answer is the "
                              f"first group): make that group required, or the others non-capturing (?:...)")
    for probe in _probes(source):
        try:
            pattern.search(probe, timeout=REGEX_PROBE_TIMEOUT_S)
        except TimeoutError:
            raise ExtractionError(f"extraction {name!r}: more than {REGEX_PROBE_TIMEOUT_S:g} s of CPU on a "
                                  f"{len(probe):,}-character text (it backtracks, as nested quantifiers such as "
                                  f"(a+)+ do): simplify the pattern") from None

    def by_pattern(text: str) -> str | None:
        try:
            found = list(pattern.finditer(text, timeout=REGEX_TIMEOUT_S))
        except TimeoutError:  # a completion the pattern backtracks on holds no answer
            return None
        answer = (found[-1].group(1) if pattern.groups else found[-1].group(0)) if found else None
        return answer.strip() if answer is not None else None  # an unset group holds no answer
    return by_pattern
