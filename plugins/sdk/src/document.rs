//! A document's values and field errors: [`Value`] as text and as JSON,
//! the host's [`FieldError`]s as messages and as document errors, and
//! writing values to a field as a [`Mode`] says ([`update`]).

use crate::{Document, FieldError, Mode, PluginError, Value};

/// A document-level error from a field error: the document fails, the run goes on.
pub fn doc_error(error: FieldError) -> PluginError {
    PluginError::Document(field_error_message(&error))
}

/// A readable message for a field error.
pub fn field_error_message(error: &FieldError) -> String {
    match error {
        FieldError::ReservedField(m) => format!("reserved field: {m}"),
        FieldError::WrongType(m) => format!("wrong type: {m}"),
        FieldError::InvalidPath(m) => format!("invalid path: {m}"),
        FieldError::InvalidJson(m) => format!("invalid JSON: {m}"),
        FieldError::TooLarge(m) => format!("too large: {m}"),
    }
}

impl Value {
    /// The value as text, like `Document::get_string` (None for null).
    pub fn to_text(&self) -> Option<String> {
        Some(match self {
            Value::Null => return None,
            Value::Boolean(b) => b.to_string(),
            Value::Integer(i) => i.to_string(),
            // As the host renders it (`1.0`, `1e-7`).
            Value::Float(f) => {
                serde_json::Number::from_f64(*f).map_or_else(|| f.to_string(), |n| n.to_string())
            }
            Value::Text(s) | Value::Number(s) | Value::Json(s) => s.clone(),
        })
    }

    /// The value as JSON (numbers exactly as they are).
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            Value::Null => serde_json::Value::Null,
            Value::Boolean(b) => (*b).into(),
            Value::Integer(i) => (*i).into(),
            Value::Float(f) => (*f).into(),
            Value::Text(s) => s.clone().into(),
            Value::Number(s) | Value::Json(s) => {
                serde_json::from_str(s).unwrap_or(serde_json::Value::Null)
            }
        }
    }

    /// A value from JSON: scalars as themselves, arrays and objects as JSON
    /// text; a number beyond s64 as its exact text.
    pub fn from_json(json: &serde_json::Value) -> Self {
        match json {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Boolean(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Value::Integer(i),
                None => Value::Json(n.to_string()),
            },
            serde_json::Value::String(s) => Value::Text(s.clone()),
            other => Value::Json(other.to_string()),
        }
    }
}
/// Write `values` to `name` according to `mode`. One value is stored
/// single-valued, several as a multi-valued field.
pub fn update(
    doc: &Document,
    name: &str,
    mut values: Vec<Value>,
    mode: Mode,
) -> Result<(), FieldError> {
    match mode {
        Mode::Skip if doc.has(name) => Ok(()),
        Mode::Append => values.into_iter().try_for_each(|v| doc.add(name, &v)),
        _ if values.len() == 1 => doc.set(name, &values.remove(0)),
        _ => doc.set_all(name, &values),
    }
}
