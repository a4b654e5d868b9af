// Building DOM nodes without innerHTML: every text goes in as text, never as markup.

let counter = 0;

/** A fresh id for label/input pairs. */
export function uid(prefix = "f") {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** h("a", {href: "/x", onclick: fn}, "text", child): attributes as attributes, on* as listeners,
 *  `value`/`checked`/`disabled`/`hidden` as properties. */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") el.addEventListener(key.slice(2), value);
    else if (["value", "checked", "disabled", "hidden"].includes(key)) el[key] = value;
    else el.setAttribute(key, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

/** An error announced to screen readers. */
export function alertBox(message) {
  return h("p", { role: "alert", class: "error" }, message);
}

/** A JSON value as readable text. */
export function pretty(value) {
  return JSON.stringify(value, null, 2);
}
