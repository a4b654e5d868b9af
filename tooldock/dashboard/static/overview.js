// Overview: every namespace with its state (also in data-status, for scripts), the reason when it is not
// ready, its worker (pid or container, and the container's image on the docker backend), the generation it
// came with, restarts, secrets status (the missing names), upstream servers' health and the scanner's
// problems; the last reload or swap. Updated live: GET /overview/live is an event stream the gateway sends
// a new state on when something changed (read with fetch, which can send the token header); when it cannot
// be opened the page reads GET /overview every few seconds instead and says so.

import { ApiError, api, authHeaders, errorOf, root } from "./api.js";
import { alertBox, h } from "./dom.js";

const POLL_MS = 3000;
const time = (seconds) => (seconds ? new Date(seconds * 1000).toLocaleTimeString() : "?");

function reason(ns) {
  if (ns.state === "ready" || ns.state === "sleeping" || ns.state === "empty") return "";
  return ns.last_error || ns.reason || (ns.problems || []).map((p) => p.message).join("; ") || ns.state;
}

function problems(list) {
  if (!list || !list.length) return "none";
  return h("ul", { class: "problems" }, list.map((p) =>
    h("li", {}, h("code", {}, p.line ? `${p.file}:${p.line}` : p.file), " ", p.message)));
}

function worker(ns) {
  const who = ns.pid ? `pid ${ns.pid}` : ns.container || ns.worker || (ns.kind === "upstream" ? "in the gateway" : "none");
  const image = ns.image ? h("div", { class: "image" }, "image ", h("code", { title: ns.image }, ns.image.replace(/^sha256:/, "").slice(0, 12))) : null;
  return [who, image];
}

function secrets(ns) {
  const status = ns.secrets_status || "no_secrets_needed";
  const missing = ns.secrets_missing || [];
  const waiting = ns.secrets_placeholders || [];
  if (status === "no_secrets_needed") return h("span", { class: "muted", "data-secrets": status }, "none needed");
  if (missing.length) return h("span", { class: "state-missing", "data-secrets": status }, `missing: ${missing.join(", ")}`);
  if (waiting.length) return h("span", { class: "state-placeholder", "data-secrets": status }, `placeholders: ${waiting.join(", ")}`);
  return h("span", { class: "state-set", "data-secrets": status }, status === "ok" ? "all set" : status);
}

function servers(ns) {
  if (ns.kind !== "upstream") return "";
  return h("ul", { class: "problems" }, (ns.servers || []).map((s) => h("li", { "data-server": s.namespace, "data-status": s.state },
    `${s.namespace}: `, h("span", { class: `state-${s.state}` }, s.state), s.last_error ? h("span", { class: "reason" }, ` (${s.last_error})`) : "")));
}

function row(ns, href) {
  const since = ns.since ? `generation ${ns.since.generation}, ${time(ns.since.at)}` : "";
  return h("tr", { "data-namespace": ns.name, "data-status": ns.state },
    h("th", { scope: "row" }, ns.name),
    h("td", {}, h("span", { class: `state state-${ns.state}`, "data-status": ns.state }, ns.state.replace("_", " "))),
    h("td", { class: "reason" }, reason(ns)),
    h("td", { class: "worker" }, worker(ns)),
    h("td", { class: "since" }, since),
    h("td", {}, String(ns.restarts ?? 0)),
    h("td", {}, ns.tool_count ? h("a", { href: href(`/tools?namespace=${encodeURIComponent(ns.name)}`), "data-internal": true },
      `${ns.tool_count} tools`) : "0"),
    h("td", { class: "secrets" }, secrets(ns)),
    h("td", { class: "servers" }, servers(ns)),
    h("td", {}, problems(ns.problems)));
}

/** The overview's events from GET /overview/live, each handed to `onState`, until the stream ends. */
async function follow(signal, onState) {
  const reply = await fetch(`${root}/overview/live`, { headers: authHeaders(), signal, credentials: "omit", cache: "no-store" });
  if (!reply.ok) throw errorOf(reply.status, await reply.text());
  const reader = reply.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const lines = buffer.slice(0, end).split("\n");
      buffer = buffer.slice(end + 2);
      const data = lines.filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
      if (data && lines.includes("event: overview")) onState(JSON.parse(data));
    }
  }
}

export default async function overview(main, { href }) {
  const summary = h("p", { class: "muted", "aria-live": "polite" }, "Loading...");
  const live = h("p", { class: "muted", id: "live" });
  const stray = h("div");
  const body = h("tbody");
  const failure = h("div");
  main.append(h("h1", { tabindex: "-1" }, "Overview"), summary, live, failure, stray,
    h("table", { class: "namespaces", "aria-label": "Namespaces" },
      h("thead", {}, h("tr", {}, ["Namespace", "State", "Reason", "Worker", "Since", "Restarts", "Tools", "Secrets", "Servers", "Problems"]
        .map((title) => h("th", { scope: "col" }, title)))), body));

  function show(data) {
    body.replaceChildren(...data.namespaces.map((ns) => row(ns, href)));
    const ready = data.namespaces.filter((ns) => ns.state === "ready").length;
    const found = data.problems || [];
    const changed = data.changed || {};
    summary.textContent = `${data.namespaces.length} namespaces, ${ready} ready; generation ${data.replica.generation}`
      + ` on ${data.replica.name}; last reload or swap: generation ${changed.generation ?? "?"} at ${time(changed.at)};`
      + ` ${found.length} problems found by the scanner`;
    stray.replaceChildren(found.length ? h("section", { "aria-label": "Problems found by the scanner" },
      h("h2", {}, "Problems found by the scanner"), problems(found)) : "");
    failure.replaceChildren();
  }
  function said(mode, text) {
    live.dataset.live = mode;
    live.textContent = text;
  }

  const stop = new AbortController();
  /** Reads GET /overview once; false when the token was refused (api.js has signed out, with the reason). */
  async function poll() {
    try {
      show(await api("/overview"));
    } catch (error) {
      if (error.status === 401) return false;
      failure.replaceChildren(alertBox(`Cannot read the namespaces: ${error.message}`));
    }
    return true;
  }
  const wait = (ms) => new Promise((resolve) => { window.setTimeout(resolve, ms); });
  async function run() {
    while (!stop.signal.aborted) {
      try {
        await follow(stop.signal, (data) => { show(data); said("stream", `Updated live (last change seen ${new Date().toLocaleTimeString()}).`); });
        await wait(500); // the gateway ends a stream now and then: open it again
      } catch (error) {
        if (stop.signal.aborted) return;
        if (error instanceof ApiError && error.status === 401) { await poll(); return; } // signs out
        said("poll", `Live updates are not available (${error.message}): reading every ${POLL_MS / 1000} s.`);
        await poll();
        await wait(POLL_MS);
      }
    }
  }
  if (await poll()) run();
  return () => stop.abort();
}
