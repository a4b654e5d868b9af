// A call's outcome in the "Result" region: each content item (text, image, audio, resources, links), the
// structured content checked against the tool's output schema (a mismatch is a warning, not a failure), the
// duration; a tool's error told apart from a transport error.

import { h, pretty } from "./dom.js";
import { validate } from "./validate.js";

function item(content) {
  switch (content.type) {
    case "text":
      return h("pre", { class: "text" }, content.text);
    case "image":
      return h("img", { src: `data:${content.mimeType};base64,${content.data}`, alt: `Image (${content.mimeType})` });
    case "audio":
      return h("audio", { controls: true, src: `data:${content.mimeType};base64,${content.data}`, "aria-label": `Audio (${content.mimeType})` });
    case "resource": {
      const r = content.resource || {};
      return h("div", { class: "resource" }, h("p", {}, "Resource ", h("code", {}, r.uri || "")),
        h("pre", {}, r.text !== undefined ? r.text : `(${r.mimeType || "binary"}, ${(r.blob || "").length} base64 characters)`));
    }
    case "resource_link":
      return h("p", { class: "resource" }, "Link to resource ", h("code", {}, content.uri), content.name ? ` (${content.name})` : "");
    default:
      return h("pre", {}, pretty(content));
  }
}

const took = (ms) => h("p", { class: "duration" }, `Took ${Math.round(ms)} ms`);

function outputCheck(region, result, outputSchema) {
  if (!outputSchema || result.isError) return null;
  const structured = result.structuredContent;
  const found = structured === undefined
    ? [{ message: "the tool declares an output schema but sent no structured content" }]
    : validate(structured, outputSchema);
  region.dataset.outputCheck = found.length ? "mismatch" : "ok";
  if (!found.length) return null;
  return h("div", { class: "warning", role: "status" },
    h("p", {}, h("strong", {}, "Warning: "), "the structured content does not match the tool's output schema."),
    h("ul", {}, found.map((p) => h("li", {}, p.message))));
}

export function showResult(region, result, ms, outputSchema) {
  if (result && result.resultType === "input_required") {
    region.dataset.status = "input-required";
    region.replaceChildren(h("h2", {}, "Result"), h("p", { role: "alert", class: "error" },
      "The tool asked for input (elicitation or sampling) and the call ended before it was answered."), took(ms));
    return;
  }
  const failed = Boolean(result.isError);
  region.dataset.status = failed ? "tool-error" : "ok";
  delete region.dataset.outputCheck;
  const warning = outputCheck(region, result, outputSchema);
  const parts = (result.content || []).map(item);
  const head = failed ? h("p", { role: "alert", class: "error tool-error" }, "Tool error: the tool ran and reported a failure.")
    : h("p", { class: "ok" }, "The tool answered.");
  region.replaceChildren(h("h2", {}, "Result"), head, warning || "", took(ms), h("div", { class: "content" }, parts),
    result.structuredContent !== undefined && !failed
      ? h("details", { open: true }, h("summary", {}, "Structured content"), h("pre", { class: "structured" }, pretty(result.structuredContent)))
      : "");
}

export function showTransportError(region, message, ms) {
  region.dataset.status = "transport-error";
  region.replaceChildren(h("h2", {}, "Result"), h("p", { role: "alert", class: "error transport-error" },
    `Transport error: the call did not complete. ${message}`), took(ms));
}

export function showRefused(region, message, ms) {
  region.dataset.status = "refused";
  region.replaceChildren(h("h2", {}, "Result"), h("p", { role: "status" }, `${message} The call ended without an answer.`), took(ms));
}

export function showCancelled(region, ms) {
  region.dataset.status = "cancelled";
  region.replaceChildren(h("h2", {}, "Result"), h("p", { role: "status" }, `Cancelled after ${Math.round(ms)} ms.`));
}
