//! embed-text's settings: what the plugin parses, and what the plugin
//! reference (docs/plugin-reference.md) is generated from.

use std::time::Duration;

/// Turn a text field into a vector with an embedding service, a batch of
/// documents per request.
///
/// The text is `source`'s value (the text values of a multi-valued field
/// joined with line breaks), cut to `max_chars` characters; a document
/// whose `source` is absent, not text, or only whitespace is left as it is.
/// The documents of a batch that have text go in requests of at most
/// `max_inputs` texts, and each gets its vector in `target` (a list of
/// numbers). The service's host must be in the plugin's `grants.http`.
///
/// A 429 or 5xx answer, or a service that cannot be reached, fails every
/// document of the batch transiently (the worker's retries apply); any
/// other error answer (with the service's message), an answer that is not
/// JSON, of another API's shape or with another number of vectors than
/// texts fails every document of the batch. A vector that is not a list of
/// finite numbers, or not of `dimensions` numbers, fails its document.
/// `timeout` bounds each request; the stage's `limits.call_timeout` bounds
/// the whole batch call, so size `batch.size` and `max_inputs` to fit in it.
///
/// With `cache` (the default), each vector is kept in the host's cache (the
/// run's `[cache]`) under a SHA-256 of the model, the API's URL,
/// `dimensions` and the text, and looked up there first: only texts not
/// found are sent (each text once per batch), so a page edited in one
/// place has only its changed chunks embedded again. A cache that cannot be
/// used is skipped with a warning in the log; it never fails a document.
#[derive(serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// The service's base URL (`http://` or `https://`, no credentials,
    /// query or fragment in it); the API's path is appended to it.
    pub url: String,
    /// The shape of the service's API.
    #[serde(default)]
    pub api: Api,
    /// The model to ask for; needed by the `openai` and `ollama` APIs, not
    /// sent to `tei` (its server serves one model).
    pub model: Option<String>,
    /// The field holding the text to embed.
    pub source: String,
    /// The field that gets the vector.
    #[serde(default = "Config::vector")]
    pub target: String,
    /// How many numbers each vector must have (1 to 65536); a vector of
    /// another length fails its document. Unset: any length is taken.
    pub dimensions: Option<usize>,
    /// The environment variable holding the service's key, sent as
    /// `Authorization: Bearer <key>`; it must be granted to the plugin
    /// (`grants.env`), and the stage does not start without it. Unset: no key
    /// is sent.
    pub api_key_env: Option<String>,
    /// Most texts in one request (1 to 4096).
    #[serde(default = "Config::max_inputs")]
    pub max_inputs: usize,
    /// Most characters (Unicode scalar values) of a text sent; the rest is
    /// left out (at least 1).
    #[serde(default = "Config::max_chars")]
    pub max_chars: usize,
    /// Longest wait for one request, in seconds (more than 0, at most 3600;
    /// fractions allowed).
    #[serde(default = "Config::timeout", with = "seconds")]
    #[schemars(with = "f64")]
    pub timeout: Duration,
    /// Look vectors up in the host's cache before asking the service, and
    /// keep the ones it answers there.
    #[serde(default = "Config::cache")]
    pub cache: bool,
}

/// The API an embedding service speaks.
#[derive(
    serde::Deserialize, serde::Serialize, schemars::JsonSchema, Clone, Copy, Default, PartialEq,
)]
#[serde(rename_all = "lowercase")]
pub enum Api {
    /// `POST <url>/v1/embeddings`, `{model, input}` answered by
    /// `data[].embedding`: OpenAI, vLLM, LiteLLM, llama.cpp and most servers.
    #[default]
    Openai,
    /// Ollama's `POST <url>/api/embed`, `{model, input}` answered by
    /// `embeddings`.
    Ollama,
    /// Hugging Face text-embeddings-inference, `POST <url>/embed`, `{inputs,
    /// truncate: true}` answered by a list of vectors.
    Tei,
}

/// `timeout` as a number of seconds.
mod seconds {
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(
        d: D,
    ) -> Result<std::time::Duration, D::Error> {
        let s: f64 = serde::Deserialize::deserialize(d)?;
        if !(s > 0.0 && s <= 3600.0) {
            return Err(serde::de::Error::custom(
                "must be more than 0 and at most 3600 seconds",
            ));
        }
        Ok(std::time::Duration::from_secs_f64(s))
    }

    /// For the default shown in the plugin reference (the plugin only reads
    /// settings).
    pub fn serialize<S: serde::Serializer>(
        d: &std::time::Duration,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }
}

impl Config {
    fn vector() -> String {
        "vector".into()
    }
    fn max_inputs() -> usize {
        64
    }
    fn max_chars() -> usize {
        8192
    }
    fn timeout() -> Duration {
        Duration::from_secs(30)
    }
    fn cache() -> bool {
        true
    }
}
