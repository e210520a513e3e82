//! Where two JSON values differ, by field path (`title`, `meta.lang`):
//! inside objects present on both sides, key by key; whole values elsewhere.
//!
//! What it costs is bounded by what it finds, not by the values' shape: it
//! stops once it has found its most differences, builds the path it walks
//! in one buffer (a key pushed on the way in, cut off on the way out), cut
//! to its longest path as it is built, and copies a path only for a
//! difference it keeps. Each value is walked once (equal subtrees are found
//! equal on the way down, not compared again at each level).

use std::borrow::Cow;

use serde_json::Value;

use super::document::same_json;

/// One difference: where, and each side's value there (`None` for a side
/// without it).
pub(crate) type Difference<'v> = (String, Option<Cow<'v, Value>>, Option<Cow<'v, Value>>);

/// The differences found so far, and the path being walked.
pub(crate) struct Differences<'v> {
    found: Vec<Difference<'v>>,
    /// Found no more than this many: the walk stops there.
    max: usize,
    /// The path walked, cut to `max_path` bytes.
    path: String,
    /// Its length in full.
    path_len: usize,
    max_path: usize,
}

impl<'v> Differences<'v> {
    /// At most `max` differences, each path cut to `max_path` bytes (its
    /// full length then said).
    pub(crate) fn new(max: usize, max_path: usize) -> Self {
        Self {
            found: Vec::new(),
            max,
            path: String::new(),
            path_len: 0,
            max_path,
        }
    }

    /// Every difference, with its full path.
    pub(crate) fn unbounded() -> Self {
        Self::new(usize::MAX, usize::MAX)
    }

    /// Whether it has found its most.
    pub(crate) fn is_full(&self) -> bool {
        self.found.len() >= self.max
    }

    pub(crate) fn found(&self) -> &[Difference<'v>] {
        &self.found
    }

    pub(crate) fn into_found(self) -> Vec<Difference<'v>> {
        self.found
    }

    /// Run `walk` with `key` appended to the path (after a dot, unless the
    /// path is empty).
    pub(crate) fn within(&mut self, key: &str, walk: impl FnOnce(&mut Self)) {
        if self.is_full() {
            return;
        }
        let saved = (self.path.len(), self.path_len);
        let dot = if self.path_len == 0 { "" } else { "." };
        self.path_len += dot.len() + key.len();
        for part in [dot, key] {
            let room = self.max_path.saturating_sub(self.path.len());
            match super::text::cut_at(part, room) {
                None => self.path.push_str(part),
                Some(kept) => {
                    self.path.push_str(kept);
                    break;
                }
            }
        }
        walk(self);
        self.path.truncate(saved.0);
        self.path_len = saved.1;
    }

    /// A difference here: `e` on one side, `a` on the other.
    pub(crate) fn record(&mut self, e: Option<Cow<'v, Value>>, a: Option<Cow<'v, Value>>) {
        if self.is_full() {
            return;
        }
        let at = if self.path_len > self.path.len() {
            format!("{}... ({} bytes in all)", self.path, self.path_len)
        } else {
            self.path.clone()
        };
        self.found.push((at, e, a));
    }

    /// Where `a` differs from `e`, under the path walked.
    pub(crate) fn compare(&mut self, e: &'v Value, a: &'v Value) {
        if self.is_full() {
            return;
        }
        let (Value::Object(eo), Value::Object(ao)) = (e, a) else {
            if !same_json(e, a) {
                self.record(Some(Cow::Borrowed(e)), Some(Cow::Borrowed(a)));
            }
            return;
        };
        for (key, ev) in eo {
            self.within(key, |d| match ao.get(key) {
                Some(av) => d.compare(ev, av),
                None => d.record(Some(Cow::Borrowed(ev)), None),
            });
        }
        for (key, av) in ao.iter().filter(|(k, _)| !eo.contains_key(*k)) {
            self.within(key, |d| d.record(None, Some(Cow::Borrowed(av))));
        }
    }
}

/// Where `a` differs from `e`, by field path (`title`, `meta.lang`; empty
/// for the whole value, or under `path` when one is given): inside objects
/// present in both, key by key; whole values elsewhere. `None` is a field
/// one side does not have.
pub(crate) fn field_differences<'v>(path: &str, e: &'v Value, a: &'v Value) -> Vec<Difference<'v>> {
    let mut found = Differences::unbounded();
    if path.is_empty() {
        found.compare(e, a);
    } else {
        found.within(path, |d| d.compare(e, a));
    }
    found.into_found()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn differences_by_path_and_whole_values_elsewhere() {
        let e = json!({ "a": 1, "m": { "x": [1, 2], "y": "same", "gone": true }, "n": 1.0 });
        let a = json!({ "a": 2, "m": { "x": [1, 3], "y": "same", "new": null }, "n": 1 });
        let mut d = Differences::unbounded();
        d.compare(&e, &a);
        let found: Vec<(&str, Option<&Value>, Option<&Value>)> = d
            .found()
            .iter()
            .map(|(p, e, a)| (p.as_str(), e.as_deref(), a.as_deref()))
            .collect();
        assert_eq!(
            found,
            [
                ("a", Some(&json!(1)), Some(&json!(2))),
                ("m.x", Some(&json!([1, 2])), Some(&json!([1, 3]))),
                ("m.gone", Some(&json!(true)), None),
                ("m.new", None, Some(&json!(null))),
            ]
        );
        let copy = e.clone();
        let mut same = Differences::unbounded();
        same.compare(&e, &copy);
        assert!(same.found().is_empty());
    }

    /// A document of many differing fields costs no more than the
    /// differences kept: the walk stops at its most.
    #[test]
    fn the_walk_stops_at_its_most_differences() {
        let e: serde_json::Map<String, Value> =
            (0..100_000).map(|n| (format!("f{n}"), json!(n))).collect();
        let a: serde_json::Map<String, Value> =
            (0..100_000).map(|n| (format!("f{n}"), json!(-n))).collect();
        let (e, a) = (Value::Object(e), Value::Object(a));
        let mut d = Differences::new(65, 256);
        d.compare(&e, &a);
        assert_eq!(d.found().len(), 65);
        assert_eq!(d.found()[64].0, "f65");
    }

    /// Deep paths of long keys are cut as they are built: each kept path is
    /// at most its bound and says how long it was.
    #[test]
    fn paths_are_cut_as_they_are_built() {
        let key = "k".repeat(1000);
        let (mut e, mut a) = (json!(1), json!(2));
        for _ in 0..200 {
            e = json!({ key.clone(): e });
            a = json!({ key.clone(): a });
        }
        let mut d = Differences::new(65, 256);
        d.compare(&e, &a);
        let [(path, _, _)] = d.found() else {
            panic!("{:?}", d.found().len())
        };
        let full = 200 * 1000 + 199;
        assert_eq!(
            path,
            &format!(
                "{}... ({full} bytes in all)",
                &("k".repeat(1000) + ".")[..256]
            )
        );
        // Cut on a character boundary.
        let e = json!({ "é".repeat(200): { "x": 1 } });
        let a = json!({ "é".repeat(200): { "x": 2 } });
        let mut d = Differences::new(65, 255);
        d.compare(&e, &a);
        assert!(
            d.found()[0].0.starts_with(&"é".repeat(127)),
            "{}",
            d.found()[0].0
        );
        assert!(
            d.found()[0].0.ends_with("... (402 bytes in all)"),
            "{}",
            d.found()[0].0
        );
    }
}
