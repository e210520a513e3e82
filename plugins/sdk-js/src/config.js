/**
 * A plugin's settings, read with typed getters that never throw: a missing or
 * wrong setting is recorded as a problem naming it (`fields[2].source`), the
 * getter returns the default or a harmless placeholder of the right type, and
 * `configure` goes on, so that every problem is reported at once. Settings that
 * `configure` never reads are problems too (unknown keys, usually typos).
 */

import { Decimal, parseJson, toJsonText } from "./json.js";

const KINDS = {
  string: { noun: "a string", placeholder: () => "", test: (v) => typeof v === "string" },
  integer: { noun: "an integer", placeholder: () => 0, test: Number.isSafeInteger },
  number: {
    noun: "a number",
    placeholder: () => 0,
    test: (v) => typeof v === "number" || typeof v === "bigint" || v instanceof Decimal,
  },
  boolean: { noun: "true or false", placeholder: () => false, test: (v) => typeof v === "boolean" },
  list: { noun: "a list", placeholder: () => [], test: Array.isArray },
  object: { noun: "an object", placeholder: () => ({}), test: isObject },
  // Only for list items, which are then taken as they are.
  any: { test: () => true },
};

function isObject(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Decimal);
}

/** A value as short JSON text, for messages. */
function show(value) {
  const text = toJsonText(value);
  return text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

/**
 * A JSON object of settings. The root one is handed to `configure(config)`;
 * `config.object(key)` and `config.list(key, {of: "object"})` give nested ones.
 */
export class Config {
  #values;
  #path;
  #problems;
  #all;
  #read = new Set();

  /**
   * @internal plugins get their config from `configure(config)`
   * @param {object} values the settings
   * @param {string} path where they sit in the root config ("" for the root)
   * @param {{path: string, message: string}[]} problems shared by the root and nested configs
   * @param {Config[]} all every config to check for unknown keys, shared likewise
   */
  constructor(values, path, problems, all) {
    this.#values = values;
    this.#path = path;
    this.#problems = problems;
    this.#all = all;
    all.push(this);
  }

  /**
   * The root config from JSON text (problems if it is not a JSON object).
   * @internal used by the SDK before `configure`
   */
  static parse(text) {
    const problems = [];
    let values;
    try {
      values = parseJson(text);
    } catch (e) {
      problems.push({ path: "", message: `the settings are not valid JSON: ${e.message}` });
    }
    if (values !== undefined && !isObject(values)) {
      problems.push({ path: "", message: `the settings must be a JSON object, got ${show(values)}` });
    }
    return new Config(isObject(values) ? values : {}, "", problems, []);
  }

  /** Whether `key` is set (to anything, even null). Counts as reading it. */
  has(key) {
    this.#read.add(key);
    return Object.hasOwn(this.#values, key);
  }

  /**
   * A string setting.
   * @param {string} key
   * @param {{default?: string, oneOf?: string[]}} [options] `oneOf`: the allowed values
   * @returns {string}
   */
  string(key, options = {}) {
    const value = this.#get(key, "string", options);
    if (options.oneOf && this.#holds(key, "string") && !options.oneOf.includes(value)) {
      this.problem(key, `expected one of ${options.oneOf.join(", ")}; got ${show(value)}`);
    }
    return value;
  }

  /**
   * An integer setting (a safe integer, as a number).
   * @param {string} key
   * @param {{default?: number, min?: number, max?: number}} [options]
   * @returns {number}
   */
  integer(key, options = {}) {
    return this.#ranged(key, "integer", options);
  }

  /**
   * A number setting, as a number (the nearest double to what is written).
   * @param {string} key
   * @param {{default?: number, min?: number, max?: number}} [options]
   * @returns {number}
   */
  number(key, options = {}) {
    const value = this.#ranged(key, "number", options);
    return this.#holds(key, "number") ? Number(value) : value;
  }

  /**
   * A boolean setting.
   * @param {string} key
   * @param {{default?: boolean}} [options]
   * @returns {boolean}
   */
  boolean(key, options = {}) {
    return this.#get(key, "boolean", options);
  }

  /**
   * A list setting. With `of`, every item must be of that kind; `of: "object"`
   * gives each item as a `Config` (whose problems read like `fields[2].source`).
   * @param {string} key
   * @param {{default?: any[], of?: "string"|"integer"|"number"|"boolean"|"list"|"object"|"any"}} [options]
   * @returns {any[]}
   */
  list(key, options = {}) {
    const items = this.#get(key, "list", options);
    if (!this.#holds(key, "list")) return items;
    const kind = KINDS[options.of ?? "any"];
    if (!kind) throw new TypeError(`list(): \`of\` must be one of ${Object.keys(KINDS).join(", ")}`);
    return items.map((item, i) => {
      const path = `${this.#join(key)}[${i}]`;
      const fits = kind.test(item);
      if (!fits) this.#problems.push({ path, message: `expected ${kind.noun}, got ${show(item)}` });
      if (options.of === "object") return this.#nested(fits ? item : {}, path, fits);
      return fits ? item : kind.placeholder();
    });
  }

  /**
   * A nested object of settings. When it is missing or not an object, the
   * problem is recorded once, and reads from the returned config report nothing.
   * @param {string} key
   * @param {{default?: object}} [options]
   * @returns {Config}
   */
  object(key, options = {}) {
    return this.#nested(this.#get(key, "object", options), this.#join(key), this.#holds(key, "object"));
  }

  /**
   * Record a problem of your own, e.g. a pattern that does not compile.
   * @param {string} key the setting, relative to this object ("" for this object itself)
   * @param {string} message what is wrong and, where possible, how to fix it
   */
  problem(key, message) {
    this.#problems.push({ path: key === "" ? this.#path : this.#join(key), message: String(message) });
  }

  /**
   * Every problem recorded, then every key that no getter read.
   * @internal used by the SDK after `configure`
   */
  problems() {
    return [...this.#problems, ...this.#all.flatMap((config) => config.#unknownKeys())];
  }

  #unknownKeys() {
    const known = [...this.#read].join(", ");
    return Object.keys(this.#values)
      .filter((key) => !this.#read.has(key))
      .map((key) => ({
        path: this.#join(key),
        message: known ? `unknown setting (known here: ${known})` : "unknown setting",
      }));
  }

  /** A nested config at `path`; one standing in for a wrong value (`checked` false) reports nothing. */
  #nested(values, path, checked) {
    return new Config(values, path, checked ? this.#problems : [], checked ? this.#all : []);
  }

  #join(key) {
    return this.#path ? `${this.#path}.${key}` : key;
  }

  /** Whether `key` is set to a value of `kind`. */
  #holds(key, kind) {
    return Object.hasOwn(this.#values, key) && KINDS[kind].test(this.#values[key]);
  }

  #get(key, kind, options) {
    this.#read.add(key);
    const { noun, placeholder, test } = KINDS[kind];
    const hasDefault = Object.hasOwn(options, "default");
    if (!Object.hasOwn(this.#values, key)) {
      if (!hasDefault) this.problem(key, `missing: ${noun} is required`);
    } else if (!test(this.#values[key])) {
      this.problem(key, `expected ${noun}, got ${show(this.#values[key])}`);
    } else {
      return this.#values[key];
    }
    return hasDefault ? options.default : placeholder();
  }

  #ranged(key, kind, options) {
    const value = this.#get(key, kind, options);
    if (this.#holds(key, kind)) {
      const { min, max } = options;
      if (min !== undefined && value < min) this.problem(key, `must be at least ${min}, got ${value}`);
      if (max !== undefined && value > max) this.problem(key, `must be at most ${max}, got ${value}`);
    }
    return value;
  }
}
