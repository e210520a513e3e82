/**
 * Messages from sources that never end (contract 0.2.2, world
 * `streaming-connector`): a Kafka topic, a message queue or documents pushed
 * to `weir serve`, as the connector's config grants them (`grants.kafka`,
 * `grants.queues`, `grants.push`). The host holds the client; the connector
 * names the grant, turns each message into documents and says when it is
 * done with it. The host acknowledges a message (or commits its offset) only
 * once every document published for it is done: indexed, dropped, or failed
 * and dead-lettered. Build the connector with `build.sh streaming-connector`;
 * its `execute` loops until the run stops:
 *
 * ```js
 * const messages = weir.messages;
 * execute(publisher) {
 *   messages.consume(publisher, "orders", (message) => {
 *     const fields = JSON.parse(messages.text(message));
 *     return fields.deleted ? new messages.Delete(fields.id) : weir.Document.create(fields.id, fields);
 *   });
 * }
 * ```
 *
 * `consume(publisher, source, becomes, options)` receives batches and, for
 * each message, publishes what `becomes(message)` returns (a
 * `weir.Document`, a `messages.Delete`, or `undefined`/`null` for nothing)
 * and finishes it; a `becomes` that throws rejects the message with the
 * error's text (dead-lettered with its origin). A message has `handle`,
 * `origin` (`topic/partition/offset`, or the queue), `key` (a Uint8Array or
 * undefined), `body` (a Uint8Array), `headers` (`[name, Uint8Array]` pairs),
 * `timestampMs` and `attempt` (1, or the broker's delivery count).
 *
 * No module of the SDK imports `weir:plugin/messages` (only the streaming
 * world has it): `build.sh streaming-connector` hands it to
 * {@link exportConnector}.
 */

import { Publisher, messagesHost } from "./connector.js";
import { Document } from "./document.js";
import { Fatal } from "./errors.js";

/** Most messages one {@link receive} answers. */
export const MAX_RECEIVE = 4096;

/** What `becomes` returns for a message that deletes document `id`. */
export class Delete {
  /** @param {string} id */
  constructor(id) {
    this.id = text(id, "id");
  }
}

/**
 * Up to `max` messages (1 to {@link MAX_RECEIVE}) from granted source
 * `source`, waiting at most `waitMs` for the first: `null` once the run is
 * stopping (return from `execute`), an empty array when none came in time.
 * @throws {Fatal} when the source failed (not granted, a client that cannot be made)
 */
export function receive(source, max, waitMs) {
  const wanted = Math.min(Math.max(1, Math.trunc(max)), MAX_RECEIVE);
  try {
    return host().receive(text(source, "source"), wanted, Math.max(0, Math.trunc(waitMs)));
  } catch (e) {
    const error = e?.payload;
    if (error?.tag === "stopping") return null;
    if (error?.tag === "failed") throw new Fatal(error.val);
    throw e;
  }
}

/**
 * Publish `doc` as one of the documents of `message` (unusable after).
 * @throws {Fatal} with the host's reason when it refuses it (the run stopping, an unknown handle)
 */
export function publish(publisher, message, doc) {
  if (!(doc instanceof Document)) throw new TypeError("publish() takes a weir.Document");
  const lent = lentOf(publisher);
  const handed = Document.handOver(doc, "published");
  refused(() => host().publish(lent, message.handle, handed));
}

/**
 * Publish a deletion marker for document `id` as one of the documents of
 * `message`: the indexer deletes the document, and the message is done once
 * it has. `weir.messages.delete`.
 * @throws {Fatal} with the host's reason when it refuses it
 */
function deleteDocument(publisher, message, id) {
  const lent = lentOf(publisher);
  refused(() => host().delete(lent, message.handle, text(id, "id")));
}
export { deleteDocument as delete };

/** Every document of `message` is published: acknowledged once they are done. */
export function finish(message) {
  host().finish(message.handle);
}

/** `message` is not a valid document: dead-lettered now with `reason`, never retried. */
export function reject(message, reason) {
  host().reject(message.handle, String(reason));
}

/** The message's body as UTF-8 text, or `undefined` when it is not. */
export function text_(message) {
  try {
    return new TextDecoder("utf-8", { fatal: true }).decode(message.body);
  } catch {
    return undefined;
  }
}
export { text_ as text };

/** The message's header `name` (the first of that name) as UTF-8 text, if any. */
export function header(message, name) {
  for (const [key, value] of message.headers) {
    if (key === name) {
      try {
        return new TextDecoder("utf-8", { fatal: true }).decode(value);
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/**
 * The usual loop: receive batches of at most `batch` from `source` (waiting
 * `waitMs`), at most `limit` messages in all (none: until the run stops);
 * for each, publish what `becomes(message)` makes of it and finish it, or
 * reject it with the text of what `becomes` threw.
 */
export function consume(publisher, source, becomes, { batch = 512, waitMs = 1000, limit } = {}) {
  let left = limit ?? Infinity;
  while (left > 0) {
    const received = receive(source, Math.min(batch, left), waitMs);
    if (received === null) return;
    left -= received.length;
    for (const message of received) {
      let made;
      try {
        made = becomes(message);
      } catch (e) {
        if (e instanceof Fatal) throw e;
        reject(message, e instanceof Error ? `${e.name}: ${e.message}` : String(e));
        continue;
      }
      if (made instanceof Document) publish(publisher, message, made);
      else if (made instanceof Delete) deleteDocument(publisher, message, made.id);
      else if (made != null) throw new TypeError("becomes() must return a weir.Document, a messages.Delete or nothing");
      finish(message);
    }
  }
}

function lentOf(publisher) {
  if (!(publisher instanceof Publisher)) throw new TypeError("takes the weir.Publisher lent to execute()");
  return publisher.lent();
}

/** Run a host call whose `result` error is the host's reason: thrown as {@link Fatal}. */
function refused(call) {
  try {
    call();
  } catch (e) {
    throw typeof e?.payload === "string" ? new Fatal(e.payload) : e;
  }
}

/** The WIT `messages` interface, which `build.sh streaming-connector` hands the connector's export. */
function host() {
  if (messagesHost === undefined) {
    throw new Error("weir.messages is for streaming connectors only (built by `build.sh streaming-connector`)");
  }
  return messagesHost;
}

function text(value, what) {
  if (typeof value !== "string") throw new TypeError(`the ${what} must be a string, not ${typeof value}`);
  return value;
}
