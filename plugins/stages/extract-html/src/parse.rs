//! HTML parsed within bounds that keep the work linear in the page.
//!
//! html5ever checks an element's scope by walking the stack of open
//! elements, so each tag costs the depth it is opened at, and it checks
//! each attribute of a tag against those before it: a page 40,000 deep,
//! or a tag with 40,000 attributes, costs their square (7 s and more).
//! Here a tag's attributes are counted in one pass before parsing, and the
//! page is fed to the parser a slice at a time while a sink counts how
//! deep each element lands: past `max_depth`, parsing stops and the page
//! fails before the depth is walked.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use ego_tree::NodeId;
use html5ever::interface::{ElementFlags, NodeOrText, QuirksMode, TreeSink};
use html5ever::tendril::{StrTendril, TendrilSink};
use html5ever::{Attribute, QualName};
use scraper::{Html, HtmlTreeSink};

/// Most attributes one tag may have: the tokenizer's duplicate check makes
/// each attribute cost those before it, so a page of tags at the limit
/// costs the limit per attribute (at 3,000 a tag, ~2 s a MB in the guest).
pub const MAX_ATTRIBUTES: usize = 256;

/// Bytes fed to the parser at a time: the depth is checked between slices,
/// so a slice bounds what is parsed past the limit.
const SLICE: usize = 1024;

/// `html` parsed, or why not: a tag with more than [`MAX_ATTRIBUTES`]
/// attributes, or elements nested deeper than `max_depth`.
pub fn parse(html: &str, max_depth: usize) -> Result<Html, String> {
    attributes(html)?;
    let sink = Limited {
        inner: HtmlTreeSink::new(Html::new_document()),
        depths: RefCell::new(HashMap::new()),
        max_depth,
        deepest: Cell::new(0),
    };
    let mut parser = html5ever::parse_document(sink, Default::default());
    let mut rest = html;
    while !rest.is_empty() {
        let mut cut = rest.len().min(SLICE);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        parser.process(StrTendril::from_slice(&rest[..cut]));
        rest = &rest[cut..];
        let deepest = parser.tokenizer.sink.sink.deepest.get();
        if deepest > max_depth {
            return Err(too_deep(max_depth));
        }
    }
    let (html, deepest) = parser.finish();
    if deepest > max_depth {
        return Err(too_deep(max_depth));
    }
    Ok(html)
}

fn too_deep(max_depth: usize) -> String {
    format!("nests elements deeper than max_depth ({max_depth})")
}

/// Whether each tag has at most [`MAX_ATTRIBUTES`] attributes, counted as
/// the words in a tag outside quoted values (an upper bound: `a = "b"` is
/// at most three). Comments, declarations and the text of `script`,
/// `style` and the other raw-text elements are skipped as the tokenizer
/// skips them. One pass: linear in the page.
fn attributes(html: &str) -> Result<(), String> {
    const RAW: [&[u8]; 9] = [
        b"script",
        b"style",
        b"textarea",
        b"title",
        b"xmp",
        b"iframe",
        b"noembed",
        b"noframes",
        b"noscript",
    ];
    let b = html.as_bytes();
    let mut i = 0;
    while let Some(p) = b[i..].iter().position(|&c| c == b'<') {
        i += p + 1;
        if b[i..].starts_with(b"!--") {
            i = find(b, i + 3, b"-->").map_or(b.len(), |e| e + 3);
            continue;
        }
        if !b.get(i).is_some_and(u8::is_ascii_alphabetic) {
            continue;
        }
        let name_end = b[i..]
            .iter()
            .position(|c| c.is_ascii_whitespace() || matches!(c, b'>' | b'/'))
            .map_or(b.len(), |e| i + e);
        let name = &b[i..name_end];
        let (mut words, mut quote, mut space) = (0usize, None, false);
        let mut j = name_end;
        while j < b.len() {
            let c = b[j];
            match quote {
                Some(q) if c == q => quote = None,
                Some(_) => {}
                None if c == b'>' => break,
                None if c.is_ascii_whitespace() || c == b'/' => space = true,
                None => {
                    if space {
                        words += 1;
                        space = false;
                    }
                    if c == b'"' || c == b'\'' {
                        quote = Some(c);
                    }
                }
            }
            j += 1;
        }
        if words > 3 * MAX_ATTRIBUTES {
            return Err(format!(
                "has a tag with more than {MAX_ATTRIBUTES} attributes (at byte {})",
                i - 1
            ));
        }
        i = (j + 1).min(b.len());
        if let Some(raw) = RAW.iter().find(|r| name.eq_ignore_ascii_case(r)) {
            // The element's text runs to its end tag, whatever it holds.
            let mut close = Vec::with_capacity(raw.len() + 2);
            close.extend_from_slice(b"</");
            close.extend_from_slice(raw);
            i = find_ignore_case(b, i, &close).unwrap_or(b.len());
        }
    }
    Ok(())
}

