"""Console scripts in an image's Python trees name the image's Python, not the build host's (so the digest
does not depend on where the build ran)."""

from __future__ import annotations

from pathlib import Path

from tooldock.builder.install import IMAGE_SHEBANG, portable_scripts

BODY = b"import sys\nfrom pkg.cli import main\nsys.exit(main())\n"


def test_shebangs_of_the_build_host_become_the_images(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "plain").write_bytes(b"#!/home/someone/.venv/bin/python3\n" + BODY)
    long = "/" + "x" * 140 + "/bin/python"
    (bin_dir / "trampoline").write_bytes(
        b"#!/bin/sh\n'''exec' \"" + long.encode() + b"\" \"$0\" \"$@\"\n' '''\n" + BODY
    )
    (bin_dir / "shell").write_bytes(b"#!/bin/sh\necho hi\n")
    (bin_dir / "data.txt").write_bytes(b"no shebang\n")
    (bin_dir / "link").symlink_to("plain")

    portable_scripts(bin_dir)

    assert (bin_dir / "plain").read_bytes() == IMAGE_SHEBANG + b"\n" + BODY
    assert (bin_dir / "trampoline").read_bytes() == IMAGE_SHEBANG + b"\n" + BODY
    assert (bin_dir / "shell").read_bytes() == b"#!/bin/sh\necho hi\n"  # not a Python script: left alone
    assert (bin_dir / "data.txt").read_bytes() == b"no shebang\n"
    assert (bin_dir / "link").is_symlink()


def test_no_bin_folder_is_fine(tmp_path: Path) -> None:
    portable_scripts(tmp_path / "bin")  # a lock without console scripts
    assert not (tmp_path / "bin").exists()
