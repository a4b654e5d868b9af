"""tooldock.atomic: the one writer of files that other programs or later runs read."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tooldock.atomic import atomic_write, staged


def test_a_file_is_replaced_whole_with_its_mode_and_no_temporary_file_is_left(tmp_path: Path):
    target = tmp_path / "state.json"
    target.write_text("old")
    atomic_write(target, b"new", mode=0o600, durable=True)
    assert target.read_bytes() == b"new" and stat.S_IMODE(target.stat().st_mode) == 0o600
    atomic_write(target, b"newer")
    assert target.read_bytes() == b"newer" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_group_is_given_to_the_file(tmp_path: Path):
    group = os.getgid()
    atomic_write(tmp_path / "token", b"t", mode=0o440, group=group)
    info = (tmp_path / "token").stat()
    assert info.st_gid == group and stat.S_IMODE(info.st_mode) == 0o440


def test_a_failed_write_keeps_the_old_file_and_leaves_nothing_behind(tmp_path: Path, monkeypatch):
    target = tmp_path / "state.json"
    target.write_text("old")

    def full_disk(*args):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)  # fails after the data was written
    with pytest.raises(OSError):
        atomic_write(target, b"new")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_a_staged_file_is_written_in_steps_and_named_when_committed(tmp_path: Path):
    with staged(tmp_path, "layer") as out:
        out.file.write(b"part one, ")
        out.file.write(b"part two")
        assert [p.name for p in tmp_path.iterdir()] != []  # only the temporary file so far
        assert not (tmp_path / "sha256-abc").exists()
        out.commit(tmp_path / "sha256-abc")
    target = tmp_path / "sha256-abc"
    assert target.read_bytes() == b"part one, part two" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["sha256-abc"]


def test_a_staged_file_left_uncommitted_or_failing_leaves_nothing_behind(tmp_path: Path):
    with staged(tmp_path, "archive.tar") as out:
        out.file.write(b"never committed")
    with pytest.raises(RuntimeError), staged(tmp_path, "archive.tar") as out:
        out.file.write(b"half")
        raise RuntimeError("the build failed")
    assert list(tmp_path.iterdir()) == []


def test_a_file_that_cannot_be_opened_leaves_no_descriptor_or_file(tmp_path: Path, monkeypatch):
    opened = set(os.listdir("/proc/self/fd"))

    def refuse(*args, **kwargs):
        raise MemoryError("no memory for the file object")

    monkeypatch.setattr(os, "fdopen", refuse)
    with pytest.raises(MemoryError), staged(tmp_path, "archive.tar"):
        pass
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    assert set(os.listdir("/proc/self/fd")) <= opened
