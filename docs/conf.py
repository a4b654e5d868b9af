"""Sphinx configuration of ToolDock's documentation site (`scripts/docs` builds it strictly).

MyST Markdown pages, the Furo theme (self-contained: no page loads anything from a CDN), sphinx-click for
the CLI reference, and `tooldock_docs` (docs/_ext) for the other reference pages, generated from the code.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

project = "ToolDock"
author = "The ToolDock developers"
copyright = "2026, the ToolDock developers"

extensions = ["myst_parser", "sphinx_click", "tooldock_docs"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

# Every heading down to ####  gets a GitHub-style anchor, so `[text](page.md#some-heading)` links resolve
# (and a link to a heading that does not exist is a warning, which the strict build turns into a failure).
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]
nitpicky = True

html_theme = "furo"
html_title = "ToolDock"
html_static_path: list[str] = []
html_extra_path: list[str] = []  # tooldock_docs adds the generated JSON Schemas and OpenAPI document
html_show_sourcelink = False
html_copy_source = False
# No en dashes: `--watch` in the CLI reference's option texts stays two hyphens.
smartquotes_action = "qe"
pygments_style = "friendly"
pygments_dark_style = "monokai"
