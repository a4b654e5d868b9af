"""fetch_package (issue 12): npm tarballs and PyPI sdists / wheels served by a registry on loopback
(NPM_REGISTRY_URL / PYPI_URL point at it), including hand-made malicious archives: `..` and absolute
members, symlinks and hard links out of the tree, compression bombs, too many entries, a wrong checksum."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import io
import json
import socket
import tarfile
import threading
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tooldock.errors import AnalysisError, FetchFailed
from tooldock.manager.analysis import analyze_tree, fetch_package
from tooldock.manager.analysis.extract import extract

SERVER_TS = ('import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";\nimport { z } from "zod";\n'
             'server.tool("hello", "Say hello", { name: z.string() }, async () => ({ content: [] }));\n')


class Registry:
    """A loopback HTTP server answering fixed routes; counts the requests per path."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes]] = {}
        self.hits: dict[str, int] = {}
        registry = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                registry.hits[self.path] = registry.hits.get(self.path, 0) + 1
                status, body = registry.routes.get(self.path, (404, b"not found"))
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def npm(self, name: str, version: str, tarball: bytes, integrity: str | None = None) -> None:
        path = f"/tarballs/{name.replace('/', '-')}-{version}.tgz"
        self.routes[path] = (200, tarball)
        digest = integrity or "sha512-" + base64.b64encode(hashlib.sha512(tarball).digest()).decode()
        packument = {"name": name, "dist-tags": {"latest": version},
                     "versions": {version: {"dist": {"tarball": self.url + path, "integrity": digest},
                                            "repository": {"type": "git", "url": "git+https://github.com/o/r.git"}}}}
        self.routes["/" + name.replace("/", "%2F")] = (200, json.dumps(packument).encode())

    def pypi(self, name: str, version: str, files: list[tuple[str, str, bytes]]) -> None:
        urls = []
        for kind, filename, data in files:
            self.routes[f"/packages/{filename}"] = (200, data)
            urls.append({"packagetype": kind, "filename": filename, "url": f"../../../packages/{filename}",
                         "digests": {"sha256": hashlib.sha256(data).hexdigest()}})
        doc = json.dumps({"info": {"version": version, "project_urls": {"Source": "https://github.com/o/p"}},
                          "urls": urls}).encode()
        self.routes[f"/pypi/{name}/json"] = (200, doc)
        self.routes[f"/pypi/{name}/{version}/json"] = (200, doc)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def registry():
    reg = Registry()
    yield reg
    reg.close()


