// Tools: one table of every tool of every namespace, searched by text or regular expression and filtered by
// namespace, annotation, source (local or upstream) and whether it is active (an upstream namespace's
// toolman_activate catalog lists the tools it can turn on: the inactive ones are rows too). Each filter's
// options carry their counts; the filters are in the URL (?q=&re=1&namespace=&annotation=&source=&active=),
// so a filtered view can be bookmarked. Rows are made once and hidden or shown, so a search stays quick with
// thousands of tools.

import { api, seg } from "./api.js";
import { alertBox, h, uid } from "./dom.js";
import { listTools } from "./mcp.js";
import { catalog } from "./upstream.js";

const ANNOTATIONS = [["read-only", "readOnlyHint"], ["destructive", "destructiveHint"], ["idempotent", "idempotentHint"],
  ["open world", "openWorldHint"]];

function annotationsOf(tool) {
  const a = tool.annotations || {};
  return ANNOTATIONS.filter(([, hint]) => a[hint]).map(([label]) => label);
}

/** The tools of an upstream namespace its catalog lists but that are not on (for this dashboard's clients). */
async function inactive(ns, listed) {
  try {
    const activate = (await listTools(ns)).find((t) => t.name === "toolman_activate");
    const on = new Set(listed.map((t) => t.name));
    return activate ? catalog(activate.description || "").filter((item) => !on.has(item.name)) : [];
  } catch {
    return []; // the catalog is the upstream page's business: a failure there is shown there
  }
}

function select(id, all, options, chosen) {
  return h("select", { id }, h("option", { value: "" }, all),
    options.map(([value, label]) => h("option", { value, selected: value === chosen }, label)));
}

export default async function tools(main, { href }) {
  const listing = await api("/namespaces");
  const kinds = new Map(listing.namespaces.map((ns) => [ns.name, ns.kind === "upstream" ? "upstream" : "local"]));
  const names = listing.namespaces.filter((ns) => ns.tool_count > 0 || (ns.kind === "upstream" && ns.catalog)).map((ns) => ns.name);
  const lists = await Promise.all(names.map(async (ns) => {
    try {
      const list = await api(`/ns/${seg(ns)}/tools`);
      return { ...list, off: kinds.get(ns) === "upstream" ? await inactive(ns, list.tools) : [] };
    } catch (error) {
      return { error };
    }
  }));
  const rows = [];
  const failures = [];
  const add = (ns, tool, active) => {
    const text = `${ns}/${tool.name} ${tool.title || ""} ${tool.description || ""}`;
    const to = href(`/namespaces/${seg(ns)}/tools/${tool.name.split("/").map(seg).join("/")}`);
    const marks = annotationsOf(tool);
    const tr = h("tr", { "data-namespace": ns, "data-tool": tool.name, "data-source": kinds.get(ns), "data-active": String(active) },
      h("td", {}, ns),
      h("th", { scope: "row" }, h("a", { href: to, "data-internal": true }, tool.name)),
      h("td", {}, (tool.description || "").split("\n")[0]),
      h("td", {}, marks.join(", ")),
      h("td", {}, kinds.get(ns), active ? "" : h("span", { class: "muted" }, " (not active)")));
    rows.push({ tr, ns, text, lower: text.toLowerCase(), marks: new Set(marks), source: kinds.get(ns), active });
  };
  lists.forEach((list, i) => {
    if (list.error) { failures.push(`${names[i]}: ${list.error.message}`); return; }
    for (const tool of list.tools) add(names[i], tool, true);
    for (const item of list.off) add(names[i], { name: item.name, description: item.description }, false);
  });

  const params = new URLSearchParams(window.location.search);
  const count = (test) => rows.filter(test).length;
  const ids = { search: uid("search"), ns: uid("ns"), note: uid("annotation"), source: uid("source"), active: uid("active") };
  const search = h("input", { id: ids.search, type: "search", autocomplete: "off", value: params.get("q") || "" });
  const regex = h("input", { id: `${ids.search}-re`, type: "checkbox", checked: params.get("re") === "1" });
  const nsSelect = select(ids.ns, "All namespaces",
    names.map((ns) => [ns, `${ns} (${count((r) => r.ns === ns)})`]), params.get("namespace") || "");
  const noteSelect = select(ids.note, "Any annotation",
    ANNOTATIONS.map(([label]) => [label, `${label} (${count((r) => r.marks.has(label))})`]), params.get("annotation") || "");
  const sourceSelect = select(ids.source, "Local and upstream",
    ["local", "upstream"].map((s) => [s, `${s} (${count((r) => r.source === s)})`]), params.get("source") || "");
  const activeSelect = select(ids.active, "Active or not",
    [["yes", `active (${count((r) => r.active)})`], ["no", `not active (${count((r) => !r.active)})`]], params.get("active") || "");
  const counter = h("p", { id: "tool-count", "aria-live": "polite" });
  const problem = h("div");
  main.append(h("h1", { tabindex: "-1" }, "Tools"),
    h("div", { class: "filters" },
      h("label", { for: ids.search }, "Search tools"), search,
      h("label", { class: "inline" }, regex, " Regular expression"),
      h("label", { for: ids.ns }, "Namespace"), nsSelect,
      h("label", { for: ids.note }, "Annotation"), noteSelect,
      h("label", { for: ids.source }, "Source"), sourceSelect,
      h("label", { for: ids.active }, "Active"), activeSelect),
    counter, problem, failures.length ? alertBox(`Some namespaces could not be listed: ${failures.join("; ")}`) : "",
    h("table", { class: "tools", "aria-label": "Tools" },
      h("thead", {}, h("tr", {}, ["Namespace", "Tool", "Description", "Annotations", "Source"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((r) => r.tr))));

  function remember() {
    const kept = new URLSearchParams();
    const put = (key, value) => { if (value) kept.set(key, value); };
    put("q", search.value);
    put("re", regex.checked ? "1" : "");
    put("namespace", nsSelect.value);
    put("annotation", noteSelect.value);
    put("source", sourceSelect.value);
    put("active", activeSelect.value);
    const query = kept.toString();
    const url = `${window.location.pathname}${query ? `?${query}` : ""}`;
    if (url !== `${window.location.pathname}${window.location.search}`) window.history.replaceState(window.history.state, "", url);
  }

  function apply() {
    let match = (r) => r.lower.includes(search.value.trim().toLowerCase());
    problem.replaceChildren();
    if (regex.checked && search.value) {
      try {
        const pattern = new RegExp(search.value, "i");
        match = (r) => pattern.test(r.text);
      } catch (error) {
        problem.replaceChildren(alertBox(`Not a valid regular expression: ${error.message}`));
        match = () => true;
      }
    }
    const wanted = { ns: nsSelect.value, note: noteSelect.value, source: sourceSelect.value, active: activeSelect.value };
    let shown = 0;
    for (const r of rows) {
      const visible = (!wanted.ns || r.ns === wanted.ns) && (!wanted.note || r.marks.has(wanted.note))
        && (!wanted.source || r.source === wanted.source) && (!wanted.active || r.active === (wanted.active === "yes")) && match(r);
      r.tr.hidden = !visible;
      if (visible) shown += 1;
    }
    counter.textContent = `${shown} of ${rows.length} tools in ${names.length} namespaces`;
    remember();
  }
  for (const control of [search, regex, nsSelect, noteSelect, sourceSelect, activeSelect]) control.addEventListener("input", apply);
  apply();
  return null;
}
