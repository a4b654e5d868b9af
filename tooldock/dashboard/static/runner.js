// Run a tool: its form (or the JSON view, which round-trips with it), Run and Cancel, progress and log
// lines as they come, the tool's questions answered in dialogs (dialog.js), the arguments checked against
// the input schema before sending (validate.js), the result, and the same call as curl without the token.

import { api, seg, toolPath } from "./api.js";
import { askPerson } from "./dialog.js";
import { alertBox, h, pretty, uid } from "./dom.js";
import { buildForm } from "./form.js";
import { find, newRequestId, remember } from "./history.js";
import { Refused, TransportError, callTool, endpoint, request } from "./mcp.js";
import { clear, distinct, show } from "./problems.js";
import { showCancelled, showRefused, showResult, showTransportError } from "./result.js";
import { Unsupported, check } from "./schema.js";
import { NoSession, callInSession } from "./session.js";
import { validate } from "./validate.js";

const quote = (text) => `'${text.replace(/'/g, "'\\''")}'`;

export function curl(namespace, name, args) {
  const { body, headers } = request(name, args);
  delete body.params._meta.progressToken;
  const lines = [`curl -N -X POST ${quote(new URL(endpoint(namespace), window.location.href).href)}`,
    `  -H "Authorization: Bearer $TOOLDOCK_TOKEN"`,
    ...Object.entries(headers).map(([k, v]) => `  -H ${quote(`${k}: ${v}`)}`),
    `  -d ${quote(JSON.stringify(body))}`];
  return lines.join(" \\\n");
}

/** The call over an MCP session (the tool's questions answered as it runs); over the stateless protocol,
 *  its questions answered in input_required rounds, when the gateway opens no session. */
async function call(namespace, name, args, options) {
  try {
    return await callInSession(namespace, name, args, options);
  } catch (error) {
    if (!(error instanceof NoSession)) throw error;
    return callTool(namespace, name, args, options);
  }
}

