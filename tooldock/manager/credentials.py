"""Credentials written into a tool file's code. An LLM given a key in the chat writes it into the tool
(`API_KEY = "sk-..."`); the file, and every image built from it, would then hold the value, which the
secrets store exists to keep out of both. `write_tool` refuses such a file and says how to read the value
from the environment instead, declared and set through `prepare_secret` (the value never passes through the
chat again).

detect-secrets (Yelp) finds them: its detectors for known token formats (GitHub, GitLab, AWS, Slack, Stripe,
OpenAI, npm, PyPI, private keys, JWTs, ...), for secret-named assignments of literal values (`password = "..."`,
`API_KEY = "..."`, with its filters for placeholders such as "YOUR_API_KEY_HERE") and for credentials in URLs.
Its high-entropy detectors are left out: they flag embedded data (a base64 PNG, a hash) as often as keys.
"""

from __future__ import annotations

import ast
import re
import tempfile
import threading
from pathlib import Path
from typing import Any

from tooldock.secrets.validate import KEY_RE  # a suggested name must be one prepare_secret takes

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
# The name suggested when the value is not assigned to a variable (a literal in a call or a dict).
NAMES = {
    "GitHub Token": "GITHUB_TOKEN",
    "GitLab Token": "GITLAB_TOKEN",
    "AWS Access Key": "AWS_ACCESS_KEY_ID",
    "Slack Token": "SLACK_TOKEN",
    "Stripe Access Key": "STRIPE_API_KEY",
    "OpenAI Token": "OPENAI_API_KEY",
}
# detect-secrets' names for what it found, said plainly.
KINDS = {"Secret Keyword": "a literal value for a secret's name", "Basic Auth Credentials": "a password in a URL"}
_PLACEHOLDER_WORDS = ("your", "here", "xxx", "changeme", "change_me", "example", "placeholder", "dummy", "todo")
_WORDS = re.compile(r"^[a-z]+([-_][a-z]+)*$")
_SECRET_ENDINGS = ("PASSWORD", "SECRET", "TOKEN", "KEY")
_settings = threading.Lock()  # detect-secrets keeps its settings in one global: one scan at a time


def _found(code: str) -> list[tuple[int, str]]:
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import transient_settings

    with tempfile.TemporaryDirectory(prefix="tooldock-credentials-") as tmp:
        path = Path(tmp) / "tool.py"  # its detectors pick their patterns by the file's type
        path.write_text(code, encoding="utf-8")
        with _settings, transient_settings({"plugins_used": [{"name": name} for name in PLUGINS]}) as settings:
            # It skips every line that assigns a call's result (`password = get_password()`), so a token in
            # `r = httpx.get(url, headers={"Authorization": "token ghp_..."})` went unseen; its keyword
            # detector needs a quoted value in Python anyway.
            settings.disable_filters("detect_secrets.filters.heuristic.is_indirect_reference")
            found = SecretsCollection()
            found.scan_file(str(path))
    kept = (s for _, s in found if s.type != "Secret Keyword" or not _placeholder(s.secret_value or ""))
    return sorted({(secret.line_number, secret.type) for secret in kept})


def _placeholder(value: str) -> bool:
    """A secret-named variable's value that is no secret: a variable's name (`API_KEY = "GITHUB_TOKEN"`, the
    name to read), a field's or header's (`PASSWORD_FIELD = "password"`, `KEY_HEADER = "x-api-key"`), or a
    placeholder to fill in (`"YOUR_API_KEY_HERE"`, `"<token>"`, `"xxxx"`)."""
    lowered = value.lower()
    return (
        (bool(KEY_RE.match(value)) and value.upper() == value)
        or bool(_WORDS.match(value))
        or any(word in lowered for word in _PLACEHOLDER_WORDS)
        or len(set(lowered) - set("<>{}-_. ")) <= 1
    )


def _assigned(code: str) -> dict[int, str]:
    """Each line's assigned variable name (`API_KEY = "..."`, `token: str = "..."`)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
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
            if isinstance(target, ast.Name) and KEY_RE.match(target.id):
                for line in range(node.lineno, (node.end_lineno or node.lineno) + 1):
                    names.setdefault(line, target.id.upper())
    return names


def written_credentials(filename: str, code: str, namespace: str) -> list[dict[str, Any]]:
    """A `hardcoded_secret` problem for each line holding a credential; the value itself is never repeated."""
    assigned = _assigned(code)
    problems = []
    for line, kind in _found(code):
        name = assigned.get(line) or NAMES.get(kind, "API_KEY")
        if kind == "Basic Auth Credentials" and not name.endswith(_SECRET_ENDINGS):  # a URL's password
            name = f"{name}_PASSWORD"
        kind = KINDS.get(kind, kind)
        problems.append(
            {
                "file": filename,
                "line": line,
                "code": "hardcoded_secret",
                "message": (
                    f"a credential ({kind}) is written into the code: the file and every image built from it "
                    f"would hold its value. Read it from the environment instead, os.environ[{name!r}], then call "
                    f"prepare_secret(key={name!r}, namespace={namespace!r}), which declares it, and ask the user "
                    f"to set its value with the command it gives (never paste a secret into the chat)"
                ),
            }
        )
    return problems
