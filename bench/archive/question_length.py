"""The longest question each Reasoning Gym family builds at each level of its own curriculum (seeds 0..N-1),
in characters: what shortlist/sources/budget.py's QUESTION_MAX is set from.

    python bench/archive/question_length.py --seeds 4 > bench/results/question_length.cpu.txt

A build that takes more than --cpu-s seconds of CPU is stopped and named (the family's own budget is
budget.BUILD_CPU_S, for seed 0 of a config it does not define).
"""
from __future__ import annotations

import argparse
import resource
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from shortlist import sources  # noqa: E402
from shortlist.sources import source as source_  # noqa: E402


class Slow(Exception):
    pass


def _stop(*_):
    raise Slow()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--cpu-s", type=float, default=30.0)
    args = ap.parse_args()
    src = source_.get(source_.DEFAULT)
    signal.signal(signal.SIGVTALRM, _stop)
    longest, started = [], time.time()
    for name in sources.creatable():
        configs = [{}] + [src.level(name, at) for at in range(src.levels(name))]
        best, where, slow = 0, None, []
        for at, config in enumerate(configs):
            for seed in range(args.seeds):
                signal.setitimer(signal.ITIMER_VIRTUAL, args.cpu_s)
                try:
                    chars = len(str(src.entry(name, config, seed)["question"]))
                except Slow:
                    slow.append(f"level {at - 1} seed {seed}")
                    break
                except Exception as e:  # noqa: BLE001  a level that does not build: said, not measured
                    slow.append(f"level {at - 1}: {type(e).__name__}")
                    break
                finally:
                    signal.setitimer(signal.ITIMER_VIRTUAL, 0)
                if chars > best:
                    best, where = chars, f"level {at - 1} seed {seed}" if at else f"defaults seed {seed}"
        longest.append((best, name, where, slow))
        print(f"{best:>8} {name} ({where}){' not measured: ' + ', '.join(slow) if slow else ''}", flush=True)
    top = max(longest)
    print(f"longest: {top[0]:,} characters ({top[1]}, {top[2]}); {len(longest)} families, "
          f"{args.seeds} seeds per level, {time.time() - started:.0f} s, "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10} MB peak")
    return 0


if __name__ == "__main__":
    sys.exit(main())
