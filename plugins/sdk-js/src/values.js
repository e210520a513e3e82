/**
 * A field's values and names as they cross to the host and back: the first
 * and every value of a field from its JSON text, lists of field names, the
 * steps of a nested path (`a.b[2].c`), and the host's refusals of a document
 * method as `weir.FieldError`.
 */

import { parseJson } from "./json.js";

/** A document method the host refused; the message names the field. */
export class FieldError extends Error {
  name = "FieldError";

  /**
   * @param {string} message
   * @param {"reserved-field"|"wrong-type"|"invalid-path"|"invalid-json"|"too-large"} kind
   */
  constructor(message, kind) {
    super(message);
    this.kind = kind;
  }
}

const FIELD_ERRORS = {
  "reserved-field": (m) => `\`${m}\` is a reserved field name`,
  "wrong-type": (m) => `wrong type: ${m}`,
  "invalid-path": (m) => `invalid path: ${m}`,
  "invalid-json": (m) => `invalid JSON: ${m}`,
  "too-large": (m) => `document too large: ${m}`,
};

/**
 * Run a host call for `what` (e.g. "set `title`"), turning a host field error,
 * or a value with no JSON form, into an error that names the field.
 */
export function attempt(what, call) {
  try {
    return call();
  } catch (e) {
    const payload = e?.payload;
    if (payload && FIELD_ERRORS[payload.tag]) throw fieldError(what, payload);
    if (e instanceof TypeError) throw new TypeError(`${what}: ${e.message}`);
    throw e;
  }
}

/** Whether `payload` (of a thrown host error) is a WIT `field-error`. */
export function isFieldError(payload) {
  return Boolean(payload && FIELD_ERRORS[payload.tag]);
}

/** The error for the host's refusal `payload` (a WIT `field-error`) of `what`. */
export function fieldError(what, payload) {
  return new FieldError(`${what}: ${FIELD_ERRORS[payload.tag](payload.val)}`, payload.tag);
}

/** The first value of a field whose JSON text is `text`. */
export function first(text) {
  if (text === undefined) return undefined;
  const value = parseJson(text);
  return Array.isArray(value) ? value[0] : value;
}

/** Every value of a field whose JSON text is `text`. */
export function every(text) {
  if (text === undefined) return [];
  const value = parseJson(text);
  return Array.isArray(value) ? value : [value];
}

/** `names` as an array of field names (a lone string is refused: it would read letters). */
export function fieldList(names) {
  if (typeof names === "string" || typeof names?.[Symbol.iterator] !== "function") {
    throw new TypeError("expected an array of field names");
  }
  const list = [...names];
  for (const name of list) {
    if (typeof name !== "string") throw new TypeError(`a field name must be a string, not ${typeof name}`);
  }
  return list;
}

/** Steps of a path `a.b[2].c`: keys (any characters but `.`, `[`, `]`) and indexes. */
export function parsePath(path) {
  const steps = [];
  const step = /([^.[\]]+)|\[(\d+)\]|(\.)/y;
  let expectKey = true;
  while (step.lastIndex < path.length || expectKey) {
    const at = step.lastIndex;
    const [, key, index, dot] = step.exec(path) ?? [];
    if (key !== undefined && expectKey) {
      steps.push(key);
    } else if (index !== undefined && steps.length > 0) {
      steps.push(Number(index));
    } else if (dot === undefined || expectKey) {
      const why = steps.length === 0 ? "it must start with a field name" : `malformed at character ${at}`;
      throw new FieldError(`path \`${path}\`: invalid path: ${why}`, "invalid-path");
    }
    expectKey = dot !== undefined;
  }
  return steps;
}
