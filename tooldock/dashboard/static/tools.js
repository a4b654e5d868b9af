// Tools: one table of every tool of every namespace, searched by text or regular expression and filtered by
// namespace. Rows are made once and hidden or shown, so a search stays quick with thousands of tools.

import { api, seg } from "./api.js";
import { alertBox, h, uid } from "./dom.js";

function annotations(tool) {
  const a = tool.annotations || {};
  return [a.readOnlyHint && "read-only", a.destructiveHint && "destructive", a.idempotentHint && "idempotent",
    a.openWorldHint && "open world"].filter(Boolean).join(", ");
}

export default async function tools(main, { href }) {
  const listing = await api("/namespaces");
  const names = listing.namespaces.filter((ns) => ns.tool_count > 0).map((ns) => ns.name);
  const lists = await Promise.all(names.map((ns) => api(`/ns/${seg(ns)}/tools`).catch((error) => ({ error, ns }))));
  const rows = [];
  const failures = [];
  lists.forEach((list, i) => {
    if (list.error) { failures.push(`${names[i]}: ${list.error.message}`); return; }
    for (const tool of list.tools) {
      const text = `${names[i]}/${tool.name} ${tool.title || ""} ${tool.description || ""}`;
      const to = href(`/namespaces/${seg(names[i])}/tools/${tool.name.split("/").map(seg).join("/")}`);
      const tr = h("tr", { "data-namespace": names[i], "data-tool": tool.name },
        h("td", {}, names[i]),
        h("th", { scope: "row" }, h("a", { href: to, "data-internal": true }, tool.name)),
        h("td", {}, (tool.description || "").split("\n")[0]),
        h("td", {}, annotations(tool)));
      rows.push({ tr, ns: names[i], text, lower: text.toLowerCase() });
    }
  });

  const searchId = uid("search");
  const nsId = uid("ns");
  const search = h("input", { id: searchId, type: "search", autocomplete: "off" });
  const regex = h("input", { id: `${searchId}-re`, type: "checkbox" });
  const asked = new URLSearchParams(window.location.search).get("namespace");
  const select = h("select", { id: nsId }, h("option", { value: "" }, "All namespaces"),
    names.map((ns) => h("option", { value: ns, selected: ns === asked }, ns)));
  const count = h("p", { id: "tool-count", "aria-live": "polite" });
  const problem = h("div");
  main.append(h("h1", { tabindex: "-1" }, "Tools"),
    h("div", { class: "filters" },
      h("label", { for: searchId }, "Search tools"), search,
      h("label", { class: "inline" }, regex, " Regular expression"),
      h("label", { for: nsId }, "Namespace"), select),
    count, problem, failures.length ? alertBox(`Some namespaces could not be listed: ${failures.join("; ")}`) : null,
    h("table", { class: "tools", "aria-label": "Tools" },
      h("thead", {}, h("tr", {}, ["Namespace", "Tool", "Description", "Annotations"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, rows.map((r) => r.tr))));

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
    let shown = 0;
    for (const r of rows) {
      const visible = (!select.value || r.ns === select.value) && match(r);
      r.tr.hidden = !visible;
      if (visible) shown += 1;
    }
    count.textContent = `${shown} of ${rows.length} tools in ${names.length} namespaces`;
  }
  for (const control of [search, regex, select]) control.addEventListener("input", apply);
  apply();
  return null;
}
