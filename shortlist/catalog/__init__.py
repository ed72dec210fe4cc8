"""The catalog: every family at the difficulty levels where GRPO can learn. records.py (what a run
holds), run.py (the run, its fan-out and summary), walk.py (one worker), store.py (json, csv, html)."""
