"""Single sign-on on the web dashboard (issue 62): a person signs in at the gateway's issuer, a real
oidc-provider on loopback (tests/oauthkit.py), through its own login and consent pages, in Debian's Chromium
driven by Playwright: authorization code + PKCE (S256) from the page as a public client, the access token for
the gateway's resource, back to the view asked for. Refusals: a callback this tab did not ask for (state), the
issuer's error. The page's CSP names the issuer's origin only when SSO is configured.

The browser resolves no host name but localhost, and every request beyond loopback is refused and fails the
test."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import jwt
import pytest
from conftest import STATE_DIR, Gateway
from oauthkit import Provider, free_port, provider_home
from test_dashboard import browser  # noqa: F401 (the dashboard tests' Chromium fixture, no host but loopback)

from tooldock.dashboard import CSP

pytestmark = pytest.mark.slow
LOOPBACK = {"127.0.0.1", "localhost", "[::1]"}
TOOLS = '''from fastmcp.tools import tool


@tool(annotations={"readOnlyHint": True})
def ping() -> str:
    """Answer pong."""
    return "pong"
'''


class Site:
    def __init__(self, provider: Provider, gateway: Gateway) -> None:
        self.provider, self.gateway, self.url = provider, gateway, gateway.url


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    tmp = tmp_path_factory.mktemp("sso")
    port = free_port()
    redirect = f"http://127.0.0.1:{port}/ui/callback"
    provider = Provider(provider_home(STATE_DIR), tmp, {"DASHBOARD_REDIRECT": redirect}).start()
    (tmp / "tools" / "project").mkdir(parents=True)
    (tmp / "tools" / "project" / "tools.py").write_text(TOOLS)
    env = {"TOOLDOCK_OAUTH_ISSUER": provider.issuer, "TOOLDOCK_OAUTH_DASHBOARD_CLIENT_ID": "dashboard",
           "TOOLDOCK_KEYS_DIR": str(tmp / "keys"), "TOOLDOCK_LOG_DIR": str(tmp / "audit")}
    gateway = Gateway(tmp / "tools", tmp / "gateway.log", env, args=("--port", str(port))).start()
    assert gateway.url == f"http://127.0.0.1:{port}"
    yield Site(provider, gateway)
    gateway.stop()
    provider.stop()


@pytest.fixture
def page(browser: Any, site: Site) -> Iterator[Any]:  # noqa: F811 (browser: the imported fixture)
    refused: list[str] = []
    errors: list[str] = []

    def route(r: Any) -> None:
        if urlsplit(r.request.url).hostname in LOOPBACK or r.request.url.startswith("data:"):
            r.continue_()
        else:  # the provider's development pages import a web font: refused, not the dashboard's doing
            if r.request.frame.url.startswith(site.url):
                refused.append(r.request.url)
            r.abort()

    context = browser.new_context()
    context.route("**/*", route)
    opened = context.new_page()
    opened.set_default_timeout(20_000)
    opened.on("pageerror", lambda error: errors.append(str(error)))
    opened.on("console", lambda m: errors.append(m.text) if site.url in m.location.get("url", "") and
              ("Content Security Policy" in m.text or m.type == "error") else None)
    yield opened
    context.close()
    assert not refused, f"the sign-in asked for addresses beyond loopback: {refused}"
    assert not errors, f"the dashboard had script or CSP errors: {errors}"


def _sign_in_at_the_provider(page: Any, login: str) -> None:
    """The provider's own development pages: a login form, then a consent form."""
    page.locator('input[name="login"]').fill(login)
    page.locator('input[name="password"]').fill("anything")
    page.locator('button[type="submit"]').click()
    page.get_by_role("button", name="Continue").click()


def test_the_csp_names_the_issuer_only_for_connect_src(site: Site):
    reply = httpx.get(f"{site.url}/ui/tools", timeout=30)
    origin = site.provider.issuer
    assert reply.headers["content-security-policy"] == CSP.replace(
        "; img-src", f"; connect-src 'self' {origin}; img-src", 1)
    assert reply.headers["content-security-policy"].startswith("default-src 'self'; connect-src 'self' http://")
    sso = json.loads(httpx.get(f"{site.url}/ui/", timeout=30).text.split('name="tooldock-sso" content="')[1]
                     .split('"')[0].replace("&quot;", '"'))
    assert sso == {"issuer": origin, "client_id": "dashboard", "resource": f"{site.url}/mcp",
                   "scope": "openid tooldock:admin tooldock:write tooldock:read"}


