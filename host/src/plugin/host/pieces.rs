//! Text that crosses packed: many pieces one after another in one string,
//! cut by a list of byte lengths (`publish-packed`, `update-packed`).
//! A plugin that cuts its text wrongly is refused before any piece is
//! used.

/// The length that stands for a piece that is not there (a field absent,
/// a removal's missing value).
pub(crate) const ABSENT: u32 = u32::MAX;

/// The pieces `lengths` cuts `text` into, in order, checked whole before
/// the first is handed out: every piece on a character boundary, and all
/// of `text` covered.
pub(super) fn cut(text: &str, lengths: impl IntoIterator<Item = u32>) -> Result<Vec<&str>, String> {
    let mut pieces = Vec::new();
    let mut start = 0usize;
    for (i, length) in lengths.into_iter().enumerate() {
        let end = start.saturating_add(length as usize);
        if end > text.len() || !text.is_char_boundary(end) {
            return Err(format!(
                "piece {i} ends at byte {end}, which is {} the text's {} bytes",
                if end > text.len() {
                    "past"
                } else {
                    "inside a character of"
                },
                text.len()
            ));
        }
        pieces.push(&text[start..end]);
        start = end;
    }
    if start != text.len() {
        return Err(format!(
            "the lengths cover {start} of the text's {} bytes",
            text.len()
        ));
    }
    Ok(pieces)
}
