"""shortlist/generation/multinomial.py's contract: draw() is torch.multinomial(probs, 1) token for token, on the same
random stream, and refused() flags exactly the rows multinomial refuses."""
import pytest
import torch

from shortlist.generation import multinomial


def test_draw_is_multinomial_token_for_token_on_the_same_random_stream():
    assert multinomial.matches_torch("cpu", rows=32, vocabulary=500)
    assert multinomial.matches_torch("cpu")  # Qwen3's vocabulary, as bench/decode_attention.py asks a GPU


def test_the_contract_sees_a_draw_that_differs(monkeypatch):
    """matches_torch() is what a GPU's bench reports: it must say False for a draw that is not multinomial's."""
    monkeypatch.setattr(multinomial, "draw", lambda probs: probs.argmax(dim=-1))  # greedy: other tokens
    assert not multinomial.matches_torch("cpu", rows=32, vocabulary=500)
    real = multinomial.draw

    def one_more_number(probs):  # the right tokens, then one number more from the stream: every later step shifts
        drawn = real(probs)
        torch.rand(1, device=probs.device)
        return drawn
    monkeypatch.setattr(multinomial, "draw", one_more_number)
    assert not multinomial.matches_torch("cpu", rows=32, vocabulary=500)


@pytest.mark.parametrize("row", [[0.5, float("inf"), 0.5], [0.5, float("nan"), 0.5], [0.6, -0.1, 0.5], [0.0, 0.0, 0.0]])
def test_refused_flags_the_rows_multinomial_refuses_and_valid_raises_its_refusal(row):
    probs = torch.tensor([[0.2, 0.3, 0.5], row, [1.0, 0.0, 0.0]])
    with pytest.raises(RuntimeError):
        torch.multinomial(probs[1:2], 1)
    assert multinomial.refused(probs).tolist() == [False, True, False]
    with pytest.raises(RuntimeError, match="probability tensor contains"):
        multinomial.valid(bool(multinomial.refused(probs).any()))
    multinomial.valid(bool(multinomial.refused(probs[[0, 2]]).any()))  # valid rows: nothing raised
