"""Sphinx extension: the reference pages' generated parts, made from the code at build time.

A page asks for a generated part with a marker line, `<!-- tooldock:KIND ARGS -->`, which is replaced by the
Markdown the generator of KIND makes (`generate`); an unknown kind, a bad argument or a generator's error is
a build warning, and the strict build (`-W`) fails on it. Parts that must be complete (every manager tool,
every CLI command) are checked once all pages are read: one that no page documents is a warning too.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

from tooldock_docs import clickmyst, coverage, generate

logger = logging.getLogger(__name__)
MARKER = re.compile(r"^<!-- tooldock:(?P<kind>[a-z-]+)(?P<args>(?: [^ >]+)*) -->$", re.MULTILINE)


def fill(app: Sphinx, docname: str, source: list[str]) -> None:
    text = source[0]

    def one(match: re.Match[str]) -> str:
        kind, args = match["kind"], match["args"].split()
        try:
            part = generate.part(kind, args)
        except Exception as exc:  # a generator's failure is a warning naming the marker: the strict build fails
            logger.warning("%s: tooldock:%s %s: %s", docname, kind, " ".join(args), exc, location=docname)
            return ""
        coverage.seen(app.env, kind, args, docname)
        return part

    source[0] = MARKER.sub(one, text)
    coverage.scan_click(app.env, docname, source[0])


def check(app: Sphinx, env: Any) -> None:
    for problem in coverage.missing(env):
        logger.warning(problem)


def add_downloads(app: Sphinx, config: Any) -> None:
    """The files pages link to (the JSON Schemas, the gateway's OpenAPI document), written to a folder of
    this build's that the HTML builder copies to the site's root (`schemas/...`, `openapi/...`)."""
    folder = Path(tempfile.mkdtemp(prefix="tooldock-docs-"))
    try:
        generate.write_downloads(folder)
    except Exception as exc:  # reported, so the strict build fails with the reason rather than a traceback
        logger.warning("tooldock_docs: the downloadable files could not be made: %s", exc)
    config.html_extra_path = [*config.html_extra_path, str(folder)]


def setup(app: Sphinx) -> dict[str, Any]:
    clickmyst.setup(app)
    app.connect("source-read", fill)
    app.connect("env-check-consistency", check)
    app.connect("config-inited", add_downloads)
    app.connect("env-merge-info", coverage.merge)
    app.connect("env-purge-doc", coverage.purge)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 1}
