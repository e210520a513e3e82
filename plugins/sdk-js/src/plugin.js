/**
 * What the three kinds of plugin share: one plugin object per component
 * instance, made on the first call and kept for the instance's life; its
 * settings checked and applied; exceptions turned into WIT results, never
 * into an abort.
 */

import { Config } from "./config.js";
import { describe, pluginError } from "./errors.js";
import { logToHost } from "./log.js";

export const ok = (val) => ({ tag: "ok", val });
export const err = (val) => ({ tag: "err", val });

/** Run a lifecycle call: an exception is `fatal` unless it is a `Failure` or `Transient`. */
export function lifecycle(call) {
  try {
    return ok(call());
  } catch (e) {
    return err(pluginError(e, "fatal"));
  }
}

/** The plugin object of a component instance, and the calls that configure it. */
export class Instance {
  /** The plugin object, once made. */
  plugin;
  #Plugin;

  /**
   * @param {Function} Plugin the class `app.js` exports by default
   * @param {Function} Base the class it must extend
   * @param {string} method the method it must implement, e.g. `process(doc)`
   */
  constructor(Plugin, Base, method) {
    if (!(typeof Plugin === "function" && Plugin.prototype instanceof Base)) {
      throw new TypeError(`app.js must \`export default\` a class that extends weir.${Base.name}`);
    }
    if (typeof Plugin.prototype[method.split("(")[0]] !== "function") {
      throw new TypeError(`${Plugin.name} must implement ${method}`);
    }
    this.#Plugin = Plugin;
  }

  /** Every problem in the settings `text` (WIT `config-issue`s), after configuring the plugin with them. */
  checkConfig(text) {
    // Every kind's first call comes here: the host is there from now on.
    logToHost();
    const config = Config.parse(text);
    try {
      this.plugin ??= new this.#Plugin();
      this.plugin.configure(config);
    } catch (e) {
      // Reported only when no recorded problem explains it.
      return config.problems().length ? config.problems() : [{ path: "", message: describe(e) }];
    }
    return config.problems();
  }

  /** `start`/`pre-execute`: configure with the settings `text`, then run `then` if they are good. */
  begin(text, then) {
    const problems = this.checkConfig(text);
    if (problems.length === 0) return lifecycle(then);
    const list = problems.map(({ path, message }) => (path ? `${path}: ${message}` : message));
    return err({ tag: "fatal", val: `invalid config: ${list.join("; ")}` });
  }
}

/**
 * The exported interface: `calls`, each followed by `afterCall` however it ends.
 * @param {Record<string, Function>} calls
 * @param {() => void} afterCall
 */
export function exported(calls, afterCall) {
  return Object.fromEntries(
    Object.entries(calls).map(([name, call]) => [
      name,
      (...args) => {
        try {
          return call(...args);
        } finally {
          afterCall();
        }
      },
    ]),
  );
}
