"""The engine's record per phase (engine.phase): one phase's requests and checks, not the process's so far."""
from shortlist.generation import engine

BATCH = {"rows": 4, "identical_rows": 4}


def _served(monkeypatch, times: int, check: dict | None = None) -> None:
    """`times` static-cache requests, each served by the fast engine (its check, where given, made once)."""
    checked = []
    monkeypatch.setattr(engine, "usable", lambda model: None)
    monkeypatch.setattr(engine, "decode_static", lambda *a, **k: [[1]])

    def self_check(*a):
        if check is not None and not checked:
            checked.append(check)
            for record in engine._this.records():
                record.checks.append(check)
        return True
    monkeypatch.setattr(engine, "self_check", self_check)
    for _ in range(times):
        assert engine.serve(object(), None, None, None, []) == [[1]]


def test_a_phases_record_counts_only_what_was_asked_while_it_was_open(monkeypatch):
    engine.reset()
    try:
        monkeypatch.setattr(engine, "gate", lambda: None)
        _served(monkeypatch, 3, {"rows": 8, "identical_rows": 8})
        first = engine.status()
        assert first["engine"] == "static" and len(first["checks"]) == 1
        with engine.phase() as quiet:
            pass
        assert quiet.status() == first | {"engine": "generate", "checks": [],
                                          "why": "fast off: nothing asked for the static engine"}
        with engine.phase() as busy:
            _served(monkeypatch, 2, BATCH)
        _served(monkeypatch, 1)  # after the phase closed: not its
        assert (busy.requested, busy.served) == (2, 2) and busy.status()["checks"] == [BATCH]
        assert busy.status()["engine"] == "static" and quiet.requested == 0
        assert engine.status()["checks"] == first["checks"] + [BATCH] and engine._this.record.requested == 6
    finally:
        engine.reset()
