"""bench/commit_of.py and provenance.code(): a result names the commit whose files ran, read from the files (not from
a .git that may be another commit's), and a tree with uncommitted changes matches no commit."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import commit_of  # noqa: E402

from shortlist import provenance  # noqa: E402


def _git(repo: Path, *args: str) -> str:
    env = os.environ | {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                        "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    for path, text in {"shortlist/a.py": "A = 1\n", "proof/b.py": "B = 2\n", "notebooks/n.ipynb": "{}\n",
                       "bench/c.py": "C = 3\n", "bench/results/r.json": "{}\n", "README.md": "read me\n",
                       "requirements.txt": "torch\n"}.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)
    (repo / "proof" / "notebooks").symlink_to("../notebooks")  # as the repository has it
    (repo / "requirements.txt.bak").write_text("not a pin\n")  # beside a counted file's name: not counted
    (repo / "shortlist" / os.fsdecode(b"caf\xe9.py")).write_text("E = 1\n")  # a name that is not UTF-8
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "first")
    return repo


def _code(repo: Path) -> str:
    return f"sha256:{provenance.fingerprint(provenance.code_files(repo))[:16]}"


def test_a_checkout_and_its_commit_give_one_fingerprint_and_an_edit_to_the_code_matches_no_commit(tmp_path):
    repo = _repo(tmp_path)
    first = _git(repo, "rev-parse", "HEAD").strip()
    assert {p for p, _ in provenance.code_files(repo)} == {"shortlist/a.py", "proof/b.py", "notebooks/n.ipynb",
                                                           "bench/c.py", "requirements.txt",
                                                           "shortlist/" + os.fsdecode(b"caf\xe9.py")}
    assert commit_of.matches(repo, {_code(repo)}, 10) == [(first, _code(repo))]
    # what runs write beside the code, compiled files and the README do not move it
    (repo / "bench" / "results" / "r.json").write_text('{"new": 1}\n')
    (repo / "shortlist" / "__pycache__").mkdir()
    (repo / "shortlist" / "__pycache__" / "a.cpython-311.pyc").write_bytes(b"\0")
    (repo / "README.md").write_text("edited\n")
    assert commit_of.matches(repo, {_code(repo)}, 10) == [(first, _code(repo))]
    (repo / "shortlist" / "a.py").write_text("A = 2\n")  # uncommitted code: no commit is this tree
    edited = _code(repo)
    assert commit_of.matches(repo, {edited}, 10) == []
    _git(repo, "commit", "-q", "-am", "second")
    second = _git(repo, "rev-parse", "HEAD").strip()
    assert commit_of.matches(repo, {edited}, 10) == [(second, edited)]
    (repo / "shortlist" / "new.py").write_text("")  # a file added, even empty, is another tree
    assert _code(repo) != edited


def test_the_command_reads_a_results_fingerprints_at_any_depth_and_says_which_match_none(tmp_path, capsys):
    repo = _repo(tmp_path)
    first = _git(repo, "rev-parse", "HEAD").strip()
    result = tmp_path / "r.json"
    result.write_text(json.dumps({"modes": {"a": {"versions": {"shortlist code": _code(repo)}}},
                                  "versions": {"shortlist code": "sha256:0000000000000000"}}))
    assert commit_of.main([str(result), "--repo", str(repo)]) == 0
    out = capsys.readouterr().out
    assert f"{_code(repo)} {first}" in out and "sha256:0000000000000000 matches none" in out
    assert commit_of.main(["sha256:0000000000000000", "--repo", str(repo)]) == 1
    result.write_text(json.dumps({"versions": {"torch": "2.11"}}))
    assert commit_of.main([str(result), "--repo", str(repo)]) == 2


def test_every_file_a_run_writes_carries_this_codes_fingerprint():
    assert provenance.versions()["shortlist code"] == provenance.code() and provenance.code().startswith("sha256:")
    assert len(provenance.code()) == len("sha256:") + 16
    assert provenance.stamp()["versions"]["shortlist code"] == provenance.code()


def test_this_repository_at_head_matches_its_own_fingerprint_where_its_code_is_unchanged():
    root = provenance.ROOT
    if not (root / ".git").exists() or subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", *provenance.FOLDERS, *provenance.FILES], capture_output=True,
            text=True).stdout.strip():
        pytest.skip("no .git here, or the code has uncommitted changes")
    head = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert commit_of.matches(root, {provenance.code()}, 1) == [(head, provenance.code())]


def test_an_installed_package_or_an_unreadable_file_gives_no_fingerprint_and_no_failure(tmp_path, monkeypatch):
    repo = _repo(tmp_path)
    assert provenance.code(repo) is None  # no pyproject.toml beside the packages: not a checkout (pip install .)
    (repo / "pyproject.toml").write_text("[project]\n")
    readable = tmp_path / "readable"
    (repo).rename(readable)
    assert provenance.code(readable) == _code(readable) and _code(readable).startswith("sha256:")
    without = tmp_path / "without"
    shutil.copytree(readable, without, symlinks=True)
    shutil.rmtree(without / "bench")  # a folder missing is nothing to count, not an unreadable tree
    assert provenance.code(without).startswith("sha256:") and provenance.code(without) != _code(readable)
    real = Path.read_bytes

    def denied(self):
        if self.name == "b.py":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self)
    monkeypatch.setattr(Path, "read_bytes", denied)
    said = provenance.code(tmp_path / "readable" / ".." / "readable")  # another key: the cache holds the first
    assert said.startswith("unknown (PermissionError") and "b.py" in said
    result = tmp_path / "r.json"
    result.write_text(json.dumps({"versions": {"shortlist code": said}}))
    assert commit_of.main([str(result), "--repo", str(readable)]) == 2  # nothing to look for, said so
