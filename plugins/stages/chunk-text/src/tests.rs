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

fn config(json: &str) -> Config {
    weir_plugin::serde_json::from_str(json).expect("config")
}

#[test]
fn offsets_are_characters_from_the_start_of_each_value() {
    let c = config(r#"{"source": "t", "by": "sentences", "size": 2, "overlap": 1}"#);
    let texts = vec!["Ünï. Zwei zwei. Drei!".to_owned(), "Ça. Va.".to_owned()];
    let found = chunk_texts(&c, &texts).expect("chunks");
    let got: Vec<(&str, usize, usize)> = found
        .iter()
        .map(|(t, c)| (t.as_str(), c.offset, c.length))
        .collect();
    assert_eq!(
        got,
        [
            ("Ünï. Zwei zwei.", 0, 15),
            ("Zwei zwei. Drei!", 5, 16),
            ("Ça. Va.", 0, 7)
        ]
    );
}

/// Chunking is linear in the text: 4x the sentences take about 4x the time
/// (it took 16x and more when each chunk's offset was counted from the
/// start of the text: 105,000 sentences took 11.5 s in the guest). The
/// bound is generous (8x), the sizes large enough for a square to show
/// (~40x at these sizes) and each time the best of three, so a loaded
/// machine does not fail it.
#[test]
fn chunking_is_linear_in_the_text() {
    let c = config(r#"{"source": "t", "by": "sentences", "size": 5, "overlap": 1}"#);
    let time = |n: usize| {
        let texts = vec!["Größe zählt nicht. ".repeat(n)];
        (0..3)
            .map(|_| {
                let start = std::time::Instant::now();
                let found = chunk_texts(&c, &texts).expect("chunks");
                assert_eq!(found.len(), n.div_ceil(4) - usize::from(n % 4 == 1));
                start.elapsed()
            })
            .min()
            .expect("three runs")
    };
    let (small, large) = (time(25_000), time(100_000));
    let ratio = large.as_secs_f64() / small.as_secs_f64().max(1e-6);
    assert!(
        ratio < 8.0,
        "4x the text took {ratio:.1}x the time ({small:?} -> {large:?})"
    );
}
