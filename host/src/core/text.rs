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
