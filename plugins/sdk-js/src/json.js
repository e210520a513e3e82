/**
 * Lossless JSON for plugin values.
 *
 * The host keeps numbers exactly as written. In JavaScript a JSON number
 * becomes:
 * - a `number` when it is a safe integer, or a decimal with a fraction or
 *   exponent that a double holds exactly as written and that is not integral
 *   (`0.5`, `-1.25e-3`);
 * - a `bigint` when it is an integer beyond 2^53 (`18446744073709551616`);
 * - a {@link Decimal} otherwise: more digits than a double keeps
 *   (`0.12345678901234567890123`), beyond a double's range (`1e400`), or an
 *   integral decimal (`2.0`, `1e2`), which a `number` would turn into an
 *   integer when written back.
 *
 * Written back, each comes out as it went in. `NaN` and infinities are refused.
 * This relies on `JSON.parse` source text access and `JSON.rawJSON`, which the
 * engine of JavaScript components (SpiderMonkey in StarlingMonkey) provides.
 */

const NUMBER = /^-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?$/;

/** A JSON number kept as its text, for numbers that a `number` cannot hold exactly. */
export class Decimal {
  /** @param {string} text JSON number text, e.g. `"0.12345678901234567890123"` */
  constructor(text) {
    if (typeof text !== "string" || !NUMBER.test(text)) {
      throw new TypeError(`not a JSON number: ${JSON.stringify(String(text))}`);
    }
    /** The number as written. */
    this.text = text;
    Object.freeze(this);
  }

  /** The nearest double, so that arithmetic and comparisons work (`d * 2`, `d > 1`). */
  valueOf() {
    return Number(this.text);
  }

  toString() {
    return this.text;
  }

  /** Serializes as the number itself, exactly. */
  toJSON() {
    return JSON.rawJSON(this.text);
  }
}

// Text without a digit followed by `.`, `e`, `E` or 15 more digits holds only
// integers of at most 15 digits, which native parsing reads exactly.
const NEEDS_SOURCE = /\d(?:[.eE]|\d{15})/;

/**
 * Parse JSON text, keeping every number exact (see the module comment).
 * @param {string} text
 * @returns {any}
 */
export function parseJson(text) {
  return NEEDS_SOURCE.test(text) ? JSON.parse(text, revive) : JSON.parse(text);
}

function revive(_key, value, context) {
  return typeof value === "number" ? fromNumberText(context.source, value) : value;
}

/** The native value of JSON number `text`, whose nearest double is `value`. */
function fromNumberText(text, value) {
  if (!/[.eE]/.test(text)) {
    return Number.isSafeInteger(value) ? value : BigInt(text);
  }
  const exact = Number.isFinite(value) && !Number.isInteger(value) && sameDecimal(text, String(value));
  return exact ? value : new Decimal(text);
}

/** Whether two JSON number texts denote the same decimal number (`1.50` and `15e-1` do). */
function sameDecimal(a, b) {
  const [x, y] = [decimalParts(a), decimalParts(b)];
  return x.negative === y.negative && x.digits === y.digits && x.position === y.position;
}

/** Sign, significant digits and the power of ten of the first digit. */
function decimalParts(text) {
  const negative = text.startsWith("-");
  const [mantissa, exponent = "0"] = (negative ? text.slice(1) : text).split(/[eE]/);
  const [whole, fraction = ""] = mantissa.split(".");
  const all = whole + fraction;
  const digits = all.replace(/^0+/, "").replace(/0+$/, "");
  const leading = all.length - all.replace(/^0+/, "").length;
  return { negative, digits, position: Number(exponent) + whole.length - leading };
}

/**
 * JSON text for a native value: `bigint` and {@link Decimal} exactly, other
 * values as `JSON.stringify` writes them.
 * @param {any} value
 * @returns {string}
 * @throws {TypeError} for `undefined`, `NaN`, infinities, or a value with no JSON form
 */
export function toJsonText(value) {
  const text = typeof value === "string" ? JSON.stringify(value) : JSON.stringify(value, replace);
  if (text === undefined) {
    throw new TypeError(`${typeof value === "undefined" ? "undefined" : typeof value} has no JSON form`);
  }
  return text;
}

function replace(_key, value) {
  if (typeof value === "bigint") return JSON.rawJSON(String(value));
  if (typeof value === "number" && !Number.isFinite(value)) {
    throw new TypeError(`${value} is not a JSON number (JSON has no NaN or infinities)`);
  }
  return value;
}
