"""Numbers at the precision they carry (proof/report/numbers.py, tables.py): no float with every digit, no
equivalence claimed where the tasks had no spread, no gains figure drawn as if a row of zeros said something."""
import re

from proof import report
from proof.report import figures, numbers

HELD_UP, UP = [0.0] * 100 + [1.0] * 100, [1.0] * 200
FLAT = {"before": HELD_UP, "after": HELD_UP}  # no score changes: every difference 0


def cells(table) -> list[str]:
    return re.findall(r'<td [^>]*>([^<]*)<', table.to_html())


def test_no_table_prints_a_float_with_every_digit(synthetic):
    s = synthetic({"chain_sum": {"prediction": "no change", **FLAT},
                   "leg_counting": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    r = report.load(s.out)
    sides = report.sides_table(r)
    assert list(sides.data.columns) == ["side", "judged specs", "really learned", "share [Wilson 95% CI]"]
    assert [c for c in cells(sides) if re.search(r"\.\d{4,}", c)] == []
    shown = [c for key in ("sides", "rules", "audit", "equivalence", "learning", "heldout", "runs", "power")
             for t in report.section(r, key) if hasattr(t, "to_html") for c in cells(t)]
    assert len(shown) > 100 and [c for c in shown if re.search(r"\d\.\d{4,}", c)] == []
    assert numbers.plain(0.0) == "0" and numbers.plain(2 / 3) == "0.667" and numbers.plain("a") == "a"


def test_a_count_of_a_count_stays_on_one_line(synthetic):
    s = synthetic({"chain_sum": {"prediction": "improves", "before": HELD_UP, "after": UP}})
    html = report.rules_table(report.load(s.out)).to_html()
    assert re.search(r'class="data row0 col\d+ num" >1 of 1<', html)  # "hits": no break between "1 of" and "1"


def test_a_committed_reason_shows_its_guess_rate_as_a_share():
    assert numbers.tidy('guessable (ceiling 1.0, guess rate 0.9166666666666666 by "1")') == \
        'guessable (ceiling 1.0, guess rate 0.92 by "1")'
    assert numbers.tidy("chain_sum(max_terms=2): 39 distinct, 40 needed") == "chain_sum(max_terms=2): 39 distinct, 40 needed"


def test_equivalence_is_not_claimed_where_the_tasks_have_no_spread(synthetic):
    s = synthetic({"chain_sum": {"prediction": "no change", **FLAT},
                   "leg_counting": {"prediction": "no change", "before": [1.0, 0.0] * 100, "after": [1.0] * 100 + [0.0] * 100}})
    r = report.load(s.out)
    flat = r.analyses["chain_sum"]
    assert flat.difference_sd == 0 and flat.equivalence["equivalent"] is None
    assert flat.judgement == "held (equivalence cannot be judged)" and flat.held
    table = report.equivalence_table(r)
    shown = dict(zip(table.data.columns, cells(table)))  # chain_sum's row: no p, no detectable gain, no "yes"
    assert shown["equivalent"] == "cannot be judged: SD 0" and shown["SD of differences"] == "0.000"
    assert shown["detectable gain (80% power)"] == "–" and shown["TOST p (±0.05)"] == "–"
    noisy = report.equivalence_table(r).data.set_index("family").loc["leg_counting"]
    assert noisy["equivalent"] in ("yes", "no") and noisy["detectable gain (80% power)"] > 0


def test_a_gains_figure_of_unchanged_scores_is_not_drawn_and_the_caption_says_why(synthetic):
    r = report.load(synthetic({"chain_sum": {"prediction": "no change", **FLAT}}).out)
    assert report.SECTIONS["forest"].figure(r) is None
    [caption] = report.section(r, "forest")
    assert "No evaluation task's score changed in the finished family" in caption.data
    mixed = report.load(synthetic({"chain_sum": {"prediction": "no change", **FLAT},
                                   "leg_counting": {"prediction": "improves", "before": HELD_UP, "after": UP}}).out)
    caption, figure = report.section(mixed, "forest")
    assert "<i>no score changed</i>: 1 family" in caption.data and figure.format == "png"
    labels = [t.get_text() for t in report.SECTIONS["forest"].figure(mixed).axes[0].get_yticklabels()]
    assert labels == ["leg_counting", "chain_sum\n(no score changed)"]
    assert figures.unchanged(mixed.done()[0])
