/**
 * Files in the directories granted to the plugin (`grants.dirs` in the
 * pipeline config), by the path the plugin sees them under, e.g. `/data/in.jsonl`.
 */

import { getDirectories } from "wasi:filesystem/preopens@0.2.12";

const MODES = {
  r: { open: {}, flags: { read: true } },
  w: { open: { create: true, truncate: true }, flags: { write: true } },
  a: { open: { create: true }, flags: { write: true } },
};
// Written text is kept until this many characters, or `flush()`.
const BUFFER_CHARS = 64 * 1024;

/** An open file: text read whole, or written (buffered) from the start or at the end. */
export class File {
  #path;
  #descriptor;
  #offset;
  #pending = [];
  #pendingChars = 0;

  /** @internal use {@link File.open} */
  constructor(path, descriptor, offset) {
    this.#path = path;
    this.#descriptor = descriptor;
    this.#offset = offset;
  }

  /**
   * Open `path` to read (`"r"`), to write from the start (`"w"`, created or
   * emptied), or to append (`"a"`, created if missing).
   * @param {string} path
   * @param {"r"|"w"|"a"} [mode]
   * @returns {File}
   */
  static open(path, mode = "r") {
    const how = MODES[mode];
    if (!how) throw new TypeError(`open \`${path}\`: mode must be "r", "w" or "a"`);
    const [dir, rest] = granted(path);
    return fsCall(`open \`${path}\``, () => {
      const descriptor = dir.openAt({ symlinkFollow: true }, rest, how.open, how.flags);
      return new File(path, descriptor, mode === "a" ? descriptor.stat().size : 0n);
    });
  }

  /** The whole file (from where reading stopped) as UTF-8 text. */
  readText() {
    const chunks = [];
    fsCall(`read \`${this.#path}\``, () => {
      for (let end = false; !end; ) {
        const [bytes, eof] = this.#open().read(65536n, this.#offset);
        chunks.push(bytes);
        this.#offset += BigInt(bytes.length);
        end = eof || bytes.length === 0;
      }
    });
    return new TextDecoder().decode(concat(chunks));
  }

  /** Write `text` (UTF-8); it reaches the file by the next `flush()` or `close()`, or sooner. */
  write(text) {
    this.#open();
    const chunk = String(text);
    this.#pending.push(chunk);
    this.#pendingChars += chunk.length;
    if (this.#pendingChars >= BUFFER_CHARS) this.flush();
  }

  /** Write out what `write` kept. */
  flush() {
    const bytes = new TextEncoder().encode(this.#pending.join(""));
    this.#pending = [];
    this.#pendingChars = 0;
    fsCall(`write \`${this.#path}\``, () => {
      for (let at = 0; at < bytes.length; ) {
        const written = this.#open().write(bytes.subarray(at), this.#offset);
        at += Number(written);
        this.#offset += written;
      }
    });
  }

  /** Flush and close; the file cannot be used afterwards. Closing twice does nothing. */
  close() {
    if (!this.#descriptor) return;
    try {
      this.flush();
    } finally {
      this.#descriptor[Symbol.dispose]();
      this.#descriptor = undefined;
    }
  }

  #open() {
    if (!this.#descriptor) throw new Error(`file \`${this.#path}\` is closed`);
    return this.#descriptor;
  }
}

let preopens;

/** The granted directory holding `path`, and the path inside it. */
function granted(path) {
  // Each call of get-directories makes new handles: ask once.
  preopens ??= getDirectories().sort(([, a], [, b]) => b.length - a.length);
  for (const [dir, name] of preopens) {
    const base = name.replace(/\/+$/, "");
    if (path.startsWith(`${base}/`)) return [dir, path.slice(base.length + 1)];
  }
  const names = preopens.map(([, name]) => name).join(", ") || "none";
  throw new Error(`\`${path}\` is in no directory granted to the plugin (granted: ${names})`);
}

/** Run a filesystem call for `what`, turning a WASI error code into a readable error. */
function fsCall(what, call) {
  try {
    return call();
  } catch (e) {
    if (typeof e?.payload === "string") throw new Error(`${what}: ${e.payload.replaceAll("-", " ")}`);
    throw e;
  }
}

function concat(chunks) {
  const all = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  chunks.reduce((at, c) => (all.set(c, at), at + c.length), 0);
  return all;
}
