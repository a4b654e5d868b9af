"""The documentation site is the user's manual: it builds strictly, loads nothing from the internet, holds
every CLI option, setting, endpoint, manager tool, error code and config key the code has, keeps everything
the README held before the site existed, and its quick start works against a real gateway."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from tooldock.builder import ENV_VARS as BUILD_ENV_VARS
from tooldock.cli import main
from tooldock.cli.relay import ENV_VARS as RELAY_CLIENT_ENV_VARS
from tooldock.keys import ENV_VARS as KEYS_ENV_VARS
from tooldock.manager.analysis import ENV_VARS as ANALYSIS_ENV_VARS
from tooldock.manager.settings import ENV_VARS as MANAGER_ENV_VARS
from tooldock.oauth import ENV_VARS as OAUTH_ENV_VARS
from tooldock.runtime.relay.config import ENV_VARS as RELAY_ENV_VARS
from tooldock.runtime.settings import ENV_VARS
from tooldock.secrets import ENV_VARS as SECRETS_ENV_VARS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
README = (ROOT / "README.md").read_text()
HEADINGS = ROOT / "tests" / "fixtures" / "readme_headings.tsv"
SPHINX_WARNING = re.compile(r"WARNING|ERROR")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built as `scripts/docs` builds it: strict (any warning fails: a broken link, anchor or page
    reference, a page outside the navigation, a reference part the code has and no page shows)."""
    out = tmp_path_factory.mktemp("site")
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-n", "-q", "-b", "html", str(DOCS), str(out)],
        capture_output=True, text=True, cwd=ROOT, timeout=600,
    )
    assert build.returncode == 0, f"the docs site does not build strictly:\n{build.stderr[-6000:]}"
    return out


def _text(page: Path) -> str:
    """A built page's text, tags dropped and entities decoded (what a reader sees)."""
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))


def _pages(site: Path) -> list[Path]:
    return [p for p in site.rglob("*.html") if not p.name.startswith(("genindex", "search", "py-modindex"))]


def test_the_build_script_is_the_strict_build():
    script = (ROOT / "scripts" / "docs").read_text()
    assert "sphinx" in script and " -W " in script and "--keep-going" in script and " -n " in script


def test_no_page_loads_anything_from_the_internet(site):
    external = re.compile(r"""<(script|link|img|iframe)\b[^>]*\b(src|href)=["'](https?:)?//""", re.IGNORECASE)
    for page in _pages(site):
        for tag in re.finditer(r"<(?:script|link|img|iframe)\b[^>]*>", page.read_text(), re.IGNORECASE):
            if external.search(tag.group(0)) and 'rel="canonical"' not in tag.group(0):
                pytest.fail(f"{page.relative_to(site)} loads {tag.group(0)} from outside the site")
    for sheet in site.rglob("*.css"):
        found = re.search(r"(@import|url\()\s*[\"']?(https?:)?//", sheet.read_text(errors="replace"))
        assert found is None, f"{sheet.relative_to(site)} loads {found.group(0) if found else ''} from outside"


def test_search_is_built(site):
    assert (site / "search.html").exists() and (site / "searchindex.js").exists()
    index = (site / "searchindex.js").read_text()
    assert all(f'"{word}"' in index for word in ("bearer", "reload_core", "namespac"))


def test_every_page_is_in_the_navigation(site):
    nav = (site / "index.html").read_text()
    for source in DOCS.rglob("*.md"):
        if "_ext" in source.parts or "_build" in source.parts or source == DOCS / "index.md":
            continue
        target = source.relative_to(DOCS).with_suffix(".html").as_posix()
        assert f'href="{target}"' in nav, f"docs/{source.relative_to(DOCS)} is not in the site's navigation"


def _options(group: click.Group = main, prefix: str = ""):
    for name, command in group.commands.items():
        yield prefix + name, None
        for param in command.params:
            if isinstance(param, click.Option):
                yield prefix + name, max(param.opts, key=len)
        if isinstance(command, click.Group):
            yield from _options(command, f"{prefix}{name} ")


@pytest.mark.parametrize("command, option", list(_options()))
def test_every_cli_command_and_option_is_in_the_reference(site, command, option):
    cli = _text(site / "reference" / "cli.html")
    assert f"tooldock {command}" in cli, f"`tooldock {command}` is not in the CLI reference"
    if option:
        assert option in cli, f"{option} of `tooldock {command}` is not in the CLI reference"


@pytest.mark.parametrize("variable", ENV_VARS + BUILD_ENV_VARS + SECRETS_ENV_VARS + MANAGER_ENV_VARS + KEYS_ENV_VARS
                         + RELAY_ENV_VARS + RELAY_CLIENT_ENV_VARS + ANALYSIS_ENV_VARS + OAUTH_ENV_VARS)
