/** Stages, and their export as the WIT `stage-api`. */

import { Document } from "./document.js";
import { pluginError } from "./errors.js";
import { Instance, err, exported, lifecycle, ok } from "./plugin.js";

/**
 * A stage: changes documents one at a time. Extend it and implement
 * `process(doc)`: change `doc` in place (it is lent for that call only), and
 * return nothing, or an array of new documents ({@link Document.create}) to run
 * through the rest of the pipeline ahead of this one. Throw to fail the
 * document: `weir.Failure` or any error fails it, `weir.Transient` lets the
 * host retry it, `weir.Fatal` stops the run.
 *
 * ```js
 * export default class Upper extends weir.Stage {
 *   configure(config) { this.field = config.string("field"); }
 *   process(doc) { const v = doc.get(this.field); if (typeof v === "string") doc.set(this.field, v.toUpperCase()); }
 * }
 * ```
 */
export class Stage {
  /** Read the settings (see {@link Config}); also called alone to check them, so acquire nothing here. */
  configure(_config) {}

  /** Acquire what the stage needs (files, connections), once per instance, after `configure`. */
  start() {}

  /** Release what `configure` acquired, when the worker shuts down. */
  stop() {}
}

/**
 * The WIT `stage-api`, backed by one instance of `Plugin`.
 * @internal `build.sh` exports it as `stageApi`
 */
export function exportStage(Plugin) {
  const instance = new Instance(Plugin, Stage, "process(doc)");
  const calls = {
    checkConfig: (text) => instance.checkConfig(text),
    start: (text) => instance.begin(text, () => instance.plugin.start()),
    processDocument: (host) => processDocument(instance.plugin, host),
    stop: () => lifecycle(() => instance.plugin?.stop()),
  };
  return exported(calls, () => Document.releaseMade());
}

function processDocument(plugin, host) {
  const [doc, end] = Document.lend(host);
  try {
    const children = plugin.process(doc) ?? [];
    if (!Array.isArray(children)) {
      throw new TypeError(`process() must return nothing or an array of weir.Document, not ${typeof children}`);
    }
    return ok(children.map((child) => Document.handOver(child, "returned by process()")));
  } catch (e) {
    return err(pluginError(e, "document"));
  } finally {
    end();
  }
}
