// A stage that probes the JavaScript SDK: state across calls, plain
// exceptions, a lent document kept past its call, logging, fields read and
// written several at a time, a field read again after a change, changes kept
// for the end of the batch (see tests/all/sdk.rs).
import * as weir from "weir";

export default class Probe extends weir.Stage {
  configure() {
    this.calls = 0;
    this.kept = undefined;
  }

  process(doc) {
    this.calls += 1;
    doc.set("calls", this.calls);
    const action = doc.get("action");
    if (action === "raise") throw new RangeError(`bad value in ${doc.id}`);
    if (action === "keep") this.kept = doc;
    if (action === "use-kept") this.kept.get("action");
    if (action === "log") console.warn("probe saw", doc.id);
    if (action === "fields") {
      const got = {
        first: doc.getMany(["a", "missing"]).map((v) => v ?? null),
        every: doc.getAllMany(["a", "b", "missing"]),
        texts: doc.getStringsMany(["b", "missing"]),
      };
      doc.update({ got, a: weir.REMOVE });
    }
    if (action === "reread") {
      const before = doc.get("a");
      doc.set("a", before + 1);
      doc.set("seen", [before, doc.get("a"), doc.has("a"), doc.isMultiValued("a")]);
    }
    if (action === "buffered") {
      doc.set("x", "new");
      doc.update({ y: [1, 2], action: weir.REMOVE });
      doc.set("seen", [doc.get("x"), doc.getAll("y"), doc.has("action")]);
      doc.set("names", doc.fieldNames()); // asks the host: the changes are made first
    }
    if (action === "grow") {
      doc.set("big", "x".repeat(2 << 20)); // over a 1 MiB limit: refused with the batch's changes
      doc.set("after", doc.get("big") !== undefined);
    }
  }
}