export default async function runner(main, { params: [namespace, name], href }) {
  let tool;
  try {
    tool = await api(`/ns/${seg(namespace)}/tools/${toolPath(name)}/schema`);
  } catch (error) {
    main.append(h("h1", { tabindex: "-1" }, `${namespace} / ${name}`), alertBox(`Cannot open this tool: ${error.message}`));
    return null;
  }
  const schema = tool.inputSchema || { type: "object", properties: {} };
  let unsupported = null;
  try { check(schema); } catch (error) { if (error instanceof Unsupported) unsupported = error.message; else throw error; }

  const jsonId = uid("json");
  const json = h("textarea", { id: jsonId, rows: 10, spellcheck: "false", class: "json" });
  const jsonView = h("div", { class: "json-view", hidden: true }, h("label", { for: jsonId }, "Arguments (JSON)"), json);
  const formHolder = h("div", { class: "form-view" });
  let form = null;
  const messages = h("div", { class: "messages" });
  const toggle = h("button", { type: "button", "aria-pressed": "false" }, "Edit as JSON");
  const run = h("button", { type: "submit", class: "primary" }, "Run");
  const cancel = h("button", { type: "button", disabled: true }, "Cancel");
  const copy = h("button", { type: "button" }, "Copy as curl");
  const curlBox = h("pre", { class: "curl", hidden: true, "aria-label": "curl command" });
  const progress = h("progress", { max: 1, value: 0, hidden: true, "aria-label": "Progress" });
  const progressText = h("span", { class: "muted", "aria-live": "polite" });
  const log = h("ol", { class: "log", "aria-label": "Log", "aria-live": "polite" });
  const region = h("section", { role: "region", "aria-label": "Result", class: "result", "data-status": "idle" });

  const inJson = () => !jsonView.hidden;
  if (unsupported) {
    json.value = pretty({});
    jsonView.hidden = false;
    toggle.hidden = true;
    messages.append(h("p", { class: "note" }, `The form cannot show this tool's input (${unsupported}): edit the arguments as JSON.`));
  }
  const replay = find(new URLSearchParams(window.location.search).get("replay") || "");
  const initial = replay && replay.namespace === namespace && replay.tool === name ? replay.args : undefined;
  if (unsupported) {
    if (initial) json.value = pretty(initial);
  } else {
    form = buildForm(schema, initial);
    formHolder.append(form.el);
  }
  if (initial) messages.append(h("p", { class: "note", role: "status" }, `The arguments of the call made at ${new Date(replay.time).toLocaleTimeString()}: press Run to replay it.`));

  /** The arguments to send, checked against the input schema; null (and the problems shown) when wrong.
   *  `checked: false` (switching to the JSON view) takes the form's value as it is. */
  function args(checked = true) {
    clear(form && form.el, messages);
    let value;
    const errors = [];
    if (inJson()) {
      try {
        value = JSON.parse(json.value || "{}");
        if (value === null || typeof value !== "object" || Array.isArray(value)) throw new Error("the arguments must be a JSON object");
      } catch (error) {
        messages.append(alertBox(`The arguments are not valid JSON: ${error.message}`));
        return null;
      }
    } else {
      value = form.get(errors);
    }
    if (!checked) return value;
    const found = distinct([...errors, ...validate(value, schema)]);
    if (found.length) { show(inJson() ? null : form.el, messages, found); return null; }
    return value;
  }

  toggle.addEventListener("click", () => {
    if (!inJson()) {
      json.value = pretty(form.get([]));
      jsonView.hidden = false;
      formHolder.hidden = true;
      toggle.textContent = "Edit as form";
      toggle.setAttribute("aria-pressed", "true");
      json.focus();
      return;
    }
    const value = args(false);
    if (value === null) return;
    form = buildForm(schema, value);
    formHolder.replaceChildren(form.el);
    jsonView.hidden = true;
    formHolder.hidden = false;
    toggle.textContent = "Edit as JSON";
    toggle.setAttribute("aria-pressed", "false");
  });

  let running = null;
  async function submit(event) {
    event.preventDefault();
    if (running) return;
    const value = args();
    if (value === null) return;
    running = new AbortController();
    run.disabled = true;
    cancel.disabled = false;
    progress.hidden = true;
    progress.value = 0;
    progressText.textContent = "";
    log.replaceChildren();
    region.dataset.status = "running";
    region.replaceChildren(h("h2", {}, "Result"), h("p", { role: "status" }, "Running..."));
    const started = performance.now();
    const requestId = newRequestId();
    try {
      const result = await call(namespace, name, value, {
        signal: running.signal, requestId,
        onProgress: (p) => {
          progress.hidden = false;
          if (p.total) { progress.max = p.total; progress.value = p.progress; } else { progress.removeAttribute("value"); }
          progressText.textContent = `${p.progress}${p.total ? ` of ${p.total}` : ""}${p.message ? `: ${p.message}` : ""}`;
        },
        onAsk: (requests) => askPerson(requests, running.signal),
        onLog: (m) => {
          const text = typeof m.data === "string" ? m.data : (m.data && m.data.msg) || JSON.stringify(m.data);
          log.append(h("li", { "data-level": m.level }, `${m.level}: ${text}`));
        },
      });
      showResult(region, result, performance.now() - started, tool.outputSchema);
    } catch (error) {
      if (error.name === "AbortError") showCancelled(region, performance.now() - started);
      else if (error instanceof Refused) showRefused(region, error.message, performance.now() - started);
      else showTransportError(region, error instanceof TransportError ? error.message : String(error), performance.now() - started);
    } finally {
      remember({ namespace, tool: name, args: value, status: region.dataset.status, ms: performance.now() - started, request_id: requestId });
      region.dataset.requestId = requestId;
      running = null;
      run.disabled = false;
      cancel.disabled = true;
      // Run was disabled during the call, so focus fell to the page: give it back to the keyboard user
      if (!document.activeElement || document.activeElement === document.body) run.focus();
    }
  }

  cancel.addEventListener("click", () => { if (running) running.abort(); });
  copy.addEventListener("click", async () => {
    const value = args();
    if (value === null) return;
    curlBox.textContent = curl(namespace, name, value);
    curlBox.hidden = false;
    try { await navigator.clipboard.writeText(curlBox.textContent); copy.textContent = "Copied as curl"; }
    catch { copy.textContent = "Copy as curl (select the text below)"; }
  });

  const annotations = tool.annotations || {};
  main.append(
    h("p", { class: "crumbs" }, h("a", { href: href("/tools"), "data-internal": true }, "Tools"), ` / ${namespace} /`),
    h("h1", { tabindex: "-1" }, name),
    h("p", { class: "description" }, tool.description || ""),
    h("p", { class: "badges" }, [["readOnlyHint", "read-only"], ["destructiveHint", "destructive"], ["idempotentHint", "idempotent"],
      ["openWorldHint", "open world"]].filter(([hint]) => annotations[hint]).map(([, label]) => h("span", { class: "badge" }, label))),
    h("form", { class: "runner", novalidate: true, onsubmit: submit, "aria-label": `Arguments of ${name}` },
      messages, formHolder, jsonView,
      h("div", { class: "actions" }, run, cancel, toggle, copy)),
    curlBox, h("div", { class: "progress" }, progress, " ", progressText), log, region);
  return () => { if (running) running.abort(); };
}
