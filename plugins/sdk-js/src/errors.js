/**
 * Errors a plugin throws to tell the host what went wrong, and how they
 * become the WIT `plugin-error` cases.
 */

/** The current document (or call) fails with exactly this message; the run goes on. */
export class Failure extends Error {
  name = "Failure";
}

/**
 * The current document fails, and trying it again later may succeed (a
 * service is down, slow or rate-limited): the host may retry it. Never use it
 * for a document that is simply bad.
 */
export class Transient extends Error {
  name = "Transient";
}

/** The plugin cannot go on (a lost resource, bad settings found late): the host stops the run. */
export class Fatal extends Error {
  name = "Fatal";
}

/** An indexer's whole batch failed. Thrown from `indexBatch`. */
export class BatchError extends Error {
  name = "BatchError";

  /**
   * @param {string} message
   * @param {{status?: number, connectionFailed?: boolean}} [options]
   *   `status`: the backend's (HTTP-like) status; statuses the host retries
   *   (by default 429 and 503) make the batch retried with backoff.
   *   `connectionFailed`: the backend could not be reached at all; retried too.
   */
  constructor(message, { status, connectionFailed = false } = {}) {
    super(message);
    this.status = checkedStatus(status);
    this.connectionFailed = connectionFailed;
  }
}

/** One document of a batch that the backend refused; returned (in an array) by `indexBatch`. */
export class DocumentFailure {
  /**
   * @param {number} index the entry's position in the batch (`entry.index`)
   * @param {string} message
   * @param {{status?: number, transient?: boolean}} [options]
   *   `status`: the backend's status for this document; retried statuses count as transient.
   *   `transient`: trying this document again later may succeed.
   */
  constructor(index, message, { status, transient = false } = {}) {
    this.index = index;
    this.message = message;
    this.status = checkedStatus(status);
    this.transient = transient;
  }
}

/** A status as the WIT's `option<u16>`. */
function checkedStatus(status) {
  if (status == null) return undefined;
  if (Number.isInteger(status) && status >= 0 && status <= 65535) return status;
  throw new TypeError(`status must be an integer from 0 to 65535, got ${status}`);
}

/**
 * A thrown value as text: the message of the SDK's own errors, `TypeName:
 * message` for other errors (`TypeError: x is undefined`), else the value as a string.
 * @param {unknown} error
 */
export function describe(error) {
  if (error instanceof Failure || error instanceof Transient || error instanceof Fatal || error instanceof BatchError) {
    return error.message;
  }
  if (error instanceof Error) {
    const type = error.name === "Error" ? error.constructor.name : error.name;
    return `${type}: ${error.message}`;
  }
  return String(error);
}

/**
 * The WIT `plugin-error` for a thrown value. {@link Transient} and
 * {@link Fatal} keep their case; anything else is `document`, or `fatal` when
 * `otherwise` says so (for lifecycle calls, where a bug means the plugin cannot go on).
 * @param {unknown} error
 * @param {"document" | "fatal"} otherwise
 */
export function pluginError(error, otherwise) {
  const tag =
    error instanceof Transient ? "transient"
    : error instanceof Fatal ? "fatal"
    : error instanceof Failure ? "document"
    : otherwise;
  return { tag, val: describe(error) };
}
