// The conformance stage written against the batch API: the operations of
// ../stage, a batch per call, each document's failure returned as its outcome,
// fields read and written through the several-fields calls (getMany,
// getAllMany, update). See ../../README.md.
import * as weir from "weir";

const SETTINGS = {
  copy: ["from", "to"],
  rename: ["from", "to"],
  split: ["field", "separator"],
  children: ["field"],
  drop: ["field", "equals"],
  fail: [],
};

export default class ConformanceBatchStage extends weir.Stage {
  configure(config) {
    this.op = config.string("op", { oneOf: Object.keys(SETTINGS) });
    for (const name of SETTINGS[this.op] ?? []) this[name] = config.string(name);
  }

  processBatch(docs) {
    return docs.map((doc) => this[this.op](doc));
  }

  copy(doc) {
    const [values] = doc.getAllMany([this.from]);
    if (!doc.has(this.from)) return undefined;
    doc.update(new Map([[this.to, doc.isMultiValued(this.from) ? values : values[0]]]));
    return undefined;
  }

  rename(doc) {
    doc.rename(this.from, this.to, "overwrite");
  }

  split(doc) {
    const text = doc.getString(this.field);
    if (text === undefined) return undefined;
    const pieces = text.split(this.separator).map((piece) => piece.trim());
    doc.update(new Map([[this.field, pieces.filter((piece) => piece !== "")]]));
    return undefined;
  }

  children(doc) {
    const children = [];
    doc.getAll(this.field).forEach((value, position) => {
      if (value?.constructor !== Object) return;
      children.push(weir.Document.create(`${doc.id}-${position}`, { ...value, parent_id: doc.id }));
    });
    doc.update(new Map([[this.field, weir.REMOVE]]));
    return children;
  }

  drop(doc) {
    if (doc.getString(this.field) === this.equals) doc.drop();
  }

  fail(doc) {
    const [transient, fail] = doc.getMany(["transient", "fail"]);
    if (transient === true) return new weir.Transient(`service unavailable for ${doc.id}`);
    if (fail === true) return new weir.Failure(`cannot process ${doc.id}`);
    return undefined;
  }
}
