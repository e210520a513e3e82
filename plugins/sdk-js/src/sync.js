/**
 * Incremental sync (contract 0.2.2): state a connector keeps between runs,
 * and deletes. `weir.sync` in a connector (the `syncing-connector` world).
 *
 * The host keeps a map of text keys to text values per connector (per
 * pipeline and connector name). Reads see this run's changes at once; a
 * change is kept for the next run only once every document published before
 * it is done (indexed, dropped, or failed and dead-lettered), so a run that
 * crashes or is stopped keeps exactly the state of the work it finished. The
 * usual loop: for each item of the source that is new or changed (its
 * version differs from `get`), publish it, then `set` its version; then, for
 * each key the source no longer has, `delete` the document, then `remove`
 * the key:
 *
 * ```js
 * const sync = weir.sync;
 * const seen = new Set();
 * for (const item of this.source.list()) {
 *   seen.add(item.key);
 *   if (sync.fullSync() || sync.get(item.key) !== item.etag) {
 *     publisher.publish(weir.Document.create(item.key, item.fields));
 *     sync.set(item.key, item.etag);
 *   }
 * }
 * for (const [key] of [...sync.entries()].filter(([key]) => !seen.has(key))) {
 *   sync.delete(publisher, key);
 *   sync.remove(key);
 * }
 * ```
 *
 * A refused change or delete (a key over 1 KiB, a value over 64 KiB, the
 * state over `limits.max_state_mib`; the run stopping) throws `weir.Fatal`
 * with the host's reason: left uncaught, it stops the run with that message.
 *
 * No module of the SDK imports `weir:plugin/sync` (only the connector's world
 * has it, and a bundle may keep the whole SDK): `build.sh connector` imports
 * it in the entry module and hands it to {@link exportConnector}.
 */

import { Publisher, syncHost } from "./connector.js";
import { Fatal } from "./errors.js";

/** Entries asked of the host per `list` call by {@link entries}. */
const PAGE = 1024;

/**
 * The value under `key`: the last one this run set, else the one earlier
 * runs kept; `undefined` when there is none.
 * @param {string} key
 * @returns {string | undefined}
 */
export function get(key) {
  return host().get(text(key, "key")) ?? undefined;
}

/**
 * Keep `value` under `key`, for the next run once every document published
 * so far is done.
 * @param {string} key
 * @param {string} value
 * @throws {Fatal} with the host's reason when it refuses (the key or value
 *   is too large, the state is over its limit)
 */
export function set(key, value) {
  refused(() => host().set(text(key, "key"), text(value, "value")));
}

/**
 * Forget `key` (nothing happens when it is absent), kept as {@link set} keeps a value.
 * @param {string} key
 * @throws {Fatal} with the host's reason when it refuses
 */
export function remove(key) {
  refused(() => host().remove(text(key, "key")));
}

/**
 * How many keys {@link get} sees, and the UTF-8 bytes of their keys and values together.
 * @returns {{keys: number, bytes: number}}
 */
export function size() {
  const [keys, bytes] = host().size();
  return { keys: Number(keys), bytes: Number(bytes) };
}

/**
 * Whether this run sends everything again (`weir run --full`): publish every
 * item as if it were new, and still `delete` the items the state holds that are gone.
 * @returns {boolean}
 */
export function fullSync() {
  return host().fullSync();
}

/**
 * Publish a deletion marker for document `id` (the item is gone from the
 * source): it skips the stages, reaches the indexer in order with the
 * documents of the same id, and the indexer deletes the document.
 * `weir.sync.delete` (a function named `delete` cannot be declared).
 * @param {Publisher} publisher the one lent to `execute`
 * @param {string} id
 * @throws {Fatal} with the host's reason when it refuses, as it refuses a publish (the run is stopping)
 */
function deleteDocument(publisher, id) {
  if (!(publisher instanceof Publisher)) {
    throw new TypeError("delete() takes the weir.Publisher lent to execute()");
  }
  const lent = publisher.lent();
  refused(() => host().delete(lent, text(id, "id")));
}
export { deleteDocument as delete };

/**
 * Every `[key, value]` in key order (byte order of the UTF-8 text), as
 * {@link get} sees them, asked of the host a page at a time. Changes made
 * while iterating are seen for the keys not reached yet.
 * @returns {Generator<[string, string]>}
 */
export function* entries() {
  let after;
  for (;;) {
    const page = host().list(after, PAGE);
    yield* page;
    if (page.length < PAGE) return;
    after = page[page.length - 1][0];
  }
}

/** The WIT `sync` interface, which `build.sh connector` hands the connector's export. */
function host() {
  if (syncHost === undefined) {
    throw new Error("weir.sync is for connectors only (built by `build.sh connector`, the syncing-connector world)");
  }
  return syncHost;
}

/** Run a host call whose `result` error is the host's reason: thrown as {@link Fatal}. */
function refused(call) {
  try {
    call();
  } catch (e) {
    throw typeof e?.payload === "string" ? new Fatal(e.payload) : e;
  }
}

function text(value, what) {
  if (typeof value !== "string") throw new TypeError(`the state ${what} must be a string, not ${typeof value}`);
  return value;
}
