/** Stages, and their per-document export as the WIT `stage-api`. */

import { Document } from "./document.js";
import { Failure, pluginError } from "./errors.js";
import { Instance, err, exported, lifecycle, ok } from "./plugin.js";

/** The most fields the default `processBatch` reads ahead for a batch. */
const MAX_AHEAD = 16;

/**
 * A stage: changes documents. Extend it and implement `process(doc)` (one
 * document at a time) or `processBatch(docs)` (a batch at a time).
 *
 * `process(doc)`: change `doc` in place (it is lent for that call only), and
 * return nothing, or an array of new documents ({@link Document.create}) to run
 * through the rest of the pipeline ahead of this one. Throw to fail the
 * document: `weir.Failure` or any error fails it, `weir.Transient` lets the
 * host retry it, `weir.Fatal` stops the run.
 *
 * Either way the host lends documents a batch at a time, and one call into the
 * component serves the batch: the default `processBatch` runs `process` on
 * each document, reading the fields `process` read on the documents before for
 * the whole batch in one host call. In the batch-stage world the `set`, `add`,
 * `update` and `remove` changes of the batch's documents go to the host in one
 * call when the batch ends (a read sees them at once; a change the host refuses
 * then, such as one that makes the document too large, fails its document).
 *
 * ```js
 * export default class Upper extends weir.Stage {
 *   configure(config) { this.field = config.string("field"); }
 *   process(doc) { const v = doc.get(this.field); if (typeof v === "string") doc.set(this.field, v.toUpperCase()); }
 * }
 * ```
 */
export class Stage {
  /** The fields `process` read from the host, read ahead for the documents after. */
  #ahead = [];

  /** Read the settings (see {@link Config}); also called alone to check them, so acquire nothing here. */
  configure(_config) {}

  /** Acquire what the stage needs (files, connections), once per instance, after `configure`. */
  start() {}

  /** Release what `configure` acquired, when the worker shuts down. */
  stop() {}

  /**
   * Change each of `docs` in place (they are lent for this call only) and say what
   * became of each: nothing when every one is done without children, else an
   * array of one outcome per document, in order: undefined (done), an array of new
   * child documents (done, with children that run ahead of it), or an `Error` (it
   * failed: `weir.Failure`, `weir.Transient`, `weir.Fatal` or any other). Throwing
   * fails every document of the batch.
   *
   * The default runs `process` on each document in turn: what it throws fails
   * that document only.
   * @param {Document[]} docs
   * @returns {Array<undefined | Document[] | Error> | undefined}
   */
  processBatch(docs) {
    const ahead = this.#ahead;
    const reads = [];
    const outcomes = [];
    Document.recordReads(reads);
    try {
      if (ahead.length > 0) Document.prefetchEach(docs, ahead);
      docs.forEach((doc, at) => {
        try {
          outcomes.push(this.process(doc));
        } catch (e) {
          outcomes.push(e instanceof Error ? e : new Failure(String(e)));
        }
        if (reads.length > 0) {
          const learned = learn(ahead, reads);
          if (learned.length > 0 && at + 1 < docs.length) Document.prefetchEach(docs.slice(at + 1), learned);
        }
      });
    } finally {
      Document.recordReads(undefined);
    }
    return outcomes;
  }
}

/** Add the fields just read from the host to `ahead` (read for the whole of the next batch in one call), and return those added; empty `reads`. */
function learn(ahead, reads) {
  const learned = [];
  for (const name of reads) {
    if (ahead.length < MAX_AHEAD && !ahead.includes(name)) {
      ahead.push(name);
      learned.push(name);
    }
  }
  reads.length = 0;
  return learned;
}

/** The plugin object's instance, for a class that must implement `process` or `processBatch`. */
export function stageInstance(Plugin) {
  const method = typeof Plugin?.prototype?.processBatch === "function" && Plugin.prototype.processBatch !== Stage.prototype.processBatch
    ? "processBatch(docs)"
    : "process(doc)";
  return new Instance(Plugin, Stage, method);
}

/**
 * What became of each of `count` documents, from what `processBatch` returned:
 * the WIT `outcome`s (children handed over), or a `TypeError` for the whole batch.
 */
export function outcomes(result, count) {
  if (result === undefined || result === null) return Array.from({ length: count }, () => DONE);
  if (!Array.isArray(result)) {
    throw new TypeError(`processBatch() must return nothing or an array of outcomes, not ${typeof result}`);
  }
  if (result.length !== count) {
    throw new TypeError(`processBatch() returned ${result.length} outcomes for ${count} documents (one per document)`);
  }
  return result.map(outcome);
}

const DONE = Object.freeze({ tag: "done", val: [] });

/** The WIT `outcome` of one document. */
function outcome(value) {
  if (value === undefined || value === null) return DONE;
  try {
    if (value instanceof Error) throw value;
    if (!Array.isArray(value)) {
      throw new TypeError(`process() must return nothing or an array of weir.Document, not ${typeof value}`);
    }
    return { tag: "done", val: value.map((child) => Document.handOver(child, "returned by process()")) };
  } catch (e) {
    return { tag: "failed", val: pluginError(e, "document") };
  }
}

/**
 * The WIT `stage-api` (the per-document `stage` world), backed by one instance
 * of `Plugin`: each document runs as a batch of one.
 * @internal `build.sh` exports it as `stageApi` for `per-document-stage`
 */
export function exportStagePerDocument(Plugin) {
  const instance = stageInstance(Plugin);
  const calls = {
    checkConfig: (text) => instance.checkConfig(text),
    start: (text) => instance.begin(text, () => instance.plugin.start()),
    processDocument: (host) => {
      const [docs, end] = Document.lend([host]);
      try {
        const [made] = outcomes(instance.plugin.processBatch(docs), 1);
        return made.tag === "done" ? ok(made.val) : err(made.val);
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
