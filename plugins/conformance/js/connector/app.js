// The conformance connector: `count` documents with edge values (see ../../README.md).
import * as weir from "weir";

// How deep `deep_at`'s document nests: deeper than a document may be.
const TOO_DEEP = 200;

export default class ConformanceConnector extends weir.Connector {
  configure(config) {
    this.count = config.integer("count", { min: 0 });
    this.prefix = config.string("prefix", { default: "doc" });
    this.packed = config.boolean("packed", { default: false });
    this.deepAt = config.integer("deep_at", { default: -1, min: -1 });
    this.failAt = config.integer("fail_at", { default: -1, min: -1 });
  }

  fields(i) {
    if (i === this.failAt) throw new weir.Fatal(`configured to fail at ${this.prefix}-${i}`);
    if (i === this.deepAt) {
      let deep = 1;
      for (let d = 0; d < TOO_DEEP; d++) deep = [deep];
      return { deep };
    }
    return {
      n: i,
      neg: -i - 1,
      big: 18446744073709551616n + BigInt(i),
      half: i + 0.5,
      text: `ünï-😀-${i}`,
      nested: { i, list: [i, null, "x"] },
      none: null,
      tags: ["a", "b"],
    };
  }

  *documents() {
    for (let i = 0; i < this.count; i++) yield [`${this.prefix}-${i}`, this.fields(i)];
  }

  execute(publisher) {
    publisher.expect(this.count);
    if (this.packed) {
      publisher.publishAll(this.documents());
      return;
    }
    for (const [id, fields] of this.documents()) publisher.publish(weir.Document.create(id, fields));
  }
}
