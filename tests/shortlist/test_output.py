import errno
import os

import pytest

from shortlist import output


def test_a_full_disk_is_told_apart_wherever_it_is_raised_from():
    assert output.disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert output.disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    try:  # torch's zip writer wraps the OSError in a RuntimeError of its own words
        try:
            raise OSError(errno.ENOSPC, "No space left on device")
        except OSError:
            raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 94208 vs 94096")
    except RuntimeError as e:
        assert output.disk_full(e)
    assert output.disk_full(RuntimeError("PytorchStreamWriter failed writing file data/0: file write failed"))
    assert not output.disk_full(OSError(errno.EACCES, "Permission denied"))
    assert not output.disk_full(ValueError("no space for doubt"))


def test_a_write_that_fills_the_disk_is_one_line_and_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "record.json"
    output.write_json(path, {"old": True})

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(output.DiskFull) as e:
        output.write_json(path, {"new": True})
    assert str(e.value).startswith(f"disk full: cannot write {path} (") and "\n" not in str(e.value)
    assert "bytes free" in str(e.value) and "run the same command again" in str(e.value)
    assert output.read_json(path) == {"old": True} and sorted(p.name for p in tmp_path.iterdir()) == ["record.json"]
    assert isinstance(e.value, output.OutputError)  # the command lines print OutputErrors as one line


def test_a_folder_is_published_whole_in_place_of_a_leftover(tmp_path):
    staged, dest = tmp_path / ".staging" / "checkpoint-3", tmp_path / "checkpoint-3"
    staged.mkdir(parents=True)
    (staged / "weights").write_bytes(b"w" * 100)
    (dest / "half").mkdir(parents=True)  # what a killed writer left where the folder goes
    assert output.publish_folder(staged, dest) == dest
    assert sorted(p.name for p in dest.iterdir()) == ["weights"] and not staged.exists()
