/**
 * The fields of a whole batch in few host calls (the batch-stage and lent-stage
 * worlds): the fields a stage will read, read for every document of the batch
 * at once ({@link prefetchEach}), and the changes kept for each document, sent
 * for the whole batch when it ends ({@link flushBatch}), in chunks the host's
 * limits allow. A batch lent by position is read and written through its own
 * handle, by position.
 *
 * `document.js` calls these with the `weir:plugin/fields` functions and `inside`,
 * its accessors of a document's private state.
 *
 * @typedef {object} Inside
 * @property {(doc: any) => any} batch the batch a document is lent from by position, or undefined
 * @property {(doc: any) => number} at its position in that batch
 * @property {(doc: any) => Map<string, string | undefined>} kept the JSON text of the fields read, by name
 * @property {(doc: any) => any} host its host document
 * @property {(doc: any) => Array | undefined} pending its changes not yet sent to the host
 * @property {(doc: any) => void} restart start its pending changes anew (empty)
 */

import { fieldError } from "./values.js";

/** The most changes the host takes in one `update` call (and for one document of `update-each`). */
export const MAX_CHANGES = 4096;

/** The most answers one `get-json-each` gives (documents times names), and the most changes one `update-each` makes in all. */
const MAX_EACH = 65536;

/** The most documents one `get-json-each` or `update-each` takes. */
const MAX_DOCS = 4096;

/** The batch `docs` are lent from by position (all of one), or undefined. */
function batchOf(docs, inside) {
  const batch = docs[0] == null ? undefined : inside.batch(docs[0]);
  if (batch === undefined) return undefined;
  return docs.every((doc) => inside.batch(doc) === batch) ? batch : undefined;
}

/**
 * Read the fields `names` of every one of `docs` in one host call (one per
 * `MAX_EACH` answers), answered as one JSON text, for the reads to come.
 * @param {Inside} inside
 */
export function prefetchEach(docs, names, fields, inside) {
  const batch = batchOf(docs, inside);
  if (batch !== undefined && batch.size * names.length <= MAX_EACH) {
    // Lent by position: the whole batch's in one call, kept for `docs` only (the
    // others may hold changes of their own).
    const answers = JSON.parse(batch.lent.getJson(names));
    for (const doc of docs) {
      const texts = answers[inside.at(doc)];
      const kept = inside.kept(doc);
      for (let n = 0; n < names.length; n++) kept.set(names[n], texts[n] ?? undefined);
    }
    return;
  }
  const step = Math.max(1, Math.min(MAX_DOCS, Math.floor(MAX_EACH / names.length)));
  for (let at = 0; at < docs.length; at += step) {
    const chunk = docs.slice(at, at + step);
    // One string for the batch: each string and list element that crosses costs here.
    const answers = JSON.parse(fields.getJsonEachText(chunk.map(inside.host), names));
    for (let i = 0; i < chunk.length; i++) {
      const texts = answers[i];
      const kept = inside.kept(chunk[i]);
      for (let n = 0; n < names.length; n++) kept.set(names[n], texts[n] ?? undefined);
    }
  }
}

/**
 * Send the changes kept for each of `docs` (a batch) to the host, in one call (one
 * per `MAX_DOCS` documents or `MAX_EACH` changes), as one JSON text. What the host refused, by the
 * position of its document: a `weir.FieldError` that fails it, as the change itself
 * would have; undefined when nothing was refused.
 * @param {Inside} inside
 */
export function flushBatch(docs, fields, inside) {
  const waiting = [];
  for (let at = 0; at < docs.length; at++) {
    if (inside.pending(docs[at])?.length) waiting.push(at);
  }
  let refused;
  if (waiting.length === 0) return refused;
  const batch = batchOf(docs, inside);
  const total = waiting.reduce((sum, at) => sum + inside.pending(docs[at]).length, 0);
  if (batch !== undefined && docs.length === batch.size && total <= MAX_EACH) {
    // Lent by position: the whole batch's changes in one call, failures answered by position.
    const changes = docs.map(inside.pending);
    for (const at of waiting) inside.restart(docs[at]);
    for (const [at, error] of batch.lent.update(JSON.stringify(changes))) {
      const doc = docs[at];
      inside.kept(doc).clear();
      (refused ??= [])[at] = fieldError(`document \`${doc.id}\``, error);
    }
    return refused;
  }
  for (let start = 0; start < waiting.length; ) {
    let end = start;
    let total = 0;
    while (end < waiting.length && end - start < MAX_DOCS) {
      total += inside.pending(docs[waiting[end]]).length;
      if (total > MAX_EACH) break;
      end += 1;
    }
    const sent = waiting.slice(start, end);
    const hosts = [];
    const changes = [];
    for (const at of sent) {
      const doc = docs[at];
      hosts.push(inside.host(doc));
      changes.push(inside.pending(doc));
      inside.restart(doc);
    }
    // The changes as one string, as for reads.
    fields.updateEachText(hosts, JSON.stringify(changes)).forEach((result, i) => {
      if (result.tag !== "err") return;
      const doc = docs[sent[i]];
      inside.kept(doc).clear();
      (refused ??= [])[sent[i]] = fieldError(`document \`${doc.id}\``, result.val);
    });
    start = end;
  }
  return refused;
}
