// Single sign-on at the gateway's OpenID / OAuth issuer (TOOLDOCK_OAUTH_ISSUER with
// TOOLDOCK_OAUTH_DASHBOARD_CLIENT_ID): the authorization code flow with PKCE (S256), run in this page as a
// public client. `start` goes to the issuer's authorization endpoint; the issuer sends the browser back to
// /ui/callback, where `finish` checks the state (and the issuer, RFC 9207), trades the code for an access token
// for the gateway's resource (RFC 8707) with fetch, checks the ID token's nonce, and hands the token back: it
// is kept in sessionStorage and sent as a header like any other. What the flow needs between the two pages
// (verifier, state, nonce, the view asked for) is in sessionStorage too, removed once used.

const PENDING = "tooldock.ui.sso";
const meta = document.querySelector('meta[name="tooldock-sso"]');

/** {issuer, client_id, resource, scope} from the page, or null when the gateway offers no SSO. */
export const ssoConfig = (() => {
  try { return meta && meta.content ? JSON.parse(meta.content) : null; } catch { return null; }
})();

export class SsoError extends Error {}

const b64url = (bytes) => btoa(String.fromCharCode(...new Uint8Array(bytes)))
  .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const random = (n = 32) => b64url(crypto.getRandomValues(new Uint8Array(n)));

/** The issuer's metadata: OpenID discovery, or RFC 8414's document. */
async function discover(issuer) {
  const base = issuer.replace(/\/$/, "");
  const where = [`${base}/.well-known/openid-configuration`];
  const parts = new URL(issuer);
  where.push(`${parts.origin}/.well-known/oauth-authorization-server${parts.pathname.replace(/\/$/, "")}`);
  for (const url of where) {
    try {
      const reply = await fetch(url, { credentials: "omit", cache: "no-store" });
      if (!reply.ok) continue;
      const doc = await reply.json();
      if (doc.issuer === issuer && doc.authorization_endpoint && doc.token_endpoint) return doc;
    } catch { /* the next one */ }
  }
  throw new SsoError(`${issuer} did not answer its discovery document (is it up, and does it allow this origin?)`);
}

export const redirectUri = (root) => `${window.location.origin}${root}/ui/callback`;

/** Go to the issuer's sign-in page; `back`: the dashboard path to return to afterwards. */
export async function start(root, back) {
  const doc = await discover(ssoConfig.issuer);
  const verifier = random(48);
  const challenge = b64url(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier)));
  const state = random(), nonce = random();
  window.sessionStorage.setItem(PENDING, JSON.stringify({ verifier, state, nonce, back, token: doc.token_endpoint }));
  const url = new URL(doc.authorization_endpoint);
  const query = {
    response_type: "code", client_id: ssoConfig.client_id, redirect_uri: redirectUri(root), scope: ssoConfig.scope,
    state, nonce, code_challenge: challenge, code_challenge_method: "S256", resource: ssoConfig.resource,
  };
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  window.location.assign(url.toString());
}

function claimsOf(idToken) {
  try {
    const part = idToken.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
    return JSON.parse(atob(part + "=".repeat((4 - (part.length % 4)) % 4)));
  } catch {
    throw new SsoError("the issuer's ID token could not be read");
  }
}

/** On /ui/callback: the access token and the path to go back to; SsoError says what went wrong. */
export async function finish(root) {
  const query = new URLSearchParams(window.location.search);
  const pending = JSON.parse(window.sessionStorage.getItem(PENDING) || "null");
  window.sessionStorage.removeItem(PENDING);
  if (query.get("error")) {
    throw new SsoError(`${ssoConfig.issuer} refused the sign-in: ${query.get("error_description") || query.get("error")}`);
  }
  if (!pending || !query.get("state") || query.get("state") !== pending.state) {
    throw new SsoError("this sign-in answer was not asked for by this tab (its state does not match): sign in again");
  }
  if (query.get("iss") && query.get("iss") !== ssoConfig.issuer) {
    throw new SsoError(`the sign-in answer came from ${query.get("iss")}, not ${ssoConfig.issuer}`);
  }
  const form = new URLSearchParams({
    grant_type: "authorization_code", code: query.get("code") || "", redirect_uri: redirectUri(root),
    client_id: ssoConfig.client_id, code_verifier: pending.verifier, resource: ssoConfig.resource,
  });
  let reply;
  try {
    reply = await fetch(pending.token, { method: "POST", body: form, credentials: "omit", cache: "no-store" });
  } catch (error) {
    throw new SsoError(`${ssoConfig.issuer}'s token endpoint cannot be reached from this page (${error.message})`);
  }
  const answer = await reply.json().catch(() => ({}));
  if (!reply.ok || !answer.access_token) {
    throw new SsoError(`${ssoConfig.issuer} gave no token: ${answer.error_description || answer.error || reply.status}`);
  }
  if (!answer.id_token && ssoConfig.scope.split(" ").includes("openid")) {
    throw new SsoError("the issuer sent no ID token, so this sign-in cannot be checked (nonce): sign in again");
  }
  if (answer.id_token) { // straight from the token endpoint over TLS (OpenID Connect Core 3.1.3.7)
    const claims = claimsOf(answer.id_token);
    const audience = [].concat(claims.aud);
    if (claims.nonce !== pending.nonce || claims.iss !== ssoConfig.issuer || !audience.includes(ssoConfig.client_id)) {
      throw new SsoError("the issuer's ID token is not for this sign-in (nonce, issuer or audience differ): sign in again");
    }
  }
  return { token: answer.access_token, back: pending.back || "/" };
}
