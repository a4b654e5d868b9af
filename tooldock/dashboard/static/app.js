// The dashboard's shell: sign-in, navigation, and one URL per view (history API). The gateway answers
// every /ui/... path with this page, so any view can be bookmarked; signing in renders the view asked for.

import { api, clearToken, onUnauthorized, root, setToken, token } from "./api.js";
import { alertBox, h, uid } from "./dom.js";
import * as sso from "./sso.js";
import activity from "./activity.js";
import connect from "./connect.js";
import keys from "./keys.js";
import metrics from "./metrics.js";
import overview from "./overview.js";
import runner from "./runner.js";
import secrets from "./secrets.js";
import tools from "./tools.js";
import upstream from "./upstream.js";

const BASE = `${root}/ui`;
const ROUTES = [
  [/^\/?$/, overview],
  [/^\/tools\/?$/, tools],
  [/^\/namespaces\/([^/]+)\/tools\/(.+)$/, runner],
  [/^\/keys\/?$/, keys],
  [/^\/activity\/?$/, activity],
  [/^\/metrics\/?$/, metrics],
  [/^\/secrets\/?$/, secrets],
  [/^\/connect(?:\/([^/]+))?\/?$/, connect],
  [/^\/upstream\/?$/, upstream],
];
const main = document.getElementById("main");
let me = null; // GET /whoami: who the token is
let stop = null; // the current view's clean-up (timers, calls in flight)

export const href = (path) => BASE + path;

export function navigate(path) {
  window.history.pushState(null, "", href(path));
  render();
}

function path() {
  const here = window.location.pathname;
  return here.startsWith(BASE) ? here.slice(BASE.length) || "/" : "/";
}

function signIn(message) {
  document.getElementById("nav").hidden = true;
  document.getElementById("who").textContent = "";
  const id = uid("token");
  const input = h("input", { id, type: "password", autocomplete: "off", required: true, "aria-describedby": `${id}-help` });
  const note = h("div", { id: "signin-note" }, message ? alertBox(message) : null);
  const form = h("form", { class: "signin", "aria-labelledby": "signin-title" },
    h("h1", { id: "signin-title", tabindex: "-1" }, "Sign in"),
    h("p", { id: `${id}-help` }, "The gateway's bearer token (TOOLDOCK_BEARER_TOKEN, or the one it printed when it started) ",
      "or an API key (tdk_..., from tooldock keys create). It is kept in this tab only and sent as a header."),
    h("label", { for: id }, "Bearer token or API key"), " ", input, " ",
    h("button", { type: "submit" }, "Sign in"), note);
  if (sso.ssoConfig) {
    const issuer = sso.ssoConfig.issuer;
    const button = h("button", { type: "button", class: "sso" }, `Sign in with ${issuer}`);
    button.addEventListener("click", () => sso.start(root, path()).catch((error) => {
      note.replaceChildren(alertBox(`Signing in with ${issuer} failed: ${error.message}`));
    }));
    form.insertBefore(h("p", {}, "People: ", button), form.children[1]);
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const presented = input.value.trim();
    if (!presented) return;
    try {
      me = await api("/whoami", { as: presented });
    } catch (error) {
      const why = error.status === 401 ? "The gateway refused this token" : "Signing in failed";
      note.replaceChildren(alertBox(`${why} (${error.status || "no answer"}): ${error.message}`));
      input.select();
      return;
    }
    setToken(presented);
    input.value = "";
    render();
  });
  main.replaceChildren(form);
  input.focus();
}

function showNav() {
  const links = [["/", "Overview"], ["/tools", "Tools"], ["/activity", "Activity"], ["/metrics", "Metrics"],
    ["/upstream", "Upstream"], ["/secrets", "Secrets"], ["/connect", "Connect"]];
  if (me.admin) links.push(["/keys", "Keys"]);
  const here = path();
  const nav = document.getElementById("nav");
  nav.replaceChildren(h("ul", {}, links.map(([to, text]) => {
    const current = to === "/" ? here === "/" : here.startsWith(to);
    return h("li", {}, h("a", { href: href(to), "data-internal": true, "aria-current": current ? "page" : null }, text));
  })));
  nav.hidden = false;
  const who = me.kind === "token" ? "bearer token (admin)"
    : me.kind === "oauth" ? `account ${me.name} (${me.scope})` : `API key ${me.name} (${me.scope})`;
  document.getElementById("who").replaceChildren(`Signed in with the ${who} `,
    h("button", { type: "button", onclick: signOut }, "Sign out"));
}

function signOut() {
  clearToken();
  me = null;
  render();
}

async function ssoCallback() {
  try {
    const done = await sso.finish(root);
    setToken(done.token);
    window.history.replaceState(null, "", href(done.back));
  } catch (error) {
    window.history.replaceState(null, "", href("/"));
    return signIn(error instanceof sso.SsoError ? error.message : `Signing in failed: ${error.message}`);
  }
  return render();
}

export async function render() {
  if (stop) stop();
  stop = null;
  if (path() === "/callback" && sso.ssoConfig) return ssoCallback();
  if (!token()) return signIn();
  if (!me) {
    try {
      me = await api("/whoami");
    } catch (error) {
      if (error.status !== 401) main.replaceChildren(alertBox(`The gateway did not answer: ${error.message}`));
      return;
    }
  }
  showNav();
  const here = path();
  for (const [pattern, view] of ROUTES) {
    const found = here.match(pattern);
    if (found) {
      const params = found.slice(1).map((p) => (p === undefined ? undefined : decodeURIComponent(p)));
      main.replaceChildren();
      stop = (await view(main, { me, params, href, navigate })) || null;
      const heading = main.querySelector("h1");
      if (heading) heading.focus();
      return;
    }
  }
  main.replaceChildren(h("h1", { tabindex: "-1" }, "Not found"),
    h("p", {}, "No dashboard view at this address. ", h("a", { href: href("/"), "data-internal": true }, "Overview")));
}

onUnauthorized((error) => {
  clearToken();
  me = null;
  if (stop) stop();
  stop = null;
  signIn(`The gateway no longer accepts this token (${error.message}). Sign in again.`);
});

document.addEventListener("click", (event) => {
  const link = event.target.closest("a[data-internal]");
  if (!link || event.ctrlKey || event.metaKey || event.shiftKey || event.button !== 0) return;
  event.preventDefault();
  navigate(link.getAttribute("href").slice(BASE.length) || "/");
});
window.addEventListener("popstate", render);
render();
