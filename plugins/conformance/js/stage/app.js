// The conformance stage: one operation per config (see ../../README.md).
import * as weir from "weir";

const SETTINGS = {
  copy: ["from", "to"],
  rename: ["from", "to"],
  split: ["field", "separator"],
  children: ["field"],
  drop: ["field", "equals"],
  fail: [],
};

export default class ConformanceStage extends weir.Stage {
  configure(config) {
    this.op = config.string("op", { oneOf: Object.keys(SETTINGS) });
    for (const name of SETTINGS[this.op] ?? []) this[name] = config.string(name);
  }

  process(doc) {
    return this[this.op](doc);
  }

  copy(doc) {
    if (!doc.has(this.from)) return;
    const values = doc.getAll(this.from);
    if (doc.isMultiValued(this.from)) doc.setAll(this.to, values);
    else doc.set(this.to, values[0]);
  }

  rename(doc) {
    doc.rename(this.from, this.to, "overwrite");
  }

  split(doc) {
    const text = doc.getString(this.field);
    if (text === undefined) return;
    const pieces = text.split(this.separator).map((piece) => piece.trim());
    doc.setAll(this.field, pieces.filter((piece) => piece !== ""));
  }

  children(doc) {
    const children = [];
    doc.getAll(this.field).forEach((value, position) => {
      if (value?.constructor !== Object) return;
      children.push(weir.Document.create(`${doc.id}-${position}`, { ...value, parent_id: doc.id }));
    });
    doc.remove(this.field);
    return children;
  }

  drop(doc) {
    if (doc.getString(this.field) === this.equals) doc.drop();
  }

  fail(doc) {
    if (doc.get("transient") === true) throw new weir.Transient(`service unavailable for ${doc.id}`);
    if (doc.get("fail") === true) throw new weir.Failure(`cannot process ${doc.id}`);
  }
}
