"""The proof's family list, chosen from a catalog by a rule written before training (proof/selection.py)."""
import pytest

from proof import selection
from shortlist import trainee


def row(family, level, verdict, pass1=0.0):
    spec = f"{family}(level={level})"
    return {"family": family, "level": level, "spec": spec, "verdict": verdict, "pass1": pass1, "learnability": 0.1}


def catalog(rows, shortlist):
    return {"trainee": trainee.SMOLLM2.as_dict(), "rows": rows, "shortlist": shortlist}


def test_both_sides_of_each_threshold_and_controls_in_an_interleaved_order():
    rows = [row("a", 0, "improves", 0.3), row("a", 1, "too hard", 0.02), row("a", 2, "too hard", 0.0),
            row("b", 0, "improves", 0.2), row("b", 1, "too hard", 0.0)]
    rows += [row(f"z{i}", 0, "too hard", 0.0) for i in range(6)] + [row(f"g{i}", 0, "guessable") for i in range(3)]
    rows += [row(f"u{i}", 0, "unscorable") for i in range(3)] + [row("e", 0, "too hard", 0.04)]
    short = [{"rank": 1, "family": "a", "best": "a(level=0)", "learnability": 0.2},
             {"rank": 2, "family": "b", "best": "b(level=0)", "learnability": 0.1}]
    chosen = selection.select(catalog(rows, short), zero=2, controls=1, minimum=5)
    groups = [c["group"] for c in chosen]
    # round by round: a's first too hard level is a boundary spec, listed once, so round one skips it
    assert groups[:4] == ["improves", "boundary", "zero", "control"] and groups[4:6] == ["improves", "boundary"]
    specs = [c["spec"] for c in chosen]
    assert {"a(level=0)", "b(level=0)"} <= set(specs)  # every improving family, at its best level
    assert {"a(level=1)", "e(level=0)"} <= set(specs)  # every boundary spec: 0 < pass@1 < pass_min
    assert "b(level=1)" in specs and "a(level=2)" not in specs  # b's first too hard; a's first is a boundary one
    assert groups.count("zero") == 2 and groups.count("control") == 2 and len(set(specs)) == len(specs)
    assert selection.select(catalog(rows, short), zero=2, controls=1, minimum=5) == chosen  # the catalog decides


def test_every_improves_level_is_chosen_best_first_audit_controls_sampled_and_a_trained_proof_excluded():
    rows = [row("chain_sum", 0, "improves", 0.3), row("chain_sum", 1, "improves", 0.1),
            row("products", 0, "improves", 0.2), row("leg_counting", 0, "unverified ceiling"),
            row("aiw", 0, "guessable"), row("gcd", 0, "unscorable"), row("gcd", 1, "too hard", 0.01)]
    short = [{"rank": 1, "family": "chain_sum", "best": "chain_sum(level=0)", "learnability": 0.2},
             {"rank": 2, "family": "products", "best": "products(level=0)", "learnability": 0.1}]
    chosen = selection.select(catalog(rows, short), zero=0, controls=1, minimum=1)
    improves = [c["spec"] for c in chosen if c["group"] == "improves"]
    assert improves == ["chain_sum(level=0)", "products(level=0)", "chain_sum(level=1)"]
    assert {c["spec"] for c in chosen if c["group"] == "control"} == {"leg_counting(level=0)", "aiw(level=0)",
                                                                      "gcd(level=0)"}


def test_too_few_specs_are_refused_in_one_line():
    with pytest.raises(selection.SelectionError, match="fewer than 16"):
        selection.select(catalog([row("a", 0, "too hard")], []))


def test_the_specs_of_a_proof_already_trained_are_never_chosen_again():
    spec = {"family": "chain_sum", "level": 0, "spec": "chain_sum(max_digits=1, max_terms=2)", "verdict": "improves",
            "pass1": 0.2, "learnability": 0.1}
    other = spec | {"level": 1, "spec": "chain_sum(max_terms=3)", "pass1": 0.1}
    short = [{"rank": 1, "family": "chain_sum", "best": spec["spec"], "learnability": 0.2}]
    chosen = selection.select(catalog([spec, other], short), zero=0, controls=0, minimum=1,
                              exclude=frozenset({"chain_sum(max_terms=2, max_digits=1)"}))  # the same spec, spelled otherwise
    assert [c["spec"] for c in chosen] == ["chain_sum(max_terms=3)"]
