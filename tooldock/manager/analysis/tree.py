"""`analyze_tree`: seed 000's analyze_repo answer for any directory (a clone, an unpacked npm or PyPI
package). It reads files, never runs them: each language's analyzer (Python `ast`; tree-sitter for
TypeScript/JavaScript and Go) reports tools, environment variables, URL hosts and the MCP framework."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tooldock.errors import AnalysisError
from tooldock.manager.analysis.facts import Facts, looks_secret
from tooldock.manager.analysis.golang import analyze_go
from tooldock.manager.analysis.javascript import analyze_javascript
from tooldock.manager.analysis.manifests import dependencies
from tooldock.manager.analysis.python import analyze_python
from tooldock.manager.analysis.walk import MAX_LISTED, SourceFile, read_text, walk

Analyzer = Callable[[list[tuple[SourceFile, str]]], dict[str, Facts]]
ANALYZERS: dict[str, Analyzer] = {
    "python": analyze_python,
    "typescript": analyze_javascript,
    "javascript": analyze_javascript,
    "go": analyze_go,
}
MAX_TOOLS = 500
# When a repository mixes frameworks, the one its language speaks wins; this order breaks the rest.
FRAMEWORK_ORDER = ("mcp-sdk", "fastmcp", "mcp-python", "mcp-go", "go-sdk")


def _family(language: str) -> str:
    return "js" if language in ("typescript", "javascript") else language


def _framework(language: str, per_file: dict[str, Facts], sources: dict[str, SourceFile]) -> str:
    """The MCP framework most files of the repository's language import (files of other languages count
    only when none of its language imports one); ties go by FRAMEWORK_ORDER."""
    mine: Counter[str] = Counter()
    others: Counter[str] = Counter()
    for rel, facts in per_file.items():
        same = _family(sources[rel].language) == _family(language)
        (mine if same else others).update(facts.frameworks)
    counts = mine or others
    if not counts:
        return "unknown"
    return max(counts, key=lambda fw: (counts[fw], -FRAMEWORK_ORDER.index(fw)))


def _dedupe(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per tool name: the one with the most parameters, then the first found."""
    best: dict[str, dict[str, Any]] = {}
    for found in tools:
        kept = best.get(found["name"])
        if kept is None or len(found["parameters"]) > len(kept["parameters"]):
            best[found["name"]] = found
    order = list(dict.fromkeys(t["name"] for t in tools))
    return [best[name] for name in order][:MAX_TOOLS]


def analyze_tree(path: Path | str, repo_url: str = "") -> dict[str, Any]:
    """Seed 000's analyze_repo answer for the directory `path`: repo_url, language, framework, files,
    tools_found, dependencies, apis_called, secrets_needed; plus env_vars (every variable read), skipped
    (files left out and why) and files_total."""
    root = Path(path)
    if not root.is_dir() or root.is_symlink():
        raise AnalysisError(f"{path} is not a directory to analyze")
    tree = walk(root)
    by_language: dict[str, list[tuple[SourceFile, str]]] = {}
    for src in tree.sources:
        if src.language in ANALYZERS:
            content = read_text(src.path)
            if content is None:
                tree.skip(src.rel, "unreadable, binary or changed while reading")
                continue
            by_language.setdefault(src.language, []).append((src, content))
    per_file: dict[str, Facts] = {}
    groups: dict[Analyzer, list[tuple[SourceFile, str]]] = {}
    for language, files in by_language.items():  # TypeScript and JavaScript share one index
        groups.setdefault(ANALYZERS[language], []).extend(files)
    for analyzer, files in groups.items():
        per_file.update(analyzer(files))
    sources = {src.rel: src for src in tree.sources}
    total = Facts()
    for rel in sorted(per_file):  # tests mock servers, fake hosts and variables: only their imports count
        total.merge(per_file[rel] if not sources[rel].is_test else Facts(frameworks=per_file[rel].frameworks))
    language = tree.language()
    listed = [src.rel for src in tree.sources] + [rel for rel in tree.manifests if rel not in sources]
    return {
        "repo_url": repo_url,
        "language": language,
        "framework": _framework(language, per_file, sources),
        "files": sorted(listed)[:MAX_LISTED],
        "files_total": len(listed),
        "tools_found": _dedupe(total.tools),
        "dependencies": dependencies(tree.manifests),
        "apis_called": sorted(total.hosts),
        "secrets_needed": sorted(name for name in total.env if looks_secret(name)),
        "env_vars": sorted(total.env),
        "skipped": tree.skipped,
        "truncated": tree.truncated,
    }