def tgz(members: list[tuple[str, bytes | None, bytes | str]]) -> bytes:
    """(name, type, data or link target): type None is a regular file."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, kind, payload in members:
            info = tarfile.TarInfo(name)
            if kind is None:
                data = payload if isinstance(payload, bytes) else payload.encode()
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            else:
                info.type = kind
                info.linkname = str(payload)
                tf.addfile(info)
    return buf.getvalue()


def zipped(members: dict[str, bytes], links: dict[str, str] | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16)
            zf.writestr(info, target)
    return buf.getvalue()


def fetch(kind: str, name: str, dest: Path, registry: Registry, version: str | None = None):
    return asyncio.run(fetch_package(kind, name, version, dest, registry=registry.url))


def test_npm_tarball_unpacked_and_cached(tmp_path, registry):
    registry.npm("@acme/server-demo", "1.2.0", tgz([
        ("package/package.json", None, b'{"name": "@acme/server-demo", "dependencies": {"zod": "^3"}}'),
        ("package/dist/index.js", None, SERVER_TS.encode()),
    ]))
    pkg = fetch("npm", "@acme/server-demo", tmp_path / "cache", registry)
    assert (pkg.kind, pkg.name, pkg.version) == ("npm", "@acme/server-demo", "1.2.0")
    assert pkg.path.name == "package" and (pkg.path / "dist" / "index.js").read_text() == SERVER_TS
    assert pkg.repository == "git+https://github.com/o/r.git"
    result = analyze_tree(pkg.path, "npm:@acme/server-demo")
    assert [t["name"] for t in result["tools_found"]] == ["hello"]
    assert result["dependencies"] == {"zod": "^3"}
    again = fetch("npm", "@acme/server-demo", tmp_path / "cache", registry, version="1.2.0")
    assert again.path == pkg.path
    assert registry.hits["/tarballs/@acme-server-demo-1.2.0.tgz"] == 1  # the second fetch is the cache


@pytest.mark.parametrize("evil", ["package/../../escaped.js", "/tmp/absolute-escape.js", "../escaped.js",
                                  "C:/windows.js"])
def test_escaping_members_refuse_the_whole_archive(tmp_path, registry, evil):
    registry.npm("evil", "1.0.0", tgz([("package/index.js", None, b"ok"), (evil, None, b"pwned")]))
    with pytest.raises(AnalysisError, match="unsafe path"):
        fetch("npm", "evil", tmp_path / "cache", registry)
    assert not list(tmp_path.rglob("escaped.js")) and not Path("/tmp/absolute-escape.js").exists()
    assert not (tmp_path / "cache" / "npm" / "evil" / "1.0.0").exists()
    assert not [p for p in (tmp_path / "cache" / "npm" / "evil").iterdir() if p.name.startswith(".tmp-")]


def test_links_and_special_files_are_never_created(tmp_path, registry):
    registry.npm("linky", "1.0.0", tgz([
        ("package/index.js", None, b"module.exports = 1;\n"),
        ("package/passwd", tarfile.SYMTYPE, "/etc/passwd"),
        ("package/up", tarfile.SYMTYPE, "../../.."),
        ("package/hard", tarfile.LNKTYPE, "/etc/passwd"),
        ("package/fifo", tarfile.FIFOTYPE, ""),
        ("package/up/escaped.js", None, b"x"),  # through the skipped link: a plain directory now
    ]))
    pkg = fetch("npm", "linky", tmp_path / "cache", registry)
    names = sorted(p.relative_to(pkg.path).as_posix() for p in pkg.path.rglob("*"))
    assert names == ["index.js", "up", "up/escaped.js"]
    assert not any(p.is_symlink() for p in pkg.path.rglob("*"))
    assert (pkg.path / "up").is_dir()


def test_checksum_mismatch_is_refused(tmp_path, registry):
    registry.npm("tampered", "1.0.0", tgz([("package/index.js", None, b"x")]), integrity="sha512-AAAA")
    with pytest.raises(FetchFailed, match="checksum"):
        fetch("npm", "tampered", tmp_path / "cache", registry)
    assert not (tmp_path / "cache" / "npm" / "tampered" / "1.0.0").exists()


def test_missing_package_version_and_registry(tmp_path, registry):
    with pytest.raises(AnalysisError, match="does not exist"):
        fetch("npm", "nothing-here", tmp_path, registry)
    registry.npm("real", "1.0.0", tgz([("package/a.js", None, b"x")]))
    with pytest.raises(AnalysisError, match="has no version '9.9.9'"):
        fetch("npm", "real", tmp_path, registry, version="9.9.9")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    with pytest.raises(FetchFailed, match="cannot reach"):
        asyncio.run(fetch_package("pypi", "anything", None, tmp_path, registry=closed))


@pytest.mark.parametrize("kind, name, version, message", [
    ("cargo", "serde", None, "not supported"),
    ("npm", "../etc/passwd", None, "not a valid npm package name"),
    ("pypi", "a b", None, "not a valid pypi package name"),
    ("pypi", "ok", "1.0; rm -rf /", "not a package version"),
])
def test_bad_package_input(tmp_path, kind, name, version, message):
    with pytest.raises(AnalysisError, match=message):
        asyncio.run(fetch_package(kind, name, version, tmp_path, registry="http://127.0.0.1:9"))


def test_pypi_sdist_from_relative_urls_and_env_registry(tmp_path, registry, monkeypatch):
    server = ("from mcp.server.fastmcp import FastMCP\nmcp = FastMCP('demo')\n\n@mcp.tool()\n"
              "def shout(text: str) -> str:\n    '''Upper-case the text.'''\n    return text.upper()\n")
    sdist = tgz([("demo_mcp-0.3.0/pyproject.toml", None, b'[project]\nname="demo-mcp"\ndependencies=["mcp>=1"]\n'),
                 ("demo_mcp-0.3.0/src/demo_mcp/server.py", None, server.encode())])
    wheel = zipped({"demo_mcp/server.py": b"# the wheel"})
    registry.pypi("demo-mcp", "0.3.0", [("bdist_wheel", "demo_mcp-0.3.0-py3-none-any.whl", wheel),
                                         ("sdist", "demo_mcp-0.3.0.tar.gz", sdist)])
    monkeypatch.setenv("PYPI_URL", registry.url)
    pkg = asyncio.run(fetch_package("pypi", "demo-mcp", None, tmp_path / "cache"))
    assert pkg.version == "0.3.0" and pkg.path.name == "demo_mcp-0.3.0"  # the sdist, not the wheel
    assert pkg.repository == "https://github.com/o/p"
    result = analyze_tree(pkg.path)
    assert [t["name"] for t in result["tools_found"]] == ["shout"]
    assert result["framework"] == "mcp-python" and result["dependencies"] == {"mcp": ">=1"}


def test_pypi_wheel_when_there_is_no_sdist(tmp_path, registry):
    wheel = zipped({"only_wheel/__init__.py": b"", "only_wheel/server.py": b"x = 1\n"},
                   links={"only_wheel/link.py": "/etc/passwd"})
    registry.pypi("only-wheel", "1.0", [("bdist_wheel", "only_wheel-1.0-py3-none-any.whl", wheel)])
    pkg = fetch("pypi", "only-wheel", tmp_path / "cache", registry, version="1.0")
    assert (pkg.path / "server.py").read_text() == "x = 1\n"
    assert not (pkg.path / "link.py").exists()


def test_zip_with_traversal_is_refused(tmp_path, registry):
    registry.pypi("zipslip", "1.0", [("bdist_wheel", "zipslip-1.0-py3-none-any.whl",
                                      zipped({"ok.py": b"", "../../zipslip.py": b"pwned"}))])
    with pytest.raises(AnalysisError, match="unsafe path"):
        fetch("pypi", "zipslip", tmp_path / "cache", registry)
    assert not list(tmp_path.rglob("zipslip.py"))


def test_compression_bomb_and_entry_count_are_capped(tmp_path):
    bomb = tmp_path / "bomb.tgz"
    bomb.write_bytes(tgz([("package/zeros.bin", None, bytes(3 * 1024 * 1024))]))
    assert bomb.stat().st_size < 50_000
    with pytest.raises(AnalysisError, match="more than 1 MB"):
        extract(bomb, tmp_path / "out", "bomb", max_bytes=1024 * 1024)
    assert not (tmp_path / "out").exists()
    many = tmp_path / "many.zip"
    many.write_bytes(zipped({f"f{i}.txt": b"x" for i in range(50)}))
    with pytest.raises(AnalysisError, match="more than 20 entries"):
        extract(many, tmp_path / "out2", "many", max_members=20)
    assert not (tmp_path / "out2").exists()
    junk = tmp_path / "junk.tgz"
    junk.write_bytes(b"this is not an archive")
    with pytest.raises(AnalysisError, match="not a readable archive"):
        extract(junk, tmp_path / "out3", "junk")
