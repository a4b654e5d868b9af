// Overview: every namespace with its state (also in data-status, for scripts), the reason when it is not
// ready, its worker, restarts and problems; read again every few seconds.

import { api } from "./api.js";
import { alertBox, h } from "./dom.js";

const EVERY_MS = 3000;

function reason(ns) {
  if (ns.state === "ready" || ns.state === "sleeping" || ns.state === "empty") return "";
  return ns.last_error || ns.reason || (ns.problems || []).map((p) => p.message).join("; ") || ns.state;
}

function problems(list) {
  if (!list || !list.length) return "none";
  return h("ul", { class: "problems" }, list.map((p) =>
    h("li", {}, h("code", {}, p.line ? `${p.file}:${p.line}` : p.file), " ", p.message)));
}

function row(ns, href) {
  const worker = ns.pid ? `pid ${ns.pid}` : ns.container || ns.worker || "none";
  return h("tr", { "data-namespace": ns.name, "data-status": ns.state },
    h("th", { scope: "row" }, ns.name),
    h("td", {}, h("span", { class: `state state-${ns.state}`, "data-status": ns.state }, ns.state.replace("_", " "))),
    h("td", { class: "reason" }, reason(ns)),
    h("td", {}, worker),
    h("td", {}, String(ns.restarts ?? 0)),
    h("td", {}, ns.tool_count ? h("a", { href: href(`/tools?namespace=${encodeURIComponent(ns.name)}`), "data-internal": true },
      `${ns.tool_count} tools`) : "0"),
    h("td", {}, problems(ns.problems)));
}

export default async function overview(main, { href }) {
  const summary = h("p", { class: "muted", "aria-live": "polite" }, "Loading...");
  const body = h("tbody");
  const failure = h("div");
  main.append(h("h1", { tabindex: "-1" }, "Overview"), summary, failure,
    h("table", { class: "namespaces", "aria-label": "Namespaces" },
      h("thead", {}, h("tr", {}, ["Namespace", "State", "Reason", "Worker", "Restarts", "Tools", "Problems"]
        .map((title) => h("th", { scope: "col" }, title)))), body));

  async function refresh() {
    try {
      const data = await api("/namespaces");
      body.replaceChildren(...data.namespaces.map((ns) => row(ns, href)));
      const ready = data.namespaces.filter((ns) => ns.state === "ready").length;
      const stray = (data.problems || []).length;
      summary.textContent = `${data.namespaces.length} namespaces, ${ready} ready; generation ${data.replica.generation}`
        + ` on ${data.replica.name}; ${stray} problems found by the scanner; updated ${new Date().toLocaleTimeString()}`;
      failure.replaceChildren();
    } catch (error) {
      if (error.status !== 401) failure.replaceChildren(alertBox(`Cannot read the namespaces: ${error.message}`));
    }
  }
  await refresh();
  const timer = window.setInterval(refresh, EVERY_MS);
  return () => window.clearInterval(timer);
}
