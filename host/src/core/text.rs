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

#[cfg(test)]
mod tests {
    use super::*;

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
