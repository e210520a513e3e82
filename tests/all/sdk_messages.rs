//! A streaming connector in Python (`weir.messages`, built for the
//! `streaming-connector` world), through the `weir` binary on the test
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

#[test]
fn a_python_streaming_connector_publishes_deletes_and_rejects_by_message() {
    let amqp = Amqp::test_broker();
    let queue = unique("python");
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
    std::fs::write(src.join("app.py"), PYTHON).expect("app.py");
    let component = sdk_component("python", "streaming-connector", &src);
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
    let last = lines.last().expect("lines");
    assert_eq!(
        (last["id"].as_str(), last["_deleted"].as_bool()),
        (Some("o-3"), Some(true))
    );
    for doc in &lines[..30] {
        assert_eq!(doc["lang"], "python", "{doc}");
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
            .is_some_and(|e| e.contains("JSONDecodeError")),
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
