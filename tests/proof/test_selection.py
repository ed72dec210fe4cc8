"""The proof's family list, chosen from a catalog by a rule written before training (proof/selection.py, v2)."""
import json

import pytest

from proof import selection
from proof.settings import Settings
from shortlist import rule, trainee


def row(family, level, verdict, pass1=0.0, learnability=0.1):
    return {"family": family, "level": level, "spec": f"{family}(level={level})", "verdict": verdict, "pass1": pass1,
            "learnability": learnability, "ceiling": 1.0, "guess": 0.0, "guess_answer": "0"}


def catalog(rows):
    return {"trainee": trainee.SMOLLM2.as_dict(), "rows": rows, "shortlist": []}


def every_one_judged(spec, r):  # a stand-in for the proof's draw: every non-audit spec has its questions
    return selection.judged_by_the_proof(spec, r, None) if r["verdict"] in rule.AUDIT_VERDICTS else []


def wide():
    rows = [row(f"i{k}", 0, "improves", 0.2, 0.1 + k / 100) for k in range(12)]
    rows += [row(f"b{k}", 1, "too hard", 0.02 + k / 1000) for k in range(6)] + [row("n", 0, "no signal", 0.06)]
    rows += [row(f"z{k}", 0, "too hard") for k in range(30)]
    rows += [row(f"g{k}", 0, "guessable", 0.1) for k in range(3)] + [row(f"u{k}", 0, "unscorable") for k in range(3)]
    return rows


def test_forty_judged_ten_a_side_interleaved_with_controls_and_the_same_list_from_the_same_catalog():
    chosen = selection.select(catalog(wide()), judge=every_one_judged)
    k = selection.counts(chosen)
    assert k["judged improves"] == 12 and k["judged not"] == 28 and k["boundary"] == 7 and k["control"] == 4
    groups = [c["group"] for c in chosen]
    assert groups[:4] == ["improves", "boundary", "zero", "control"]  # both sides from the first round
    improves = [c["spec"] for c in chosen if c["group"] == "improves"]
    assert improves[0] == "i11(level=0)"  # best mean p(1-p) first
    boundary = [c["spec"] for c in chosen if c["group"] == "boundary"]
    assert boundary[:2] == ["b5(level=1)", "b4(level=1)"] and "n(level=0)" in boundary  # nearest the band first
    assert not {c["spec"] for c in chosen if c["group"] != "control"} & {f"g{k}(level=0)" for k in range(3)}
    assert selection.select(catalog(wide()), judge=every_one_judged) == chosen  # the catalog alone decides


def test_a_spec_the_proof_could_not_judge_is_never_chosen_as_judged():
    few = {"i0(level=0)", "z3(level=0)"}
    chosen = selection.select(catalog(wide()), judge=lambda s, r: ["only 12 distinct reserved"] if s in few
                              else every_one_judged(s, r))
    assert not few & {c["spec"] for c in chosen} and selection.counts(chosen)["judged not"] == 29


def test_a_catalog_short_of_a_side_is_refused_in_one_line_with_its_counts():
    rows = [r for r in wide() if not r["family"].startswith("i")] + [row("i0", 0, "improves", 0.2)]
    with pytest.raises(selection.SelectionError) as e:
        selection.select(catalog(rows), judge=every_one_judged)
    assert "1 judged 'improves'" in str(e.value) and "below 10 per side" in str(e.value) and "\n" not in str(e.value)
    assert selection.select(catalog(rows), judge=every_one_judged, side_min=1, judged_min=1)  # a bar lowered by name


def test_the_specs_of_a_proof_already_trained_are_never_chosen_again():
    spec = row("chain_sum", 0, "improves", 0.2) | {"spec": "chain_sum(max_digits=1, max_terms=2)"}
    other = row("chain_sum", 1, "improves", 0.1) | {"spec": "chain_sum(max_terms=3)"}
    chosen = selection.select(catalog([spec, other]), exclude=frozenset({"chain_sum(max_terms=2, max_digits=1)"}),
                              side_min=0, judged_min=0, judge=every_one_judged)  # the same spec, spelled otherwise
    assert [c["spec"] for c in chosen] == ["chain_sum(max_terms=3)"]


def test_the_proof_s_own_draw_decides_whether_a_spec_is_judged():
    settings = Settings(trainee=trainee.SMOLLM2.as_dict())
    small = row("coin_flip", 0, "too hard") | {"spec": "coin_flip(max_trials=2, min_trials=2)"}  # 3 questions or so
    assert "below min_unseen=40" in selection.judged_by_the_proof(small["spec"], small, settings)[0]
    big = row("chain_sum", 0, "too hard") | {"spec": "chain_sum(max_digits=2, max_terms=3)"}
    assert selection.judged_by_the_proof(big["spec"], big, settings) == []
    audit = row("aiw", 0, "guessable") | {"spec": "aiw"}
    assert selection.judged_by_the_proof("aiw", audit, settings)[0].startswith("guessable")


def test_the_command_writes_the_list_and_its_counts_and_refuses_a_thin_catalog(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(selection, "judged_by_the_proof", lambda spec, r, s: every_one_judged(spec, r))
    (tmp_path / "cat.json").write_text(json.dumps(catalog(wide())))
    assert selection.main([str(tmp_path / "cat.json"), "--json", str(tmp_path / "sel.json")]) == 0
    body = json.loads((tmp_path / "sel.json").read_text())
    assert body["counts"]["judged improves"] == 12 and capsys.readouterr().out.count(", ") == len(body["selected"]) - 1
    (tmp_path / "thin.json").write_text(json.dumps(catalog(wide()[:13])))
    assert selection.main([str(tmp_path / "thin.json")]) == 2
    assert "judged not" in capsys.readouterr().err


def test_drawing_ahead_in_processes_chooses_what_drawing_one_at_a_time_chooses():
    rows = [row("chain_sum", 0, "improves", 0.2) | {"spec": "chain_sum(max_digits=2, max_terms=3)"},
            row("coin_flip", 0, "too hard", 0.01) | {"spec": "coin_flip(max_trials=2, min_trials=2)"}]
    one, ahead = {}, {}
    alone = selection.select(catalog(rows), side_min=0, judged_min=0, refused=one)
    assert selection.select(catalog(rows), side_min=0, judged_min=0, refused=ahead, jobs=2) == alone
    assert one == ahead and list(one) == ["coin_flip(max_trials=2, min_trials=2)"]  # too few questions to judge
    assert [c["spec"] for c in alone] == ["chain_sum(max_digits=2, max_terms=3)"]
