//! Content in and HTML extraction: pages in several character sets, from a
//! field, a granted file and a URL; malformed, deep, huge and hostile pages
//! each fail (or pass) only their own document, naming their cause; and the
//! cost of extraction against the size of its input. One file per topic:
//! HTML and fetched content, Office and PDF files, XML, cost.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpListener;

use serde_json::Value;
use weir::plugin::{DirGrant, PluginSpec};

mod cost;
mod documents;
mod html;
mod xml;

/// Each document's fields after one batch call, or its error.
fn batch(spec: &PluginSpec, inputs: Vec<Value>) -> Vec<Result<Value, String>> {
    crate::text_stages::batch_with(spec.clone(), inputs)
        .into_iter()
        .map(|r| r.map(|(fields, _)| fields))
        .collect()
}

pub(crate) fn granted(mut spec: PluginSpec, dir: &std::path::Path) -> PluginSpec {
    spec.grants.dirs.push(DirGrant {
        host: dir.to_path_buf(),
        guest: "/pages".into(),
        writable: false,
        opened: None,
    });
    spec
}

/// A loopback HTTP server answering each path with (status, content type, body).
fn serve(routes: HashMap<&'static str, (u16, &'static str, Vec<u8>)>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                match stream.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => request.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&request);
            let path = line.split_whitespace().nth(1).unwrap_or("/").to_owned();
            let (status, media, body) =
                routes
                    .get(path.as_str())
                    .cloned()
                    .unwrap_or((404, "text/plain", b"no".to_vec()));
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: {media}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream
                .write_all(head.as_bytes())
                .and_then(|()| stream.write_all(&body));
        }
    });
    port
}
