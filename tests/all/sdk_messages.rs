//! A streaming connector in Python and in JavaScript (`weir.messages`, built
//! for the `streaming-connector` world), through the `weir` binary on the test
//! RabbitMQ node: each message a document, a delete event a deletion, a
//! body that is not JSON rejected (dead-lettered with its origin, on the
//! broker too), every message acknowledged once done, and the run ends
//! after its `limit`.

use serde_json::Value;
use weir_tests::{sdk_component, with_plugins};

use crate::queue_source::{Amqp, unique};

const WEIR: &str = env!("CARGO_BIN_EXE_weir-under-test");

const PYTHON: &str = r#"import json
import weir
from weir import messages


class Orders(weir.Connector):
    def configure(self, config: weir.Config):
        self.limit = config.integer("limit")

    def execute(self, publisher: weir.Publisher):
        messages.consume(publisher, "orders", self.becomes, batch=20, wait_ms=200, limit=self.limit)

    def becomes(self, message):
        fields = json.loads(messages.text(message) or "")
        if fields.get("delete"):
            return messages.Delete(fields["id"])
        fields.update({"lang": "python", "attempt": message.attempt, "origin": message.origin})
        return weir.Document(fields["id"], fields)
"#;

/// The same connector in JavaScript.
const JS: &str = r#"import * as weir from "weir";

const messages = weir.messages;

export default class Orders extends weir.Connector {
  configure(config) {
    this.limit = config.integer("limit");
  }

  execute(publisher) {
    messages.consume(publisher, "orders", (message) => this.becomes(message), { batch: 20, waitMs: 200, limit: this.limit });
  }

  becomes(message) {
    const fields = JSON.parse(messages.text(message) ?? "");
    if (fields.delete) return new messages.Delete(fields.id);
    Object.assign(fields, { lang: "js", attempt: message.attempt, origin: message.origin });
    return weir.Document.create(fields.id, fields);
  }
}
"#;

#[test]
fn a_python_streaming_connector_publishes_deletes_and_rejects_by_message() {
    streams("python", "JSONDecodeError");
}

#[test]
fn a_js_streaming_connector_publishes_deletes_and_rejects_by_message() {
    streams("js", "SyntaxError");
}

/// The connector in `lang` on a queue of 30 documents, a body that is not
/// JSON (its error names `parse_error`) and a delete event.
fn streams(lang: &str, parse_error: &str) {
    let amqp = Amqp::test_broker();
    let queue = unique(lang);
    amqp.declare(&queue);
    let mut bodies: Vec<String> = (0..30)
        .map(|i| format!(r#"{{"id":"o-{i}","n":{i}}}"#))
        .collect();
    bodies.push("not json".to_owned());
    bodies.push(r#"{"id":"o-3","delete":true}"#.to_owned());
    amqp.publish(&queue, &bodies);

    let dir = tempfile::tempdir().expect("tempdir");
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).expect("src");
    std::fs::create_dir_all(dir.path().join("out")).expect("out");
    let (file, text) = if lang == "python" {
        ("app.py", PYTHON)
    } else {
        ("app.js", JS)
    };
    std::fs::write(src.join(file), text).expect("connector source");
    let component = sdk_component(lang, "streaming-connector", &src);
    let config = format!(
        r#"
        [worker]
        threads = 2
        [dead_letters]
        path = "dead.jsonl"
        [[connectors]]
        name = "orders"
        pipeline = "p"
        plugin = {{ path = {component:?}, config = {{ limit = {limit} }}, grants = {{ queues = {{ orders = {{ url = "${{QUEUE_URL}}", queue = {queue:?}, batch_wait = "20ms" }} }} }} }}
        [[pipelines]]
        name = "p"
        [indexer]
        batch_size = 10
        batch_timeout = "20ms"
        plugin = {{ path = {indexer}, config = {{ path = "/out/out.jsonl" }}, grants = {{ dirs = [{{ host = "out", guest = "/out", writable = true }}] }} }}
        "#,
        component = component.display().to_string(),
        limit = bodies.len(),
        indexer = with_plugins("@jsonl-indexer"),
    );
    let path = dir.path().join("run.toml");
    std::fs::write(&path, config).expect("config");
    let output = std::process::Command::new(WEIR)
        .args(["run", "--no-progress"])
        .arg(&path)
        .env("QUEUE_URL", &amqp.url)
        .output()
        .expect("weir starts");
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // The rejected message fails: a partial success.
    assert_eq!(output.status.code(), Some(3), "{log}");

    let lines: Vec<Value> = std::fs::read_to_string(dir.path().join("out/out.jsonl"))
        .expect("output")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(lines.len(), 31, "30 documents and a deletion:\n{log}");
    // One id's lines in order (ids apart go through apart): o-3's last
    // line is its deletion.
    let o3: Vec<&Value> = lines.iter().filter(|l| l["id"] == "o-3").collect();
    assert_eq!(o3.len(), 2, "{o3:?}");
    assert_eq!(o3[1]["_deleted"], true, "{o3:?}");
    for doc in lines.iter().filter(|l| l["_deleted"] != true) {
        assert_eq!(doc["lang"], lang, "{doc}");
        assert_eq!(doc["attempt"], 1, "{doc}");
        assert_eq!(doc["origin"], queue.as_str(), "{doc}");
    }
    let letters = std::fs::read_to_string(dir.path().join("dead.jsonl")).expect("dead letters");
    let letters: Vec<Value> = letters
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect();
    assert_eq!(letters.len(), 1, "{letters:?}");
    assert!(
        letters[0]["error"]
            .as_str()
            .is_some_and(|e| e.contains(parse_error)),
        "{letters:?}"
    );
    // Every message settled on the broker: none left, the invalid one on
    // the dead-letter queue.
    assert_eq!(amqp.counts(&queue), (0, 0));
    let dlq = format!("{queue}.dead-letters");
    assert_eq!(amqp.counts(&dlq).0, 1);
    amqp.delete(&queue);
    amqp.delete(&dlq);
}
