// The conformance connector: `count` documents with edge values (see ../../README.md).
import * as weir from "weir";

export default class ConformanceConnector extends weir.Connector {
  configure(config) {
    this.count = config.integer("count", { min: 0 });
    this.prefix = config.string("prefix", { default: "doc" });
  }

  execute(publisher) {
    for (let i = 0; i < this.count; i++) {
      const doc = weir.Document.create(`${this.prefix}-${i}`, {
        n: i,
        neg: -i - 1,
        big: 18446744073709551616n + BigInt(i),
        half: i + 0.5,
        text: `ünï-😀-${i}`,
        nested: { i, list: [i, null, "x"] },
        none: null,
        tags: ["a", "b"],
      });
      publisher.publish(doc);
    }
  }
}
