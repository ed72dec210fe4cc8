"""What the tests that kill runs ask of a process."""


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (a killed child its parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone(pids, within: float = 30.0) -> list[int]:
    """The pids still alive after waiting up to `within` seconds for them to end."""
    import time
    deadline = time.monotonic() + within
    while any(map(alive, pids)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]
