// The conformance indexer: appends documents' JSON to a file (see ../../README.md).
import * as weir from "weir";

/** Whether picked values are exactly `["true"]`. */
const isTrue = (values) => values.length === 1 && values[0] === "true";

export default class ConformanceIndexer extends weir.Indexer {
  wantsJson = true;
  pick = ["reject", "busy"];

  configure(config) {
    this.path = config.string("path");
  }

  start() {
    this.file = weir.File.open(this.path, "a");
  }

  indexBatch(entries) {
    const failures = [];
    for (const { index, id, json, picked } of entries) {
      if (isTrue(picked.reject)) {
        failures.push(new weir.DocumentFailure(index, `rejected ${id}`));
      } else if (isTrue(picked.busy)) {
        failures.push(new weir.DocumentFailure(index, `busy ${id}`, { status: 503, transient: true }));
      } else {
        this.file.write(`${json}\n`);
      }
    }
    this.file.flush();
    return failures;
  }

  close() {
    this.file?.close();
  }
}
