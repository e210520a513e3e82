/**
 * A stage's exports for the `lent-stage` world (contract 0.2.1): the WIT
 * `stage-batch-api` as {@link exportStage} makes it, and beside it
 * `stage-lent-api`, which the host calls instead of `process-batch`: the batch
 * comes as one `lending.batch` handle whose documents are addressed by
 * position, so no host document is made for one unless a call needs it, and
 * only the documents that failed or made children are answered.
 */

import { Document } from "./document.js";
import { pluginError } from "./errors.js";
import { err, exported, ok } from "./plugin.js";
import { exportStage, refusing } from "./batch.js";
import { outcomes } from "./stage.js";

/** The batch of one `process-lent` call, with its ids asked of the host once. */
class LentBatch {
  /** @param lent the WIT `batch` */
  constructor(lent) {
    this.lent = lent;
    this.size = lent.size();
    this.ids = undefined;
  }

  id(at) {
    this.ids ??= this.lent.ids();
    return this.ids[at];
  }

  handle(at) {
    return this.lent.document(at);
  }
}

/**
 * `{ stageBatchApi, stageLentApi }`, backed by one instance of `Plugin`.
 * @internal `build.sh` exports them for `stage`
 */
export function exportLentStage(Plugin) {
  const [stageBatchApi, instance] = exportStage(Plugin, true);
  const calls = {
    processLent: (lent) => {
      const batch = new LentBatch(lent);
      const [docs, end] = Document.lendBatch(batch);
      try {
        const result = instance.plugin.processBatch(docs);
        const made = outcomes(refusing(result, Document.flushBatch(docs), docs.length), docs.length);
        const listed = [];
        made.forEach((outcome, at) => {
          if (outcome.tag !== "done" || outcome.val.length > 0) listed.push([at, outcome]);
        });
        return ok(listed);
      } catch (e) {
        Document.flushBatch(docs); // the documents go back as the plugin left them
        return err(pluginError(e, "document"));
      } finally {
        end();
      }
    },
  };
  return { stageBatchApi, stageLentApi: exported(calls, () => Document.releaseMade()) };
}
