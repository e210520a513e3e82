//! The Python and JavaScript sources `weir new` writes: a stage on the batch
//! API (a batch of documents per call, an outcome per document), a connector
//! and an indexer. `{{name}}` becomes the plugin's name.

pub(super) const PYTHON_STAGE: &str = r#""""{{name}}: upper-cases the text of one field."""
import weir


class Upper(weir.Stage):
    def configure(self, config: weir.Config):
        self.field = config.string("field")

    def process_batch(self, docs: list[weir.Document]):
        # One call per batch; one outcome per document, in order: None (done),
        # a list of new documents (its children), or an exception (it failed).
        outcomes = []
        for doc in docs:
            value = doc.get(self.field)
            if isinstance(value, str):
                doc.set(self.field, value.upper())
                outcomes.append(None)
            elif value is None:
                outcomes.append(None)
            else:
                outcomes.append(weir.Failure(f"`{self.field}` of {doc.id} is not text"))
        return outcomes
"#;

pub(super) const PYTHON_CONNECTOR: &str = r#""""{{name}}: publishes `count` numbered documents."""
import weir


class Numbers(weir.Connector):
    def configure(self, config: weir.Config):
        self.count = config.integer("count", min=0)

    def execute(self, publisher):
        # How many it will publish: `weir run` shows the share done and the time left.
        publisher.expect(self.count)
        for n in range(self.count):
            publisher.publish(weir.Document(f"doc-{n}", {"n": n}))

"#;

pub(super) const PYTHON_INDEXER: &str = r#""""{{name}}: appends each document as a JSON line to a file."""
import weir


class Lines(weir.Indexer):
    wants_json = True

    def configure(self, config: weir.Config):
        self.path = config.string("path")

    def start(self):
        self.file = open(self.path, "w", encoding="utf-8")

    def index_batch(self, entries):
        for entry in entries:
            self.file.write(entry.json + "\n")
        self.file.flush()

    def close(self):
        self.file.close()
"#;

pub(super) const JS_STAGE: &str = r#"// {{name}}: upper-cases the text of one field.
import * as weir from "weir";

export default class Upper extends weir.Stage {
  configure(config) {
    this.field = config.string("field");
  }

  // One call per batch; one outcome per document, in order: undefined (done),
  // an array of new documents (its children), or an Error (it failed).
  processBatch(docs) {
    return docs.map((doc) => {
      const value = doc.get(this.field);
      if (typeof value === "string") doc.set(this.field, value.toUpperCase());
      else if (value !== undefined) return new weir.Failure(`\`${this.field}\` of ${doc.id} is not text`);
      return undefined;
    });
  }
}
"#;

pub(super) const JS_CONNECTOR: &str = r#"// {{name}}: publishes `count` numbered documents.
import * as weir from "weir";

export default class Numbers extends weir.Connector {
  configure(config) {
    this.count = config.integer("count", { min: 0 });
  }

  execute(publisher) {
    // How many it will publish: `weir run` shows the share done and the time left.
    publisher.expect(this.count);
    for (let n = 0; n < this.count; n++) {
      publisher.publish(weir.Document.create(`doc-${n}`, { n }));
    }
  }
}
"#;

pub(super) const JS_INDEXER: &str = r#"// {{name}}: appends each document as a JSON line to a file.
import * as weir from "weir";

export default class Lines extends weir.Indexer {
  wantsJson = true;

  configure(config) {
    this.path = config.string("path");
  }

  start() {
    this.file = weir.File.open(this.path, "w");
  }

  indexBatch(entries) {
    for (const entry of entries) this.file.write(`${entry.json}\n`);
    this.file.flush();
  }

  close() {
    this.file?.close();
  }
}
"#;

/// A stage project's pipeline: the stage alone, for `weir test`.
pub(super) const PIPELINE: &str = r#"# A pipeline of this stage, for `weir test test/pipeline.toml`, which runs the
# cases of pipeline.cases.toml through it. With no connectors and no indexer it is a
# config of pipelines only: add the stages your pipelines run beside this one to test
# them together.

[[pipelines]]
name = "main"
stages = [
  { name = "{{name}}", plugin = { path = "../{{name}}.wasm", config = { field = "title" } } },
]
"#;

/// A stage project's pipeline cases.
pub(super) const PIPELINE_CASES: &str = r#"# Cases of pipeline.toml: each sends `input` through a pipeline's stages (from
# `before`, the first by default, to `after`, the last by default) and compares what
# came out with `expect`: {document = ...}, {event = "CREATE", id, parent},
# {event = "DROP", id}, {event = "FAIL", id, stage, error, message}.

[[cases]]
name = "the title is upper-cased"
pipeline = "main"
input = [{ id = "1", title = "hello" }]
expect = [{ document = { id = "1", title = "HELLO" } }]

[[cases]]
name = "a document without a title goes through as it came"
pipeline = "main"
input = [{ id = "2", body = "text" }]
expect = [{ document = { id = "2", body = "text" } }]
"#;
