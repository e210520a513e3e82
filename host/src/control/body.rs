//! Reading a request's body within its bounds: its size (refused on its
//! `Content-Length` before a byte is read) and the time it is sent in.

use std::pin::Pin;
use std::time::Duration;

use axum::body::{Body, HttpBody};

use super::ApiError;
use crate::core::problem::{Problem, Problems};

/// Largest config a tenant may submit.
pub(super) const MAX_CONFIG_BYTES: usize = 1 << 20;

/// A submitted config: at most [`MAX_CONFIG_BYTES`] (refused on its
/// `Content-Length` before a byte is read), sent within `timeout`, UTF-8.
pub(super) async fn read_config(body: Body, timeout: Duration) -> Result<String, ApiError> {
    let too_large = || ApiError::TooLarge {
        max: MAX_CONFIG_BYTES,
    };
    let bytes = read_body(body, MAX_CONFIG_BYTES, timeout, too_large).await?;
    String::from_utf8(bytes).map_err(|_| {
        ApiError::Invalid(Problems::one(Problem::whole(
            "the config is not UTF-8 text",
        )))
    })
}

/// A request's body: at most `max` bytes (else `too_large()`, on its
/// `Content-Length` before a byte is read, or once it grows past), sent
/// within `timeout`.
pub(super) async fn read_body(
    mut body: Body,
    max: usize,
    timeout: Duration,
    too_large: impl Fn() -> ApiError,
) -> Result<Vec<u8>, ApiError> {
    if body.size_hint().lower() > max as u64 {
        return Err(too_large());
    }
    let read = async {
        let mut bytes = Vec::with_capacity(usize::try_from(body.size_hint().lower()).unwrap_or(0));
        while let Some(frame) = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await
        {
            let frame =
                frame.map_err(|e| ApiError::BadRequest(format!("cannot read the body: {e}")))?;
            if let Ok(data) = frame.into_data() {
                if bytes.len() + data.len() > max {
                    return Err(too_large());
                }
                bytes.extend_from_slice(&data);
            }
        }
        Ok(bytes)
    };
    tokio::time::timeout(timeout, read)
        .await
        .map_err(|_| ApiError::SlowBody(timeout))?
}
