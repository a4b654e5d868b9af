"""Reproducible layers: the same files give the same bytes, whatever their mtimes or location."""

import gzip
import io
import os
import tarfile

from tooldock.builder.tarball import Entry, entries_from_dir, write_layer


def layer_of(root, mtime=0):
    out = io.BytesIO()
    digest, diff_id, size = write_layer(entries_from_dir(root, "/app"), out, mtime=mtime)
    return digest, diff_id, size, out.getvalue()


def make_tree(root, stamp):
    (root / "pkg").mkdir(parents=True)
    (root / "b.py").write_text("B = 1\n")
    (root / "a.py").write_text("A = 1\n")
    (root / "pkg" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(root / "pkg" / "run.sh", 0o700)
    (root / "pkg" / "__pycache__").mkdir()
    (root / "pkg" / "__pycache__" / "x.pyc").write_bytes(b"junk")
    (root / "link").symlink_to("a.py")
    for path in root.rglob("*"):
        os.utime(path, (stamp, stamp), follow_symlinks=False)


def test_same_files_same_digest_whatever_mtime_and_place(tmp_path):
    make_tree(tmp_path / "one", 1_000_000)
    make_tree(tmp_path / "elsewhere" / "two", 2_000_000)
    first, second = layer_of(tmp_path / "one"), layer_of(tmp_path / "elsewhere" / "two")
    assert first == second
    assert first[2] == len(first[3])


def test_contents_are_normalised(tmp_path):
    make_tree(tmp_path / "t", 1_234_567)
    digest, diff_id, size, blob = layer_of(tmp_path / "t", mtime=42)
    assert blob[4:8] == b"\0\0\0\0"  # gzip header mtime
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(blob))) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert names == ["app", "app/a.py", "app/b.py", "app/link", "app/pkg", "app/pkg/run.sh"]
    assert {(m.uid, m.gid, m.uname, m.gname, m.mtime) for m in members} == {(0, 0, "", "", 42)}
    modes = {m.name: m.mode for m in members if not m.issym()}
    assert modes == {"app": 0o755, "app/a.py": 0o644, "app/b.py": 0o644, "app/pkg": 0o755, "app/pkg/run.sh": 0o755}
    assert next(m for m in members if m.name == "app/link").linkname == "a.py"


def test_change_of_content_changes_digest(tmp_path):
    make_tree(tmp_path / "t", 1)
    before = layer_of(tmp_path / "t")[0]
    (tmp_path / "t" / "a.py").write_text("A = 2\n")
    assert layer_of(tmp_path / "t")[0] != before


def test_explicit_entries():
    out = io.BytesIO()
    write_layer([Entry("/tmp", is_dir=True, mode=0o1777), Entry("/etc/x", b"hi")], out, mtime=0)
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(out.getvalue()))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["tmp"].mode == 0o1777 and members["etc"].isdir()
