//! Compact JSON writing, as `serde_json` writes it, with strings escaped
//! eight bytes at a time (documents are mostly long runs of plain text).

use serde_json::Value;

/// `value` as compact JSON text, appended to `out`.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_value(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write_value(out, v);
            }
            out.push(b'}');
        }
        // Scalars: writing to a Vec cannot fail.
        scalar => {
            let _ = serde_json::to_writer(&mut *out, scalar);
        }
    }
}

const LOW: u64 = 0x0101_0101_0101_0101;
const HIGH: u64 = 0x8080_8080_8080_8080;

/// Whether any of the eight bytes of `x` is a control character, `"` or `\`.
fn needs_escape(x: u64) -> bool {
    let has_zero = |y: u64| y.wrapping_sub(LOW) & !y & HIGH;
    let control = x.wrapping_sub(LOW * 0x20) & !x & HIGH;
    (control | has_zero(x ^ (LOW * u64::from(b'"'))) | has_zero(x ^ (LOW * u64::from(b'\\')))) != 0
}

pub(super) fn write_str(out: &mut Vec<u8>, s: &str) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let bytes = s.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let (mut i, mut run) = (0, 0);
    while i < bytes.len() {
        if let Some(chunk) = bytes.get(i..i + 8)
            && let Ok(chunk) = <[u8; 8]>::try_from(chunk)
            && !needs_escape(u64::from_le_bytes(chunk))
        {
            i += 8;
            continue;
        }
        let byte = bytes[i];
        let escape: Option<&[u8]> = match byte {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            0x08 => Some(b"\\b"),
            0x0c => Some(b"\\f"),
            0..0x20 => None,
            _ => {
                i += 1;
                continue;
            }
        };
        out.extend_from_slice(&bytes[run..i]);
        match escape {
            Some(escape) => out.extend_from_slice(escape),
            None => out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(byte >> 4)],
                HEX[usize::from(byte & 0xf)],
            ]),
        }
        i += 1;
        run = i;
    }
    out.extend_from_slice(&bytes[run..]);
    out.push(b'"');
}
