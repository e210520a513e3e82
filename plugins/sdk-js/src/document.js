/**
 * Documents: a JavaScript view of a document that lives in the host.
 *
 * Values go in and out as native JavaScript values (see `json.js` for
 * numbers), through the host's `get-json`/`set-json`. A field holds one value,
 * or several as an array (a multi-valued field).
 *
 * This module holds the document itself (fields, paths, children, the whole
 * document) and its loans; `values.js` reads values from JSON text and names
 * the host's refusals, and `batch_fields.js` reads and writes the fields of a
 * whole batch at once.
 */

import { Document as HostDocument } from "weir:plugin/document@0.2.5";
import { MAX_CHANGES, flushBatch, prefetchEach } from "./batch_fields.js";
import { parseJson, toJsonText } from "./json.js";
import { attempt, every, fieldError, fieldList, first, isFieldError, parsePath } from "./values.js";

const MODES = ["overwrite", "append", "skip"];

/** Documents the plugin made during the current call and has not handed over. */
const made = new Set();

/**
 * The batch-stage world's several-fields-in-one-call functions (`weir:plugin/fields`,
 * new in 0.2.1), once the batch export has given them (other worlds have none).
 */
let fields;

/** Accessors of a document's private state, for `batch_fields.js` (set by the class). */
let inside;

/** Names no field may have: a change to one goes to the host at once, which refuses it. */
const RESERVED = new Set(["id", "run_id", "_children"]);

const REMOVE_CHANGE = Object.freeze({ tag: "remove" });

/** A kept `[name, JSON text or null]` change as the WIT `field-change` of `update`. */
function asChange([name, text]) {
  return { name, change: text === null ? REMOVE_CHANGE : { tag: "set-json", val: text } };
}

const LENT_TAIL =
  " was lent for the duration of process() only; " +
  "keep what you need (doc.toObject()) or make a new one with weir.Document.create()";
/** Why a lent document whose id the call did not read can no longer be used (one string for all). */
const LENT = `a document${LENT_TAIL}`;

/** As a value in {@link Document#update}: remove the field. */
export const REMOVE = Object.freeze({ toString: () => "weir.REMOVE" });

/** While a batch runs through `process`, the fields read from the host (not kept). */
let reads;

/**
 * A document: an id, a run id, named fields, nested children.
 *
 * A document handed to a stage (`process(doc)`) is lent for the duration of
 * that call only. Documents the plugin makes
 * ({@link Document.create}, {@link Document#children}) are its own for the
 * duration of the call that makes them, in which it hands them over: returns
 * them from `process`, publishes them, or nests them with
 * {@link Document#addChild}. Those it does not hand over are released when the
 * call returns (the engine never collects them).
 */
/** Made by {@link Document.lendBatch}: a document of a batch lent by position. */
const BY_POSITION = Symbol("by position");

export class Document {
  #host;
  #id;
  /** Whether the document is lent to the plugin (by `process(doc)`) rather than its own. */
  #lent = false;
  /** Why the document can no longer be used, once it cannot. */
  #gone;
  /** The JSON text of the fields read (undefined for an absent one), by name, until changed. */
  #json = new Map();
  /**
   * A document of a batch (batch-stage world): its changes not yet sent to the host,
   * `[name, JSON text]` pairs (null text: removed), sent for the whole batch in one
   * call when it ends ({@link Document.flushBatch}). Undefined: changes go to the host
   * at once.
   */
  #pending;
  /** A document of a batch lent by position (lent-stage world): the batch, and where in it. */
  #batch;
  #at = 0;

  /** @internal use {@link Document.create} */
  constructor(host, batch, at) {
    if (host === BY_POSITION) {
      this.#batch = batch;
      this.#at = at;
      return;
    }
    if (!(host instanceof HostDocument)) {
      throw new TypeError("make documents with weir.Document.create(id, fields)");
    }
    this.#host = host;
  }

