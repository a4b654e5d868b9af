// Secrets: each name's status by scope and the namespaces that declare it (never a value), and for an admin
// a write-only field that sets or rotates a value (PUT /secrets/NAME, stored as `tooldock secrets set` does).
// The field is emptied as soon as the value is sent; nothing the gateway answers holds it.

import { api, seg } from "./api.js";
import { alertBox, h, uid } from "./dom.js";

function labelled(text, control, help) {
  const id = uid("secret");
  control.id = id;
  const note = help ? h("p", { class: "help", id: `${id}-help` }, help) : null;
  if (note) control.setAttribute("aria-describedby", note.id);
  return h("div", { class: "field" }, h("label", { for: id }, text), control, note);
}

const verb = (row) => (row.status === "set" ? "Rotate" : "Set");

export default async function secrets(main, { me }) {
  const messages = h("div");
  const body = h("tbody");
  const summary = h("p", { class: "muted", id: "secrets-summary" });
  const name = h("input", { type: "text", autocomplete: "off", required: true, pattern: "[A-Za-z_][A-Za-z0-9_]*" });
  const scope = h("select", {}, h("option", { value: "" }, "global (every namespace that declares it)"));
  const value = h("input", { type: "password", autocomplete: "new-password", required: true, spellcheck: "false" });

  function edit(row) {
    name.value = row.key;
    scope.value = row.scope === "global" ? "" : row.scope;
    value.focus();
  }

  async function refresh() {
    const data = await api("/secrets");
    const namespaces = data.namespaces.map((ns) => ns.name);
    const chosen = scope.value;
    scope.replaceChildren(h("option", { value: "" }, "global (every namespace that declares it)"),
      ...namespaces.map((ns) => h("option", { value: ns }, `namespace ${ns}`)));
    scope.value = namespaces.includes(chosen) ? chosen : "";
    body.replaceChildren(...data.names.map((row) => h("tr", { "data-secret": row.key, "data-scope": row.scope, "data-status": row.status },
      h("th", { scope: "row" }, h("code", {}, row.key)), h("td", {}, row.scope),
      h("td", {}, h("span", { class: `state state-${row.status}` }, row.status)),
      h("td", {}, row.declared_by.length ? row.declared_by.join(", ") : h("span", { class: "muted" }, "no namespace")),
      me.admin ? h("td", {}, h("button", { type: "button", "aria-label": `${verb(row)} ${row.key} (${row.scope})`,
        onclick: () => edit(row) }, verb(row))) : null)));
    const unset = data.names.filter((r) => r.status !== "set").length;
    summary.textContent = data.store
      ? `${data.names.length} names, ${unset} not set; ${data.namespaces.length} namespaces declare secrets`
      : "This gateway has no secrets store: tooldock secrets init makes one.";
  }

  async function save(event) {
    event.preventDefault();
    messages.replaceChildren();
    const sent = value.value;
    value.value = "";  // write-only: gone from the page before the answer comes
    if (!name.value.trim() || !sent) {
      messages.replaceChildren(alertBox("Give the secret's name and its value."));
      return;
    }
    const where = scope.value ? `?namespace=${encodeURIComponent(scope.value)}` : "";
    try {
      const done = await api(`/secrets/${seg(name.value.trim())}${where}`, { method: "PUT", body: { value: sent } });
      messages.replaceChildren(h("p", { role: "status", class: "ok" },
        `${done.key} is set (${done.scope === "global" ? "global scope" : `namespace ${done.scope}`})`
        + (done.reloaded ? "; the gateway reloaded, so the namespaces that declare it have the new value." : "; reload the gateway to apply it.")));
      await refresh();
    } catch (error) {
      messages.replaceChildren(alertBox(`Setting the secret failed: ${error.message}`));
    }
  }

  const columns = ["Name", "Scope", "Status", "Declared by", ...(me.admin ? [""] : [])];
  main.append(h("h1", { tabindex: "-1" }, "Secrets"),
    h("p", {}, "Which secret names are set, placeholders or missing, and which namespaces declare them. Values are never shown."),
    messages, summary,
    h("table", { class: "secrets", "aria-label": "Secrets" },
      h("thead", {}, h("tr", {}, columns.map((t) => h("th", { scope: "col" }, t)))), body),
    me.admin ? h("form", { class: "set-secret", onsubmit: save, "aria-labelledby": "set-secret-title", autocomplete: "off" },
      h("h2", { id: "set-secret-title" }, "Set or rotate a value"),
      labelled("Secret name", name), labelled("Scope", scope),
      labelled("New value", value, "Write-only: sent once over this connection, stored encrypted, never shown again."),
      h("button", { type: "submit" }, "Save secret")) : null);
  try {
    await refresh();
  } catch (error) {
    if (error.status !== 401) messages.replaceChildren(alertBox(`Cannot read the secrets: ${error.message}`));
  }
  return null;
}
