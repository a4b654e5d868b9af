"""What workers and upstream servers print reaches the gateway's log line by line, masked, and a line too
long to log whole is cut, never stopping the reading (worker/loglines.py)."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

from tooldock.upstream.output import ServerOutput
from tooldock.worker.loglines import MAX_LINE, LineSplitter, as_text
from tooldock.worker.secretenv import Masker

SECRET = "sk-live-0123456789abcdef"
LOUD = '''from fastmcp.tools import tool


@tool
def shout(size: int) -> str:
    """Print one line of `size` bytes, then a short one."""
    print("start" + "x" * size + "end")
    print("after the long line")
    return "ok"
'''


def split(chunks: list[bytes], limit: int = MAX_LINE) -> list[tuple[bytes, int]]:
    splitter = LineSplitter(limit)
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    return lines + splitter.end()


def test_lines_are_split_however_the_output_arrives():
    assert split([b"one\ntw", b"o\n", b"", b"thr", b"ee"]) == [(b"one", 0), (b"two", 0), (b"three", 0)]
    assert split([b"a\n\nb\n"]) == [(b"a", 0), (b"", 0), (b"b", 0)]
    assert split([b"\n"]) == [(b"", 0)] and split([]) == []


def test_a_long_line_keeps_its_start_and_counts_the_rest_across_chunks():
    assert split([b"abc", b"defgh", b"ij\nk"], limit=4) == [(b"abcd", 6), (b"k", 0)]
    assert split([b"abcd\n"], limit=4) == [(b"abcd", 0)]
    assert split([b"x" * 10], limit=4) == [(b"xxxx", 6)]


def test_a_cut_line_says_its_size_and_a_whole_one_is_as_printed():
    mask = Masker([])
    assert as_text(b"plain line \r\n", 0, mask) == "plain line"
    text = as_text(b"x" * 8, 92, mask)
    assert text.startswith("x" * 8) and "a line of 100 bytes, cut" in text and "keeps its first 8" in text


@pytest.mark.parametrize("before", range(MAX_LINE - len(SECRET), MAX_LINE + 1))
def test_no_part_of_a_secret_the_cut_goes_through_is_logged(before):
    line = b"a" * before + SECRET.encode() + b"b" * 50
    ((head, more),) = split([line])
    kept = as_text(head, more, Masker([SECRET])).split(" ... [")[0]
    assert set(kept) <= {"a", "*"}, kept[-40:]  # the filler only: no character of the value


def test_a_secret_inside_what_is_kept_is_masked():
    ((head, more),) = split([b"token=" + SECRET.encode() + b" " + b"z" * (2 * MAX_LINE)])
    text = as_text(head, more, Masker([SECRET]))
    assert SECRET not in text and text.startswith("token=*** zzz")


def test_an_upstream_servers_long_line_is_cut_and_its_next_lines_still_logged(capsys):
    output = ServerOutput("[up]", Masker([SECRET]))
    with output as errlog:
        writer = threading.Thread(
            target=lambda: (errlog.write("y" * 300_000 + SECRET + "\n" + f"then {SECRET}\n"), errlog.flush())
        )
        writer.start()
        writer.join(10)
    said = asyncio.run(output.said(wait=10))
    logged = capsys.readouterr().err
    assert SECRET not in logged and SECRET[:8] not in logged
    assert "[up] yyy" in logged and f"a line of {300_000 + len(SECRET)} bytes, cut" in logged
    assert said.endswith("then ***") and "[up] then ***" in logged


@pytest.mark.parametrize("fork", ["1", "0"], ids=["forked", "spawned"])
def test_a_tool_printing_a_line_of_megabytes_answers_and_its_worker_goes_on(make_gateway, tmp_path, fork):
    # The reading ended on a line over asyncio's limit (64 KiB spawned, 1 MiB forked): the pipe filled, the
    # tool blocked in print() until its time limit, and its worker was replaced as stuck.
    (tmp_path / "src" / "loud").mkdir(parents=True)
    (tmp_path / "src" / "loud" / "tools.py").write_text(LOUD)
    gw = make_gateway(tmp_path / "src", env={"TOOLDOCK_FORK_WORKERS": fork, "TOOL_CALL_TIMEOUT_SECONDS": "20"})
    size = 3_000_000
    for _ in range(2):
        reply = gw.call("loud", "shout", size=size)
        assert reply.status_code == 200, reply.text
        assert reply.json() == {"result": "ok"}
    assert gw.namespace("loud")["restarts"] == 0
    gw.wait_for(lambda: gw.logs.count("[loud] after the long line") == 2, timeout=10, what="the short lines")
    cut = [line for line in gw.logs.splitlines() if line.startswith("[loud] startxxx")]
    assert len(cut) == 2 and all(f"a line of {size + 8} bytes, cut" in line for line in cut), cut
    assert all(len(line) < MAX_LINE + 200 for line in gw.logs.splitlines())
    assert os.path.getsize(gw.log_path) < 4 * MAX_LINE + 100_000  # not the whole lines