fn find(b: &[u8], from: usize, what: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(what.len())
        .position(|w| w == what)
        .map(|p| from + p)
}

fn find_ignore_case(b: &[u8], from: usize, what: &[u8]) -> Option<usize> {
    b.get(from..)?
        .windows(what.len())
        .position(|w| w.eq_ignore_ascii_case(what))
        .map(|p| from + p)
}

/// scraper's sink, counting how deep each node lands.
struct Limited {
    inner: HtmlTreeSink,
    depths: RefCell<HashMap<NodeId, usize>>,
    max_depth: usize,
    deepest: Cell<usize>,
}

impl Limited {
    fn depth(&self, node: &NodeId) -> usize {
        self.depths.borrow().get(node).copied().unwrap_or(0)
    }

    fn place(&self, child: &NodeOrText<NodeId>, depth: usize) {
        if let NodeOrText::AppendNode(node) = child {
            self.depths.borrow_mut().insert(*node, depth);
            if depth > self.deepest.get() {
                self.deepest.set(depth);
            }
        }
    }

    fn past_limit(&self) -> bool {
        self.deepest.get() > self.max_depth
    }
}

impl TreeSink for Limited {
    type Output = (Html, usize);
    type Handle = NodeId;
    type ElemName<'a>
        = <HtmlTreeSink as TreeSink>::ElemName<'a>
    where
        Self: 'a;