  /**
   * A new document.
   * @param {string} id
   * @param {object|string} [fields] its fields: an object, or JSON text of one
   *   (the fast way; numbers are kept exactly). `id`, `run_id` and `_children` keys are left out.
   * @returns {Document}
   */
  static create(id, fields) {
    if (fields === undefined) return Document.#made(new HostDocument(id));
    const text = typeof fields === "string" ? fields : toJsonText(fields);
    return Document.#made(attempt(`create \`${id}\``, () => HostDocument.fromJsonWithId(id, text)));
  }

  /** The document's id. */
  get id() {
    this.#id ??= this.#batch && !this.#host ? (this.#check(), this.#batch.id(this.#at)) : this.#use().id();
    return this.#id;
  }

  /** The id of the run that published it, or undefined. */
  get runId() {
    return this.#use().runId() ?? undefined;
  }

  // Reads go through `#text`: a field's JSON text is asked of the host once and kept
  // until this document changes the field, so `has`, `isMultiValued` and `get` of
  // one field cost one host call together.

  /** The JSON text of field `name` (undefined when absent), kept from an earlier read. */
  #text(name) {
    if (this.#gone) throw new Error(this.#gone);
    const kept = this.#json;
    if (kept.has(name)) return kept.get(name);
    const text = this.#use().getJson(name);
    kept.set(name, text);
    reads?.push(name);
    return text;
  }

