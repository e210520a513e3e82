//! s3-connector: publish one document per object of an S3 bucket, keeping
//! an index in step with it (new and changed objects, deletes).
//!
//! Settings: `config.rs` (and docs/plugin-reference.md, made from it).

mod config;
pub mod listing;
pub mod sigv4;

use std::collections::HashSet;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use config::{Addressing, Config, Content};
use listing::{Object, error_message, parse_page, unquoted};
use weir_plugin::http::{Request, Response, Retry, Url, send_with_retries};
use weir_plugin::serde_json::{self, Value as Json, json};
use weir_plugin::{ConfigIssue, Connector, Document, PluginError, Publisher, issue, sync};

/// Tries of a request answered 429 or 5xx, or not answered.
const TRIES: u32 = 4;

struct S3 {
    config: Config,
    endpoint: Url,
    access_key: String,
    secret_key: String,
    session_token: Option<String>,
    /// Keys listed this run (with `incremental`).
    seen: HashSet<String>,
}

fn env(name: &str, setting: &str) -> Result<String, PluginError> {
    std::env::var(name).map_err(|_| {
        PluginError::Fatal(format!(
            "the environment variable `{name}` ({setting}) is not set: grant it with grants.env"
        ))
    })
}

fn now_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

impl S3 {
    /// The URL of `key` in the bucket (the bucket itself for an empty key)
    /// with `query`, and the host it is signed for.
    fn url(&self, key: &str, query: &[(&str, &str)]) -> (Url, String, String) {
        let base = self.endpoint.path.trim_end_matches('/');
        let key = sigv4::encode(key, true);
        let (authority, path) = match self.config.addressing {
            Addressing::Path => (
                self.endpoint.authority.clone(),
                format!("{base}/{}/{key}", sigv4::encode(&self.config.bucket, false)),
            ),
            Addressing::Virtual => (
                format!("{}.{}", self.config.bucket, self.endpoint.authority),
                format!("{base}/{key}"),
            ),
        };
        let query_text = sigv4::query_string(query);
        let url = Url {
            https: self.endpoint.https,
            authority: authority.clone(),
            path: if query_text.is_empty() {
                path.clone()
            } else {
                format!("{path}?{query_text}")
            },
        };
        (url, authority, path)
    }

    /// A signed GET of `key` with `query`, tried again on 429, 5xx and no
    /// answer. `cut`: keep at most that many body bytes.
    fn get(
        &self,
        key: &str,
        query: &[(&str, &str)],
        cut: Option<usize>,
    ) -> Result<Response, PluginError> {
        let (url, host, path) = self.url(key, query);
        // Signed anew for each try: the signature holds the time.
        let request = || {
            let amz_date = sigv4::amz_date(now_seconds());
            let headers = sigv4::sign(
                &sigv4::Unsigned {
                    method: "GET",
                    host: &host,
                    path: &path,
                    query,
                    amz_date: &amz_date,
                    payload_sha256: sigv4::EMPTY_SHA256,
                },
                &sigv4::Credentials {
                    access_key: &self.access_key,
                    secret_key: &self.secret_key,
                    session_token: self.session_token.as_deref(),
                    region: &self.config.region,
                },
            );
            let mut request = headers
                .into_iter()
                .fold(Request::get(&url), |r, (name, value)| r.header(name, value));
            request = request.timeout(Duration::from_secs(self.config.timeout_secs));
            request = match cut {
                Some(bytes) => request.cut_body(bytes),
                // A listing page or an error: a few hundred KiB at most.
                None => request.max_body(16 << 20),
            };
            request
        };
        send_with_retries(
            TRIES,
            request,
            |retry| match retry {
                Retry::Status(response) => format!(
                    "{url} answered {}: {}",
                    response.status,
                    error_message(&response.text())
                ),
                Retry::Unreachable(why) => why.to_owned(),
            },
            PluginError::Fatal,
        )
    }

    /// Every object of the bucket under the prefix, a page at a time.
    fn each_object(
        &mut self,
        mut each: impl FnMut(&mut Self, Object) -> Result<(), PluginError>,
    ) -> Result<(), PluginError> {
        let mut token: Option<String> = None;
        loop {
            let mut query = vec![("list-type", "2"), ("max-keys", "1000")];
            if !self.config.prefix.is_empty() {
                query.push(("prefix", self.config.prefix.as_str()));
            }
            if let Some(token) = &token {
                query.push(("continuation-token", token.as_str()));
            }
            let response = self.get("", &query, None)?;
            let text = response.text();
            if !response.ok() {
                return Err(PluginError::Fatal(format!(
                    "listing bucket `{}` failed ({}): {}",
                    self.config.bucket,
                    response.status,
                    error_message(&text)
                )));
            }
            let page = parse_page(&text).map_err(|e| {
                PluginError::Fatal(format!("listing bucket `{}`: {e}", self.config.bucket))
            })?;
            for object in page.objects {
                each(self, object)?;
            }
            match page.next {
                Some(next) => token = Some(next),
                None => return Ok(()),
            }
        }
    }

