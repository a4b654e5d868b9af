"""Repository analysis for the manager's translation tools (seed 000, "Builder"): clone a repository or
fetch a package's published source, and report what it is and which MCP tools it defines, without ever
running its code. `RepoWorkspace` keeps the clones; `analyze_tree` reads any directory; `fetch_package`
unpacks an npm or PyPI package safely."""

from tooldock.errors import AnalysisError, FetchFailed
from tooldock.manager.analysis.fetch import ENV_VARS, Package, fetch_package
from tooldock.manager.analysis.tree import analyze_tree
from tooldock.manager.analysis.workspace import RepoWorkspace

__all__ = ["ENV_VARS", "AnalysisError", "FetchFailed", "Package", "RepoWorkspace", "analyze_tree", "fetch_package"]
