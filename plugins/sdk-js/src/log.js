/**
 * `console.log`, `info`, `warn`, `error`, `debug` and `trace` go to the host's
 * log (tagged there with the plugin, pipeline and document). `console.log` is
 * info. Arguments are joined with spaces: strings as they are, errors as
 * `TypeName: message`, other values as JSON where they have a JSON form.
 * While the module loads (at build time, when there is no host) the engine's
 * own console prints to the build's output.
 */

import { enabled, log } from "weir:plugin/log@0.2.5";
import { toJsonText } from "./json.js";

const LEVELS = { trace: "trace", debug: "debug", log: "info", info: "info", warn: "warn", error: "error" };

let toHost = false;

/**
 * Send console output to the host from now on.
 * @internal called on the first call into the plugin
 */
export function logToHost() {
  toHost = true;
}

function show(value) {
  if (typeof value === "string") return value;
  if (value instanceof Error) return `${value.name}: ${value.message}`;
  try {
    return toJsonText(value);
  } catch {
    return String(value);
  }
}

for (const [method, level] of Object.entries(LEVELS)) {
  const atBuild = console[method].bind(console);
  console[method] = (...args) => {
    if (!toHost) atBuild(...args);
    else if (enabled(level)) log(level, args.map(show).join(" "));
  };
}
