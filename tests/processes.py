"""What the tests that kill runs ask of a process."""


def alive(pid: int) -> bool:
    """Whether a process exists and is not a zombie (a killed child its parent has not reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
