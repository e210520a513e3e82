//! A TOML value read through serde with an error that says what kind of
//! problem it is (an unknown key, a missing key, anything else), so the
//! shape check never has to read serde's message text to tell them apart.
//!
//! It reads values as `toml::Value` itself does (a table as a map, a string
//! or a one-key table as an enum, any present value as `Some`), and the
//! messages are serde's own.

use std::fmt;

use serde::de::value::{MapDeserializer, SeqDeserializer};
use serde::de::{self, IntoDeserializer, Visitor};

/// What kind of problem serde found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Kind {
    /// A key the table does not have (`deny_unknown_fields`), and the keys
    /// it has.
    UnknownKey {
        key: String,
        expected: &'static [&'static str],
    },
    /// A required key left out.
    MissingKey(&'static str),
    /// A value of the wrong type or out of range, a bad variant name, ...
    Other,
}

/// A problem with its kind and serde's message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct ShapeError {
    pub kind: Kind,
    pub message: String,
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ShapeError {}

impl de::Error for ShapeError {
    fn custom<T: fmt::Display>(msg: T) -> Self {
        Self {
            kind: Kind::Other,
            message: msg.to_string(),
        }
    }

    fn unknown_field(field: &str, expected: &'static [&'static str]) -> Self {
        let message = if expected.is_empty() {
            format!("unknown field `{field}`, there are no fields")
        } else {
            format!("unknown field `{field}`, expected {}", one_of(expected))
        };
        Self {
            kind: Kind::UnknownKey {
                key: field.to_owned(),
                expected,
            },
            message,
        }
    }

    fn missing_field(field: &'static str) -> Self {
        Self {
            kind: Kind::MissingKey(field),
            message: format!("missing field `{field}`"),
        }
    }
}

/// `` `a` ``, `` `a` or `b` ``, `` one of `a`, `b`, `c` ``, as serde says it.
pub(super) fn one_of(names: &[&str]) -> String {
    match names {
        [] => String::new(),
        [one] => format!("`{one}`"),
        [a, b] => format!("`{a}` or `{b}`"),
        _ => {
            let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
            format!("one of {}", quoted.join(", "))
        }
    }
}

/// A TOML value to read as some `T`.
pub(super) struct Value(pub toml::Value);

impl<'de> IntoDeserializer<'de, ShapeError> for Value {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

impl<'de> de::Deserializer<'de> for Value {
    type Error = ShapeError;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ShapeError> {
        match self.0 {
            toml::Value::Boolean(v) => visitor.visit_bool(v),
            toml::Value::Integer(n) => visitor.visit_i64(n),
            toml::Value::Float(n) => visitor.visit_f64(n),
            toml::Value::String(v) => visitor.visit_string(v),
            toml::Value::Datetime(v) => visitor.visit_string(v.to_string()),
            toml::Value::Array(items) => {
                let mut seq = SeqDeserializer::<_, ShapeError>::new(items.into_iter().map(Value));
                let value = visitor.visit_seq(&mut seq)?;
                seq.end()?;
                Ok(value)
            }
            toml::Value::Table(table) => {
                let mut map = MapDeserializer::<_, ShapeError>::new(
                    table.into_iter().map(|(k, v)| (k, Value(v))),
                );
                let value = visitor.visit_map(&mut map)?;
                map.end()?;
                Ok(value)
            }
        }
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, ShapeError> {
        match self.0 {
            toml::Value::String(variant) => {
                visitor.visit_enum(IntoDeserializer::<ShapeError>::into_deserializer(variant))
            }
            toml::Value::Table(table) if table.len() == 1 => {
                let map = MapDeserializer::<_, ShapeError>::new(
                    table.into_iter().map(|(k, v)| (k, Value(v))),
                );
                visitor.visit_enum(de::value::MapAccessDeserializer::new(map))
            }
            toml::Value::Table(table) if table.is_empty() => Err(de::Error::custom(
                "wanted exactly 1 element, found 0 elements",
            )),
            toml::Value::Table(_) => Err(de::Error::custom(
                "wanted exactly 1 element, more than 1 element",
            )),
            _ => Err(de::Error::invalid_type(
                de::Unexpected::UnitVariant,
                &"string only",
            )),
        }
    }

    // A present value is `Some`; `None` is a key left out.
    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, ShapeError> {
        visitor.visit_some(self)
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        visitor: V,
    ) -> Result<V::Value, ShapeError> {
        visitor.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        bool u8 u16 u32 u64 i8 i16 i32 i64 f32 f64 char str string unit seq
        bytes byte_buf map unit_struct tuple_struct struct
        tuple ignored_any identifier
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn problems_are_found_where_toml_finds_them_with_its_messages() {
        for text in [
            "colour = 1",
            "[worker]\nthreads = \"four\"",
            "[worker]\nthreads = -1",
            "[runner]\nlog_interval = \"often\"",
            "[[connectors]]\nname = \"c\"\npipeline = \"p\"",
            "[[connectors]]\nname = \"c\"\npipeline = \"p\"\nplugin = { path = \"c\", instance = \"never\" }",
            "[[connectors]]\nname = \"c\"\npipeline = \"p\"\nplugin = { path = \"c\", grants = { http = [\"a\", 5] } }",
            "[[connectors]]\nname = \"c\"\npipeline = \"p\"\nplugin = { path = \"c\", limits = { fuel = 1 } }",
        ] {
            let table = toml::Value::Table(text.parse().expect("toml"));
            let ours = serde_path_to_error::deserialize::<_, Config>(Value(table.clone()))
                .expect_err("a problem");
            let theirs =
                serde_path_to_error::deserialize::<_, Config>(table).expect_err("a problem");
            assert_eq!(ours.path().to_string(), theirs.path().to_string(), "{text}");
            assert_eq!(ours.inner().message, theirs.inner().message(), "{text}");
        }
    }

    #[test]
    fn names_are_listed_as_serde_lists_them() {
        assert_eq!(one_of(&["a"]), "`a`");
        assert_eq!(one_of(&["a", "b"]), "`a` or `b`");
        assert_eq!(one_of(&["a", "b", "c"]), "one of `a`, `b`, `c`");
    }
}
