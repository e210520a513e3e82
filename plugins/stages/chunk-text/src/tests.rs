use super::*;

fn texts(text: &str, by: Unit, size: usize, overlap: usize, max: Option<usize>) -> Vec<&str> {
    chunks(text, by, size, overlap, max, 1000)
        .into_iter()
        .map(|r| &text[r])
        .collect()
}

#[test]
fn sentences_group_with_overlap() {
    let text = "One. Two two. Three! Four? Five.";
    assert_eq!(
        texts(text, Unit::Sentences, 2, 1, None),
        [
            "One. Two two.",
            "Two two. Three!",
            "Three! Four?",
            "Four? Five."
        ]
    );
    assert_eq!(texts(text, Unit::Sentences, 5, 0, None), [text]);
}

#[test]
fn words_keep_the_text_between_them() {
    let text = "a, b c; d";
    assert_eq!(texts(text, Unit::Words, 2, 0, None), ["a, b", "c; d"]);
}

#[test]
fn characters_count_scalar_values_not_bytes() {
    assert_eq!(
        texts("héllo wörld", Unit::Characters, 4, 1, None),
        ["héll", "lo w", "wörl", "ld"]
    );
    assert_eq!(
        texts("abcdefgh", Unit::Characters, 4, 2, None),
        ["abcd", "cdef", "efgh"]
    );
    assert_eq!(
        texts("abcdefghi", Unit::Characters, 4, 2, None),
        ["abcd", "cdef", "efgh", "ghi"]
    );
    assert_eq!(texts("abc", Unit::Characters, 4, 0, None), ["abc"]);
    assert_eq!(texts("abcd", Unit::Characters, 2, 0, None), ["ab", "cd"]);
}

#[test]
fn paragraphs_split_at_blank_lines_and_max_chars_cuts_long_ones() {
    let text = "first para\nstill first\n\n  \nsecond\n\n\nthird one here";
    assert_eq!(
        texts(text, Unit::Paragraphs, 1, 0, None),
        ["first para\nstill first", "second", "third one here"]
    );
    assert_eq!(
        texts(text, Unit::Paragraphs, 1, 0, Some(6)),
        [
            "first ", "para\ns", "till f", "irst", "second", "third ", "one he", "re"
        ]
    );
}

#[test]
fn empty_and_blank_texts_make_no_chunks() {
    assert!(chunks("", Unit::Sentences, 3, 0, None, 10).is_empty());
    assert!(chunks("\n\n\n", Unit::Paragraphs, 1, 0, None, 10).is_empty());
    assert!(chunks("  ", Unit::Words, 3, 0, None, 10).is_empty());
}

#[test]
fn a_huge_text_stops_one_past_the_limit() {
    let text = "x".repeat(10_000_000);
    assert_eq!(chunks(&text, Unit::Characters, 1, 0, None, 100).len(), 101);
    let words = "w ".repeat(1_000_000);
    assert_eq!(chunks(&words, Unit::Words, 1, 0, None, 100).len(), 101);
    assert_eq!(
        chunks(&text, Unit::Paragraphs, 1, 0, Some(1), 100).len(),
        101
    );
}
