"""The adversarial corpus of protocol-notes.md through every creatable family (issue: scoring that
a model's answer cannot hang, crash or exploit)."""
import os
import time

import pytest

from shortlist import families
from shortlist.scoring import Scorer

DEADLINE_S = 0.5
MARGIN_S = 1.5  # killing the worker and forking its replacement


def corpus(marker: str) -> list[str]:
    """Answers a model that explores might write, and worse."""
    return [
        "9**9**9", "10**10**10", "9**9**8", "2**2**2**2**2**2", "1e999999999", "-1e999999999", "10**-10**10",
        f"__import__('os').system('touch {marker}/system')",
        f"exec(\"open('{marker}/exec', 'w').write('x')\")",
        f"open('{marker}/open', 'w').write('x')",
        f"__import__('pathlib').Path('{marker}/pathlib').touch()",
        f"__import__('subprocess').run(['touch', '{marker}/subprocess'])",
        f"__import__('shutil').copy('/etc/hostname', '{marker}/copy')",
        "__import__('socket').create_connection(('1.1.1.1', 53), 1)",
        "__import__('os').kill(__import__('os').getppid(), 9)",
        "__import__('os')._exit(3)", "exit()", "raise SystemExit", "[x for x in iter(int, 1)]",
        "(" * 5000 + ")" * 5000, "[" * 100000, "{" * 10000, "-" * 10000 + "1",
        "x" * 1_000_000, "9" * 1_000_000, "[0] * 10**10", "' ' * 10**11", "list(range(10**10))",
        "\x00\x01\x02\x1b[2J\x7f", "\ud800", "\u202e1", "",
        '{"a": NaN}', "1e309", "[1, 2,", '{"__proto__": {"x": 1}}', "-0", "null", "[[[[[[[[]]]]]]]]", "Infinity",
    ]


def run_corpus(names: list[str], answers: list[str]) -> tuple[float, dict]:
    """Every answer to every family, one call each, timed from outside; returns the slowest call."""
    worst = 0.0
    with Scorer(workers=1, deadline_s=DEADLINE_S) as scorer:
        for name in names:
            oracle = families.parse(name).task(0)["answer"]
            scorer.score(name, [0], [str(oracle)])  # warm the worker for this family outside the timings
            for answer in answers:
                t = time.monotonic()
                [score] = scorer.score(name, [0], [answer])
                worst = max(worst, time.monotonic() - t)
                assert type(score) is float and 0.0 <= score <= 1.0, (name, answer[:40], score)
        return worst, {k: vars(v) for k, v in scorer.counts.items()}


def test_adversarial_corpus_through_every_creatable_family(tmp_path):
    marker = tmp_path / "pwned"
    marker.mkdir()
    home_before = set(os.listdir(os.path.expanduser("~")))
    answers = corpus(str(marker))
    names = families.creatable()
    assert len(names) >= 100
    started = time.monotonic()
    worst, per_family = run_corpus(names, answers)  # one worker: the hangs burn a core each, so more do not help
    total = time.monotonic() - started
    counts = list(per_family.values())
    summary = {k: sum(c[k] for c in counts) for k in ("timeouts", "crashes", "exceptions", "refused", "clamped")}
    print(f"\n{len(names)} families x {len(answers)} answers in {total:.1f} s; slowest call {worst:.2f} s; {summary}")
    assert worst < DEADLINE_S + MARGIN_S
    assert os.listdir(marker) == []  # nothing written outside the scratch directory
    assert set(os.listdir(os.path.expanduser("~"))) == home_before
    assert summary["refused"] > 0 and summary["timeouts"] > 0  # the attacks and the hangs did happen
