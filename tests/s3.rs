//! A small native S3 client for the tests and benchmarks: buckets, objects
//! put, got, listed and deleted on the test server ([`crate::s3_url`]),
//! signed with the s3-connector's own SigV4 code.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[path = "../plugins/connectors/s3-connector/src/sigv4.rs"]
#[allow(dead_code)]
mod sigv4;

/// The test server's access key id.
pub const ACCESS_KEY: &str = "weir-test";
/// The test server's secret key.
pub const SECRET_KEY: &str = "weir-test-secret";

/// An answer: status, headers (names in lower case) and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Path-style requests to one endpoint, region us-east-1.
#[derive(Debug)]
pub struct Client {
    endpoint: String,
    agent: ureq::Agent,
}

impl Client {
    pub fn new(endpoint: &str) -> Self {
        Self {
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            agent: ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_global(Some(Duration::from_secs(60)))
                .build()
                .into(),
        }
    }

    /// `method /bucket/key?query` with `body`, signed.
    pub fn send(
        &self,
        method: &str,
        bucket: &str,
        key: &str,
        query: &[(&str, &str)],
        body: &[u8],
    ) -> Answer {
        let host = crate::authority(&self.endpoint);
        let path = format!(
            "/{}/{}",
            sigv4::encode(bucket, false),
            sigv4::encode(key, true)
        );
        let path = if key.is_empty() {
            path.trim_end_matches('/').to_owned()
        } else {
            path
        };
        let seconds = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let amz_date = sigv4::amz_date(seconds);
        let payload = sigv4::payload_sha256(body);
        let headers = sigv4::sign(
            &sigv4::Unsigned {
                method,
                host,
                path: &path,
                query,
                amz_date: &amz_date,
                payload_sha256: &payload,
            },
            &sigv4::Credentials {
                access_key: ACCESS_KEY,
                secret_key: SECRET_KEY,
                session_token: None,
                region: "us-east-1",
            },
        );
        let query = sigv4::query_string(query);
        let uri = if query.is_empty() {
            format!("{}{path}", self.endpoint)
        } else {
            format!("{}{path}?{query}", self.endpoint)
        };
        let request = headers
            .into_iter()
            .fold(
                ureq::http::Request::builder().method(method).uri(&uri),
                |r, (n, v)| r.header(n, v),
            )
            .body(body.to_vec())
            .expect("request");
        let mut response = self
            .agent
            .run(request)
            .unwrap_or_else(|e| panic!("{method} {uri}: {e}"));
        let headers = response
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_ascii_lowercase(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect();
        let body = response
            .body_mut()
            .with_config()
            .limit(1 << 30)
            .read_to_vec()
            .unwrap_or_default();
        Answer {
            status: response.status().as_u16(),
            headers,
            body,
        }
    }

    /// Make `bucket` (it may exist).
    pub fn create_bucket(&self, bucket: &str) {
        let answer = self.send("PUT", bucket, "", &[], b"");
        assert!(
            answer.status == 200 || answer.text().contains("BucketAlreadyOwnedByYou"),
            "creating bucket {bucket}: {} {}",
            answer.status,
            answer.text()
        );
    }

    pub fn put(&self, bucket: &str, key: &str, body: &[u8]) {
        let answer = self.send("PUT", bucket, key, &[], body);
        assert_eq!(answer.status, 200, "PUT {key}: {}", answer.text());
    }

    pub fn delete(&self, bucket: &str, key: &str) {
        let answer = self.send("DELETE", bucket, key, &[], b"");
        assert!(
            answer.status == 204 || answer.status == 200,
            "DELETE {key}: {}",
            answer.text()
        );
    }

    pub fn get(&self, bucket: &str, key: &str) -> Vec<u8> {
        let answer = self.send("GET", bucket, key, &[], b"");
        assert_eq!(answer.status, 200, "GET {key}: {}", answer.text());
        answer.body
    }

    /// Every key under `prefix`, a page of `page` at a time (ListObjectsV2).
    pub fn keys(&self, bucket: &str, prefix: &str, page: usize) -> Vec<String> {
        let mut keys = Vec::new();
        let mut token: Option<String> = None;
        let page = page.to_string();
        loop {
            let mut query = vec![
                ("list-type", "2"),
                ("max-keys", page.as_str()),
                ("prefix", prefix),
            ];
            if let Some(token) = &token {
                query.push(("continuation-token", token.as_str()));
            }
            let answer = self.send("GET", bucket, "", &query, b"");
            assert_eq!(answer.status, 200, "listing: {}", answer.text());
            let text = answer.text();
            keys.extend(
                between_all(&text, "<Key>", "</Key>")
                    .into_iter()
                    .map(unescape),
            );
            match between_all(&text, "<NextContinuationToken>", "</NextContinuationToken>").first()
            {
                Some(next) if text.contains("<IsTruncated>true</IsTruncated>") => {
                    token = Some(unescape(next));
                }
                _ => return keys,
            }
        }
    }
}

fn between_all<'a>(text: &'a str, open: &str, close: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        let after = &rest[start + open.len()..];
        let Some(end) = after.find(close) else { break };
        out.push(&after[..end]);
        rest = &after[end + close.len()..];
    }
    out
}

fn unescape(text: &str) -> String {
    text.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}
