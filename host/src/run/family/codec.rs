//! How the children of one root are written in the host's `#children`
//! state: a JSON array, compact for the ids stages make.
//!
//! Each element is one of
//! - `"+<suffix>"`: the root's id followed by `<suffix>` (`page-3` of
//!   root `page` is `"+-3"`);
//! - `"=<id>"`: an id that does not start with the root's;
//! - `["+<suffix>", a, b]` (or `["=<id>", a, b]`): that text followed by
//!   each number from `a` to `b`, written without leading zeros (chunks
//!   `page-0` to `page-999` are `[["+-", 0, 999]]`).
//!
//! The value is the same whatever order the ids came in: they are sorted,
//! by their text before a trailing number and then by that number.

use serde_json::Value;

/// Longest trailing number taken as a number: its value fits in a `u64`.
const MAX_DIGITS: usize = 18;

/// Runs of at least this many consecutive numbers are written as a range.
const MIN_RANGE: u64 = 3;

/// `id` as its tagged text before a trailing number, and that number
/// (none when the id does not end in a number written without leading
/// zeros).
fn split(root: &str, id: &str) -> (String, Option<u64>) {
    let tagged = match id.strip_prefix(root) {
        Some(suffix) => format!("+{suffix}"),
        None => format!("={id}"),
    };
    let digits = tagged.len() - tagged.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    // The tag itself is never part of the number.
    let digits = digits.min(tagged.len() - 1);
    if digits == 0 || digits > MAX_DIGITS {
        return (tagged, None);
    }
    let at = tagged.len() - digits;
    let number = &tagged[at..];
    if number.len() > 1 && number.starts_with('0') {
        return (tagged, None);
    }
    match number.parse() {
        Ok(n) => (tagged[..at].to_owned(), Some(n)),
        Err(_) => (tagged, None),
    }
}

/// The value that keeps `children` of `root` (duplicates once), or `None`
/// when there are none.
pub(crate) fn encode(root: &str, children: &[String]) -> Option<String> {
    if children.is_empty() {
        return None;
    }
    let mut parts: Vec<(String, Option<u64>)> = children.iter().map(|id| split(root, id)).collect();
    parts.sort_unstable();
    parts.dedup();
    let mut out: Vec<Value> = Vec::with_capacity(parts.len());
    let mut i = 0;
    while i < parts.len() {
        let (text, number) = &parts[i];
        let Some(first) = *number else {
            out.push(Value::String(text.clone()));
            i += 1;
            continue;
        };
        // How far the numbers after it run on by one.
        let mut last = first;
        let mut j = i + 1;
        while j < parts.len()
            && parts[j].0 == *text
            && last.checked_add(1).is_some_and(|n| parts[j].1 == Some(n))
        {
            last += 1;
            j += 1;
        }
        if last - first + 1 >= MIN_RANGE {
            out.push(Value::Array(vec![
                Value::String(text.clone()),
                first.into(),
                last.into(),
            ]));
        } else {
            for n in first..=last {
                out.push(Value::String(format!("{text}{n}")));
            }
        }
        i = j;
    }
    Some(Value::Array(out).to_string())
}

/// Why a kept value cannot be read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub(crate) struct Unreadable(String);

/// Most ids one value may stand for: a range written by hand could
/// otherwise ask for billions.
pub(crate) const MAX_CHILDREN: u64 = 1 << 20;

/// The children `value` keeps for `root`, in the order written.
pub(crate) fn decode(root: &str, value: &str) -> Result<Vec<String>, Unreadable> {
    let bad = |why: &str| Unreadable(format!("not a list of children ({why})"));
    let Value::Array(elements) = serde_json::from_str(value).map_err(|e| bad(&e.to_string()))?
    else {
        return Err(bad("not an array"));
    };
    let untag = |text: &str| -> Result<String, Unreadable> {
        if let Some(suffix) = text.strip_prefix('+') {
            Ok(format!("{root}{suffix}"))
        } else if let Some(id) = text.strip_prefix('=') {
            Ok(id.to_owned())
        } else {
            Err(bad("an element starts with neither `+` nor `=`"))
        }
    };
    let mut ids = Vec::with_capacity(elements.len());
    for element in &elements {
        match element {
            Value::String(text) => ids.push(untag(text)?),
            Value::Array(range) => {
                let [Value::String(text), first, last] = range.as_slice() else {
                    return Err(bad("a range is not [text, first, last]"));
                };
                let (Some(first), Some(last)) = (first.as_u64(), last.as_u64()) else {
                    return Err(bad("a range's ends are not numbers"));
                };
                if last < first || (ids.len() as u64).saturating_add(last - first) >= MAX_CHILDREN {
                    return Err(bad("a range is empty or too long"));
                }
                let text = untag(text)?;
                ids.extend((first..=last).map(|n| format!("{text}{n}")));
            }
            _ => return Err(bad("an element is neither text nor a range")),
        }
    }
    Ok(ids)
}
