// Upstream namespaces: each one's state, and each of its servers' state and last error (from /namespaces,
// read again every 3 s); and toolman_activate's catalog as switches. The dashboard speaks MCP 2026-07-28
// (stateless), so a switch changes what every stateless client of the namespace sees, as their own
// toolman_activate call would; sessions of older protocol versions keep their own activation.

import { api } from "./api.js";
import { alertBox, h, uid } from "./dom.js";
import { callTool, listTools } from "./mcp.js";

const ACTIVATE = "toolman_activate";
const EVERY_MS = 3000;

/** (name, active, description) of each tool in toolman_activate's description, as the gateway writes them
 *  (tooldock/upstream/catalog.py: catalog_tools). */
export function catalog(description) {
  const lines = description.split("\n");
  const start = lines.indexOf("Tools:");
  if (start < 0) return [];
  const found = [];
  for (const line of lines.slice(start + 1)) {
    if (!["*", " "].includes(line[0]) || line.length < 3) break;
    const [name, ...rest] = line.slice(2).split(" - ");
    found.push({ name, active: line[0] === "*", description: rest.join(" - ") });
  }
  return found;
}

function servers(ns) {
  return h("table", { class: "servers", "aria-label": `Servers of ${ns.name}` },
    h("thead", {}, h("tr", {}, ["Server", "Transport", "Target", "State", "Restarts", "Tools", "Last error"]
      .map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, (ns.servers || []).map((s) => h("tr", { "data-server": s.namespace, "data-status": s.state },
      h("th", { scope: "row" }, s.namespace), h("td", {}, s.transport), h("td", {}, h("code", {}, s.target)),
      h("td", {}, h("span", { class: `state state-${s.state}` }, s.state)), h("td", {}, String(s.restarts)),
      h("td", {}, String(s.tools)), h("td", { class: "reason" }, s.last_error || "")))));
}

async function switches(ns, holder) {
  let tools;
  try {
    tools = await listTools(ns.name);
  } catch (error) {
    holder.replaceChildren(alertBox(`Cannot read the catalog of ${ns.name}: ${error.message}`));
    return;
  }
  const activate = tools.find((t) => t.name === ACTIVATE);
  if (!activate) {
    holder.replaceChildren(h("p", { class: "muted" }, "Turning tools on and off takes a key that may call toolman_activate (not a read key)."));
    return;
  }
  const items = catalog(activate.description || "");
  const note = h("div", { "aria-live": "polite" });
  const list = h("ul", { class: "switches", "aria-label": `Catalog of ${ns.name}` }, items.map((item) => {
    const box = h("input", { type: "checkbox", role: "switch", id: uid("switch"), checked: item.active,
      "data-tool": item.name });
    box.addEventListener("change", async () => {
      box.disabled = true;
      const args = { tools_on: box.checked ? [item.name] : [], tools_off: box.checked ? [] : [item.name], resources_on: [], resources_off: [] };
      try {
        const result = await callTool(ns.name, ACTIVATE, args, {});
        if (result.isError) throw new Error((result.content || []).map((c) => c.text || "").join(" "));
        note.replaceChildren(h("p", { role: "status" }, `${item.name} is ${box.checked ? "on" : "off"}.`));
      } catch (error) {
        box.checked = !box.checked;
        note.replaceChildren(alertBox(`Switching ${item.name} failed: ${error.message}`));
      } finally {
        box.disabled = false;
      }
    });
    return h("li", {}, box, " ", h("label", { for: box.id }, item.name),
      item.description ? h("span", { class: "muted" }, ` ${item.description}`) : null);
  }));
  holder.replaceChildren(items.length ? list : h("p", { class: "muted" }, "The catalog is empty: no upstream server is up."), note);
}

export default async function upstream(main) {
  main.append(h("h1", { tabindex: "-1" }, "Upstream namespaces"),
    h("p", {}, "Namespaces whose tools come from upstream MCP servers (tools.toml). The switches turn a tool on or off "
      + "for stateless MCP clients (protocol 2026-07-28, as this dashboard), as toolman_activate does."));
  const failure = h("div");
  const sections = new Map();
  main.append(failure);

  async function refresh(first) {
    let listed;
    try {
      listed = (await api("/namespaces")).namespaces.filter((ns) => ns.kind === "upstream");
    } catch (error) {
      if (error.status !== 401) failure.replaceChildren(alertBox(`Cannot read the namespaces: ${error.message}`));
      return;
    }
    failure.replaceChildren();
    if (first && !listed.length) main.append(h("p", {}, "No upstream namespace."));
    for (const ns of listed) {
      let section = sections.get(ns.name);
      if (!section) {
        section = { state: h("p"), servers: h("div"), catalog: h("div") };
        sections.set(ns.name, section);
        main.append(h("section", { "aria-labelledby": `up-${ns.name}`, "data-namespace": ns.name },
          h("h2", { id: `up-${ns.name}` }, ns.name), section.state, section.servers,
          h("h3", {}, "Catalog"), section.catalog));
        await switches(ns, section.catalog);
      }
      section.state.replaceChildren(h("span", { class: `state state-${ns.state}`, "data-status": ns.state }, ns.state),
        ns.last_error ? h("span", { class: "reason" }, ` ${ns.last_error}`) : "");
      section.servers.replaceChildren(servers(ns));
    }
  }
  await refresh(true);
  const timer = window.setInterval(() => refresh(false), EVERY_MS);
  return () => window.clearInterval(timer);
}