def test_every_setting_is_in_the_reference_with_its_default(site, variable):
    page = (site / "reference" / "settings.html").read_text()
    row = re.search(r"<tr[^>]*>\s*<td[^>]*><p><code[^>]*><span class=\"pre\">" + re.escape(variable)
                    + r"</span></code></p>\s*</td>\s*<td[^>]*>(.*?)</td>", page, re.DOTALL)
    assert row, f"{variable} has no row in the settings reference"
    assert _strip(row.group(1)), f"{variable} has no default in the settings reference"


def _strip(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def test_every_endpoint_is_in_the_reference(site):
    from tooldock.runtime.http.rest import create_router
    from tooldock.runtime.settings import Settings

    router = create_router(None, Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16}))
    # As a user writes them: `/tools/{name}`, not Starlette's `{name:path}` (a tool name may hold "/").
    paths = {route.path.replace(":path}", "}") for route in router.routes} | {"/mcp", "/sse", "/messages",
                                                                              "/metrics", "/docs",
                                                                              "/.well-known/oauth-protected-resource"}
    assert len(paths) >= 10
    page = _text(site / "reference" / "http-api.html")
    for path in paths:
        assert path in page, f"endpoint {path} is not in the HTTP API reference"
    assert (site / "openapi" / "gateway.json").exists()


def test_every_manager_tool_is_in_the_reference(site):
    sys.path.insert(0, str(DOCS / "_ext"))
    from tooldock_docs.parts_api import manager_tools

    tools = manager_tools()
    assert len(tools) >= 18
    page = (site / "reference" / "manager-tools.html").read_text()
    for name in tools:
        assert f'id="{name.replace("_", "-")}"' in page, f"manager tool {name} has no section"


def test_every_error_code_is_in_the_reference(site):
    import inspect

    import tooldock.errors as errors

    page = _text(site / "reference" / "errors.html")
    classes = [c for _, c in inspect.getmembers(errors, inspect.isclass)
               if c.__module__ == errors.__name__ and issubclass(c, Exception)]
    assert len(classes) >= 30
    for cls in classes:
        assert cls.__name__ in page, f"errors.{cls.__name__} is not in the error reference"
        if getattr(cls, "code", None):
            assert cls.code in page, f"code {cls.code} is not in the error reference"


def test_every_config_key_is_in_the_reference(site):
    from tooldock.namespace.config import KNOWN_KEYS
    from tooldock.namespace.toolsfile import SERVER_KEYS, TOP_KEYS

    page = _text(site / "reference" / "schemas.html")
    for key in (*KNOWN_KEYS, *TOP_KEYS, *SERVER_KEYS):
        assert key in page, f"config key {key} is not in the schemas reference"
    for name in ("tooldock.yaml", "tools.toml"):
        assert (site / "schemas" / f"{name}.schema.json").exists()


def test_the_mcp_versions_are_in_the_reference(site):
    from mcp_types.version import SUPPORTED_PROTOCOL_VERSIONS

    page = _text(site / "reference" / "mcp.html")
    for version in SUPPORTED_PROTOCOL_VERSIONS:
        assert version in page


def test_the_worker_protocol_is_in_the_reference(site):
    from tooldock.worker.protocol import ERROR_CODES, OPS

    page = _text(site / "reference" / "worker-protocol.html")
    for name in (*OPS, *ERROR_CODES):
        assert name in page, f"worker protocol's {name} is not in its reference"


# --- Nothing the README said before the site is lost --------------------------------------------------------

def _anchors(page: Path) -> set[str]:
    return set(re.findall(r'\bid="([^"]+)"', page.read_text()))


def test_every_heading_the_readme_had_has_a_page(site):
    """Each section heading of the README before the site (tests/fixtures/readme_headings.tsv, 36 of them) and
    the page and anchor of the site that now holds it."""
    rows = [line.split("\t") for line in HEADINGS.read_text().splitlines() if "\t" in line]  # the rest: comments
    assert len(rows) == 36
    for heading, target in rows:
        page, _, anchor = target.partition("#")
        built = site / Path(page).with_suffix(".html")
        assert built.exists(), f"README heading {heading!r}: {page} is not a page of the site"
        if anchor:
            assert anchor in _anchors(built), f"README heading {heading!r}: {page} has no #{anchor}"


# --- The README: short, the two quick-start commands, links that resolve ------------------------------------

def test_readme_is_short():
    assert len(README.splitlines()) <= 260


