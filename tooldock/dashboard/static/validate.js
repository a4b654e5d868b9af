// A small JSON Schema check of a value: the keywords a tool's input or output schema uses (type, enum,
// const, the number bounds, multipleOf, string lengths and pattern, array sizes and uniqueness, required,
// properties, additionalProperties, items, anyOf/oneOf/allOf, OpenAPI's nullable, local $refs). Each problem
// is {path, message}: path is a JSON pointer ("" the whole value, "/to/zip" a nested field), which the
// runner uses to put the message next to its field. Keywords it does not know are ignored (never refused).

const MAX_DEPTH = 64;

function lookup(root, ref) {
  if (!ref.startsWith("#")) return null;
  let node = root;
  for (const part of ref.slice(1).split("/").filter(Boolean)) {
    node = node && node[decodeURIComponent(part).replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  return node && typeof node === "object" ? node : null;
}

export function typeOf(value) {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  if (typeof value === "number") return Number.isInteger(value) ? "integer" : "number";
  return typeof value;
}

const fits = (value, type) => type === typeOf(value) || (type === "number" && typeOf(value) === "integer");
const show = (value) => (typeof value === "string" ? `"${value}"` : JSON.stringify(value));
const same = (a, b) => JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));

function canonical(value) {
  if (Array.isArray(value)) return value.map(canonical);
  if (value && typeof value === "object") {
    return Object.fromEntries(Object.keys(value).sort().map((key) => [key, canonical(value[key])]));
  }
  return value;
}

const where = (path) => (path ? path.slice(1).split("/").join(".") : "the value");

function numbers(value, s, path, out) {
  const at = where(path);
  const exMin = typeof s.exclusiveMinimum === "number" ? s.exclusiveMinimum : s.exclusiveMinimum === true ? s.minimum : undefined;
  const exMax = typeof s.exclusiveMaximum === "number" ? s.exclusiveMaximum : s.exclusiveMaximum === true ? s.maximum : undefined;
  if (typeof s.minimum === "number" && s.exclusiveMinimum !== true && value < s.minimum) out.push({ path, message: `${at} must be at least ${s.minimum}` });
  if (typeof s.maximum === "number" && s.exclusiveMaximum !== true && value > s.maximum) out.push({ path, message: `${at} must be at most ${s.maximum}` });
  if (exMin !== undefined && value <= exMin) out.push({ path, message: `${at} must be more than ${exMin}` });
  if (exMax !== undefined && value >= exMax) out.push({ path, message: `${at} must be less than ${exMax}` });
  if (typeof s.multipleOf === "number" && s.multipleOf > 0) {
    const ratio = value / s.multipleOf;
    if (Math.abs(ratio - Math.round(ratio)) > 1e-9) out.push({ path, message: `${at} must be a multiple of ${s.multipleOf}` });
  }
}

function strings(value, s, path, out) {
  const at = where(path);
  const length = [...value].length;
  if (typeof s.minLength === "number" && length < s.minLength) out.push({ path, message: `${at} must be at least ${s.minLength} characters long` });
  if (typeof s.maxLength === "number" && length > s.maxLength) out.push({ path, message: `${at} must be at most ${s.maxLength} characters long` });
  if (typeof s.pattern === "string") {
    let pattern = null;
    try { pattern = new RegExp(s.pattern, "u"); } catch { /* a pattern this browser cannot read: not checked */ }
    if (pattern && !pattern.test(value)) out.push({ path, message: `${at} must match the pattern ${s.pattern}` });
  }
}

function arrays(value, s, path, out, root, depth) {
  const at = where(path);
  if (typeof s.minItems === "number" && value.length < s.minItems) out.push({ path, message: `${at} must have at least ${s.minItems} items` });
  if (typeof s.maxItems === "number" && value.length > s.maxItems) out.push({ path, message: `${at} must have at most ${s.maxItems} items` });
  if (s.uniqueItems === true) {
    const seen = new Set();
    value.forEach((item, i) => {
      const key = JSON.stringify(canonical(item));
      if (seen.has(key)) out.push({ path: `${path}/${i}`, message: `${where(`${path}/${i}`)} repeats an earlier item (the items must be unique)` });
      seen.add(key);
    });
  }
  const prefix = Array.isArray(s.prefixItems) ? s.prefixItems : Array.isArray(s.items) ? s.items : [];
  value.forEach((item, i) => {
    const itemSchema = i < prefix.length ? prefix[i] : !Array.isArray(s.items) && s.items && typeof s.items === "object" ? s.items : null;
    if (itemSchema) walk(item, itemSchema, `${path}/${i}`, out, root, depth + 1);
  });
}