def test_a_person_signs_in_at_the_issuer_and_comes_back_to_the_view_asked_for(page: Any, site: Site):
    page.goto(f"{site.url}/ui/tools")
    page.get_by_role("button", name=f"Sign in with {site.provider.issuer}").click()
    page.wait_for_url(f"{site.provider.issuer}/**")
    _sign_in_at_the_provider(page, "alice")
    page.get_by_role("button", name="Sign out").wait_for()
    assert page.url == f"{site.url}/ui/tools"  # the view asked for, the code and state gone from the address
    assert "Signed in with the account alice (admin)" in page.locator("#who").inner_text()
    page.get_by_text("ping").first.wait_for()  # the tools page, listed with the token
    stored = page.evaluate("() => window.sessionStorage.getItem('tooldock.ui.token')")
    claims = jwt.decode(stored, options={"verify_signature": False})
    assert claims["aud"] == f"{site.url}/mcp" and claims["sub"] == "alice" and claims["client_id"] == "dashboard"
    assert "tooldock:admin" in claims["scope"].split()
    assert page.evaluate("() => window.sessionStorage.getItem('tooldock.ui.sso')") is None  # verifier etc. gone
    assert "sub=alice client=dashboard" in site.gateway.logs and stored not in site.gateway.logs


def test_a_callback_this_tab_did_not_ask_for_is_refused(page: Any, site: Site):
    page.goto(f"{site.url}/ui/callback?code=stolen&state=someone-elses&iss={site.provider.issuer}")
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert "state does not match" in alert.inner_text()
    assert page.url == f"{site.url}/ui/"
    assert page.evaluate("() => window.sessionStorage.getItem('tooldock.ui.token')") is None


def test_the_issuers_refusal_is_announced(page: Any, site: Site):
    page.goto(f"{site.url}/ui/callback?error=access_denied&error_description=End-User+aborted")
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert "refused the sign-in: End-User aborted" in alert.inner_text()
    assert page.get_by_role("button", name=f"Sign in with {site.provider.issuer}").is_visible()


def test_a_wrong_verifier_is_refused_by_the_issuer(page: Any, site: Site):
    """PKCE is checked: the tab's pending verifier is changed before the browser goes to the issuer."""
    asked: list[str] = []

    def hold(r: Any) -> None:
        asked.append(r.request.url)
        r.fulfill(status=204)  # a navigation answered 204 leaves the page where it is

    page.route(f"{site.provider.issuer}/auth?*", hold)
    page.goto(f"{site.url}/ui/")
    page.get_by_role("button", name=f"Sign in with {site.provider.issuer}").click()
    page.wait_for_function("() => sessionStorage.getItem('tooldock.ui.sso') !== null")
    page.wait_for_timeout(300)
    assert len(asked) == 1 and "code_challenge_method=S256" in asked[0] and "resource=" in asked[0]
    page.evaluate("""() => { const p = JSON.parse(sessionStorage.getItem('tooldock.ui.sso'));
        p.verifier = 'x'.repeat(64); sessionStorage.setItem('tooldock.ui.sso', JSON.stringify(p)); }""")
    page.unroute(f"{site.provider.issuer}/auth?*")
    page.goto(asked[0])
    _sign_in_at_the_provider(page, "mallory")
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert "gave no token: grant request is invalid" in alert.inner_text()  # the verifier does not match
    assert page.evaluate("() => window.sessionStorage.getItem('tooldock.ui.token')") is None


def test_without_a_dashboard_client_the_page_has_no_sso(tmp_path: Path):
    from tooldock.dashboard.pages import csp_for, sso_settings
    from tooldock.oauth import OAuthConfig

    config = OAuthConfig.from_env({"TOOLDOCK_OAUTH_ISSUER": "https://login.example.com"})
    assert config is not None and sso_settings(config.for_gateway("http://127.0.0.1:1")) is None
    assert csp_for(None) == CSP
