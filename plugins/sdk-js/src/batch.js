/**
 * A stage's export as the WIT `stage-batch-api` (the `batch-stage` world,
 * contract 0.2.1): the host lends a batch of documents per call, and the
 * plugin's `processBatch` (by default `process` on each in turn) says what
 * became of each; the changes kept for the batch's documents are then made in
 * one host call, and a document whose change the host refuses fails with it.
 * Its own module: only the batch-stage world imports `weir:plugin/fields`.
 */

import { getJsonEachText, getJsonMany, getStringsMany, update, updateEachText } from "weir:plugin/fields@0.2.5";
import { Document } from "./document.js";
import { pluginError } from "./errors.js";
import { err, exported, lifecycle, ok } from "./plugin.js";
import { outcomes, stageInstance } from "./stage.js";

/**
 * The WIT `stage-batch-api`, backed by one instance of `Plugin` (with that
 * instance, when `withInstance`: for {@link exportLentStage}).
 * @internal `build.sh` exports it as `stageBatchApi` (for `per-document-stage`'s
 * comparison builds and plugins of the batch-stage world)
 */
export function exportStage(Plugin, withInstance = false) {
  const instance = stageInstance(Plugin);
  Document.useFields({ getJsonEachText, getJsonMany, getStringsMany, update, updateEachText });
  const calls = {
    checkConfig: (text) => instance.checkConfig(text),
    start: (text) => instance.begin(text, () => instance.plugin.start()),
    processBatch: (hosts) => {
      const [docs, end] = Document.lend(hosts);
      try {
        const result = instance.plugin.processBatch(docs);
        return ok(outcomes(refusing(result, Document.flushBatch(docs), docs.length), docs.length));
      } catch (e) {
        Document.flushBatch(docs); // the documents go back as the plugin left them
        return err(pluginError(e, "document"));
      } finally {
        end();
      }
    },
    stop: () => lifecycle(() => instance.plugin?.stop()),
  };
  const api = exported(calls, () => Document.releaseMade());
  return withInstance ? [api, instance] : api;
}

/**
 * What `processBatch` returned (`result`, for `count` documents), with the field
 * errors of the changes the host refused (`refused`, by position) as the outcomes of
 * their documents, unless those failed already. A result of the wrong shape is left
 * for {@link outcomes} to refuse.
 */
export function refusing(result, refused, count) {
  if (refused === undefined) return result;
  const each = result === undefined || result === null ? new Array(count).fill(undefined) : result;
  if (!Array.isArray(each) || each.length !== count) return result;
  return each.map((outcome, at) => (refused[at] !== undefined && !(outcome instanceof Error) ? refused[at] : outcome));
}