  /**
   * Keep the change of field `name` to JSON text `text` (undefined: removed) for the
   * end of the batch; reads of the field see it now.
   */
  #keep(name, text) {
    this.#json.set(name, text);
    const pending = this.#pending;
    pending.push([name, text ?? null]);
    if (pending.length >= MAX_CHANGES) this.#flush();
  }

  /**
   * Send the changes kept for this document to the host, in one call: before any
   * host call that would not see them. A refused change throws `weir.FieldError`
   * (with those before it made), as the change itself would have.
   */
  #flush() {
    const changes = this.#pending;
    if (!changes?.length) return;
    this.#pending = [];
    try {
      fields.update(this.#use(), changes.map(asChange));
    } catch (e) {
      this.#json.clear(); // what the refused changes left out is not known here
      if (isFieldError(e?.payload)) throw fieldError(`document \`${this.id}\``, e.payload);
      throw e;
    }
  }

  /** The host document, with the changes kept for it made: for calls that would not see them. */
  #synced() {
    const host = this.#use();
    if (this.#pending?.length) this.#flush();
    return host;
  }

  /** Whether `name` is present (with any value, even null). */
  has(name) {
    return this.#text(name) !== undefined;
  }

  /** The names of all fields, in order (`id`, `run_id`, `_children` excluded). */
  fieldNames() {
    return this.#synced().fieldNames();
  }

  /** Whether `name` holds several values (an array), even one or none. */
  isMultiValued(name) {
    return this.#text(name)?.startsWith("[") ?? false;
  }

  /**
   * The first value of `name`: undefined when absent or an empty list, null for JSON null.
   * @returns {any}
   */
  get(name) {
    return first(this.#text(name));
  }

  /**
   * Every value of `name`: [] when absent, the list of a multi-valued field,
   * else the one value in a list.
   * @returns {any[]}
   */
  getAll(name) {
    return every(this.#text(name));
  }

  /**
   * The first value of `name` as text, as the host renders it: strings as they
   * are, numbers exactly as written, booleans, objects and arrays as JSON.
   * Undefined when absent, empty or null.
   * @returns {string | undefined}
   */
  getString(name) {
    // Text, and what renders as the host renders it, from the kept JSON text; a
    // number or nested value is rendered by the host (numbers keep their digits).
    const text = this.#text(name);
    if (text === undefined) return undefined;
    const value = text[0] === '"' || text.startsWith('["') || text === "true" || text === "false" || text === "null" || text === "[]"
      ? JSON.parse(text)
      : undefined;
    const first = Array.isArray(value) ? value[0] : value;
    if (first === null || (Array.isArray(value) && value.length === 0)) return undefined;
    if (typeof first === "string") return first;
    if (typeof first === "boolean") return String(first);
    return this.#synced().getString(name) ?? undefined;
  }

  /** {@link Document#get} of each of `names`, in order, in one host call. */
  getMany(names) {
    return this.#texts(names).map(first);
  }

  /** {@link Document#getAll} of each of `names`, in order, in one host call. */
  getAllMany(names) {
    return this.#texts(names).map(every);
  }

  /**
   * Every value of each of `names` as text (rendered as {@link Document#getString}
   * renders one; nulls skipped), in order, in one host call.
   * @returns {string[][]}
   */
  getStringsMany(names) {
    const host = this.#synced();
    const list = fieldList(names);
    return fields ? fields.getStringsMany(host, list) : list.map((name) => host.getStrings(name));
  }

  /** The JSON texts of `names`: those not kept, read in one host call. */
  #texts(names) {
    const list = fieldList(names);
    const missing = list.filter((name) => !this.#json.has(name));
    if (missing.length > 1 && fields) this.prefetch(missing);
    return list.map((name) => this.#text(name));
  }

  /**
   * Read the fields `names` in one host call, for the reads to come (nothing in
   * worlds without `weir:plugin/fields`).
   * @internal used by the SDK's batch loop
   */
  prefetch(names) {
    if (!fields) return;
    const texts = fields.getJsonMany(this.#use(), names);
    names.forEach((name, at) => this.#json.set(name, texts[at]));
  }

  /** Set `name` to `value` (an array makes the field multi-valued). */
  set(name, value) {
    this.#check();
    if (this.#pending && !RESERVED.has(name)) {
      const text = attempt(`set \`${name}\``, () => toJsonText(value));
      this.#keep(name, text);
      return;
    }
    this.#json.delete(name);
    attempt(`set \`${name}\``, () => this.#use().setJson(name, toJsonText(value)));
  }

  /** Make `name` multi-valued with exactly `values`. */
  setAll(name, values) {
    if (!Array.isArray(values)) throw new TypeError(`setAll \`${name}\`: values must be an array`);
    this.set(name, values);
  }

  /** Append `value` to `name`, making it multi-valued (creating it if absent). */
  add(name, value) {
    this.#check();
    const current = this.#text(name);
    const list = attempt(`add to \`${name}\``, () => {
      const item = toJsonText(value);
      return current === undefined || current === "[]" ? `[${item}]`
        : current.startsWith("[") ? `${current.slice(0, -1)},${item}]`
        : `[${current},${item}]`;
    });
    if (this.#pending && !RESERVED.has(name)) {
      this.#keep(name, list);
      return;
    }
    this.#json.delete(name);
    attempt(`add to \`${name}\``, () => this.#use().setJson(name, list));
  }

  /**
   * Set several fields in one host call: `{name: value}` (or a `Map`) sets `name`
   * as {@link Document#set} does, `{name: weir.REMOVE}` removes it. Changes apply in
   * order (an object lists integer-like keys first: use a `Map` to choose); the
   * first one the host refuses throws `weir.FieldError`, with those before it applied.
   * @param {object | Map<string, any>} changes
   */
  update(changes) {
    this.#check();
    if (typeof changes !== "object" || changes === null) {
      throw new TypeError("update() takes an object (or a Map) of field changes");
    }
    const entries = changes instanceof Map ? [...changes] : Object.entries(changes);
    if (this.#pending && entries.every(([name]) => !RESERVED.has(name))) {
      const texts = entries.map(([name, value]) => (value === REMOVE ? undefined : attempt(`set \`${name}\``, () => toJsonText(value))));
      entries.forEach(([name], at) => this.#keep(name, texts[at]));
      return;
    }
    if (this.#pending?.length) this.#flush();
    for (const [name] of entries) this.#json.delete(name);
    if (!fields) {
      for (const [name, value] of entries) value === REMOVE ? this.remove(name) : this.set(name, value);
      return;
    }
    const made = entries.map(([name, value]) => ({
      name,
      change: value === REMOVE ? { tag: "remove" } : { tag: "set-json", val: attempt(`set \`${name}\``, () => toJsonText(value)) },
    }));
    for (let at = 0; at < made.length; at += MAX_CHANGES) {
      attempt("update", () => fields.update(this.#use(), made.slice(at, at + MAX_CHANGES)));
    }
  }

  /** Remove `name`; true when it was present. */
  remove(name) {
    this.#check();
    const kept = this.#json;
    if (this.#pending && kept.has(name) && !RESERVED.has(name)) {
      const present = kept.get(name) !== undefined; // known: no call
      this.#keep(name, undefined);
      return present;
    }
    if (this.#pending?.length) this.#flush();
    kept.delete(name);
    return attempt(`remove \`${name}\``, () => this.#use().remove(name));
  }

  /**
   * Move `source`'s values to `target`; false when `source` was absent.
   * @param {"overwrite"|"append"|"skip"} [mode] what to do when `target` exists:
   *   replace it, append to it, or leave it and drop `source`
   */
  rename(source, target, mode = "overwrite") {
    if (!MODES.includes(mode)) throw new TypeError(`rename: mode must be one of ${MODES.join(", ")}`);
    const host = this.#synced();
    this.#json.clear();
    return attempt(`rename \`${source}\` to \`${target}\``, () => host.rename(source, target, mode));
  }

  /**
   * The value at a nested `path` such as `a.b[2].c` (the whole field for a
   * plain name), or undefined when a step is missing.
   */
  getPath(path) {
    const [name, ...rest] = parsePath(path);
    const text = this.#text(name);
    let node = text === undefined ? undefined : parseJson(text);
    for (const step of rest) {
      const fits = typeof step === "number" ? Array.isArray(node) : node?.constructor === Object;
      node = fits && Object.hasOwn(node, step) ? node[step] : undefined;
      if (node === undefined) return undefined;
    }
    return node;
  }

  /** Set the value at `path`, creating objects (and growing arrays with nulls) along the way. */
  setPath(path, value) {
    const host = this.#synced();
    this.#json.clear();
    // The `json` case carries no number through the `value` variant.
    attempt(`set path \`${path}\``, () => host.setPath(path, { tag: "json", val: toJsonText(value) }));
  }

  /** Remove the value at `path`; true when it was present. */
  removePath(path) {
    const host = this.#synced();
    this.#json.clear();
    return attempt(`remove path \`${path}\``, () => host.removePath(path));
  }

  /** Drop the document: later stages are skipped and it is not indexed. */
  drop() {
    this.#use().setDropped(true);
  }

  /** Skip the remaining stages; the document is still indexed. */
  skipStages() {
    this.#use().setSkipStages(true);
  }

  /** Nest `child` inside this document. The child is handed over: it cannot be used afterwards. */
  addChild(child) {
    const host = this.#synced();
    const childHost = Document.handOver(child, "nested with addChild()");
    attempt(`add child to \`${this.id}\``, () => host.addChild(childHost));
  }

  /** Copies of the nested children, in order; they are the plugin's own (see {@link Document}). */
  children() {
    return this.#use().children().map((host) => Document.#made(host));
  }

  /** The whole document as JSON text: `id`, `run_id`, fields, `_children`. */
  toJson() {
    return this.#synced().toJson();
  }

  /** The whole document as an object, like {@link Document#toJson} (numbers exact). */
  toObject() {
    return parseJson(this.toJson());
  }

  /**
   * Replace every field and child with those of `whole`, an object (or JSON
   * text) in the {@link Document#toObject} shape; its `id` and `run_id`, if
   * present, must match.
   */
  load(whole) {
    const host = this.#synced();
    this.#json.clear();
    attempt(`load \`${this.id}\``, () => host.loadJson(typeof whole === "string" ? whole : toJsonText(whole)));
  }

  static #made(host) {
    const doc = new Document(host);
    made.add(doc);
    return doc;
  }

  /** The host document (asked of the host once, for a document of a batch lent by position). */
  #use() {
    if (this.#gone) throw new Error(this.#gone);
    return (this.#host ??= this.#batch.handle(this.#at));
  }

  /** Throw when the document can no longer be used. */
  #check() {
    if (this.#gone) throw new Error(this.#gone);
  }

  /**
   * Documents lent to `process()` (one) or `processBatch()` (all of a batch): the
   * returned function ends the loan of them all.
   * @internal used by the SDK around those calls
   */
  static lend(hosts) {
    const docs = hosts.map((host) => {
      const doc = new Document(host);
      doc.#lent = true;
      if (fields) doc.#pending = [];
      return doc;
    });
    return [docs, Document.#ending(docs)];
  }

  /**
   * The documents of `batch` (a `lending.batch`), lent by position as {@link Document.lend}
   * lends its own: no host document is made for any until a call needs it. The
   * returned function ends the loan of them all.
   * @internal used by the lent export around `processBatch()`
   */
  static lendBatch(batch) {
    const docs = [];
    for (let at = 0; at < batch.size; at++) {
      const doc = new Document(BY_POSITION, batch, at);
      doc.#lent = true;
      doc.#pending = [];
      docs.push(doc);
    }
    return [docs, Document.#ending(docs)];
  }

  /** What ends the loan of `docs`. */
  static #ending(docs) {
    return () => {
      for (const doc of docs) {
        // Named by its id only when the call read it: asking the host costs a call
        // (as much as a field read) for every document, kept or not.
        doc.#pending = undefined;
        doc.#gone = doc.#id === undefined ? LENT : `document \`${doc.#id}\`${LENT_TAIL}`;
        // Drop the handle here rather than in the bindings, whose drop leaves the
        // object registered for a second drop, should the engine ever collect it.
        // (A document lent by position has a host document only if a call needed one.)
        doc.#host?.[Symbol.dispose]();
      }
    };
  }

  /**
   * Read the fields `names` of every one of `docs` in one host call (one per
   * `MAX_EACH` answers), answered as one JSON text, for the reads to come.
   * @internal used by the SDK's batch loop
   */
  static prefetchEach(docs, names) {
    if (!fields) return;
    prefetchEach(docs, names, fields, inside);
  }

  /**
   * Send the changes kept for each of `docs` (a batch) to the host, in one call (one
   * per `MAX_DOCS` documents or `MAX_EACH` changes), as one JSON text. What the host refused, by the
   * position of its document: a `weir.FieldError` that fails it, as the change itself
   * would have; undefined when nothing was refused.
   * @internal used by the batch export when the plugin's `processBatch` returns
   */
  static flushBatch(docs) {
    if (!fields) return undefined;
    return flushBatch(docs, fields, inside);
  }

  // What `batch_fields.js` reads and writes of a document (its private state).
  static {
    inside = {
      batch: (doc) => doc.#batch,
      at: (doc) => doc.#at,
      kept: (doc) => doc.#json,
      host: (doc) => doc.#use(),
      pending: (doc) => doc.#pending,
      restart: (doc) => {
        doc.#pending = [];
      },
    };
  }

  /**
   * The batch-stage world's `weir:plugin/fields` functions, for reads and writes of
   * several fields in one call.
   * @internal given by the batch export
   */
  static useFields(functions) {
    fields = functions;
  }

  /**
   * Collect the names of the fields read from the host (not kept) into `list`, until
   * called again with undefined.
   * @internal used by the SDK's batch loop, which reads them ahead for the next documents
   */
  static recordReads(list) {
    reads = fields ? list : undefined;
  }

  /**
   * The host document of `doc`, which the plugin hands over (`how`); it cannot be used afterwards.
   * @internal used by the SDK for children, publishing and nesting
   */
  static handOver(doc, how) {
    if (!(doc instanceof Document)) {
      throw new TypeError(`expected a weir.Document, got ${doc?.constructor?.name ?? String(doc)}`);
    }
    const host = doc.#use();
    if (doc.#lent) {
      throw new TypeError(
        `document \`${doc.id}\` is lent to process() and cannot be ${how}: ` +
          "make a new one with weir.Document.create()",
      );
    }
    doc.#gone = `document \`${doc.id}\` was ${how} and belongs to the host now`;
    made.delete(doc);
    return host;
  }

  /**
   * Release the documents made during the call that is returning and not handed over.
   * @internal used by the SDK after every call into the plugin
   */
  static releaseMade() {
    for (const doc of made) {
      doc.#gone =
        `document \`${doc.id}\` was released when the call that made it returned; ` +
        "return, publish or nest documents (addChild) in the call that makes them";
      doc.#host[Symbol.dispose]();
    }
    made.clear();
  }
}
