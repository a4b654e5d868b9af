"""Credentials written into a tool file's code. Someone given a key (or an LLM given one in the chat) writes it
into the tool (`API_KEY = "sk-..."`); the file, and every image built from it, would then hold the value,
which the secrets store exists to keep out of both. The manager's `write_tool` refuses such a file, the
builder refuses to build it into an image, and `tooldock check` reports it, each saying how to read the value
from the environment instead. A value meant to be there (a public key) is marked `# pragma: allowlist secret`.

detect-secrets (Yelp) finds them: its detectors for known token formats (GitHub, GitLab, AWS, Slack, Stripe,
OpenAI, npm, PyPI, private keys, JWTs, ...), for secret-named assignments of literal values (`password = "..."`,
`API_KEY = "..."`, with its filters for placeholders such as "YOUR_API_KEY_HERE") and for credentials in URLs.
Its high-entropy detectors are left out: they flag embedded data (a base64 PNG, a hash) as often as keys.
The AI providers' key formats it has no detector for (EXTRA_FORMATS) are matched here, its allowlist marks
honoured.
It is imported on first use only (workers carry this package, and never call it).
"""

from __future__ import annotations

import ast
import re
import tempfile
import threading
from pathlib import Path
from typing import NamedTuple

import yaml

from tooldock.namespace.models import NamespaceSource, Problem
from tooldock.namespace.names import ENV_NAME_RE
from tooldock.namespace.scanner import is_test_path

PLUGINS = (
    "ArtifactoryDetector",
    "AWSKeyDetector",
    "AzureStorageKeyDetector",
    "BasicAuthDetector",
    "DiscordBotTokenDetector",
    "GitHubTokenDetector",
    "GitLabTokenDetector",
    "JwtTokenDetector",
    "KeywordDetector",
    "MailchimpDetector",
    "NpmDetector",
    "OpenAIDetector",
    "PrivateKeyDetector",
    "PypiTokenDetector",
    "SendGridDetector",
    "SlackDetector",
    "SquareOAuthDetector",
    "StripeDetector",
    "TelegramBotTokenDetector",
    "TwilioKeyDetector",
)
# Key formats detect-secrets (1.5) has no detector for: the AI providers' keys, the ones most often pasted into a
# chat with an LLM that writes tools (`sk-ant-...` went into a file unseen). (kind, pattern, name to read it from)
EXTRA_FORMATS = tuple(
    (kind, re.compile(r"(?<![A-Za-z0-9_-])" + pattern), name)
    for kind, pattern, name in (
        ("Anthropic API Key", r"sk-ant-[a-z]+\d{2}-[A-Za-z0-9_-]{32,}", "ANTHROPIC_API_KEY"),
        ("OpenAI Token", r"sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,}", "OPENAI_API_KEY"),
        ("Google API Key", r"AIza[0-9A-Za-z_-]{35}", "GOOGLE_API_KEY"),
        ("Hugging Face Token", r"hf_[A-Za-z0-9]{34,}", "HF_TOKEN"),
        ("GitHub Token", r"github_pat_[A-Za-z0-9_]{60,}", "GITHUB_TOKEN"),
        ("Groq API Key", r"gsk_[A-Za-z0-9]{48,}", "GROQ_API_KEY"),
    )
)
ALLOWED = "pragma: allowlist secret"  # detect-secrets' own mark, on the line (or `allowlist nextline secret` above)
# The name suggested when the value is not assigned to a variable (a literal in a call or a dict).
NAMES = {
    "GitHub Token": "GITHUB_TOKEN",
    "GitLab Token": "GITLAB_TOKEN",
    "AWS Access Key": "AWS_ACCESS_KEY_ID",
    "Slack Token": "SLACK_TOKEN",
    "Stripe Access Key": "STRIPE_API_KEY",
    "OpenAI Token": "OPENAI_API_KEY",
    **{kind: name for kind, _, name in EXTRA_FORMATS},
}
# detect-secrets' names for what it found, said plainly.
KINDS = {"Secret Keyword": "a literal value for a secret's name", "Basic Auth Credentials": "a password in a URL"}
_PLACEHOLDER_WORDS = ("your", "here", "xxx", "changeme", "change_me", "example", "placeholder", "dummy", "todo")
_WORDS = re.compile(r"^[a-z]+([-_][a-z]+)*$")
_SECRET_ENDINGS = ("PASSWORD", "SECRET", "TOKEN", "KEY")
_settings = threading.Lock()  # detect-secrets keeps its settings in one global: one scan at a time


def _found(code: str, filename: str) -> list[tuple[int, str]]:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import transient_settings

    with tempfile.TemporaryDirectory(prefix="tooldock-credentials-") as tmp:
        path = Path(tmp) / Path(filename).name  # its detectors pick their patterns by the file's type
        path.write_text(code, encoding="utf-8")
        with _settings, transient_settings({"plugins_used": [{"name": name} for name in PLUGINS]}) as settings:
            # It skips every line that assigns a call's result (`password = get_password()`), so a token in
            # `r = httpx.get(url, headers={"Authorization": "token ghp_..."})` went unseen; its keyword
            # detector needs a quoted value in Python anyway.
            settings.disable_filters("detect_secrets.filters.heuristic.is_indirect_reference")
            found = SecretsCollection()
            found.scan_file(str(path))
    kept = (s for _, s in found if s.type != "Secret Keyword" or not _placeholder(s.secret_value or ""))
    lines = {(secret.line_number, secret.type) for secret in kept}
    return sorted(lines | _other_formats(code, {line for line, _ in lines}))