    /// The document of `object`, fetched unless content is `none`; `None`
    /// when the object is gone since it was listed.
    fn document(&self, object: &Object) -> Result<Option<(Document, String)>, PluginError> {
        let mut fields = serde_json::Map::new();
        fields.insert("key".into(), json!(object.key));
        fields.insert("bucket".into(), json!(self.config.bucket));
        fields.insert("size".into(), json!(object.size));
        fields.insert("last_modified".into(), json!(object.last_modified));
        let mut etag = object.etag.clone();
        if self.config.content != Content::None {
            let max = usize::try_from(self.config.max_object_mib << 20).unwrap_or(usize::MAX);
            let response = self.get(&object.key, &[], Some(max))?;
            if response.status == 404 {
                return Ok(None);
            }
            if !response.ok() {
                return Err(PluginError::Fatal(format!(
                    "getting `{}` failed ({}): {}",
                    object.key,
                    response.status,
                    error_message(&response.text())
                )));
            }
            // What was fetched is what is kept: the object may have changed
            // since it was listed.
            if let Some(fetched) = response.header("etag") {
                etag = unquoted(fetched);
            }
            if let Some(kind) = &response.content_type {
                fields.insert("content_type".into(), json!(kind));
            }
            let content = match self.config.content {
                Content::Text => Json::String(String::from_utf8_lossy(&response.body).into_owned()),
                _ => Json::String(base64::engine::general_purpose::STANDARD.encode(&response.body)),
            };
            fields.insert(self.config.content_field.clone(), content);
            if response.truncated {
                fields.insert("content_truncated".into(), Json::Bool(true));
            }
        }
        fields.insert("etag".into(), json!(etag));
        let id = format!("{}{}", self.config.id_prefix, object.key);
        let doc =
            Document::from_json_with_id(&id, &Json::Object(fields).to_string()).map_err(|e| {
                PluginError::Fatal(format!(
                    "object `{}`: {}",
                    object.key,
                    weir_plugin::field_error_message(&e)
                ))
            })?;
        Ok(Some((doc, etag)))
    }

    fn sync_object(&mut self, publisher: &Publisher, object: Object) -> Result<(), PluginError> {
        // A folder marker is not a document.
        if object.key.ends_with('/') && object.size == 0 {
            return Ok(());
        }
        let incremental = self.config.incremental;
        if incremental {
            self.seen.insert(object.key.clone());
            if !sync::full_sync() && sync::get(&object.key).as_deref() == Some(object.etag.as_str())
            {
                return Ok(());
            }
        }
        match self.document(&object)? {
            Some((doc, etag)) => {
                publisher
                    .publish(doc)
                    .map_err(|e| PluginError::Fatal(format!("publish refused: {e}")))?;
                if incremental {
                    sync::set(&object.key, &etag)?;
                }
            }
            // Gone between the listing and the fetch.
            None => {
                self.seen.remove(&object.key);
            }
        }
        Ok(())
    }

    /// A delete for every object kept from an earlier run that the bucket no
    /// longer lists.
    fn delete_gone(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        let prefix = &self.config.id_prefix;
        let gone = sync::delete_unseen(publisher, &self.seen, |key| format!("{prefix}{key}"))?;
        if gone > 0 {
            weir_plugin::info!("{gone} objects are gone since the last run");
        }
        Ok(())
    }
}

impl Connector for S3 {
    type Config = Config;

    fn check(config: &Config) -> Vec<ConfigIssue> {
        let mut issues = Vec::new();
        match Url::parse_base(&config.endpoint) {
            Err(e) => issues.push(issue("endpoint", e)),
            Ok(url) if url.path != "/" => issues.push(issue(
                "endpoint",
                "give the server's address only: the bucket and keys are added to it",
            )),
            Ok(_) => {}
        }
        if config.bucket.is_empty() || config.bucket.contains(['/', '?', '#', ' ']) {
            issues.push(issue("bucket", "must be a bucket name"));
        }
        if config.region.is_empty()
            || !config
                .region
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        {
            issues.push(issue("region", "must be a region name such as `us-east-1`"));
        }
        if !(1..=1024).contains(&config.max_object_mib) {
            issues.push(issue("max_object_mib", "must be 1 to 1,024"));
        }
        if config.timeout_secs == 0 {
            issues.push(issue("timeout_secs", "must be at least 1"));
        }
        if config.content_field.is_empty() {
            issues.push(issue("content_field", "must name a field"));
        }
        issues.extend(weir_plugin::reserved_field_issues(
            "content_field",
            std::slice::from_ref(&config.content_field),
        ));
        for (setting, name) in [
            ("access_key_env", &config.access_key_env),
            ("secret_key_env", &config.secret_key_env),
        ] {
            if name.is_empty() {
                issues.push(issue(setting, "must name an environment variable"));
            }
        }
        issues
    }

    fn pre_execute(config: Config, _run_id: &str) -> Result<Self, PluginError> {
        let endpoint = Url::parse_base(&config.endpoint).map_err(PluginError::Fatal)?;
        Ok(Self {
            access_key: env(&config.access_key_env, "access_key_env")?,
            secret_key: env(&config.secret_key_env, "secret_key_env")?,
            session_token: match &config.session_token_env {
                Some(name) => Some(env(name, "session_token_env")?),
                None => None,
            },
            endpoint,
            config,
            seen: HashSet::new(),
        })
    }

    fn execute(&mut self, publisher: &Publisher) -> Result<(), PluginError> {
        self.each_object(|s3, object| s3.sync_object(publisher, object))?;
        if self.config.incremental {
            self.delete_gone(publisher)?;
        }
        Ok(())
    }
}

weir_plugin::export_connector!(S3);
