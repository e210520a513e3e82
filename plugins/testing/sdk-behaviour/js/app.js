// A stage that probes the JavaScript SDK: state across calls, plain
// exceptions, a lent document kept past its call, logging (see tests/all/sdk.rs).
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
  }
}
