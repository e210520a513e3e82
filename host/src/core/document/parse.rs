//! The bounded parser: JSON text into values and documents that never
//! count more than a byte budget (as [`value_bytes`](super::value_bytes)
//! counts), each part charged before it is built, so what a parse builds on
//! the way never passes the limit, whatever the text.
//!
//! The budget also records why a parse was refused (a typed [`Refusal`]),
//! so whether an error is "too large" or "not JSON" never depends on its
//! message text; and it stops nesting at the deepest a document may be, so
//! a refusal names `limits.max_depth` (never serde_json's recursion limit).
//! Numbers are kept as the text wrote them ([`Spellings`]).

use std::cell::Cell;

use serde::de::DeserializeSeed;
use serde_json::{Map, Value};

use super::limits::human_bytes;
use super::number::Spellings;
use super::sizing::{MIN_VALUE_BYTES, entry_bytes};
use super::{
    CHILDREN_FIELD, DELETED_FIELD, DocLimits, Document, FieldError, FieldName, Fields, ID_FIELD,
    RESERVED_FIELDS, RUN_ID_FIELD,
};
use crate::core::limit::Limit;

/// JSON text as a value that counts at most `max_bytes`
/// ([`value_bytes`](super::value_bytes)): the parse stops as soon as the
/// value would count more, so what is built on the way never passes the
/// limit, whatever the text.
pub fn parse_value_within(text: &str, max_bytes: usize) -> Result<Value, FieldError> {
    refuse_long_text(text, max_bytes)?;
    // Nested as deep as any document may hold: where the value goes, the
    // document's own check says how deep it may be there.
    let budget = ParseBudget::new(max_bytes, DocLimits::MAX_DEPTH, 0).reading(text);
    parse_text(text, &budget, |reader| budget.seed().deserialize(reader))
}

/// Text far longer than the limit (whitespace aside, JSON text is about as
/// long as what it builds) is refused before it is read at all.
fn refuse_long_text(text: &str, max_bytes: usize) -> Result<(), FieldError> {
    if text.len() > max_bytes.saturating_mul(4).saturating_add(1 << 10) {
        return Err(FieldError::TooLarge(format!(
            "{OVER_BUDGET}: {} bytes of JSON text for a limit of {max_bytes} bytes ({})",
            text.len(),
            Limit::MaxDocumentMib
        )));
    }
    Ok(())
}

/// The fields of JSON text holding one object, reserved keys left out as
/// they come (parsed and counted as any value, never built into the map):
/// a connector's `from-json-with-id`, whose id comes beside the text.
/// `None` when the text is not an object, for the caller to say so; what
/// is built counts at most `max_bytes`, as [`parse_value_within`] counts.
pub(super) fn parse_fields_within(
    text: &str,
    max_bytes: usize,
) -> Result<Option<Fields>, FieldError> {
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        // Not an object (or not JSON): read as any value, which says why.
        return match parse_value_within(text, max_bytes)? {
            Value::Object(fields) => Ok(Some(
                fields.into_iter().map(|(k, v)| (k.into(), v)).collect(),
            )),
            _ => Ok(None),
        };
    }
    refuse_long_text(text, max_bytes)?;
    let budget = ParseBudget::new(max_bytes, DocLimits::MAX_DEPTH, 0).reading(text);
    parse_text(text, &budget, |reader| {
        serde::Deserializer::deserialize_map(reader, FieldsVisitor { budget: &budget })
    })
}

/// Reads the fields of a top-level object within the budget, charging
/// exactly what [`Budgeted`] charges for the same object.
struct FieldsVisitor<'a, 't> {
    budget: &'a ParseBudget<'t>,
}

impl<'de> serde::de::Visitor<'de> for FieldsVisitor<'_, '_> {
    type Value = Option<Fields>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object of fields")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let budget = self.budget;
        budget.charge(MIN_VALUE_BYTES)?;
        budget.enter()?;
        let mut fields = Fields::with_capacity(FIELDS_HINT.get());
        let mut first = true;
        while let Some(key) = map.next_key_seed(NameSeed)? {
            if std::mem::take(&mut first) && key == NUMBER_TOKEN {
                // serde_json's reserved key makes the object a number, as
                // `Budgeted` reads it (and charges it): not an object of fields.
                let text: String = map.next_value()?;
                budget.charge(text.len().max(MIN_VALUE_BYTES))?;
                return Ok(None);
            }
            budget.charge(entry_bytes(&key, 0))?;
            let value = map.next_value_seed(budget.seed())?;
            if !RESERVED_FIELDS.contains(&key.as_str()) {
                fields.insert(key, value);
            }
        }
        budget.leave();
        FIELDS_HINT.set(fields.len().min(MAX_FIELDS_HINT));
        Ok(Some(fields))
    }
}

/// The most fields a connector's documents are sized for ahead of parsing.
const MAX_FIELDS_HINT: usize = 64;

