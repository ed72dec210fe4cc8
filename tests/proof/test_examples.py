"""The committed real runs read back as the project's own verification reads any run: every result made
against its commitment, its answers scored again as they were, its tasks the committed ones."""
from pathlib import Path

import pytest

from proof import commit, files, records, verify
from shortlist import sources

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRAINED22 = EXAMPLES / "smollm2-22" / "proof"  # 17 specs, trained on the H200 on 2026-12-02


def _verdicts(out: Path, keys: list, scorer) -> dict:
    body, sha = commit.committed(out, commit.READABLE)
    found = {}
    for key in keys:
        result = records.read(files.result(out, sources.parse(key).slug), sha)
        assert isinstance(result, records.FamilyResult), f"{key}: {result!r}"
        found[key] = verify.family(out, body, sha, result, scorer).reasons
    return found


def test_the_trained_17_spec_proof_is_complete_against_its_commitment():
    body, sha = commit.committed(TRAINED22, commit.READABLE)
    assert len(body["families"]) == 17
    for key in body["families"]:  # one finished result per committed spec, made against this digest
        result = records.read(files.result(TRAINED22, sources.parse(key).slug), sha)
        assert isinstance(result, records.FamilyResult) and result.after.n == result.before.n  # schema 3: <= eval_n
        assert 0 < result.before.n <= body["settings"]["eval_n"]  # unseen seeds only (products(max_digits=1): 80)


def test_two_of_its_results_verify(scorer):
    body, _ = commit.committed(TRAINED22, commit.READABLE)
    keys = [body["families"][0], body["families"][-1]]
    assert _verdicts(TRAINED22, keys, scorer) == {k: () for k in keys}


@pytest.mark.slow
def test_every_one_of_its_results_verifies(scorer):
    body, _ = commit.committed(TRAINED22, commit.READABLE)
    assert _verdicts(TRAINED22, body["families"], scorer) == {k: () for k in body["families"]}
