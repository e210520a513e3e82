//! embed-text against a loopback service speaking each API's shape (the
//! request it sends, batching, order, keys, retries and the checks on what
//! comes back), and against the real model server of `tests/embedder/`: a
//! small model whose vectors must put like texts nearer than unlike ones.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use weir::plugin::PluginSpec;
use weir_tests::spec;

/// Requests seen: (path, authorization header, body).
type Seen = Arc<Mutex<Vec<(String, Option<String>, Value)>>>;

/// A service answering each input with `[chars, 1, 0.5]`, in the shape of
/// the API its path names; `/busy/...` answers 429 to its first request.
fn service() -> (u16, Seen) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let seen: Seen = Arc::default();
    let log = Arc::clone(&seen);
    std::thread::spawn(move || {
        let mut busy_once = true;
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut line = String::new();
            let _ = reader.read_line(&mut line);
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let (mut length, mut auth, mut chunked) = (0usize, None, false);
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
                let (name, value) = header.split_once(':').unwrap_or_default();
                match name.to_ascii_lowercase().as_str() {
                    "content-length" => length = value.trim().parse().unwrap_or(0),
                    "authorization" => auth = Some(value.trim().to_owned()),
                    "transfer-encoding" => chunked = value.trim().eq_ignore_ascii_case("chunked"),
                    _ => {}
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            if chunked {
                body.clear();
                loop {
                    let mut size = String::new();
                    let _ = reader.read_line(&mut size);
                    let size = usize::from_str_radix(size.trim(), 16).unwrap_or(0);
                    let mut chunk = vec![0; size + 2];
                    if size == 0 || reader.read_exact(&mut chunk).is_err() {
                        break;
                    }
                    body.extend_from_slice(&chunk[..size]);
                }
            }
            let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            log.lock()
                .expect("log")
                .push((path.clone(), auth, request.clone()));
            let inputs: Vec<String> = request
                .get("input")
                .or_else(|| request.get("inputs"))
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(|v| v.as_str().unwrap_or_default().to_owned())
                        .collect()
                })
                .unwrap_or_default();
            let vector = |t: &String| json!([t.chars().count(), 1, 0.5]);
            let (status, answer) = if path.starts_with("/busy") && busy_once {
                busy_once = false;
                (429, json!({ "error": "slow down" }))
            } else if path.trim_start_matches("/busy") == "/v1/embeddings" {
                // Out of order, as servers may answer: `index` says where.
                let mut data: Vec<Value> = inputs
                    .iter()
                    .enumerate()
                    .map(|(i, t)| json!({ "index": i, "embedding": vector(t) }))
                    .collect();
                data.reverse();
                (200, json!({ "data": data, "model": request["model"] }))
            } else if path == "/api/embed" {
                (
                    200,
                    json!({ "embeddings": inputs.iter().map(vector).collect::<Vec<_>>() }),
                )
            } else if path == "/embed" {
                (200, json!(inputs.iter().map(vector).collect::<Vec<_>>()))
            } else {
                (404, json!({ "error": "no such route" }))
            };
            let body = answer.to_string();
            let mut stream = stream;
            let _ = write!(
                stream,
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

fn embedder(port: u16, config: Value) -> PluginSpec {
    let mut s = spec("embed-text", config);
    s.grants.http.push(format!("127.0.0.1:{port}"));
    s
}

#[test]
fn embed_text_sends_batches_in_each_api_shape_and_keeps_order() {
    let (port, seen) = service();
    let url = format!("http://127.0.0.1:{port}");
    for (api, path) in [
        ("openai", "/v1/embeddings"),
        ("ollama", "/api/embed"),
        ("tei", "/embed"),
    ] {
        let mut s = embedder(
            port,
            json!({ "url": url, "api": api, "model": "m", "source": "t", "dimensions": 3, "max_inputs": 2, "api_key_env": "KEY" }),
        );
        s.grants.env.insert("KEY".into(), "secret".into());
        let out = crate::text_stages::batch_with(
            s,
            vec![
                json!({ "id": "a", "t": "one" }),
                json!({ "id": "b" }),
                json!({ "id": "c", "t": "three" }),
                json!({ "id": "d", "t": ["fo", "ur"] }),
            ],
        );
        let vectors: Vec<Value> = out
            .iter()
            .map(|r| {
                r.as_ref()
                    .expect("embedded")
                    .0
                    .get("vector")
                    .cloned()
                    .unwrap_or(Value::Null)
            })
            .collect();
        assert_eq!(
            vectors,
            [
                json!([3, 1, 0.5]),
                Value::Null,
                json!([5, 1, 0.5]),
                json!([5, 1, 0.5])
            ],
            "{api}"
        );
        let seen = std::mem::take(&mut *seen.lock().expect("log"));
        assert_eq!(
            seen.len(),
            2,
            "three texts in requests of at most two: {seen:?}"
        );
        assert!(
            seen.iter()
                .all(|(p, auth, _)| p == path && auth.as_deref() == Some("Bearer secret")),
            "{seen:?}"
        );
        let first = &seen[0].2;
        if api == "tei" {
            assert_eq!(first["inputs"], json!(["one", "three"]));
        } else {
            assert_eq!(
                (first["model"].clone(), first["input"].clone()),
                (json!("m"), json!(["one", "three"]))
            );
        }
    }
}

#[test]
fn embed_text_retries_a_busy_service_and_checks_what_comes_back() {
    let (port, _) = service();
    // A 429 fails the batch transiently: the worker's retries (here, the
    // next call) succeed.
    let busy = embedder(
        port,
        json!({ "url": format!("http://127.0.0.1:{port}/busy"), "model": "m", "source": "t" }),
    );
    let plugin = weir_tests::runtime().load_stage("s", &busy).expect("load");
    let mut instance = plugin.instantiate().expect("instantiate");
    let mut d = weir_tests::doc(json!({ "id": "a", "t": "x" }));
    let first = instance.process(&mut d).expect_err("429");
    assert!(
        matches!(
            first,
            weir::plugin::PluginError::Document {
                transient: true,
                ..
            }
        ),
        "{first}"
    );
    assert!(first.to_string().contains("answered 429"), "{first}");
    instance.process(&mut d).expect("the second try");
    assert_eq!(d.fields_json()["vector"], json!([1, 1, 0.5]));

    // A model of another size fails each document, naming both sizes.
    let wrong = embedder(
        port,
        json!({ "url": format!("http://127.0.0.1:{port}"), "model": "m", "source": "t", "dimensions": 384 }),
    );
    let out = crate::text_stages::batch_with(wrong, vec![json!({ "id": "a", "t": "x" })]);
    let error = out[0].as_ref().expect_err("wrong size");
    assert!(error.contains("3 dimensions, not the 384"), "{error}");

    // A key not granted stops the stage at start, saying how to grant it.
    let plugin = weir_tests::runtime()
        .load_stage("s", &embedder(port, json!({ "url": "http://127.0.0.1:1", "model": "m", "source": "t", "api_key_env": "NOPE" })))
        .expect("load");
    let Err(error) = plugin.instantiate() else {
        panic!("a key not granted must stop the stage at start");
    };
    let error = error.to_string();
    assert!(
        error.contains("`NOPE`") && error.contains("grants.env"),
        "{error}"
    );

    // A route that is not the API's fails the documents with the answer.
    let lost = embedder(
        port,
        json!({ "url": format!("http://127.0.0.1:{port}/elsewhere"), "api": "tei", "source": "t" }),
    );
    let out = crate::text_stages::batch_with(lost, vec![json!({ "id": "a", "t": "x" })]);
    assert!(
        out[0].as_ref().expect_err("404").contains("answered 404"),
        "{out:?}"
    );
}

fn cosine(a: &[f64], b: &[f64]) -> f64 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array()
        .map(|a| a.iter().filter_map(Value::as_f64).collect())
        .unwrap_or_default()
}

#[test]
fn embed_text_gets_vectors_from_a_real_model_in_each_api_shape() {
    let url = weir_tests::embedder_url();
    let texts = [
        "a weir across a river holds back the water",
        "a small dam across a stream",
        "file your income tax forms before april",
    ];
    let docs: Vec<Value> = texts
        .iter()
        .enumerate()
        .map(|(i, t)| json!({ "id": i.to_string(), "text": t }))
        .collect();
    let mut by_api = Vec::new();
    for api in ["openai", "ollama", "tei"] {
        let mut s = spec(
            "embed-text",
            json!({ "url": url, "api": api, "model": "wordllama", "source": "text", "dimensions": 256, "max_inputs": 2 }),
        );
        s.grants.http = serde_json::from_str(&weir_tests::http_grants(url)).expect("grants");
        let out = crate::text_stages::batch_with(s, docs.clone());
        let vectors: Vec<Vec<f64>> = out
            .iter()
            .map(|r| floats(&r.as_ref().expect("embedded").0["vector"]))
            .collect();
        for v in &vectors {
            assert_eq!(v.len(), 256, "{api}");
            let norm = cosine(v, v).sqrt();
            assert!((norm - 1.0).abs() < 1e-3, "{api}: norm {norm}");
        }
        let (near, far) = (
            cosine(&vectors[0], &vectors[1]),
            cosine(&vectors[0], &vectors[2]),
        );
        assert!(near > far + 0.1, "{api}: weir~dam {near}, weir~tax {far}");
        by_api.push(vectors);
    }
    // One model behind three shapes: the same text, the same vector.
    for other in &by_api[1..] {
        assert!(cosine(&by_api[0][0], &other[0]) > 0.999);
    }
}
