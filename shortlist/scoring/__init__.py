"""Scoring a model's answer safely: the Scorer (scorer.py) and the kernel layers around each answer's
process (zygote.py, isolation.py, syscalls.py, landlock.py, hugepages.py)."""
from shortlist.scoring.scorer import DEADLINE_S, RETRIES, ScoreCounts, Scorer  # noqa: F401
