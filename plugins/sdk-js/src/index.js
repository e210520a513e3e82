/**
 * Write Weir plugins in JavaScript.
 *
 * A plugin is a module, `app.js`, whose default export is a class extending
 * {@link Stage}, {@link Connector} or {@link Indexer}; `build.sh` makes it a
 * WebAssembly component. `console.log` and friends go to the host's log.
 * The SDK's modules are free of side effects (but for `log.js`), so the
 * bundle keeps only what the plugin uses: an indexer, whose world has no
 * document interface, must not use `Document`; only a connector may use
 * `weir.sync` (state between runs, and deletes: see `sync.js`), and only a
 * streaming connector `weir.messages` (topics, queues, pushes: `messages.js`).
 *
 * ```js
 * import * as weir from "weir";
 *
 * export default class Upper extends weir.Stage {
 *   configure(config) {
 *     this.field = config.string("field");
 *     this.suffix = config.string("suffix", { default: "" });
 *   }
 *   process(doc) {
 *     const value = doc.get(this.field);
 *     if (typeof value === "string") doc.set(this.field, value.toUpperCase() + this.suffix);
 *   }
 * }
 * ```
 */

import "./log.js";

export { Config } from "./config.js";
export { Document, REMOVE } from "./document.js";
export { FieldError } from "./values.js";
export { BatchError, DocumentFailure, Failure, Fatal, Transient } from "./errors.js";
export { File } from "./file.js";
export { Decimal } from "./json.js";
export { Connector, Publisher, exportConnector } from "./connector.js";
export * as messages from "./messages.js";
export * as sync from "./sync.js";
export { Indexer, exportIndexer } from "./indexer.js";
export { Stage, exportStagePerDocument } from "./stage.js";
export { exportStage } from "./batch.js";
export { exportLentStage } from "./lent.js";
