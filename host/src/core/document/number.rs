//! Numbers exactly as written, and compared by value. Documents keep
//! numbers as their text (`1.0e-7` stays `1.0e-7`, `1E400` stays `1E400`),
//! so `==` on two values compares their text; [`same_number`] and
//! [`same_json`] compare the decimal numbers the texts denote.
//!
//! serde_json (`arbitrary_precision`) keeps a number's digits but writes its
//! exponent its own way (`1E5` reads as `1e+5`); [`Spellings`] finds the
//! number as the JSON text wrote it, so the document keeps that.

use std::cell::Cell;

use serde_json::{Number, Value};

/// A number from its text, kept exactly as written when `text` is one JSON
/// number token and nothing else (with whitespace around it, as serde_json
/// writes it); `None` when it is not a JSON number.
pub fn number_as_written(text: &str) -> Option<Number> {
    let parsed: Number = serde_json::from_str(text).ok()?;
    Some(spelled(text, parsed))
}

/// `parsed` (serde_json's reading of a number) holding `written`, the text
/// it was read from, when that is a plain number token that denotes it.
fn spelled(written: &str, parsed: Number) -> Number {
    let token = written.bytes().all(is_number_byte);
    if token && written != parsed.as_str() && same_number(written, parsed.as_str()) {
        // The only way to keep a number's text as is: serde_json's own
        // parser rewrites the exponent. `written` is a valid JSON number
        // (it parsed, and is nothing but number characters).
        Number::from_string_unchecked(written.to_owned())
    } else {
        parsed
    }
}

fn is_number_byte(b: u8) -> bool {
    matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E')
}

/// The numbers of one JSON text as written, for a parse of that text that
/// meets them in order. serde_json keeps a number's digits, sign and
/// fraction as written; only one with an exponent can differ, so only those
/// are looked up, each as the next exponent token of the text (the text is
/// read once, from where the last look ended).
pub(super) struct Spellings<'t> {
    text: &'t str,
    /// Where the next exponent token not yet handed out may start.
    at: Cell<usize>,
}

impl<'t> Spellings<'t> {
    pub(super) fn new(text: &'t str) -> Self {
        Self {
            text,
            at: Cell::new(0),
        }
    }

    /// `parsed`, the next number the parse met, as the text wrote it. A
    /// token that denotes another number is left for the next look (the
    /// parse met something that was not a number token: serde_json's
    /// reserved map key), and `parsed` kept as it is.
    pub(super) fn next(&self, parsed: Number) -> Number {
        if !parsed.as_str().contains('e') {
            return parsed;
        }
        match self.next_exponent_token() {
            Some((written, end)) if same_number(written, parsed.as_str()) => {
                self.at.set(end);
                spelled(written, parsed)
            }
            _ => parsed,
        }
    }

    /// The next number token with an exponent, outside strings, and where
    /// it ends.
    fn next_exponent_token(&self) -> Option<(&'t str, usize)> {
        let bytes = self.text.as_bytes();
        let mut i = self.at.get();
        while i < bytes.len() {
            match bytes[i] {
                b'"' => i = string_end(bytes, i + 1),
                b'-' | b'0'..=b'9' => {
                    let start = i;
                    while i < bytes.len() && is_number_byte(bytes[i]) {
                        i += 1;
                    }
                    let token = self.text.get(start..i)?;
                    if token.contains(['e', 'E']) {
                        return Some((token, i));
                    }
                }
                _ => i += 1,
            }
        }
        None
    }
}

/// Where the string whose text starts at `i` ends (past its closing quote).
fn string_end(bytes: &[u8], mut i: usize) -> usize {
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    i
}

/// Whether two JSON number texts denote the same decimal number
/// (`1.50` and `1.5e0` do; `0.1` and `0.1000000000000000055` do not).
pub fn same_number(a: &str, b: &str) -> bool {
    match (decimal_parts(a), decimal_parts(b)) {
        (Some(x), Some(y)) => x == y,
        // An exponent beyond i128 (a number no engine holds): the same
        // when written the same but for the exponent's spelling
        // (`1E+0099...` is `1e99...`).
        _ => a == b || spelled_alike(a, b),
    }
}