def test_quick_start_commands_match_ci():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "exec ./scripts/test" in ci
    assert "```bash\n./scripts/test\n```" in README
    assert ".venv/bin/tooldock serve examples" in README


def _slug(heading: str) -> str:
    """GitHub's (and MyST's) anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _md_anchors(path: Path) -> set[str]:
    fence, found = False, set()
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            found.add(_slug(line.lstrip("#")))
    return found


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)\s]+)\)", README)
    local = [link for link in links if not re.match(r"[a-z]+:", link)]
    assert len(local) >= 10, "the README links into the docs"
    for link in local:
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / "README.md"
        assert target.exists(), f"README links to {link}, which does not exist"
        if anchor and target.suffix == ".md":
            assert anchor in _md_anchors(target), f"README links to {link}: no such heading there"


# --- The tutorials' cheap commands, run for real ------------------------------------------------------------

def _block_with(page: Path, needle: str) -> str:
    for block in re.findall(r"```bash\n(.*?)```", page.read_text(), re.DOTALL):
        if needle in block:
            return block
    raise AssertionError(f"{page.relative_to(ROOT)} has no bash block with {needle!r}")


@pytest.mark.slow
def test_quick_start_curl_answers_as_the_docs_say(make_gateway):
    """The first tutorial's curl, run with curl against `tooldock serve examples`: the answer is the one the
    page shows under it."""
    block = _block_with(DOCS / "tutorials" / "first-tool.md", "curl ")
    assert block == _block_with(ROOT / "README.md", "curl "), "the README's quick start and the tutorial's differ"
    curl = re.search(r"^curl .*?(?<!\\)\n", block, re.DOTALL | re.MULTILINE)
    expected = re.search(r"^# (\{.*\})$", block, re.MULTILINE)
    assert curl and expected
    gateway = make_gateway(ROOT / "examples")
    command = curl.group(0).replace("http://127.0.0.1:8000", gateway.url)
    answer = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "TOOLDOCK_BEARER_TOKEN": gateway.token})
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.strip() == expected.group(1)


def _code_blocks(page: Path) -> list[tuple[str, str]]:
    """(language, text) of every fenced block of a page, in order."""
    return re.findall(r"^```(\w*)\n(.*?)^```$", page.read_text(), re.DOTALL | re.MULTILINE)


def _after(blocks: list[tuple[str, str]], needle: str, language: str = "text") -> str:
    """The first `language` block after the block that holds `needle`."""
    start = next(i for i, (_, text) in enumerate(blocks) if needle in text)
    return next(text for lang, text in blocks[start + 1:] if lang == language)


@pytest.mark.slow
def test_first_tool_tutorial_runs_as_written(tmp_path, make_gateway):
    """docs/tutorials/first-tool.md, step by step: its tool file, `tooldock check` on it and on the broken file
    (the outputs the page shows), then its REST and MCP calls against a gateway serving the folder."""
    page = DOCS / "tutorials" / "first-tool.md"
    blocks = _code_blocks(page)
    python = [text for lang, text in blocks if lang == "python"]
    notes = tmp_path / "tools" / "notes"
    notes.mkdir(parents=True)
    (notes / "words.py").write_text(next(text for text in python if "def count_words" in text))
    tooldock = str(Path(sys.executable).with_name("tooldock"))

    def check() -> subprocess.CompletedProcess[str]:
        # What a terminal shows: the report on stdout, the summary line on stderr.
        return subprocess.run([tooldock, "check", "tools"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, cwd=tmp_path, timeout=120)

    clean = check()
    assert clean.returncode == 0, clean.stdout
    assert clean.stdout == _after(blocks, "tooldock check tools")
    (notes / "broken.py").write_text(next(text for text in python if "def shout" in text))
    broken = check()
    assert broken.returncode == 1
    shown = _after(blocks, "def shout")
    assert shown.startswith("$ .venv/bin/tooldock check tools\n")
    assert broken.stdout == shown.split("\n", 1)[1]
    (notes / "broken.py").unlink()

    gateway = make_gateway(tmp_path / "tools")
    env = {**os.environ, "TOOLDOCK_BEARER_TOKEN": gateway.token}

    def run(block: str) -> str:
        command = block.replace("http://127.0.0.1:8000", gateway.url)
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    rest = next(text for lang, text in blocks if lang == "bash" and "/tools/count_words" in text)
    expected = re.search(r"^# (\{.*\})$", rest, re.MULTILINE)
    assert expected and run(rest).endswith(expected.group(1))
    mcp = next(text for lang, text in blocks if lang == "bash" and "Mcp-Session-Id" in text)
    answer = _after(blocks, "Mcp-Session-Id", "json").strip()
    assert answer in run(mcp).replace("data: ", "")
