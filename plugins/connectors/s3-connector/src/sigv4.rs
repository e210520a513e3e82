//! AWS Signature Version 4 for S3 requests: the canonical request, the
//! string to sign, the key derived per day, region and service, and the
//! `Authorization` header. (The tests' S3 client signs with this file too.)

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// The SHA-256 of an empty payload, hex.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Who signs, and where.
pub struct Credentials<'a> {
    pub access_key: &'a str,
    pub secret_key: &'a str,
    /// A temporary credential's session token (`x-amz-security-token`).
    pub session_token: Option<&'a str>,
    pub region: &'a str,
}

/// One request to sign.
pub struct Unsigned<'a> {
    pub method: &'a str,
    /// The `Host` header: the request's authority, port included when the
    /// URL has one.
    pub host: &'a str,
    /// The path, each segment already percent-encoded (see [`encode`]).
    pub path: &'a str,
    /// Query parameters, not encoded; sorted here.
    pub query: &'a [(&'a str, &'a str)],
    /// `YYYYMMDD'T'HHMMSS'Z'`.
    pub amz_date: &'a str,
    /// The hex SHA-256 of the body ([`EMPTY_SHA256`] for none).
    pub payload_sha256: &'a str,
}

/// Percent-encode `text` as SigV4 wants: everything but `A-Za-z0-9-._~`,
/// and `/` too unless `keep_slash`.
pub fn encode(text: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                out.push(byte as char);
            }
            b'/' if keep_slash => out.push('/'),
            other => out.push_str(&format!("%{other:02X}")),
        }
    }
    out
}

/// The query string, encoded and sorted, as it is sent and signed.
pub fn query_string(query: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (encode(k, false), encode(v, false)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

fn hmac(key: &[u8], data: &str) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data.as_bytes());
    mac.finalize().into_bytes().to_vec()
}

/// The hex SHA-256 of `body`.
pub fn payload_sha256(body: &[u8]) -> String {
    hex(&Sha256::digest(body))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The headers to send with `request`: `x-amz-date`,
/// `x-amz-content-sha256`, the session token when there is one, and
/// `authorization`.
pub fn sign(request: &Unsigned<'_>, credentials: &Credentials<'_>) -> Vec<(&'static str, String)> {
    let date = &request.amz_date[..8];
    let mut headers: Vec<(&'static str, String)> = vec![
        ("host", request.host.to_owned()),
        ("x-amz-content-sha256", request.payload_sha256.to_owned()),
        ("x-amz-date", request.amz_date.to_owned()),
    ];
    if let Some(token) = credentials.session_token {
        headers.push(("x-amz-security-token", token.to_owned()));
    }
    let signed: Vec<&str> = headers.iter().map(|(name, _)| *name).collect();
    let signed = signed.join(";");
    let canonical_headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}:{}\n", value.trim()))
        .collect();
    let canonical = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed}\n{}",
        request.method,
        request.path,
        query_string(request.query),
        request.payload_sha256
    );
    let scope = format!("{date}/{}/s3/aws4_request", credentials.region);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{scope}\n{}",
        request.amz_date,
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let key = ["s3", "aws4_request"].iter().fold(
        hmac(
            &hmac(format!("AWS4{}", credentials.secret_key).as_bytes(), date),
            credentials.region,
        ),
        |key, part| hmac(&key, part),
    );
    let signature = hex(&hmac(&key, &to_sign));
    headers.retain(|(name, _)| *name != "host");
    headers.push((
        "authorization",
        format!(
            "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
            credentials.access_key
        ),
    ));
    headers
}

/// `seconds` since the Unix epoch as `YYYYMMDD'T'HHMMSS'Z'`.
pub fn amz_date(seconds: u64) -> String {
    let days = seconds / 86_400;
    let rest = seconds % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    format!(
        "{year:04}{month:02}{day:02}T{:02}{:02}{:02}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's algorithm).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// AWS's documented example: GET /test.txt with a Range header is
    /// another shape; this one is the ListObjects example of the S3 API
    /// reference ("GET Bucket (List Objects)"), signed with the docs' keys.
    #[test]
    fn the_aws_list_objects_example_signs_as_documented() {
        let headers = sign(
            &Unsigned {
                method: "GET",
                host: "examplebucket.s3.amazonaws.com",
                path: "/",
                query: &[("max-keys", "2"), ("prefix", "J")],
                amz_date: "20130524T000000Z",
                payload_sha256: EMPTY_SHA256,
            },
            &Credentials {
                access_key: "AKIAIOSFODNN7EXAMPLE",
                secret_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                session_token: None,
                region: "us-east-1",
            },
        );
        let auth = headers
            .iter()
            .find(|(n, _)| *n == "authorization")
            .map(|(_, v)| v.as_str())
            .expect("signed");
        assert_eq!(
            auth,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;x-amz-content-sha256;x-amz-date, \
             Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"
        );
    }

    #[test]
    fn keys_are_encoded_byte_by_byte_and_dates_are_civil() {
        assert_eq!(encode("a b/ü~*", true), "a%20b/%C3%BC~%2A");
        assert_eq!(encode("a/b", false), "a%2Fb");
        assert_eq!(
            query_string(&[("prefix", "x y"), ("list-type", "2")]),
            "list-type=2&prefix=x%20y"
        );
        assert_eq!(payload_sha256(b""), EMPTY_SHA256);
        assert_eq!(amz_date(0), "19700101T000000Z");
        assert_eq!(amz_date(1_369_353_600), "20130524T000000Z");
        assert_eq!(amz_date(951_782_400 + 86_399), "20000229T235959Z");
    }
}
