// Activity: this browser's calls (replayed in the runner with the same arguments), and the server's recent
// calls from the audit log (GET /audit), filtered, followed live, downloadable as JSONL. The filters are in
// the URL, so a view such as /ui/activity?request_id=... can be shared.

import { api } from "./api.js";
import { alertBox, h, uid } from "./dom.js";
import { calls, forget } from "./history.js";

const EVERY_MS = 2000;
const FILTERS = [["namespace", "Namespace"], ["tool", "Tool"], ["status", "Status"], ["key", "API key id"], ["request_id", "Request id"]];
const STATUSES = ["", "ok", "error", "cancelled", "refused", "timeout"];
const time = (stamp) => new Date(stamp).toLocaleTimeString();

function field(name, text, value) {
  const id = uid(name);
  const control = name === "status"
    ? h("select", { id, name }, STATUSES.map((s) => h("option", { value: s, selected: s === value }, s || "any")))
    : h("input", { id, name, type: "text", autocomplete: "off", value: value || "" });
  return [h("label", { for: id }, text), control];
}

function mine(href, navigate) {
  const list = calls();
  if (!list.length) return h("p", { class: "muted" }, "No calls from this browser yet: run a tool from the Tools page.");
  return h("table", { class: "calls", "aria-label": "This browser's calls" },
    h("thead", {}, h("tr", {}, ["Time", "Tool", "Status", "Took", "Request id", ""].map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, list.map((c) => h("tr", { "data-call": c.id, "data-status": c.status },
      h("td", {}, time(c.time)),
      h("th", { scope: "row" }, h("a", { href: href(`/namespaces/${encodeURIComponent(c.namespace)}/tools/${c.tool}`), "data-internal": true },
        `${c.namespace} / ${c.tool}`)),
      h("td", {}, c.status), h("td", {}, `${Math.round(c.ms)} ms`), h("td", {}, h("code", {}, c.request_id || "")),
      h("td", {}, h("button", { type: "button", "aria-label": `Replay ${c.tool} (${time(c.time)})`,
        onclick: () => navigate(`/namespaces/${encodeURIComponent(c.namespace)}/tools/${c.tool}?replay=${encodeURIComponent(c.id)}`) },
      "Replay"))))));
}

function line(l) {
  return h("tr", { "data-request-id": l.request_id || "", "data-status": l.status || "" },
    h("td", {}, l.time ? time(l.time) : ""), h("td", {}, l.namespace || ""),
    h("th", { scope: "row" }, l.tool || l.target || l.method || ""), h("td", {}, l.status || ""),
    h("td", {}, l.latency_ms !== undefined ? `${l.latency_ms} ms` : ""), h("td", {}, l.front_end || ""),
    h("td", {}, l.key_id || (l.method ? "" : "")), h("td", {}, h("code", {}, l.request_id || "")));
}

export default async function activity(main, { href, navigate }) {
  const query = new URLSearchParams(window.location.search);
  const mineHolder = h("div", {}, mine(href, navigate));
  const clear = h("button", { type: "button", onclick: () => { forget(); mineHolder.replaceChildren(mine(href, navigate)); } },
    "Clear this browser's calls");
  const filters = h("form", { class: "filters", "aria-label": "Audit log filters" },
    FILTERS.map(([name, text]) => field(name, text, query.get(name))),
    h("button", { type: "submit" }, "Filter"));
  const followId = uid("follow");
  const follow = h("input", { type: "checkbox", id: followId, checked: query.get("follow") !== "0" });
  const download = h("button", { type: "button" }, "Download JSONL");
  const summary = h("p", { class: "muted", "aria-live": "polite", id: "audit-count" });
  const failure = h("div");
  const body = h("tbody");
  let shown = [];
  let timer = null;

  function wanted() {
    const params = new URLSearchParams();
    for (const [name] of FILTERS) {
      const value = filters.elements[name].value.trim();
      if (value) params.set(name, value);
    }
    return params;
  }

  function draw(note) {
    body.replaceChildren(...shown.map(line));
    summary.textContent = `${shown.length} lines${note ? `; ${note}` : ""}; updated ${new Date().toLocaleTimeString()}`;
  }

  async function load(newer) {
    const params = wanted();
    params.set("limit", "200");
    if (newer && shown.length) params.set("since", shown[0].time);
    try {
      const data = await api(`/audit?${params}`);
      if (!data.enabled) { failure.replaceChildren(alertBox("This gateway keeps no audit log (TOOLDOCK_LOG_DIR is not set).")); return; }
      shown = newer && shown.length ? [...data.lines, ...shown].slice(0, 1000) : data.lines;
      failure.replaceChildren();
      draw(follow.checked ? "following" : "");
    } catch (error) {
      if (error.status !== 401) failure.replaceChildren(alertBox(`Cannot read the audit log: ${error.message}`));
    }
  }

  function following() {
    if (timer) window.clearInterval(timer);
    timer = follow.checked ? window.setInterval(() => load(true), EVERY_MS) : null;
  }

  filters.addEventListener("submit", async (event) => {
    event.preventDefault();
    const params = wanted();
    window.history.replaceState(null, "", `${window.location.pathname}${params.size ? `?${params}` : ""}`);
    await load(false);
  });
  follow.addEventListener("change", following);
  download.addEventListener("click", () => {
    const text = shown.map((l) => JSON.stringify(l)).join("\n") + (shown.length ? "\n" : "");
    const url = URL.createObjectURL(new Blob([text], { type: "application/x-ndjson" }));
    const link = h("a", { href: url, download: `tooldock-audit-${new Date().toISOString().slice(0, 19)}.jsonl` });
    document.body.append(link);
    link.click();
    link.remove();
    window.setTimeout(() => URL.revokeObjectURL(url), 1000);
  });

  main.append(h("h1", { tabindex: "-1" }, "Activity"),
    h("section", { "aria-labelledby": "mine-title" }, h("h2", { id: "mine-title" }, "This browser's calls"), mineHolder, clear),
    h("section", { "aria-labelledby": "server-title" }, h("h2", { id: "server-title" }, "Server calls (audit log)"),
      filters, h("p", {}, follow, " ", h("label", { for: followId }, "Follow (new lines every 2 s)"), " ", download),
      failure, summary,
      h("table", { class: "audit", "aria-label": "Audit log" },
        h("thead", {}, h("tr", {}, ["Time", "Namespace", "Tool or target", "Status", "Latency", "Front end", "Key", "Request id"]
          .map((t) => h("th", { scope: "col" }, t)))), body)));
  await load(false);
  following();
  return () => { if (timer) window.clearInterval(timer); };
}
