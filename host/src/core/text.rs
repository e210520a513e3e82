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
/// [`MAX_LOGGED_NAME_BYTES`], else its start and how long it was.
pub fn for_log(name: &str) -> std::borrow::Cow<'_, str> {
    match cut_at(name, MAX_LOGGED_NAME_BYTES) {
        Some(kept) => format!("{kept}... ({} bytes in all)", name.len()).into(),
        None => name.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
