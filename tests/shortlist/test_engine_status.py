"""The engine's record per phase (engine.mark/status): one phase's requests and checks, not the process's so far."""
from shortlist.generation import engine


def test_a_phases_record_counts_only_what_came_after_its_mark(monkeypatch):
    engine.reset()
    try:
        monkeypatch.setattr(engine, "gate", lambda: None)
        engine._state.update(requested=3, served=3, checks=[{"rows": 8, "identical_rows": 8}])
        first = engine.status()
        mark = engine.mark()
        assert first["engine"] == "static" and len(first["checks"]) == 1
        assert engine.status(since=mark) == first | {"engine": "generate", "checks": [],
                                                    "why": "fast off: nothing asked for the static engine"}
        engine._state.update(requested=5, served=5, checks=first["checks"] + [{"rows": 4, "identical_rows": 4}])
        later = engine.status(since=mark)
        assert later["engine"] == "static" and later["checks"] == [{"rows": 4, "identical_rows": 4}]
    finally:
        engine.reset()
