"""The report a reader reads (issue 41): one plain sentence answers the question, the words it uses are defined
under it, and its statistics (Wilson, McNemar, Holm, best possible p) are a section of their own further down."""
import dataclasses
import re
from pathlib import Path

import nbformat

from proof import report

HELD_UP, UP = [0.0] * 100 + [1.0] * 100, [1.0] * 200
FLAT = {"before": HELD_UP, "after": HELD_UP}
JARGON = ("Wilson", "McNemar", "Holm", "best possible", " p ", "CI")
NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "03_report.ipynb"


def one_sentence(text: str) -> bool:
    return len(re.findall(r"[.!?](?:\s|$)", text.replace("**", ""))) == 1 and text.endswith(".")


def test_the_headline_is_one_plain_sentence_and_its_statistics_follow_apart(synthetic):
    # the rule is right on all three; always predicting "improves" is wrong on the "no change" one, a single
    # disagreement: no test could tell the two apart on it
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP},
                   "leg_counting": {"prediction": "no change", **FLAT},
                   "products": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    r = report.load(s.out)
    text = report.headline(r)
    assert text == ('**The rule held on 3 of 3 judged environments**; it could not be told apart from always '
                    'predicting "improves".')
    assert one_sentence(text) and not [j for j in JARGON if j in text]
    stats = report.statistics(r)
    for said in ("(1.00, Wilson 95% CI 0.44–1.00; a Wilson interval", "exact McNemar p 1.000",
                 "Holm's adjustment corrects a p for the other tests", "best possible: the smallest p the commitment",
                 "pass_min, 0.05, is the pass@1 below which the rule says \"too hard\""):
        assert said in stats, said
    assert stats.index("Holm's adjustment") < stats.index("Holm 1.000")  # defined where first used


def _against(r, only_first: int, only_second: int, p_holm: float):
    """The report with its comparison against always predicting "improves" replaced by this outcome."""
    comps = tuple(dataclasses.replace(c, disagree=only_first + only_second, p_holm=p_holm,
                                      mcnemar={"only_first": only_first, "only_second": only_second, "p": p_holm})
                  if c.rule == "always improves" else c for c in r.across.comparisons)
    return dataclasses.replace(r, across=dataclasses.replace(r.across, comparisons=comps))


def test_the_headline_says_which_rule_did_better_only_where_the_test_says_so(synthetic):
    r = report.load(synthetic({"chain_sum": {"prediction": "no change", **FLAT}}).out)
    assert report.headline(_against(r, 7, 0, 0.03)).endswith('; it did better than always predicting "improves".')
    assert report.headline(_against(r, 0, 7, 0.03)).endswith('; always predicting "improves" did better.')
    assert report.headline(_against(r, 7, 0, 0.2)).endswith('; it could not be told apart from always predicting '
                                                            '"improves".')  # p above alpha: no claim
    said = report.headline(_against(r, 0, 0, 1.0))
    assert said.endswith('it said "improves" on every one, as always predicting "improves" would, so the two '
                         'cannot be told apart.') and one_sentence(said)


def test_a_run_that_judged_nothing_says_so_in_one_plain_sentence(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP,
                                 "groups": [i % 8 for i in range(200)]}}, min_unseen=40)
    r = report.load(s.out)
    text = report.headline(r)
    assert text == ("**The one finished environment could not be judged**: the commitment set it apart before "
                    "training, so this run does not test the rule.") and one_sentence(text)
    assert "chain_sum (too few evaluation questions)" in report.statistics(r)


def test_the_words_of_the_headline_are_defined_under_it(synthetic):
    r = report.load(synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}}).out)
    html = report.top(r).data
    assert html.index("shortlist-headline") < html.index("shortlist-terms") < html.index("shortlist-families")
    terms = html[html.index("shortlist-terms"):html.index("shortlist-families")]
    assert "<i>Judged</i>:" in terms and "at least 10 distinct evaluation questions" in terms
    assert "<i>Held</i>:" in terms and "<i>real learning</i>" in terms
    assert "Guessable" not in terms  # defined only where a family has that verdict (the smoke's chain_sum does)
    assert "Wilson" not in html and "McNemar" not in html  # the statistics are a section of their own


def test_the_notebook_shows_the_gains_then_the_statistics_right_under_the_headline():
    nb = nbformat.read(NOTEBOOK, as_version=4)
    code = [c.source for c in nb.cells if c.cell_type == "code"]
    top = next(i for i, c in enumerate(code) if "report.top(r)" in c)
    assert [re.search(r"'(\w+)'", c).group(1) for c in code[top + 1:top + 3]] == ["forest", "statistics"]
