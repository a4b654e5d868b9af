// A call's outcome in the "Result" region: each content item (text, image, audio, resources, links), the
// structured content, the duration; a tool's error told apart from a transport error.

import { h, pretty } from "./dom.js";

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

export function showResult(region, result, ms) {
  if (result && result.resultType === "input_required") {
    region.dataset.status = "input-required";
    region.replaceChildren(h("h2", {}, "Result"), h("p", { role: "alert", class: "error" },
      "The tool asks for input (elicitation or sampling), which the dashboard does not answer yet."), took(ms));
    return;
  }
  const failed = Boolean(result.isError);
  region.dataset.status = failed ? "tool-error" : "ok";
  const parts = (result.content || []).map(item);
  const head = failed ? h("p", { role: "alert", class: "error tool-error" }, "Tool error: the tool ran and reported a failure.")
    : h("p", { class: "ok" }, "The tool answered.");
  region.replaceChildren(h("h2", {}, "Result"), head, took(ms), h("div", { class: "content" }, parts),
    result.structuredContent !== undefined && !failed
      ? h("details", { open: true }, h("summary", {}, "Structured content"), h("pre", { class: "structured" }, pretty(result.structuredContent)))
      : null);
}

export function showTransportError(region, message, ms) {
  region.dataset.status = "transport-error";
  region.replaceChildren(h("h2", {}, "Result"), h("p", { role: "alert", class: "error transport-error" },
    `Transport error: the call did not complete. ${message}`), took(ms));
}

export function showCancelled(region, ms) {
  region.dataset.status = "cancelled";
  region.replaceChildren(h("h2", {}, "Result"), h("p", { role: "status" }, `Cancelled after ${Math.round(ms)} ms.`));
}
