"""shortlist/generation/multinomial.py's contract: draw() is torch.multinomial(probs, 1) token for token, on the same
random stream, and refused() flags exactly the rows multinomial refuses."""
import pytest
import torch

from shortlist.generation import multinomial


def test_draw_is_multinomial_token_for_token_on_the_same_random_stream():
    probs = torch.softmax(torch.randn(32, 500, generator=torch.Generator().manual_seed(0)) * 4, dim=-1)
    torch.manual_seed(3)
    theirs, after_theirs = torch.multinomial(probs, 1).squeeze(1), torch.rand(3)
    torch.manual_seed(3)
    ours, after_ours = multinomial.draw(probs), torch.rand(3)
    assert torch.equal(ours, theirs) and torch.equal(after_ours, after_theirs)


@pytest.mark.parametrize("row", [[0.5, float("inf"), 0.5], [0.5, float("nan"), 0.5], [0.6, -0.1, 0.5], [0.0, 0.0, 0.0]])
def test_refused_flags_the_rows_multinomial_refuses_and_valid_raises_its_refusal(row):
    probs = torch.tensor([[0.2, 0.3, 0.5], row, [1.0, 0.0, 0.0]])
    with pytest.raises(RuntimeError):
        torch.multinomial(probs[1:2], 1)
    assert multinomial.refused(probs).tolist() == [False, True, False]
    with pytest.raises(RuntimeError, match="probability tensor contains"):
        multinomial.valid(bool(multinomial.refused(probs).any()))
    multinomial.valid(bool(multinomial.refused(probs[[0, 2]]).any()))  # valid rows: nothing raised
