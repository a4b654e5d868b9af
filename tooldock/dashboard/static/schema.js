// What the form can draw of a JSON Schema: local $refs followed, nullable shapes unwrapped, and anything
// else (a real anyOf/oneOf, free-form objects, tuples, "any value") refused with the reason, so the runner
// falls back to the JSON view instead of drawing an empty or wrong form.

export class Unsupported extends Error {}

const SCALARS = new Set(["string", "number", "integer", "boolean"]);

function lookup(root, ref) {
  if (!ref.startsWith("#/")) throw new Unsupported(`a $ref the form cannot follow (${ref})`);
  let node = root;
  for (const part of ref.slice(2).split("/")) {
    node = node && node[part.replace(/~1/g, "/").replace(/~0/g, "~")];
  }
  if (!node || typeof node !== "object") throw new Unsupported(`a $ref to nothing (${ref})`);
  return node;
}

/** The schema with its local $ref followed (its own keywords, such as description, kept over the target's). */
export function resolve(schema, root, seen = new Set()) {
  let node = schema || {};
  while (node.$ref) {
    if (seen.has(node.$ref)) throw new Unsupported(`a recursive $ref (${node.$ref})`);
    seen.add(node.$ref);
    const { $ref, ...rest } = node;
    node = { ...lookup(root, $ref), ...rest };
  }
  if (Array.isArray(node.allOf) && node.allOf.length === 1) {
    const { allOf, ...rest } = node;
    node = { ...resolve(allOf[0], root, seen), ...rest };
  }
  return node;
}

/** {kind, schema, nullable}: kind is enum, string, number, integer, boolean, object or array. */
export function shape(schema, root) {
  const node = resolve(schema, root);
  const options = node.anyOf || node.oneOf;
  if (options) {
    const others = options.filter((option) => resolve(option, root).type !== "null");
    if (others.length !== 1 || others.length === options.length) {
      throw new Unsupported(`a choice between ${options.length} shapes (anyOf/oneOf)`);
    }
    const { anyOf, oneOf, ...rest } = node;
    return { ...shape({ ...resolve(others[0], root), ...rest }, root), nullable: true };
  }
  if ("const" in node) return { kind: "enum", schema: { ...node, enum: [node.const] }, nullable: false };
  if (Array.isArray(node.enum)) {
    const nullable = node.enum.includes(null);
    return { kind: "enum", schema: { ...node, enum: node.enum.filter((v) => v !== null) }, nullable };
  }
  let type = node.type;
  let nullable = false;
  if (Array.isArray(type)) {
    const kept = type.filter((t) => t !== "null");
    if (kept.length !== 1) throw new Unsupported(`a value of ${type.length} types (${type.join(", ")})`);
    nullable = kept.length !== type.length;
    type = kept[0];
  }
  if (!type && node.properties) type = "object";
  if (SCALARS.has(type)) return { kind: type, schema: node, nullable };
  if (type === "object") {
    const free = node.additionalProperties && typeof node.additionalProperties === "object";
    if (free || node.patternProperties) throw new Unsupported("an object with free-form keys");
    if (!node.properties && node.additionalProperties !== false) throw new Unsupported("an object of any keys");
    return { kind: "object", schema: node, nullable };
  }
  if (type === "array") {
    if (Array.isArray(node.items) || node.prefixItems) throw new Unsupported("a tuple (items by position)");
    if (!node.items || typeof node.items !== "object") throw new Unsupported("an array of any values");
    return { kind: "array", schema: node, nullable };
  }
  throw new Unsupported(type ? `a value of type ${type}` : "a value of any type");
}

/** Throws Unsupported when any part of the tool's input schema is beyond the form. */
export function check(schema, root = schema, depth = 0) {
  if (depth > 12) throw new Unsupported("nesting deeper than 12 levels");
  const found = shape(schema, root);
  if (found.kind === "object") {
    for (const child of Object.values(found.schema.properties || {})) check(child, root, depth + 1);
  } else if (found.kind === "array") {
    check(found.schema.items, root, depth + 1);
  }
  return found;
}
