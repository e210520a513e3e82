//! Comparing JSON numbers by value. Documents keep numbers exactly as
//! written (`1.0e-7` stays `1.0e-7`), so `==` on two values compares their
//! text; these compare the decimal numbers the texts denote.

use serde_json::Value;

/// Whether two JSON number texts denote the same decimal number
/// (`1.50` and `1.5e0` do; `0.1` and `0.1000000000000000055` do not).
pub fn same_number(a: &str, b: &str) -> bool {
    match (decimal_parts(a), decimal_parts(b)) {
        (Some(x), Some(y)) => x == y,
        // An exponent beyond i64: equal only as the same text.
        _ => a == b,
    }
}

/// A number's sign, significant digits (no leading or trailing zeros) and
/// the power of ten of its first digit; zero is `(false, "", 0)`. `None`
/// when the exponent does not fit an i64.
fn decimal_parts(text: &str) -> Option<(bool, String, i128)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], i128::from(rest[at + 1..].parse::<i64>().ok()?)),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    let leading = digits.len() - digits.trim_start_matches('0').len();
    let significant = digits.trim_matches('0');
    if significant.is_empty() {
        return Some((false, String::new(), 0));
    }
    let position = exponent + whole.len() as i128 - leading as i128;
    Some((negative, significant.to_owned(), position))
}

/// Whether two JSON values are equal, numbers by their decimal value
/// (`1.0e-7` equals `1e-7`; with numbers kept as written, `==` compares text).
pub fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => same_number(x.as_str(), y.as_str()),
        (Value::Array(xs), Value::Array(ys)) => {
            xs.len() == ys.len() && xs.iter().zip(ys).all(|(x, y)| same_json(x, y))
        }
        (Value::Object(xs), Value::Object(ys)) => {
            xs.len() == ys.len()
                && xs
                    .iter()
                    .all(|(k, x)| ys.get(k).is_some_and(|y| same_json(x, y)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::{same_json, same_number};

    #[test]
    fn numbers_compare_by_value() {
        assert!(same_number("1.5", "1.50"));
        assert!(same_number("-1.0e-7", "-0.0000001"));
        assert!(same_number("1e+400", "1E400"));
        assert!(same_number("0", "-0.0"));
        assert!(!same_number("0.1", "0.1000000000000000055"));
        assert!(!same_number("-1", "1"));
        assert!(!same_number("1e99999999999999999999", "1"));
        assert!(!same_number(
            "1e9223372036854775807",
            "10e9223372036854775807"
        ));
        assert!(same_json(
            &serde_json::json!({ "a": [1.0, { "b": 2 }] }),
            &serde_json::from_str(r#"{"a":[1,{"b":2.00}]}"#).expect("json")
        ));
    }
}
