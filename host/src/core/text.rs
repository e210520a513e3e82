//! Text helpers shared by the layers above.

/// The longest start of `text` of at most `max` bytes that ends on a
/// character boundary; `None` when all of `text` fits.
pub fn cut_at(text: &str, max: usize) -> Option<&str> {
    if text.len() <= max {
        return None;
    }
    let end = (0..=max)
        .rev()
        .find(|&i| text.is_char_boundary(i))
        .unwrap_or(0);
    Some(&text[..end])
}

/// The message of a caught panic.
pub fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".into())
}

/// Most bytes of a message a plugin hands the host (an error, a document's
/// or a batch's failure, a config issue) that the host keeps: enough for any
/// useful explanation, and small enough that logging it, keeping it in a
/// dead letter or copying it to each document of a batch costs little.
pub const MAX_PLUGIN_MESSAGE_BYTES: usize = 4 * 1024;

/// `message` as the host keeps it: whole when it fits
/// [`MAX_PLUGIN_MESSAGE_BYTES`], else its start and how long it was.
pub fn clip_message(message: String) -> String {
    match cut_at(&message, MAX_PLUGIN_MESSAGE_BYTES) {
        Some(kept) => format!("{kept}... ({} bytes in all)", message.len()),
        None => message,
    }
}

/// Most bytes of a name from outside (a document id, a field) that a log
/// line carries: ids may be as long as a document.
pub const MAX_LOGGED_NAME_BYTES: usize = 256;

/// `name` as a log line carries it: whole when it fits
/// [`MAX_LOGGED_NAME_BYTES`], else its start and how long it was; either
/// way with what could forge or hide a line escaped ([`escaped_for_log`]).
pub fn for_log(name: &str) -> std::borrow::Cow<'_, str> {
    match cut_at(name, MAX_LOGGED_NAME_BYTES) {
        Some(kept) => format!("{}... ({} bytes in all)", escaped_for_log(kept), name.len()).into(),
        None => escaped_for_log(name),
    }
}

/// Whether `c`, written into a log line as it is, could forge or hide
/// what the line says: control characters (C0 and C1: newlines, carriage
/// returns, escape sequences; tabs aside), the line and paragraph
/// separators (U+2028, U+2029, which some viewers break lines at) and
/// Unicode's format characters (category Cf: bidi embeddings, overrides
/// and isolates, U+202A-202E and U+2066-2069, which reorder what is shown;
/// zero-width characters, U+200B-200F, U+2060-2064; the BOM; the
/// interlinear annotation marks; tag characters, U+E0000-E007F; ...).
pub fn unsafe_in_log(c: char) -> bool {
    (c.is_control() && c != '\t')
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{00AD}'
                | '\u{0600}'..='\u{0605}'
                | '\u{061C}'
                | '\u{06DD}'
                | '\u{070F}'
                | '\u{0890}'..='\u{0891}'
                | '\u{08E2}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{110BD}'
                | '\u{110CD}'
                | '\u{13430}'..='\u{1343F}'
                | '\u{1BCA0}'..='\u{1BCA3}'
                | '\u{1D173}'..='\u{1D17A}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// `text` with each character [`unsafe_in_log`] written as its escape
/// (`\n`, `\u{202e}`): what comes from outside is one line of the log that
/// shows what it holds.
pub fn escaped_for_log(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(unsafe_in_log) {
        return text.into();
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_in_log(c) {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nothing that reorders, hides or breaks a line passes as it is;
    /// ordinary text, tabs and emoji do.
    #[test]
    fn what_could_forge_a_log_line_is_escaped() {
        for (raw, shown) in [
            ("a\nb", "a\\nb"),
            ("a\u{1b}[2J", "a\\u{1b}[2J"),
            ("a\u{85}b", "a\\u{85}b"),
            ("a\u{2028}b\u{2029}c", "a\\u{2028}b\\u{2029}c"),
            ("evil\u{202E}txt.exe", "evil\\u{202e}txt.exe"),
            ("\u{2066}x\u{2069}", "\\u{2066}x\\u{2069}"),
            ("a\u{200B}b\u{FEFF}", "a\\u{200b}b\\u{feff}"),
            ("\u{E0041}", "\\u{e0041}"),
        ] {
            assert_eq!(escaped_for_log(raw), shown, "{raw:?}");
            assert_eq!(for_log(raw), shown, "{raw:?}");
        }
        for kept in ["plain", "a\tb", "é ü 日本 ✓", "مرحبا", "🙂"] {
            assert!(
                matches!(escaped_for_log(kept), std::borrow::Cow::Borrowed(_)),
                "{kept}"
            );
        }
        let long = format!("x\u{202E}{}", "x".repeat(MAX_LOGGED_NAME_BYTES));
        assert!(
            !for_log(&long).contains('\u{202E}'),
            "cut on a character, escaped"
        );
    }

    #[test]
    fn names_in_log_lines_are_clipped() {
        assert_eq!(for_log("doc-1"), "doc-1");
        let long = "x".repeat(1 << 20);
        let logged = for_log(&long);
        assert!(
            logged.len() < MAX_LOGGED_NAME_BYTES + 32,
            "{}",
            logged.len()
        );
        assert!(logged.ends_with("(1048576 bytes in all)"));
    }

    #[test]
    fn long_messages_are_clipped_once_with_their_size() {
        assert_eq!(clip_message("short".into()), "short");
        let long = "é".repeat(MAX_PLUGIN_MESSAGE_BYTES);
        let clipped = clip_message(long.clone());
        assert!(
            clipped.len() < MAX_PLUGIN_MESSAGE_BYTES + 64,
            "{}",
            clipped.len()
        );
        assert!(clipped.ends_with(&format!("... ({} bytes in all)", long.len())));
        assert!(long.starts_with(clipped.split("...").next().expect("a start")));
    }
}