def _other_formats(code: str, seen: set[int]) -> set[tuple[int, str]]:
    """EXTRA_FORMATS' finds on the lines detect-secrets found nothing on, its allowlist marks honoured."""
    found = set()
    lines = code.splitlines()
    for number, line in enumerate(lines, 1):
        above = lines[number - 2] if number > 1 else ""
        if number in seen or ALLOWED in line or "pragma: allowlist nextline secret" in above:
            continue
        kind = next((kind for kind, pattern, _ in EXTRA_FORMATS if pattern.search(line)), None)
        if kind is not None:
            found.add((number, kind))
    return found


def _placeholder(value: str) -> bool:
    """A secret-named variable's value that is no secret: a variable's name (`API_KEY = "GITHUB_TOKEN"`, the
    name to read), a field's or header's (`PASSWORD_FIELD = "password"`, `KEY_HEADER = "x-api-key"`), or a
    placeholder to fill in (`"YOUR_API_KEY_HERE"`, `"<token>"`, `"xxxx"`)."""
    lowered = value.lower()
    return (
        (bool(ENV_NAME_RE.match(value)) and value.upper() == value)
        or bool(_WORDS.match(value))
        or any(word in lowered for word in _PLACEHOLDER_WORDS)
        or len(set(lowered) - set("<>{}-_. ")) <= 1
    )


def _assigned(code: str) -> dict[int, str]:
    """Each line's assigned variable name (`API_KEY = "..."`, `token: str = "..."`)."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):  # validate.py reports why
        return {}
    names: dict[int, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and ENV_NAME_RE.match(target.id):
                for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    names.setdefault(line, target.id.upper())
    return names


class Credential(NamedTuple):
    line: int
    kind: str  # what was found, said plainly ("a GitHub Token", "a password in a URL")
    name: str  # the environment variable to read it from instead: the assigned name, or the token kind's


_KEY = re.compile(r"""^\s*["']?([A-Za-z_][A-Za-z0-9_]*)["']?\s*[:=]""")  # `key: value`, `key = value`, `"key": ...`


MAX_YAML_DEPTH = 100  # collections inside each other; PyYAML composes them recursively
_OPENS = (
    yaml.BlockSequenceStartToken,
    yaml.BlockMappingStartToken,
    yaml.FlowSequenceStartToken,
    yaml.FlowMappingStartToken,
)
_CLOSES = (yaml.BlockEndToken, yaml.FlowSequenceEndToken, yaml.FlowMappingEndToken)


def _expands(text: str, filename: str) -> bool:
    """Whether detect-secrets' YAML reading would blow up on this file, which is then scanned line by line:
    aliases, which it expands while walking the document (a few lines of `&a [*b, *b, ...]` are billions of
    values), or nesting too deep for PyYAML (RecursionError)."""
    if not filename.endswith((".yaml", ".yml")):
        return False
    depth = 0
    try:
        for token in yaml.scan(text):  # the scanner reads tokens in a loop; only composing them recurses
            if isinstance(token, yaml.AliasToken):
                return True
            if isinstance(token, _OPENS):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    return True
            elif isinstance(token, _CLOSES):
                depth -= 1
    except (yaml.YAMLError, RecursionError, MemoryError):  # not YAML it can read: lines, as for any text
        return True
    return False


def _keys(text: str) -> dict[int, str]:
    """Each line's key in a configuration file (YAML, TOML, JSON, .ini)."""
    return {n: m.group(1).upper() for n, line in enumerate(text.splitlines(), 1) if (m := _KEY.match(line))}


def written_credentials(code: str, filename: str = "tool.py") -> list[Credential]:
    """Each line of `code` holding a credential, and the name to read it from instead; never the value."""
    assigned = _assigned(code) if filename.endswith(".py") else _keys(code)
    lines = _found(code, filename + ".txt" if _expands(code, filename) else filename)
    found = []
    for line, kind in lines:
        name = assigned.get(line) or NAMES.get(kind, "API_KEY")
        if kind == "Basic Auth Credentials" and not name.endswith(_SECRET_ENDINGS):  # a URL's password
            name = f"{name}_PASSWORD"
        found.append(Credential(line, KINDS.get(kind, f"a {kind}"), name))
    return found


WRITTEN = "a credential ({kind}) is written into the file: it and every image built from it would hold its value"
MAX_SCANNED_BYTES = 1024 * 1024  # larger files are data, not code or configuration


def _shipped(folder: Path) -> list[Path]:
    """The files of a namespace folder an image would hold (the builder leaves out dot files, bytecode,
    sockets and the `tests/` folder), text ones only."""
    files = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if any(part.startswith(".") or part == "__pycache__" for part in rel.parts) or path.suffix in (".pyc", ".sock"):
            continue
        if is_test_path(rel.as_posix()):
            continue
        if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_SCANNED_BYTES:
            files.append(path)
    return files


def credential_problems(source: NamespaceSource) -> list[Problem]:
    """`hardcoded_secret` problems for every file of a namespace folder, saying how to read each value from
    the environment instead."""
    problems = []
    for path in _shipped(source.path):
        try:
            code = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # binary data
        rel = path.relative_to(source.path).as_posix()
        for found in written_credentials(code, path.name):
            name, read = found.name, f"os.environ[{found.name!r}]"
            instead = (
                f"Read it from the environment instead, {read}, declare it in tooldock.yaml (secrets: [{name}])"
                if path.suffix == ".py"
                else f"Keep it out of the folder: declare it in tooldock.yaml (secrets: [{name}]), have the tool "
                f"read {read}"
            )
            problems.append(
                Problem(
                    rel,
                    f"{WRITTEN.format(kind=found.kind)}. {instead} and set its value with `tooldock secrets set "
                    f"{name} --namespace {source.name}`; or end the line with '# pragma: allowlist secret' if the "
                    "value is meant to be there (a public key)",
                    found.line,
                    "hardcoded_secret",
                )
            )
    return problems
