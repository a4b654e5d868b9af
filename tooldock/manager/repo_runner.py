"""`install_from_repo(mode="upstream")`: serve a repository's MCP server as it is, behind a namespace.

The repository says how it runs in its own manifest: a `package.json` with `bin` runs with `npx` from the
git URL, a `pyproject.toml` with `[project.scripts]` with `uvx --from git+...`. Both are pinned to the
commit that was analyzed, so the server that runs is the code the LLM read, and `npm` / `uv` fetch and build
it when the namespace starts (never the manager: a repository's code is not run here). A monorepo's
server is picked with `subfolder` (`src/time`): uv takes it as `#subdirectory=`, npm has no way to run a
package from a folder of a git repository (refused, pointing at the published package). Anything else (Go,
Rust, a script with no entry point) is refused with what to do instead; a root with none of these names the
folders below it that have one.
"""

from __future__ import annotations

import json
import re
import shlex
import stat
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tooldock.errors import InvalidInput
from tooldock.manager.analysis.urls import parse_repo_url
from tooldock.manager.analysis.workspace import inside
from tooldock.manager.installer import add_server, default_prefix, server_table
from tooldock.manager.workspace import Workspace
from tooldock.namespace.toolsfile import ENV_NAME_RE, PREFIX_RE
from tooldock.secrets import SecretStore

SCP_LIKE = re.compile(r"(?P<user>[^@/:]+)@(?P<host>[^:/]+):(?P<path>.+)")
MAX_MANIFEST = 1024 * 1024


@dataclass(frozen=True)
class Runner:
    command: str  # the tools.toml `command`
    runtime: str  # "npx" or "uvx"
    program: str  # the entry point it runs


def vcs_url(git: str) -> str:
    """The URL npm and uv take for a git repository: `git+https://`, `git+ssh://`, `git+file://`."""
    match = SCP_LIKE.fullmatch(git)
    if match is not None and "://" not in git:  # git@github.com:owner/repo.git
        return f"git+ssh://{match['user']}@{match['host']}/{match['path']}"
    return git if git.startswith("git+") else "git+" + git


def _manifest(clone: Path, name: str) -> Any:
    path = clone / name
    if not path.is_file() or path.is_symlink() or path.stat().st_size > MAX_MANIFEST:
        return None
    try:
        text = path.read_text(encoding="utf-8")
        return json.loads(text) if name.endswith(".json") else tomllib.loads(text)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None


def _pick(programs: list[str], package: str, where: str) -> str:
    if not programs:
        raise InvalidInput(f"{where} declares no program to run")
    short = package.rsplit("/", 1)[-1]
    if len(programs) == 1 or short in programs:
        return programs[0] if len(programs) == 1 else short
    raise InvalidInput(
        f"{where} declares several programs ({', '.join(sorted(programs))}) and none is named like the package "
        f"{package!r}: ask the user which one is the MCP server and to write its command into tools.toml"
    )


def _programs(folder: Path) -> tuple[Any, Any]:
    """The folder's manifests' program declarations: package.json (its object, when it has a `bin`) and
    pyproject.toml's `[project]` table (when it has `scripts`); None for each that declares none."""
    package, project = _manifest(folder, "package.json"), _manifest(folder, "pyproject.toml")
    table = project.get("project") if isinstance(project, dict) else None
    npm = package if isinstance(package, dict) and package.get("bin") else None
    python = table if isinstance(table, dict) and isinstance(table.get("scripts"), dict) and table["scripts"] else None
    return npm, python


def runner_for(clone: Path, git: str, commit: str, subfolder: str = "") -> Runner:
    """How the repository at `clone` (cloned from `git` at `commit`) runs as a stdio MCP server; `subfolder`:
    where the server is in a monorepo (checked by `inside`), "" for the root."""
    where = clone / subfolder if subfolder else clone
    named = f"{subfolder}/" if subfolder else ""
    source = vcs_url(git)
    package, project = _programs(where)
    if package is not None:
        name, bins = str(package.get("name") or ""), package["bin"]
        if subfolder:
            raise InvalidInput(
                f"{named}package.json declares a program, but npm cannot run a package from a folder of a git "
                f"repository: if {name or 'the package'} is published on npm, use install_from_registry (or ask "
                "the user to write its `npx -y <package>@<version>` command into tools.toml)"
            )
        programs = [name.rsplit("/", 1)[-1]] if isinstance(bins, str) else [str(b) for b in bins]
        program = _pick(programs, name, "package.json 'bin'")
        spec = f"{source}#{commit}"
        single = isinstance(bins, str) or len(programs) == 1
        argv = ["npx", "-y", spec] if single else ["npx", "-y", "-p", spec, program]
        return Runner(shlex.join(argv), "npx", program)
    if project is not None:
        where_scripts = f"{named}pyproject.toml [project.scripts]"
        program = _pick([str(s) for s in project["scripts"]], str(project.get("name") or ""), where_scripts)
        spec = f"{source}@{commit}" + (f"#subdirectory={subfolder}" if subfolder else "")
        return Runner(shlex.join(["uvx", "--from", spec, program]), "uvx", program)
    found = servers_below(clone)
    if found and not subfolder:
        raise InvalidInput(
            "the repository's root has no package.json with 'bin' or pyproject.toml with [project.scripts], but "
            f"these folders do: {', '.join(found)}; install one of them with subfolder='<folder>'"
        )
    raise InvalidInput(
        f"cannot tell how to run {named or 'this repository'}: it has no package.json with 'bin' and no "
        "pyproject.toml with [project.scripts] (Go and Rust are not run from a repository); translate it instead "
        "(mode='translate'), or ask the user to write its command into tools.toml"
    )