function objects(value, s, path, out, root, depth) {
  for (const key of Array.isArray(s.required) ? s.required : []) {
    if (!(key in value)) out.push({ path: `${path}/${key}`, message: `${where(`${path}/${key}`)} is required` });
  }
  const props = s.properties && typeof s.properties === "object" ? s.properties : {};
  for (const [key, child] of Object.entries(value)) {
    if (key in props) walk(child, props[key], `${path}/${key}`, out, root, depth + 1);
    else if (s.additionalProperties === false) out.push({ path: `${path}/${key}`, message: `${where(`${path}/${key}`)} is not a known field (no other fields are allowed)` });
    else if (s.additionalProperties && typeof s.additionalProperties === "object") walk(child, s.additionalProperties, `${path}/${key}`, out, root, depth + 1);
  }
}

function choice(value, options, path, root, depth, kind) {
  const passing = options.filter((option) => {
    const found = [];
    walk(value, option, path, found, root, depth + 1);
    return found.length === 0;
  }).length;
  if (kind === "anyOf" ? passing === 0 : passing !== 1) {
    return [{ path, message: passing === 0 ? `${where(path)} matches none of the ${options.length} allowed shapes`
      : `${where(path)} matches ${passing} of the allowed shapes (oneOf wants exactly one)` }];
  }
  return [];
}

function walk(value, schema, path, out, root, depth) {
  if (schema === true || schema === undefined || schema === null) return;
  if (schema === false) { out.push({ path, message: `${where(path)} is not allowed` }); return; }
  if (depth > MAX_DEPTH) return;
  let s = schema;
  for (let hops = 0; s && s.$ref && hops < 32; hops += 1) {
    const { $ref, ...rest } = s;
    const target = lookup(root, $ref);
    if (!target) return; // a $ref that leads elsewhere: not checked here (the server checks it)
    s = { ...target, ...rest };
  }
  if (value === null && s.nullable === true) return;
  const at = where(path);
  if (s.type !== undefined) {
    const types = Array.isArray(s.type) ? s.type : [s.type];
    if (!types.some((type) => fits(value, type))) {
      out.push({ path, message: `${at} must be ${types.map((t) => (t === "integer" ? "a whole number" : t === "array" ? "a list" : t === "object" ? "an object" : `a ${t}`)).join(" or ")}` });
      return;
    }
  }
  if (Array.isArray(s.enum) && !s.enum.some((option) => same(option, value))) {
    out.push({ path, message: `${at} must be one of ${s.enum.map(show).join(", ")}` });
  }
  if ("const" in s && !same(s.const, value)) out.push({ path, message: `${at} must be ${show(s.const)}` });
  if (typeof value === "number") numbers(value, s, path, out);
  else if (typeof value === "string") strings(value, s, path, out);
  else if (Array.isArray(value)) arrays(value, s, path, out, root, depth);
  else if (value && typeof value === "object") objects(value, s, path, out, root, depth);
  if (Array.isArray(s.allOf)) s.allOf.forEach((part) => walk(value, part, path, out, root, depth + 1));
  if (Array.isArray(s.anyOf)) out.push(...choice(value, s.anyOf, path, root, depth, "anyOf"));
  if (Array.isArray(s.oneOf)) out.push(...choice(value, s.oneOf, path, root, depth, "oneOf"));
}

/** What is wrong with `value` under `schema`: a list of {path, message}, empty when it fits. */
export function validate(value, schema, root = schema) {
  const out = [];
  walk(value, schema, "", out, root, 0);
  return out;
}
