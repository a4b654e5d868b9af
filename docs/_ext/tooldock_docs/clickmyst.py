"""sphinx-click's `{click}` directive on MyST pages.

sphinx-click writes reStructuredText and parses it with the page's parser, which on a MyST page reads it as
Markdown (the `.. option::` lines come out as text). Here the directive is run in a reStructuredText
sub-document, as `{eval-rst}` would run it, and what it made is returned without its section title: the
page's own `## tooldock <command>` heading names the command (the same title twice would be a duplicate id).
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.utils import new_document
from myst_parser.mocking import MockRSTParser, MockState
from sphinx_click.ext import ClickDirective


class Click(ClickDirective):
    def run(self) -> list[nodes.Node]:  # type: ignore[override]
        if not isinstance(self.state, MockState):  # an .rst page: sphinx-click as it is
            return list(super().run())
        lines = [f".. click:: {self.arguments[0]}"]
        lines += [f"   :{name}: {value}" for name, value in self.options.items()]
        document = self.state.document
        sub = new_document(document["source"], document.settings)
        sub.reporter = document.reporter
        MockRSTParser().parse("\n" * (self.lineno - 1) + "\n".join(lines) + "\n", sub)
        made: list[nodes.Node] = []
        for node in sub.children:
            if isinstance(node, nodes.section) and node.children and isinstance(node[0], nodes.title):
                made.extend(node.children[1:])
            else:
                made.append(node)
        return made


def setup(app: Any) -> None:
    app.add_directive("click", Click, override=True)