def servers_below(clone: Path, depth: int = 3, limit: int = 20) -> list[str]:
    """Folders of a monorepo (up to `depth` below the root) whose manifest declares a program to run."""
    found: list[str] = []
    level = [clone]
    for _ in range(depth):
        below = []
        for folder in level:
            try:
                children = sorted(c for c in folder.iterdir() if c.is_dir() and not c.is_symlink())
            except OSError:
                continue
            below += [c for c in children if not c.name.startswith(".") and c.name != "node_modules"]
        for folder in below:
            if any(found_in is not None for found_in in _programs(folder)):
                found.append(folder.relative_to(clone).as_posix())
                if len(found) >= limit:
                    return found
        level = below
    return found


def _table(prefix: str, runner: Runner, env: dict[str, str], secrets: list[str]) -> str:
    refs = {name: f"${{secret:{name}}}" for name in secrets}
    return server_table({"namespace": prefix, "command": runner.command}, {"env": env | refs})


def _secret_names(raw: object, needed: list[str]) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or len(raw) > 32 or not all(isinstance(n, str) for n in raw):
        raise InvalidInput('secrets must be a list of environment variable names, e.g. ["GITHUB_TOKEN"]')
    for name in raw:
        if not ENV_NAME_RE.fullmatch(name):
            raise InvalidInput(f"secrets: {name!r} is not an environment variable name")
    unknown = [n for n in raw if n not in needed]
    if unknown and needed:
        reads = ", ".join(needed)
        raise InvalidInput(f"secrets: the analysis found no {', '.join(unknown)} in the code (it reads {reads})")
    return list(dict.fromkeys(raw))


def install_repo_upstream(
    ws: Workspace,
    store: SecretStore,
    analysis: dict[str, Any],
    namespace: object,
    prefix: object,
    env: dict[str, str],
    secret_names: object,
    subfolder: object = None,
) -> dict[str, Any]:
    """The analyzed repository as an upstream server of `namespace` (analysis: RepoWorkspace.analyze's answer);
    `subfolder`: the server's folder in a monorepo."""
    folder = ws.namespace_dir(namespace, must_exist=False)
    url = parse_repo_url(analysis["repo_url"])
    clone, sub = Path(analysis["path"]), ""
    if subfolder not in (None, ""):
        _, sub, info = inside(clone, subfolder, "subfolder", "a folder of the repository, e.g. 'src/time'")
        if not stat.S_ISDIR(info.st_mode):
            raise InvalidInput(f"subfolder {sub!r} is a file; give the folder that holds the server's manifest")
    runner = runner_for(clone, url.git, analysis["commit"], sub)
    if prefix in (None, ""):
        repo = sub.rsplit("/", 1)[-1] if sub else url.git.rstrip("/").rsplit("/", 1)[-1].removesuffix(".git")
        prefix = default_prefix({"server": {"name": repo}})
    if not isinstance(prefix, str) or not PREFIX_RE.fullmatch(prefix):
        raise InvalidInput(f"prefix {prefix!r} must be letters, digits, '_' or '-', e.g. 'github'")
    names = _secret_names(secret_names, list(analysis.get("secrets_needed") or []))
    clash = sorted(set(names) & set(env))
    if clash:
        raise InvalidInput(f"{', '.join(clash)}: given both in env and in secrets; a secret is set by the user only")
    written = add_server(ws, store, folder, prefix, _table(prefix, runner, env, names), names)
    return {
        "namespace": folder.name,
        "mode": "upstream",
        "repo_url": analysis["repo_url"],
        "commit": analysis["commit"],
        **({"subfolder": sub} if sub else {}),
        "prefix": prefix,
        "runs": runner.command,
        "runtime": runner.runtime,
        "secrets_needed": analysis.get("secrets_needed") or [],
        **written,
    }
