/**
 * A stage's export as the WIT `stage-batch-api` (the `batch-stage` world,
 * contract 0.2.1): the host lends a batch of documents per call, and the
 * plugin's `processBatch` (by default `process` on each in turn) says what
 * became of each. Its own module: only the batch-stage world imports
 * `weir:plugin/fields`.
 */

import { getJsonMany, getStringsMany, update } from "weir:plugin/fields@0.2.1";
import { Document } from "./document.js";
import { pluginError } from "./errors.js";
import { err, exported, lifecycle, ok } from "./plugin.js";
import { outcomes, stageInstance } from "./stage.js";

/**
 * The WIT `stage-batch-api`, backed by one instance of `Plugin`.
 * @internal `build.sh` exports it as `stageBatchApi`
 */
export function exportStage(Plugin) {
  const instance = stageInstance(Plugin);
  Document.useFields({ getJsonMany, getStringsMany, update });
  const calls = {
    checkConfig: (text) => instance.checkConfig(text),
    start: (text) => instance.begin(text, () => instance.plugin.start()),
    processBatch: (hosts) => {
      const [docs, end] = Document.lend(hosts);
      try {
        return ok(outcomes(instance.plugin.processBatch(docs), docs.length));
      } catch (e) {
        return err(pluginError(e, "document"));
      } finally {
        end();
      }
    },
    stop: () => lifecycle(() => instance.plugin?.stop()),
  };
  return exported(calls, () => Document.releaseMade());
}