/// Whether `a` and `b` differ only in how their exponent is spelled: `e`
/// or `E`, a `+`, leading zeros.
fn spelled_alike(a: &str, b: &str) -> bool {
    fn normal(text: &str) -> Option<(&str, bool, &str)> {
        let at = text.find(['e', 'E'])?;
        let exponent = &text[at + 1..];
        let (negative, digits) = match exponent.as_bytes().first() {
            Some(b'-') => (true, &exponent[1..]),
            Some(b'+') => (false, &exponent[1..]),
            _ => (false, exponent),
        };
        let digits = digits.trim_start_matches('0');
        Some((&text[..at], negative && !digits.is_empty(), digits))
    }
    normal(a).is_some_and(|x| Some(x) == normal(b))
}

/// A number's sign, significant digits (no leading or trailing zeros) and
/// the power of ten of its first digit; zero is `(false, "", 0)`. `None`
/// when the exponent does not fit an i128 (39 digits and more).
fn decimal_parts(text: &str) -> Option<(bool, String, i128)> {
    let (negative, rest) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (mantissa, exponent) = match rest.find(['e', 'E']) {
        Some(at) => (&rest[..at], rest[at + 1..].parse::<i128>().ok()?),
        None => (rest, 0),
    };
    let (whole, fraction) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits: String = whole.chars().chain(fraction.chars()).collect();
    let leading = digits.len() - digits.trim_start_matches('0').len();
    let significant = digits.trim_matches('0');
    if significant.is_empty() {
        return Some((false, String::new(), 0));
    }
    let position = exponent.checked_add(whole.len() as i128 - leading as i128)?;
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
    use super::{Spellings, number_as_written, same_json, same_number};

    #[test]
    fn numbers_are_kept_as_written() {
        for text in [
            "1e400",
            "1E400",
            "-0",
            "-0.0",
            "1E5",
            "1e+5",
            "1E-5",
            "0.1e-7",
            "123456789012345678901234567890",
            "-123456789012345678901234567890.0000000000000000001e-99999",
            // Exponents past i64, and past i128: kept as given, never
            // rewritten as serde_json spells them (`1e+99...`).
            "1e99999999999999999999",
            "-2.5E-99999999999999999999",
            "1e999999999999999999999999999999999999999999",
            "7E+0999999999999999999999999999999999999999999",
        ] {
            let number = number_as_written(text).expect("a number");
            assert_eq!(number.as_str(), text);
            assert_eq!(serde_json::to_string(&number).expect("write"), text);
        }
        assert!(number_as_written("1e").is_none());
        assert!(number_as_written("x").is_none());
        // Not a bare token: read as serde_json reads it.
        assert_eq!(
            number_as_written(" 1E5").map(|n| n.as_str().to_owned()),
            Some("1e+5".into())
        );
    }

    #[test]
    fn huge_exponents_in_json_text_are_written_back_as_given() {
        let text = r#"{"a":1e99999999999999999999,"b":[-2E+0999999999999999999999999999999999999999999,3e5]}"#;
        let value = crate::core::document::parse_value_within(text, 1 << 20).expect("parses");
        assert_eq!(serde_json::to_string(&value).expect("write"), text);
    }

    #[test]
    fn spellings_follow_the_text_past_strings() {
        let text = r#"{"a\"1E1":1E2,"b\\\\":[3,"4E4",5e5,-6E-6],"c":7}"#;
        let spellings = Spellings::new(text);
        let parsed = ["1e+2", "3", "5e+5", "-6e-6", "7"];
        let kept: Vec<String> = parsed
            .iter()
            .map(|p| {
                spellings
                    .next(p.parse().expect("number"))
                    .as_str()
                    .to_owned()
            })
            .collect();
        assert_eq!(kept, ["1E2", "3", "5e5", "-6E-6", "7"]);
    }

    #[test]
    fn numbers_compare_by_value() {
        assert!(same_number("1.5", "1.50"));
        assert!(same_number("-1.0e-7", "-0.0000001"));
        assert!(same_number("1e+400", "1E400"));
        assert!(same_number("0", "-0.0"));
        assert!(!same_number("0.1", "0.1000000000000000055"));
        assert!(!same_number("-1", "1"));
        assert!(!same_number("1e99999999999999999999", "1"));
        assert!(same_number(
            "1e99999999999999999999",
            "1e+99999999999999999999"
        ));
        assert!(same_number(
            "10e99999999999999999999",
            "1E100000000000000000000"
        ));
        assert!(!same_number(
            "1e99999999999999999999",
            "1e99999999999999999998"
        ));
        let huge = "9".repeat(50);
        assert!(same_number(&format!("1e{huge}"), &format!("1E+{huge}")));
        assert!(!same_number(&format!("1e{huge}"), &format!("1e-{huge}")));
        assert!(!same_number(&format!("1e{huge}"), &format!("2e{huge}")));
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