thread_local! {
    /// How many fields the last document parsed on this thread had: a
    /// connector's documents are alike, so the next one's map is sized for
    /// as many up front instead of growing (and rehashing) as it is read.
    /// Capped, so one wide document does not oversize the ones after it.
    static FIELDS_HINT: Cell<usize> = const { Cell::new(0) };
}

/// Whole-document JSON text as a document, checked against `limits`;
/// nothing larger than they allow is built on the way.
pub(super) fn parse_document_within(text: &str, limits: DocLimits) -> Result<Document, FieldError> {
    refuse_long_text(text, limits.max_bytes)?;
    let budget = document_budget(limits).reading(text);
    let visitor = DocumentVisitor {
        limits,
        budget: &budget,
    };
    parse_text(text, &budget, |reader| {
        serde::Deserializer::deserialize_map(reader, visitor)
    })
}

/// A document read by any serde deserializer under `limits`.
pub(super) fn deserialize_document<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
    limits: DocLimits,
) -> Result<Document, D::Error> {
    let budget = document_budget(limits);
    deserializer.deserialize_map(DocumentVisitor {
        limits,
        budget: &budget,
    })
}

/// The budget of a document read under `limits`: the document object is
/// its first level.
fn document_budget<'t>(limits: DocLimits) -> ParseBudget<'t> {
    ParseBudget::new(
        limits.max_bytes,
        limits.max_depth.min(DocLimits::MAX_DEPTH),
        1,
    )
}

/// `text`, all of it, through `read`, which charges `budget`.
fn parse_text<'t, T>(
    text: &'t str,
    budget: &ParseBudget<'_>,
    read: impl FnOnce(
        &mut serde_json::Deserializer<serde_json::de::StrRead<'t>>,
    ) -> serde_json::Result<T>,
) -> Result<T, FieldError> {
    let mut reader = serde_json::Deserializer::from_str(text);
    read(&mut reader)
        .and_then(|v| reader.end().map(|()| v))
        .map_err(|e| budget.error(e))
}

/// Reads a document under `limits`: its values are parsed within the size
/// budget (nothing larger is ever built), then it is checked.
struct DocumentVisitor<'a, 't> {
    limits: DocLimits,
    budget: &'a ParseBudget<'t>,
}

impl<'de> serde::de::Visitor<'de> for DocumentVisitor<'_, '_> {
    type Value = Document;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a document: a JSON object with a string `id`")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Document, A::Error> {
        use serde::de::Error;
        let budget = self.budget;
        let mut fields = Fields::default();
        // The last of each reserved key counts, as in a parsed JSON object.
        let (mut id, mut run_id, mut children, mut deleted) = (None, None, None, None);
        while let Some(key) = map.next_key_seed(NameSeed)? {
            budget.charge(entry_bytes(&key, 0))?;
            let value: Value = map.next_value_seed(budget.seed())?;
            match key.as_str() {
                ID_FIELD => id = Some(value),
                RUN_ID_FIELD => run_id = Some(value),
                CHILDREN_FIELD => children = Some(value),
                DELETED_FIELD => deleted = Some(value),
                _ => {
                    fields.insert(key, value);
                }
            }
        }
        let doc = Document::from_parts(fields, id, run_id, children, deleted)
            .map_err(A::Error::custom)?;
        doc.admitted(self.limits).map_err(|e| {
            if matches!(e, FieldError::TooLarge(_)) {
                // The document's own check (size with framing, depth): its
                // message names its limit.
                budget.refused.set(Some(Refusal::Document));
            }
            A::Error::custom(e)
        })
    }
}

/// Reads an object key as a [`FieldName`]: a short key is copied inline
/// from the text, never allocated as a `String` first.
struct NameSeed;

impl<'de> serde::de::DeserializeSeed<'de> for NameSeed {
    type Value = FieldName;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<FieldName, D::Error> {
        d.deserialize_str(self)
    }
}

impl serde::de::Visitor<'_> for NameSeed {
    type Value = FieldName;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a field name")
    }

    fn visit_str<E: serde::de::Error>(self, name: &str) -> Result<FieldName, E> {
        Ok(FieldName::new(name))
    }

    fn visit_string<E: serde::de::Error>(self, name: String) -> Result<FieldName, E> {
        Ok(FieldName::from(name))
    }
}

/// How the bounded parse's errors start.
const OVER_BUDGET: &str = "JSON over the size limit";

/// Why a bounded parse was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Refusal {
    /// The budget ran out: the value would count more than the byte limit.
    Budget,
    /// The text nests deeper than the depth limit.
    Depth,
    /// The parsed document failed its own check against its limits.
    Document,
}

/// What a parse may still build, in [`value_bytes`](super::value_bytes),
/// how deep it may nest, and why it was refused, if it was.
struct ParseBudget<'t> {
    left: Cell<usize>,
    max: usize,
    /// Levels of objects and arrays open, and the most there may be.
    depth: Cell<usize>,
    max_depth: usize,
    refused: Cell<Option<Refusal>>,
    /// The text being parsed, for its numbers as written.
    spellings: Option<Spellings<'t>>,
}

