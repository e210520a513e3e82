//! How a text log line writes its fields. Plugins' messages and errors,
//! documents' ids and other text from outside reach log lines in fields,
//! so each field is written with what could forge or hide a line
//! (newlines, bidi overrides, zero-width and other format characters)
//! escaped ([`weir::core::text::escaped_for_log`]), as a plugin's own log
//! lines are. JSON lines escape by their format.

use tracing_subscriber::field::MakeExt;

/// The field formatter of text log lines: `message` as it is, the others
/// as `name=value`, separated by spaces, each escaped.
pub(super) fn escaped() -> impl for<'w> tracing_subscriber::fmt::FormatFields<'w> + 'static {
    tracing_subscriber::fmt::format::debug_fn(|w, field, value| {
        let text = format!("{value:?}");
        let text = weir::core::text::escaped_for_log(&text);
        if field.name() == "message" {
            write!(w, "{text}")
        } else {
            write!(w, "{field}={text}")
        }
    })
    .delimited(" ")
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    /// What a subscriber with these fields writes.
    #[derive(Clone, Default)]
    struct Written(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Written {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("buffer").extend_from_slice(bytes);
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn fields_cannot_forge_reorder_or_hide_a_line() {
        let written = Written::default();
        let sink = written.clone();
        let subscriber = tracing_subscriber::fmt()
            .fmt_fields(super::escaped())
            .with_ansi(false)
            .with_writer(move || sink.clone())
            .finish();
        let error = "failed\n2030-01-01T00:00:00Z ERROR weir: forged \u{202E}txt.exe zero\u{200B}width \u{2028}";
        tracing::subscriber::with_default(subscriber, || {
            tracing::warn!(error = %error, id = "a\u{2066}b", "document {} failed", "x\ny");
        });
        let text = String::from_utf8(written.0.lock().expect("buffer").clone()).expect("utf-8");
        assert_eq!(text.lines().count(), 1, "{text}");
        for c in ['\u{202E}', '\u{200B}', '\u{2028}', '\u{2066}'] {
            assert!(!text.contains(c), "{c:?} in {text}");
        }
        assert!(
            text.contains("document x\\ny failed")
                && text.contains("error=failed\\n2030-01-01")
                && text.contains("\\u{202e}txt.exe"),
            "{text}"
        );
    }
}
