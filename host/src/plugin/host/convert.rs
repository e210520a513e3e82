//! Values between the host and a plugin: JSON values as WIT `value`s
//! (numbers exactly as written) and back, and document errors as WIT
//! field errors.

use serde_json::Value as Json;

use crate::core::document;
use crate::plugin::bindings::{FieldError, Value};

/// A WIT `value` from a JSON value.
pub(crate) fn to_wit(value: &Json) -> Value {
    match value {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Boolean(*b),
        Json::Number(n) => number_to_wit(n),
        Json::String(s) => Value::Text(s.clone()),
        other => Value::Json(other.to_string()),
    }
}

/// A JSON value from a WIT `value`.
/// JSON text is parsed within `max_bytes` (the document's limit): a value
/// that could never fit is refused before it is built.
pub(crate) fn from_wit(value: Value, max_bytes: usize) -> Result<Json, document::FieldError> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Boolean(b) => Json::Bool(b),
        Value::Integer(i) => Json::from(i),
        Value::Float(f) => serde_json::Number::from_f64(f)
            .map(Json::Number)
            .ok_or_else(|| document::FieldError::WrongType(format!("{f} is not a JSON number")))?,
        Value::Text(s) => Json::String(s),
        // Refused before it is read: its text alone is over the document's
        // limit, whatever it denotes.
        Value::Number(text) if text.len() > max_bytes => {
            return Err(document::FieldError::TooLarge(format!(
                "a number of {} characters is larger than a document may be ({max_bytes} bytes, {})",
                text.len(),
                crate::core::limit::Limit::MaxDocumentMib
            )));
        }
        Value::Number(text) => {
            Json::Number(document::number_as_written(&text).ok_or_else(|| {
                document::FieldError::WrongType(format!(
                    "`{}` is not a JSON number",
                    crate::core::text::cut_at(&text, 64)
                        .map_or_else(|| text.clone(), |kept| format!("{kept}..."))
                ))
            })?)
        }
        Value::Json(text) => document::parse_value_within(&text, max_bytes)?,
    })
}

/// WIT values as one multi-valued JSON value (an array), for a document
/// of at most `max_bytes`.
pub(super) fn from_wit_all(
    values: Vec<Value>,
    max_bytes: usize,
) -> Result<Json, document::FieldError> {
    let values = values.into_iter().map(|v| from_wit(v, max_bytes));
    Ok(Json::Array(values.collect::<Result<_, _>>()?))
}

/// A JSON number as the WIT `value` that holds it exactly: `integer` when
/// s64 holds it, `float` when f64 holds it as written, else its text.
fn number_to_wit(n: &serde_json::Number) -> Value {
    let text = n.as_str();
    let integral = !text.contains(['.', 'e', 'E']);
    if integral {
        return match text.parse::<i64>() {
            // `-0` is not the integer 0 as written.
            Ok(i) if i != 0 || !text.starts_with('-') => Value::Integer(i),
            _ => Value::Number(text.to_owned()),
        };
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() && document::same_number(text, &f.to_string()) => Value::Float(f),
        _ => Value::Number(text.to_owned()),
    }
}

pub(super) fn to_wit_error(error: document::FieldError) -> FieldError {
    use document::FieldError as E;
    match error {
        E::ReservedField(m) => FieldError::ReservedField(m),
        E::WrongType(m) => FieldError::WrongType(m),
        E::InvalidPath(m) => FieldError::InvalidPath(m),
        E::InvalidJson(m) => FieldError::InvalidJson(m),
        E::TooLarge(m) => FieldError::TooLarge(m),
    }
}

pub(super) fn wit_result<T>(r: Result<T, document::FieldError>) -> Result<T, FieldError> {
    r.map_err(to_wit_error)
}

#[cfg(test)]
mod tests {
    use super::{Value, from_wit, to_wit};
    use serde_json::Value as Json;

    fn number(text: &str) -> Json {
        serde_json::from_str(text).expect("a JSON number")
    }

    #[test]
    fn numbers_reach_plugins_exactly() {
        assert!(matches!(to_wit(&number("-5")), Value::Integer(-5)));
        assert!(matches!(
            to_wit(&number("9223372036854775807")),
            Value::Integer(i64::MAX)
        ));
        assert!(matches!(to_wit(&number("1.5")), Value::Float(f) if f == 1.5));
        assert!(matches!(to_wit(&number("-1.0e-7")), Value::Float(f) if f == -1e-7));
        assert!(matches!(to_wit(&number("100e-2")), Value::Float(f) if f == 1.0));
        for exact in [
            "9223372036854775808",
            "-99999999999999999999",
            "0.12345678901234567890123",
            "1e400",
            "-0",
        ] {
            let Value::Number(text) = to_wit(&number(exact)) else {
                panic!("{exact} was not handed over as its text");
            };
            assert!(
                crate::core::document::same_number(&text, exact),
                "{exact} became {text}"
            );
        }
    }

    #[test]
    fn numbers_from_plugins_are_checked_and_kept() {
        for written in [
            "18446744073709551616",
            "1e400",
            "1E400",
            "1E5",
            "-0",
            "0.1e-7",
            "1e99999999999999999999",
        ] {
            let kept = from_wit(Value::Number(written.into()), 1 << 20).expect("kept");
            assert_eq!(kept.to_string(), written, "kept as written");
        }
        for bad in ["", "1x", "--1", "[1]", "NaN", "1 2"] {
            assert!(
                from_wit(Value::Number(bad.into()), 1 << 20).is_err(),
                "{bad:?} accepted"
            );
        }
        assert!(from_wit(Value::Float(f64::NAN), 1 << 20).is_err());
        // Longer than a document may be: refused before it is read, naming
        // the limit.
        let digits = "9".repeat((1 << 20) + 1);
        let e = from_wit(Value::Number(digits), 1 << 20).expect_err("too long");
        assert!(
            matches!(&e, crate::core::document::FieldError::TooLarge(m) if m.contains("limits.max_document_mib")),
            "{e:?}"
        );
    }
}
