/** Connectors, their publisher, and their export as the WIT `connector-api`. */

import { Document } from "./document.js";
import { Fatal, describe } from "./errors.js";
import { Instance, exported, lifecycle } from "./plugin.js";

/**
 * A connector: reads a source and publishes documents. Extend it and implement
 * `execute(publisher)`, which publishes with `publisher.publish(doc)`. The host
 * calls `configure`, `preExecute`, `execute`, `postExecute` (only when
 * everything before succeeded and every document completed), and always `close`.
 */
export class Connector {
  /** Read the settings (see {@link Config}). */
  configure(_config) {}

  /** Prepare the run `runId`. */
  preExecute(_runId) {}

  /** After every published document completed. */
  postExecute() {}

  /** Always called last; release what the connector acquired. */
  close() {}
}

/** How a connector hands documents to the host; lent for the duration of `execute` only. */
export class Publisher {
  #host;
  #gone = false;

  /** @internal the SDK hands one to `execute` */
  constructor(host) {
    this.#host = host;
  }

  /**
   * Send `doc` for processing; blocks while the pipeline is full. The document
   * is handed over: it cannot be used afterwards.
   * @param {Document} doc
   * @throws {Fatal} with the host's reason when it refuses the document (the
   *   run is shutting down, the document is too large): let it end `execute`
   */
  publish(doc) {
    const publisher = this.lent();
    const host = Document.handOver(doc, "published");
    try {
      publisher.publish(host);
    } catch (e) {
      throw new Fatal(typeof e?.payload === "string" ? e.payload : describe(e));
    }
  }

  /** @internal the host's publisher, while it is lent (for `weir.sync.delete`) */
  lent() {
    if (this.#gone) throw new Error("the publisher was lent for the duration of execute() only");
    return this.#host;
  }

  /** @internal ends the loan */
  end() {
    this.#gone = true;
    this.#host[Symbol.dispose]();
  }
}

/**
 * The WIT `sync` interface, for `weir.sync` (see `sync.js`): set by
 * {@link exportConnector}.
 * @internal
 */
export let syncHost;

/**
 * The WIT `messages` interface, for `weir.messages` (see `messages.js`): set
 * by {@link exportConnector} in the streaming-connector world.
 * @internal
 */
export let messagesHost;

/**
 * The WIT `connector-api`, backed by one instance of `Plugin`; `hosts.sync` is
 * the world's `weir:plugin/sync`, for `weir.sync`, and `hosts.messages` the
 * streaming world's `weir:plugin/messages`, for `weir.messages`.
 * @internal `build.sh` exports it as `connectorApi`
 */
export function exportConnector(Plugin, hosts = {}) {
  syncHost = hosts.sync;
  messagesHost = hosts.messages;
  const instance = new Instance(Plugin, Connector, "execute(publisher)");
  const calls = {
    checkConfig: (text) => instance.checkConfig(text),
    preExecute: (text, runId) => instance.begin(text, () => instance.plugin.preExecute(runId)),
    execute: (host) => {
      const publisher = new Publisher(host);
      try {
        return lifecycle(() => instance.plugin.execute(publisher));
      } finally {
        publisher.end();
      }
    },
    postExecute: () => lifecycle(() => instance.plugin.postExecute()),
    close: () => lifecycle(() => instance.plugin?.close()),
  };
  return exported(calls, () => Document.releaseMade());
}