impl<'t> ParseBudget<'t> {
    /// `max` bytes, `max_depth` levels of which `depth` are already open.
    fn new(max: usize, max_depth: usize, depth: usize) -> Self {
        Self {
            left: Cell::new(max),
            max,
            depth: Cell::new(depth),
            max_depth,
            refused: Cell::new(None),
            spellings: None,
        }
    }

    /// Parsing `text`: its numbers are kept as it writes them.
    fn reading(mut self, text: &'t str) -> Self {
        self.spellings = Some(Spellings::new(text));
        self
    }

    /// One more level of nesting opens.
    fn enter<E: serde::de::Error>(&self) -> Result<(), E> {
        let depth = self.depth.get() + 1;
        if depth > self.max_depth {
            self.refused.set(Some(Refusal::Depth));
            return Err(E::custom(format!(
                "JSON nested deeper than the limit of {} levels ({})",
                self.max_depth,
                Limit::MaxDepth
            )));
        }
        self.depth.set(depth);
        Ok(())
    }

    /// A level of nesting closes.
    fn leave(&self) {
        self.depth.set(self.depth.get().saturating_sub(1));
    }

    /// A number serde_json read, as the text wrote it.
    fn number(&self, parsed: serde_json::Number) -> serde_json::Number {
        match &self.spellings {
            Some(spellings) => spellings.next(parsed),
            None => parsed,
        }
    }

    fn charge<E: serde::de::Error>(&self, bytes: usize) -> Result<(), E> {
        match self.left.get().checked_sub(bytes) {
            Some(left) => {
                self.left.set(left);
                Ok(())
            }
            None => {
                self.refused.set(Some(Refusal::Budget));
                Err(E::custom(format!(
                    "{OVER_BUDGET} of {}",
                    human_bytes(self.max)
                )))
            }
        }
    }

    fn seed(&self) -> Budgeted<'_, 't> {
        Budgeted { budget: self }
    }

    /// A parse error as a field error: over a limit (as recorded), or not
    /// JSON (of the shape).
    fn error(&self, e: serde_json::Error) -> FieldError {
        let message = e.to_string();
        match self.refused.get() {
            Some(Refusal::Budget) => {
                FieldError::TooLarge(format!("{message} ({})", Limit::MaxDocumentMib))
            }
            Some(Refusal::Depth | Refusal::Document) => FieldError::TooLarge(message),
            None => FieldError::InvalidJson(message),
        }
    }
}

/// The key under which serde_json hands a number's text to a visitor.
const NUMBER_TOKEN: &str = "$serde_json::private::Number";

/// Builds a [`Value`], charging each part to the budget before it is built
/// (the same amounts [`value_bytes`](super::value_bytes) counts).
/// serde_json stops nesting at 128 levels; the budget stops sooner.
struct Budgeted<'a, 't> {
    budget: &'a ParseBudget<'t>,
}

impl<'de> serde::de::DeserializeSeed<'de> for Budgeted<'_, '_> {
    type Value = Value;
    fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> serde::de::Visitor<'de> for Budgeted<'_, '_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_unit<E: serde::de::Error>(self) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(Value::Null)
    }

    fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(Value::Bool(b))
    }

    fn visit_i64<E: serde::de::Error>(self, n: i64) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(Value::from(n))
    }

    fn visit_u64<E: serde::de::Error>(self, n: u64) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(Value::from(n))
    }

    fn visit_f64<E: serde::de::Error>(self, n: f64) -> Result<Value, E> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        Ok(serde_json::Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Value, E> {
        self.budget.charge((s.len() + 2).max(MIN_VALUE_BYTES))?;
        Ok(Value::String(s.to_owned()))
    }

    fn visit_string<E: serde::de::Error>(self, s: String) -> Result<Value, E> {
        self.budget.charge((s.len() + 2).max(MIN_VALUE_BYTES))?;
        Ok(Value::String(s))
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        self.budget.enter()?;
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self.budget.seed())? {
            self.budget.charge(1)?;
            items.push(item);
        }
        self.budget.leave();
        Ok(Value::Array(items))
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        self.budget.charge(MIN_VALUE_BYTES)?;
        let mut out = Map::new();
        let mut entered = false;
        while let Some(key) = map.next_key::<String>()? {
            if !entered {
                // Numbers keep their digits (serde_json's
                // `arbitrary_precision`): they arrive as a one-entry map
                // holding the number's text under this reserved key.
                if key == NUMBER_TOKEN {
                    let text: String = map.next_value()?;
                    self.budget.charge(text.len().max(MIN_VALUE_BYTES))?;
                    let number = text.parse().map_err(serde::de::Error::custom)?;
                    return Ok(Value::Number(self.budget.number(number)));
                }
                self.budget.enter()?;
                entered = true;
            }
            self.budget.charge(entry_bytes(&key, 0))?;
            let value = map.next_value_seed(self.budget.seed())?;
            out.insert(key, value);
        }
        if entered {
            self.budget.leave();
        } else {
            // `{}` is a level too.
            self.budget.enter()?;
            self.budget.leave();
        }
        Ok(Value::Object(out))
    }
}
