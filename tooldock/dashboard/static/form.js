// A form drawn from a tool's input schema (schema.js says what it can draw). Each field is
// {el, get(errors)}: get returns the value to send, or undefined to leave the key out, and pushes what is
// wrong into `errors` as {path, message}. Each field's element carries its JSON pointer in data-path, where
// the runner puts the schema check's messages (validate.js). A field starts from `value` (the JSON view's, to round-trip) or the schema's default.

import { h, uid } from "./dom.js";
import { shape } from "./schema.js";

function header(id, name, schema, required, kind) {
  return [
    h("label", { for: id }, name),
    required ? h("span", { class: "req" }, "required") : null,
    h("span", { class: "type" }, kind),
  ];
}

function help(id, schema) {
  return schema.description ? h("p", { id: `${id}-help`, class: "help" }, schema.description) : null;
}

function scalar(found, opts) {
  const { name, required, value } = opts;
  const path = opts.path || "";
  const wrong = (errors, message) => errors.push({ path, message });
  const { kind, schema } = found;
  const id = uid("arg");
  const described = schema.description ? `${id}-help` : null;
  let input;
  let get;
  if (kind === "boolean") {
    input = h("input", { id, type: "checkbox", checked: value === true, "aria-describedby": described });
    get = () => input.checked;
  } else if (kind === "enum") {
    const values = schema.enum;
    const at = values.findIndex((v) => JSON.stringify(v) === JSON.stringify(value));
    input = h("select", { id, required, "aria-describedby": described },
      required && at >= 0 ? null : h("option", { value: "" }, "(not set)"),
      values.map((v, i) => h("option", { value: String(i), selected: i === at }, typeof v === "string" ? v : JSON.stringify(v))));
    get = (errors) => {
      if (input.value === "") { if (required) wrong(errors, `${name} is required`); return undefined; }
      return values[Number(input.value)];
    };
  } else if (kind === "number" || kind === "integer") {
    input = h("input", { id, type: "number", step: kind === "integer" ? "1" : "any", required,
      value: typeof value === "number" ? String(value) : "", "aria-describedby": described });
    get = (errors) => {
      if (input.validity.badInput) { wrong(errors, `${name} is not a number`); return undefined; }
      if (input.value === "") { if (required) wrong(errors, `${name} is required`); return undefined; }
      const number = Number(input.value);
      if (kind === "integer" && !Number.isInteger(number)) wrong(errors, `${name} must be a whole number`);
      return number;
    };
  } else {
    const long = (schema.maxLength || 0) > 200 || schema.format === "textarea";
    input = h(long ? "textarea" : "input", { id, required, value: typeof value === "string" ? value : "",
      "aria-describedby": described, ...(long ? {} : { type: "text" }) });
    get = (errors) => {
      if (input.value === "") { if (required) wrong(errors, `${name} is required`); return undefined; }
      return input.value;
    };
  }
  const el = h("div", { class: `field field-${kind}` }, header(id, name, schema, required, kind), input, help(id, schema));
  return { el, get };
}

function object(found, opts) {
  const { name, required, value, root, top } = opts;
  const { schema } = found;
  const needed = new Set(schema.required || []);
  const given = value && typeof value === "object" && !Array.isArray(value) ? value : undefined;
  const fields = Object.entries(schema.properties || {}).map(([key, child]) => [key, field(child, {
    name: key, root, required: needed.has(key), path: `${opts.path || ""}/${key}`,
    value: given !== undefined ? given[key] : resolveDefault(child, root),
  })]);
  const body = fields.map(([, f]) => f.el);
  const el = top ? h("div", { class: "fields" }, body.length ? body : h("p", { class: "muted" }, "This tool takes no arguments."))
    : h("fieldset", { class: "object" }, h("legend", {}, name, required ? h("span", { class: "req" }, "required") : null),
      help(uid("obj"), schema), body);
  const get = (errors) => {
    const out = {};
    for (const [key, f] of fields) {
      const v = f.get(errors);
      if (v !== undefined) out[key] = v;
    }
    return !top && !required && given === undefined && Object.keys(out).length === 0 ? undefined : out;
  };
  return { el, get };
}

function array(found, opts) {
  const { name, required, value, root } = opts;
  const { schema } = found;
  let present = Array.isArray(value);
  let items = [];
  const list = h("ol", { class: "items" });
  const add = h("button", { type: "button", class: "add" }, `Add to ${name}`);
  function draw(values) {
    items = values.map((v, i) => {
      const f = field(schema.items, { name: `${name} ${i + 1}`, root, required: true, value: v, path: `${opts.path || ""}/${i}` });
      const remove = h("button", { type: "button", class: "remove", "aria-label": `Remove ${name} ${i + 1}` }, "Remove");
      remove.addEventListener("click", () => {
        const kept = items.map((item) => item.get([])).filter((_, j) => j !== i);
        draw(kept);
        (list.querySelector("input, select, textarea") || add).focus();
      });
      return { ...f, wrap: h("li", {}, f.el, remove) };
    });
    list.replaceChildren(...items.map((item) => item.wrap));
  }
  add.addEventListener("click", () => {
    present = true;
    draw([...items.map((item) => item.get([])), resolveDefault(schema.items, root)]);
    const inputs = list.querySelectorAll(":scope > li:last-child input, :scope > li:last-child select");
    if (inputs.length) inputs[0].focus();
  });
  draw(present ? value : []);
  const el = h("fieldset", { class: "array" }, h("legend", {}, name, required ? h("span", { class: "req" }, "required") : null),
    help(uid("arr"), schema), list, add);
  const get = (errors) => {
    const values = items.map((item) => item.get(errors));
    if (!values.length && !present && !required) return undefined;
    return values.map((v) => (v === undefined ? null : v));
  };
  return { el, get };
}

function resolveDefault(schema, root) {
  try { return shape(schema, root).schema.default; } catch { return undefined; }
}

/** One field for `schema` (checked by schema.check already). */
export function field(schema, opts) {
  const found = shape(schema, opts.root);
  const value = opts.value;
  const build = found.kind === "object" ? object : found.kind === "array" ? array : scalar;
  if (!found.nullable) {
    const built = build(found, opts);
    built.el.dataset.path = opts.path || "";
    return built;
  }
  const inner = build(found, { ...opts, value: value === null ? undefined : value });
  const id = uid("null");
  const none = h("input", { id, type: "checkbox", checked: value === null });
  const toggle = () => inner.el.classList.toggle("off", none.checked);
  none.addEventListener("change", toggle);
  toggle();
  const el = h("div", { class: "nullable", "data-path": opts.path || "" }, inner.el, h("div", { class: "null" }, none, h("label", { for: id }, `${opts.name} is null`)));
  return { el, get: (errors) => (none.checked ? null : inner.get(errors)) };
}

/** The whole form of a tool's input schema, from `value` (an arguments object) or the defaults. */
export function buildForm(schema, value) {
  return object({ kind: "object", schema: shape(schema, schema).schema }, { name: "arguments", root: schema, value, top: true, required: true, path: "" });
}
