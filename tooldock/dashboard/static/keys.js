// API keys (admins only: the bearer token or an admin key without globs): the list with scopes and last use,
// a new key (shown once), revoking one.

import { api, seg } from "./api.js";
import { alertBox, h, uid } from "./dom.js";

const when = (stamp) => (stamp ? new Date(stamp).toLocaleString() : "never");
const globs = (list) => (list.length ? list.join(", ") : "all");
const split = (text) => text.split(",").map((s) => s.trim()).filter(Boolean);

function labelled(text, control) {
  const id = uid("key");
  control.id = id;
  return h("div", { class: "field" }, h("label", { for: id }, text), control);
}

export default async function keys(main, { me }) {
  main.append(h("h1", { tabindex: "-1" }, "API keys"));
  if (!me.admin) {
    main.append(h("p", {}, "Managing API keys takes the bearer token or an admin API key without globs."));
    return null;
  }
  const messages = h("div");
  const shown = h("div", { class: "secret", "aria-live": "polite" });
  const body = h("tbody");
  const name = h("input", { type: "text", required: true, autocomplete: "off" });
  const scope = h("select", {}, ["read", "write", "admin"].map((s) => h("option", { value: s }, s)));
  const namespaces = h("input", { type: "text", autocomplete: "off", placeholder: "all" });
  const tools = h("input", { type: "text", autocomplete: "off", placeholder: "all" });
  const days = h("input", { type: "number", min: "1", step: "1", placeholder: "never" });

  async function refresh() {
    const { keys: listed } = await api("/keys");
    body.replaceChildren(...listed.map((key) => h("tr", { "data-key": key.id, "data-status": key.state },
      h("td", {}, h("code", {}, key.id)), h("th", { scope: "row" }, key.name), h("td", {}, key.scope),
      h("td", {}, globs(key.namespaces)), h("td", {}, globs(key.tools)), h("td", {}, when(key.created)),
      h("td", {}, when(key.last_used)), h("td", {}, key.state + (key.expires ? ` (expires ${when(key.expires)})` : "")),
      h("td", {}, key.state === "active" ? h("button", { type: "button", "aria-label": `Revoke key ${key.name} (${key.id})`,
        onclick: () => revoke(key) }, "Revoke") : ""))));
  }

  async function revoke(key) {
    messages.replaceChildren();
    try {
      await api(`/keys/${seg(key.id)}`, { method: "DELETE" });
      messages.replaceChildren(h("p", { role: "status" }, `Key ${key.name} (${key.id}) is revoked.`));
      await refresh();
    } catch (error) {
      messages.replaceChildren(alertBox(`Revoking failed: ${error.message}`));
    }
  }

  async function create(event) {
    event.preventDefault();
    messages.replaceChildren();
    shown.replaceChildren();
    const request = { name: name.value.trim(), scope: scope.value, namespaces: split(namespaces.value), tools: split(tools.value) };
    if (days.value) request.expires_in = Number(days.value) * 86400;
    try {
      const made = await api("/keys", { method: "POST", body: request });
      const id = uid("secret");
      shown.replaceChildren(h("h2", {}, `Key ${made.key.name} (${made.key.id})`),
        h("p", {}, "Copy it now: it is shown this once and cannot be read again."),
        h("label", { for: id }, "New API key"), h("input", { id, type: "text", readonly: true, value: made.secret, class: "wide" }));
      name.value = "";
      await refresh();
    } catch (error) {
      messages.replaceChildren(alertBox(`Creating the key failed: ${error.message}`));
    }
  }

  main.append(messages,
    h("form", { class: "new-key", onsubmit: create, "aria-labelledby": "new-key-title" },
      h("h2", { id: "new-key-title" }, "New key"),
      labelled("Name", name), labelled("Scope", scope), labelled("Namespaces (globs, comma-separated)", namespaces),
      labelled("Tools (globs, comma-separated)", tools), labelled("Expires in days", days),
      h("button", { type: "submit" }, "Create key")),
    shown,
    h("table", { class: "keys", "aria-label": "API keys" },
      h("thead", {}, h("tr", {}, ["Id", "Name", "Scope", "Namespaces", "Tools", "Created", "Last used", "State", ""]
        .map((t) => h("th", { scope: "col" }, t)))), body));
  try {
    await refresh();
  } catch (error) {
    if (error.status !== 401) messages.replaceChildren(alertBox(`Cannot list the keys: ${error.message}`));
  }
  return null;
}
