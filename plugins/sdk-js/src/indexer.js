/** Indexers, and their export as the WIT `indexer-api`. */

import { BatchError, DocumentFailure, Transient, describe } from "./errors.js";
import { Instance, err, lifecycle, ok } from "./plugin.js";

/**
 * An indexer: sends batches of documents to a backend. Extend it and implement
 * `indexBatch(entries)`. What each entry carries is said by the fields below
 * (set them as class fields, or in `configure`/`start`); the host prepares it
 * outside the plugin. An entry has `index` (its position in the batch), `id`,
 * `runId`, `json` (the document as JSON text, when `wantsJson`) and `picked`
 * (for each field of `pick`, by name, its values as text: `[]` when absent).
 * Index them in order (a later entry with the same id is a later version and
 * must win); return the refused ones as
 * `new weir.DocumentFailure(entry.index, message, {status, transient})`, every
 * other entry counts as indexed. Throw `weir.BatchError` (or anything) to fail
 * the whole batch.
 */
export class Indexer {
  /** Whether each entry carries the document as JSON text (`entry.json`). */
  wantsJson = true;

  /**
   * With `wantsJson`: undefined for the whole document (`id`, `run_id`, every
   * field, `_children`), or the fields to render after `id` and `run_id`, in order.
   * @type {string[] | undefined}
   */
  jsonFields = undefined;

  /** With `wantsJson`: names left out of the JSON (fields that steer indexing; may be `id`, `run_id`, `_children`). */
  omit = [];

  /** Fields whose values each entry carries as text, in `entry.picked` (columns, routing keys, ...). */
  pick = [];

  /** Read the settings (see {@link Config}). */
  configure(_config) {}

  /** Prepare the backend; any error stops the run before it starts. */
  start() {}

  /** Check the backend is reachable; any error stops the run before any document. */
  validateConnection() {}

  /** Flush and release what `start` acquired. */
  close() {}
}

/**
 * The WIT `indexer-api`, backed by one instance of `Plugin`.
 * @internal `build.sh` exports it as `indexerApi`
 */
export function exportIndexer(Plugin) {
  const instance = new Instance(Plugin, Indexer, "indexBatch(entries)");
  let format;
  return {
    checkConfig: (text) => instance.checkConfig(text),
    start: (text) =>
      instance.begin(text, () => {
        instance.plugin.start();
        format = batchFormat(instance.plugin);
        return format;
      }),
    validateConnection: () => lifecycle(() => instance.plugin.validateConnection()),
    indexBatch: (entries) => indexBatch(instance.plugin, format.pick, entries),
    close: () => lifecycle(() => instance.plugin?.close()),
  };
}

/** The WIT `batch-format` the indexer's fields ask for. */
function batchFormat({ wantsJson, jsonFields, omit, pick }) {
  const names = (list, field) => {
    if (Array.isArray(list) && list.every((name) => typeof name === "string")) return [...list];
    throw new TypeError(`${field} must be an array of field names`);
  };
  const fields = jsonFields === undefined ? undefined : names(jsonFields, "jsonFields");
  return { json: Boolean(wantsJson), fields, omit: names(omit, "omit"), pick: names(pick, "pick") };
}

function indexBatch(plugin, pick, hostEntries) {
  try {
    const entries = hostEntries.map(({ id, runId, json, picked }, index) => ({
      index,
      id,
      runId: runId ?? undefined,
      json: json ?? undefined,
      picked: Object.fromEntries(pick.map((name, i) => [name, picked[i]])),
    }));
    const failures = plugin.indexBatch(entries) ?? [];
    return ok(failures.map((failure) => checked(failure, entries.length)));
  } catch (e) {
    // `weir.Transient` is retried like a lost connection (as in the Python SDK).
    const { status, connectionFailed = e instanceof Transient } = e instanceof BatchError ? e : {};
    return err({ message: describe(e), status, connectionFailed });
  }
}

/** A returned failure as the WIT record, after checking it fits. */
function checked(failure, size) {
  if (!(failure instanceof DocumentFailure)) {
    throw new TypeError("indexBatch() must return nothing or an array of weir.DocumentFailure");
  }
  const { index, message, status, transient } = failure;
  if (!(Number.isInteger(index) && index >= 0 && index < size)) {
    throw new TypeError(`DocumentFailure index ${index} is not a position in this batch of ${size}`);
  }
  return { index, message: String(message), status, transient: Boolean(transient) };
}
