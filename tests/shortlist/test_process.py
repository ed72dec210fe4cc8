"""What a process closes when it exits (process.close_at_exit): weakly held, the latest first, each once."""
import gc

from shortlist import process


class Resource:
    def __init__(self, name, closed, fails=False):
        self.name, self.closed, self.fails = name, closed, fails

    def close(self):
        self.closed.append(self.name)
        if self.fails:
            raise RuntimeError(f"{self.name} cannot close")


def test_live_resources_close_latest_first_and_a_failure_stops_none_of_the_others(monkeypatch, capsys):
    monkeypatch.setattr(process, "_live", type(process._live)())
    closed = []
    first, failing = Resource("first", closed), Resource("failing", closed, fails=True)
    gone, last = Resource("gone", closed), Resource("last", closed)
    for r in (first, failing, gone):
        process.close_at_exit(r)
    process.close_at_exit(last, lambda r: closed.append(f"{r.name} by its closer"))
    del gone, r  # the loop variable held the last one
    gc.collect()
    process._close_live()
    assert closed == ["last by its closer", "failing", "first"]  # the collected one is not held, nor closed
    assert "failing cannot close" in capsys.readouterr().err


def test_the_c_library_is_loaded_in_one_module_and_before_any_sandbox():
    import re
    from pathlib import Path

    from shortlist import libc
    from shortlist.scoring import hugepages, isolation, landlock, syscalls
    root = Path(__file__).resolve().parents[2]
    loading = sorted(str(p.relative_to(root)) for top in ("shortlist", "proof") for p in (root / top).rglob("*.py")
                     if re.search(r"\bCDLL\(", p.read_text()))
    assert loading == ["shortlist/libc.py"]
    assert all(m.libc is libc.libc for m in (process, hugepages, isolation, landlock, syscalls))  # one, at import