    fn finish(self) -> (Html, usize) {
        (self.inner.finish(), self.deepest.get())
    }
    fn parse_error(&self, msg: Cow<'static, str>) {
        self.inner.parse_error(msg)
    }
    fn get_document(&self) -> NodeId {
        self.inner.get_document()
    }
    fn elem_name<'a>(&'a self, target: &'a NodeId) -> Self::ElemName<'a> {
        self.inner.elem_name(target)
    }
    fn create_element(&self, name: QualName, attrs: Vec<Attribute>, flags: ElementFlags) -> NodeId {
        self.inner.create_element(name, attrs, flags)
    }
    fn create_comment(&self, text: StrTendril) -> NodeId {
        self.inner.create_comment(text)
    }
    fn create_pi(&self, target: StrTendril, data: StrTendril) -> NodeId {
        self.inner.create_pi(target, data)
    }
    fn append(&self, parent: &NodeId, child: NodeOrText<NodeId>) {
        // Past the limit the page fails: the tree is no longer built.
        if self.past_limit() {
            return;
        }
        self.place(&child, self.depth(parent) + 1);
        self.inner.append(parent, child)
    }
    fn append_based_on_parent_node(
        &self,
        element: &NodeId,
        prev_element: &NodeId,
        child: NodeOrText<NodeId>,
    ) {
        if self.past_limit() {
            return;
        }
        let depth = self.depth(element).max(self.depth(prev_element)) + 1;
        self.place(&child, depth);
        self.inner
            .append_based_on_parent_node(element, prev_element, child)
    }
    fn append_doctype_to_document(
        &self,
        name: StrTendril,
        public_id: StrTendril,
        system_id: StrTendril,
    ) {
        self.inner
            .append_doctype_to_document(name, public_id, system_id)
    }
    fn mark_script_already_started(&self, node: &NodeId) {
        self.inner.mark_script_already_started(node)
    }
    fn pop(&self, node: &NodeId) {
        self.inner.pop(node)
    }
    fn get_template_contents(&self, target: &NodeId) -> NodeId {
        let contents = self.inner.get_template_contents(target);
        let depth = self.depth(target) + 1;
        self.depths.borrow_mut().insert(contents, depth);
        contents
    }
    fn same_node(&self, x: &NodeId, y: &NodeId) -> bool {
        self.inner.same_node(x, y)
    }
    fn set_quirks_mode(&self, mode: QuirksMode) {
        self.inner.set_quirks_mode(mode)
    }
    fn append_before_sibling(&self, sibling: &NodeId, new_node: NodeOrText<NodeId>) {
        if self.past_limit() {
            return;
        }
        self.place(&new_node, self.depth(sibling));
        self.inner.append_before_sibling(sibling, new_node)
    }
    fn add_attrs_if_missing(&self, target: &NodeId, attrs: Vec<Attribute>) {
        self.inner.add_attrs_if_missing(target, attrs)
    }
    fn associate_with_form(
        &self,
        target: &NodeId,
        form: &NodeId,
        nodes: (&NodeId, Option<&NodeId>),
    ) {
        self.inner.associate_with_form(target, form, nodes)
    }
    fn remove_from_parent(&self, target: &NodeId) {
        self.inner.remove_from_parent(target)
    }
    fn reparent_children(&self, node: &NodeId, new_parent: &NodeId) {
        // The children move one level (the adoption agency's step); their
        // depth is counted again only as far as the new parent's own.
        let depth = self.depth(new_parent) + 1;
        if depth > self.deepest.get() {
            self.deepest.set(depth);
        }
        self.inner.reparent_children(node, new_parent)
    }
    fn is_mathml_annotation_xml_integration_point(&self, handle: &NodeId) -> bool {
        self.inner
            .is_mathml_annotation_xml_integration_point(handle)
    }
    fn set_current_line(&self, line_number: u64) {
        self.inner.set_current_line(line_number)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_pages_fail_at_the_limit_and_shallow_ones_parse() {
        let deep = |n: usize| {
            format!(
                "<html><body>{}deep{}</body></html>",
                "<div>".repeat(n),
                "</div>".repeat(n)
            )
        };
        // html, body and the divs: n + 2 deep.
        assert!(parse(&deep(100), 102).is_ok());
        assert!(
            parse(&deep(101), 102)
                .unwrap_err()
                .contains("max_depth (102)")
        );
        // Unclosed formatting tags the parser reopens after each block.
        let reopened: String = (0..2000).map(|i| format!("<b id={i}>x<p>")).collect();
        assert!(parse(&reopened, 512).is_err());
        // Lists without end tags are not deep.
        let list = format!("<ul>{}</ul>", "<li>item".repeat(5000));
        assert!(parse(&list, 10).is_ok());
    }

    #[test]
    fn tags_with_too_many_attributes_are_refused_but_not_script_text() {
        let attributes: String = (0..=3 * MAX_ATTRIBUTES).map(|i| format!(" a{i}")).collect();
        let page = format!("<p{attributes}>x</p>");
        assert!(
            parse(&page, 512)
                .unwrap_err()
                .contains("more than 256 attributes")
        );
        let script = format!("<script>if (a<b{attributes}) {{}}</script><p>x</p>");
        assert!(parse(&script, 512).is_ok());
        let fine: String = (0..MAX_ATTRIBUTES)
            .map(|i| format!(" a{i}=\"v w\""))
            .collect();
        assert!(parse(&format!("<p{fine}>x</p>"), 512).is_ok());
    }
}
