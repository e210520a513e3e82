/** Connectors, their publisher, and their export as the WIT `connector-api`. */

import { Document } from "./document.js";
import { Fatal, describe } from "./errors.js";
import { toJsonText } from "./json.js";
import { Instance, exported, lifecycle } from "./plugin.js";
import { fieldError } from "./values.js";

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

  /**
   * Publish `documents`, `[id, fields]` pairs (`fields` an object, or JSON text
   * of one, as `Document.create` takes them), in order, 256 to a host call
   * (contract 0.2.3, `publish-packed`): one call for many documents costs about
   * what one `publish` does. Blocks while the pipeline is full.
   * @param {Iterable<[string, object|string]>} documents
   * @returns {number} how many it published
   * @throws {FieldError} naming the first document that is not one
   * @throws {Fatal} with the host's reason when it refuses one (stop then);
   *   either way the documents before it are published, as they are when
   *   iterating `documents` throws
   */
  publishAll(documents) {
    if (packedHost === undefined) {
      throw new Error("publishAll needs a connector built with this SDK's build.sh (contract 0.2.3)");
    }
    let published = 0;
    const ids = [];
    const text = [];
    const lengths = [];
    const send = () => {
      // The outbox is emptied first: whatever the host answers, nothing is sent twice.
      if (ids.length === 0) return;
      const call = { text: text.join(""), lengths: Uint32Array.from(lengths) };
      const sent = ids.splice(0);
      text.length = 0;
      lengths.length = 0;
      try {
        packedHost.publishPacked(this.lent(), call);
      } catch (e) {
        const refusal = e?.payload;
        if (refusal?.reason === undefined) throw e;
        published += refusal.at;
        const { tag, val } = refusal.reason;
        if (tag === "invalid") throw fieldError(`document \`${sent[refusal.at]}\``, val);
        throw new Fatal(val);
      }
      published += sent.length;
    };
    try {
      for (const [id, fields] of documents) {
        if (typeof id !== "string") throw new TypeError(`a document id must be a string, not ${typeof id}`);
        const json = typeof fields === "string" ? fields : toJsonText(fields);
        ids.push(id);
        text.push(id, json);
        lengths.push(utf8Length(id), utf8Length(json));
        if (ids.length >= PACKED_CALL) send();
      }
    } catch (e) {
      // What came before the failure is published, as one by one.
      send();
      throw e;
    }
    send();
    return published;
  }

  /**
   * Say that this `execute` will publish about `documents` documents in all,
   * when the connector knows (contract 0.2.5, `progress`): `weir run`'s
   * progress line shows the share published and the time left. Said again,
   * the later number counts; only a guide, never an error.
   * @param {number|bigint} documents
   */
  expect(documents) {
    if (progressHost === undefined) {
      throw new Error("expect needs a connector built with this SDK's build.sh (contract 0.2.5)");
    }
    const n = typeof documents === "bigint" ? documents : Number.isSafeInteger(documents) ? BigInt(documents) : -1n;
    if (n < 0n) throw new RangeError(`expect() takes a count of documents, not ${documents}`);
    progressHost.expect(this.lent(), n > 0xffffffffffffffffn ? 0xffffffffffffffffn : n);
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
 * The WIT `publishing-packed` interface, for {@link Publisher#publishAll}: set
 * by {@link exportConnector}.
 * @internal
 */
let packedHost;

/**
 * The WIT `progress` interface, for {@link Publisher#expect}: set by
 * {@link exportConnector}.
 * @internal
 */
let progressHost;

/** Documents `publishAll` hands over in one host call. */
const PACKED_CALL = 256;

const utf8 = new TextEncoder();

/** Bytes of `text` in UTF-8, as the host counts them. */
function utf8Length(text) {
  // eslint-disable-next-line no-control-regex
  return /^[\x00-\x7f]*$/.test(text) ? text.length : utf8.encode(text).length;
}

/**
 * The WIT `connector-api`, backed by one instance of `Plugin`; `hosts.sync` is
 * the world's `weir:plugin/sync`, for `weir.sync`, and `hosts.messages` the
 * streaming world's `weir:plugin/messages`, for `weir.messages`.
 * @internal `build.sh` exports it as `connectorApi`
 */
export function exportConnector(Plugin, hosts = {}) {
  syncHost = hosts.sync;
  messagesHost = hosts.messages;
  packedHost = hosts.packed;
  progressHost = hosts.progress;
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
