"""Defaults that the settings, the CLI and the modules that use them share. Kept apart from those
modules so that reading settings or a report never imports torch."""
TRAINEE = "qwen3"  # the trainee profile a screen or a proof uses where none is given (trainee.PROFILES)
SAMPLE_BATCH = 0  # sequences per generate() call; 0: as many as fit (sampling.auto_batch)
SCORE_DEADLINE_S = 1.0  # a scorer call that takes longer scores 0.0 and costs its process
SCREEN_TASKS = 24  # tasks per family in screening
PREDICT_SEED = 500  # screening tasks are seeds PREDICT_SEED .. PREDICT_SEED + tasks - 1
SEED_MAX = 2**32 - 1  # numpy's and reasoning-gym's seeds are unsigned 32-bit
TASKS_MAX = 100_000  # tasks per family in a screen (the proof's predict_tasks has the same bound)
BATCH_MAX = 1 << 20  # sequences per generate() call
# A deadline under which honest answers start to time out, so that timeouts, not the model, decide the
# verdicts. Measured on the project's 2-core CPU machine at load ~7 (other jobs running), 320 honest answers
# each (10 batches of 32 through one Scorer): chain_sum timed out 41 at 0.01 s, 1 at 0.03 s, 0 at 0.1 s;
# simple_integration (sympy) 248 at 0.03 s, 5 at 0.1 s, 0 at 0.25 s, which the adversarial tests also use.
SCORE_DEADLINE_MIN_S = 0.25
SCORE_DEADLINE_MAX_S = 600.0  # above it one hostile answer could hold a scorer process for longer than a family's step


def deadline_refusal(seconds) -> str | None:
    """Why a scoring deadline cannot be used (one line), or None: the range every entry point checks."""
    low, high = SCORE_DEADLINE_MIN_S, SCORE_DEADLINE_MAX_S
    if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) and low <= seconds <= high:
        return None
    return (f"score_deadline_s={seconds}: give seconds in [{low:g}, {high:g}]; below {low:g} s honest answers time "
            f"out on a loaded machine and timeouts decide the verdicts")


def screen_bounds(tasks: int, first_seed: int, batch: int) -> str | None:
    """Why a screen's --tasks, --first-seed or --batch cannot be run (None: they can). A billion tasks
    was accepted, and seeds past SEED_MAX, which reasoning-gym cannot take."""
    if not 1 <= tasks <= TASKS_MAX:
        return f"--tasks {tasks}: give 1..{TASKS_MAX:,} tasks per family"
    if not 0 <= batch <= BATCH_MAX:
        return f"--batch {batch}: give 0 (as many as fit) up to {BATCH_MAX:,}"
    if not 0 <= first_seed <= SEED_MAX - tasks + 1:
        return (f"--first-seed {first_seed}: the seeds {first_seed}..{first_seed + tasks - 1} must lie in "
                f"0..{SEED_MAX} (unsigned 32-bit, as reasoning-gym's)")
    return None
