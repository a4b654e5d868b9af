"""Which repository URLs `analyze_repo` accepts, and in which form git gets them: `https://`, `ssh://`,
scp-like `git@host:owner/repo.git`, `file://` and absolute local paths (cloned as `file://`, so `--depth 1`
applies). Everything else is refused before git sees it: other schemes and transports (`http://`, `git://`,
`ext::`), a leading `-` (option injection), a host or path starting with `-`, control characters, and
credentials in the URL."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote, urlsplit

from tooldock.errors import AnalysisError

MAX_URL = 2048
SCP_LIKE = re.compile(r"(?P<user>[A-Za-z0-9._-]+)@(?P<host>[A-Za-z0-9][A-Za-z0-9.-]*):(?P<path>[^\s]+)")
HOSTNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]*")
EXAMPLES = "https://github.com/owner/repo, git@github.com:owner/repo.git, file:///srv/repo or /srv/repo"


@dataclass(frozen=True)
class RepoUrl:
    given: str  # as the caller wrote it (stripped): the key for read_repo_file
    git: str  # what git is given
    local: bool  # file:// (git needs protocol.file.allow=always for a shallow clone)

    @property
    def key(self) -> str:
        return hashlib.sha256(self.git.encode()).hexdigest()[:24]


def _refuse(raw: str, why: str) -> AnalysisError:
    shown = raw if len(raw) <= 200 else raw[:200] + "..."
    return AnalysisError(
        f"repo_url {shown!r} {why}; give an https, ssh or file:// URL or an absolute path, e.g. {EXAMPLES}"
    )


def parse_repo_url(raw: object) -> RepoUrl:
    if not isinstance(raw, str) or not raw.strip():
        raise AnalysisError(f"repo_url must be a git repository URL, e.g. {EXAMPLES}")
    url = raw.strip()
    if len(url) > MAX_URL:
        raise _refuse(url, f"is longer than {MAX_URL} characters")
    if url.startswith("-"):
        raise _refuse(url, "starts with '-' (it would be read as a git option)")
    if any(ord(c) < 32 or ord(c) == 127 for c in url) or " " in url:
        raise _refuse(url, "contains spaces or control characters")
    if url.startswith("/"):
        path = Path(url)
        if ".." in path.parts:
            raise _refuse(url, "contains '..'")
        return RepoUrl(url, "file://" + quote(str(path)), True)
    if "::" in url.split("/", 1)[0]:
        raise _refuse(url, "names a git remote helper transport, which is refused")
    if "://" not in url:
        match = SCP_LIKE.fullmatch(url)
        if match is None:
            raise _refuse(url, "is not a URL or an absolute path")
        if match["path"].startswith("-"):
            raise _refuse(url, "has a path starting with '-'")
        return RepoUrl(url, url, False)
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise _refuse(url, f"does not parse ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise _refuse(url, "must be file:///absolute/path")
        if ".." in Path(unquote(parts.path)).parts:
            raise _refuse(url, "contains '..'")
        return RepoUrl(url, "file://" + parts.path, True)
    if scheme not in ("https", "ssh"):
        why = "uses plain http (use https)" if scheme == "http" else f"uses the scheme {scheme!r}, which is refused"
        raise _refuse(url, why)
    if parts.password is not None or (scheme == "https" and parts.username):
        raise _refuse(
            url.replace(parts.netloc, parts.hostname or ""),
            "carries credentials; remove them (private repositories need a git credential helper or an ssh key)",
        )
    host = parts.hostname or ""
    if not HOSTNAME.fullmatch(host) or not parts.path.strip("/"):
        raise _refuse(url, "needs a host and a repository path")
    return RepoUrl(url, url, False)
