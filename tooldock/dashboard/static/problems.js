// The schema check's findings on the runner's form: one announced summary (role="alert") above the form,
// and each message next to its field (found by its JSON pointer in data-path; a path with no field of its
// own, such as an unknown key, goes to the nearest field that holds it), the field marked aria-invalid and
// described by the message.

import { alertBox, h, uid } from "./dom.js";

/** The findings with one message per path (the form's own first: "is required", "not a number"). */
export function distinct(found) {
  const seen = new Set();
  return found.filter((p) => {
    const key = p.path ?? "";
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function holder(formEl, path) {
  let at = path;
  for (;;) {
    const el = formEl.querySelector(`[data-path="${CSS.escape(at)}"]`);
    if (el || at === "") return el;
    at = at.slice(0, at.lastIndexOf("/"));
  }
}

export function clear(formEl, messages) {
  messages.querySelectorAll("[role=alert]").forEach((node) => node.remove());
  if (!formEl) return;
  formEl.querySelectorAll(".field-error").forEach((node) => node.remove());
  formEl.querySelectorAll("[aria-invalid]").forEach((node) => {
    node.removeAttribute("aria-invalid");
    const kept = (node.getAttribute("aria-describedby") || "").split(" ").filter((id) => id && !id.startsWith("problem-"));
    if (kept.length) node.setAttribute("aria-describedby", kept.join(" "));
    else node.removeAttribute("aria-describedby");
  });
}

/** Shows `found` ({path, message}) in `messages` and, with `formEl`, next to the fields. */
export function show(formEl, messages, found, lead = "Check the arguments") {
  messages.append(alertBox(`${lead}: ${found.map((p) => p.message).join("; ")}.`));
  if (!formEl) return;
  for (const problem of found) {
    const el = holder(formEl, problem.path || "");
    if (!el) continue; // the arguments as a whole: the summary says it
    const id = uid("problem");
    const note = h("p", { id, class: "field-error" }, problem.message);
    const scalar = el.classList.contains("field") ? el : el.querySelector(":scope > .field");
    const input = scalar && scalar.querySelector("input, select, textarea");
    if (input) {
      input.setAttribute("aria-invalid", "true");
      input.setAttribute("aria-describedby", [input.getAttribute("aria-describedby"), id].filter(Boolean).join(" "));
    }
    const legend = el.querySelector(":scope > legend");
    if (legend) legend.after(note);
    else el.append(note);
  }
}
