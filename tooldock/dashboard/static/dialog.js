// A tool's questions to the person running it (elicitation and sampling), each in a modal <dialog>: shown
// with showModal (the rest of the page is inert, so focus stays in the dialog), labelled by its heading and
// described by the server's message; Escape declines (elicitation) or rejects (sampling).
// Elicitation: a form drawn from the requested schema (form.js), checked (validate.js), answered Accept,
// Decline or Cancel. Sampling: the messages, a field for the reply, Approve or Reject.

import { alertBox, h, pretty, uid } from "./dom.js";
import { buildForm } from "./form.js";
import { Refused } from "./mcp.js";
import { Unsupported, check } from "./schema.js";
import { validate } from "./validate.js";

/** Shows `body` in a modal dialog titled `title`; resolves to what `settle(value)` is called with. The
 *  Escape key settles with `onEscape()`; an aborted `signal` closes it and rejects with an AbortError. */
function modal(title, kind, build, { onEscape, signal }) {
  return new Promise((resolve, reject) => {
    const headingId = uid("dlg");
    const before = document.activeElement;
    const dialog = h("dialog", { class: `ask ask-${kind}`, "aria-labelledby": headingId, "data-kind": kind });
    let done = false;
    const finish = (fn, value) => {
      if (done) return;
      done = true;
      dialog.close();
      dialog.remove();
      if (before && typeof before.focus === "function") before.focus();
      fn(value);
    };
    const settle = (value) => finish(resolve, value);
    const fail = (error) => finish(reject, error);
    dialog.append(h("h2", { id: headingId }, title), ...build(settle, fail, dialog));
    dialog.addEventListener("cancel", (event) => {
      event.preventDefault(); // Escape: the dialog's own answer, not a bare close
      try { settle(onEscape()); } catch (error) { fail(error); }
    });
    if (signal) {
      if (signal.aborted) { reject(new DOMException("The call was cancelled", "AbortError")); return; }
      signal.addEventListener("abort", () => fail(new DOMException("The call was cancelled", "AbortError")), { once: true });
    }
    document.body.append(dialog);
    dialog.showModal();
    const first = dialog.querySelector("input, select, textarea");
    if (first) first.focus();
  });
}

function elicit(params, signal) {
  const schema = params.requestedSchema || { type: "object", properties: {} };
  const byUrl = params.mode === "url";
  let form = null;
  let json = null;
  if (!byUrl) {
    try { check(schema); form = buildForm(schema); } catch (error) { if (!(error instanceof Unsupported)) throw error; }
  }
  return modal("The tool asks for input", "elicitation", (settle) => {
    const messageId = uid("msg");
    const problems = h("div", { class: "messages" });
    const parts = [h("p", { id: messageId, class: "ask-message" }, params.message || "")];
    if (byUrl) {
      parts.push(h("p", {}, "It asks you to open ", h("code", {}, params.url || ""), " and to accept once done."));
    } else if (form) {
      parts.push(form.el);
    } else {
      const id = uid("json");
      json = h("textarea", { id, rows: 6, class: "json", spellcheck: "false" }, pretty({}));
      parts.push(h("label", { for: id }, "Answer (JSON)"), json);
    }
    const accept = h("button", { type: "submit", class: "primary" }, "Accept");
    const decline = h("button", { type: "button", onclick: () => settle({ action: "decline" }) }, "Decline");
    const cancel = h("button", { type: "button", onclick: () => settle({ action: "cancel" }) }, "Cancel");
    const submit = (event) => {
      event.preventDefault();
      problems.replaceChildren();
      if (byUrl) { settle({ action: "accept" }); return; }
      let content;
      const errors = [];
      if (form) content = form.get(errors);
      else {
        try { content = JSON.parse(json.value || "{}"); } catch (error) { errors.push({ message: `not valid JSON: ${error.message}` }); }
      }
      if (!errors.length) errors.push(...validate(content, schema));
      if (errors.length) { problems.append(alertBox(`Check the answer: ${errors.map((e) => e.message).join("; ")}.`)); return; }
      settle({ action: "accept", content });
    };
    return [h("form", { novalidate: true, onsubmit: submit, "aria-describedby": messageId, "aria-label": "Answer" },
      ...parts, problems, h("div", { class: "actions" }, accept, decline, cancel))];
  }, { onEscape: () => ({ action: "decline" }), signal });
}

function messageText(content) {
  const items = Array.isArray(content) ? content : [content || {}];
  return items.map((c) => (c.type === "text" ? c.text : `[${c.type}${c.mimeType ? ` ${c.mimeType}` : ""}]`)).join("\n");
}

function sample(params, signal) {
  return modal("The tool asks for a model's reply (sampling)", "sampling", (settle, fail) => {
    const replyId = uid("reply");
    const reply = h("textarea", { id: replyId, rows: 4, required: true });
    const problems = h("div", { class: "messages" });
    const reject = () => new Refused("You rejected the tool's sampling request.");
    const submit = (event) => {
      event.preventDefault();
      problems.replaceChildren();
      if (!reply.value.trim()) { problems.append(alertBox("Write the reply to send, or press Reject.")); return; }
      settle({ role: "assistant", content: { type: "text", text: reply.value }, model: "person (ToolDock dashboard)", stopReason: "endTurn" });
    };
    return [
      params.systemPrompt ? h("p", { class: "muted" }, "System prompt: ", params.systemPrompt) : null,
      h("ol", { class: "sampling-messages", "aria-label": "Messages" }, (params.messages || []).map((m) =>
        h("li", { "data-role": m.role }, h("strong", {}, `${m.role}: `), h("span", { class: "text" }, messageText(m.content))))),
      h("p", { class: "muted" }, `At most ${params.maxTokens ?? "?"} tokens.`),
      h("form", { novalidate: true, onsubmit: submit, "aria-label": "Your reply" },
        h("label", { for: replyId }, "Reply"), reply, problems,
        h("div", { class: "actions" }, h("button", { type: "submit", class: "primary" }, "Approve"),
          h("button", { type: "button", onclick: () => fail(reject()) }, "Reject"))),
    ];
  }, { onEscape: () => { throw new Refused("You rejected the tool's sampling request."); }, signal });
}

/** Asks the person each of a round's `inputRequests` in turn; resolves to {key: answer}. Rejects with
 *  Refused (a sampling request rejected, a question the dashboard cannot answer) or an AbortError. */
export async function askPerson(requests, signal) {
  const answers = {};
  for (const [key, request] of Object.entries(requests)) {
    const params = request.params || {};
    if (request.method === "elicitation/create") answers[key] = await elicit(params, signal);
    else if (request.method === "sampling/createMessage") answers[key] = await sample(params, signal);
    else throw new Refused(`The tool asked for ${request.method}, which the dashboard does not answer.`);
  }
  return answers;
}
