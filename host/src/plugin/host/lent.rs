//! The documents the host lends a plugin for one call: which handles they
//! are, whether the plugin gave each back, and, for a batch, each one as it
//! was before the plugin first changed it (so a batch that traps can be run
//! again document by document, each from where it started).

use crate::core::document::Document;

/// The lent documents of the current call; empty between calls.
#[derive(Default)]
pub(crate) struct Lent {
    /// `(rep, position)` of every lent handle, sorted by rep.
    reps: Vec<(u32, usize)>,
    /// Whether the plugin gave up its handle (dropped it, or handed the
    /// document on): owned handles only.
    released: Vec<bool>,
    /// A copy of each document from before its first change, when kept.
    before: Vec<Option<Document>>,
    /// Whether copies are kept (a batch of more than one document).
    keep_before: bool,
}

impl Lent {
    /// Lend the handles `reps`, in the order of the documents; keep each
    /// document's state from before its first change when `keep_before`.
    pub(crate) fn start(&mut self, reps: impl IntoIterator<Item = u32>, keep_before: bool) {
        self.reps.clear();
        self.reps
            .extend(reps.into_iter().enumerate().map(|(i, rep)| (rep, i)));
        let n = self.reps.len();
        self.reps.sort_unstable();
        self.released.clear();
        self.released.resize(n, false);
        self.before.clear();
        self.before.resize_with(n, || None);
        self.keep_before = keep_before;
    }

    /// Where `rep` is in the batch, if it is a lent handle.
    pub(crate) fn position(&self, rep: u32) -> Option<usize> {
        self.reps
            .binary_search_by_key(&rep, |&(r, _)| r)
            .ok()
            .map(|at| self.reps[at].1)
    }

    /// The plugin is about to change the document at `position`, which is
    /// `doc` now: keep a copy the first time, when copies are kept.
    pub(crate) fn before_change(&mut self, position: usize, doc: &Document) {
        if self.keep_before && self.before[position].is_none() {
            self.before[position] = Some(doc.clone());
        }
    }

    /// The plugin gave up its handle on the document at `position`.
    pub(crate) fn release(&mut self, position: usize) {
        self.released[position] = true;
    }

    /// How many lent handles the plugin still holds.
    pub(crate) fn kept(&self) -> usize {
        self.released.iter().filter(|r| !**r).count()
    }

    /// End the call: the copies from before each document's first change,
    /// by position (none for a document left unchanged, or when no copies
    /// were kept).
    pub(crate) fn finish(&mut self) -> Vec<Option<Document>> {
        self.reps.clear();
        self.released.clear();
        std::mem::take(&mut self.before)
    }
}

#[cfg(test)]
mod tests {
    use super::Lent;
    use crate::core::document::Document;

    #[test]
    fn positions_follow_the_documents_whatever_the_reps() {
        let mut lent = Lent::default();
        lent.start([7, 2, 9], false);
        assert_eq!(lent.position(7), Some(0));
        assert_eq!(lent.position(2), Some(1));
        assert_eq!(lent.position(9), Some(2));
        assert_eq!(lent.position(3), None);
        assert_eq!(lent.kept(), 3);
        lent.release(1);
        assert_eq!(lent.kept(), 2);
        assert!(lent.finish().iter().all(Option::is_none));
        assert_eq!(lent.position(7), None);
    }

    #[test]
    fn only_the_first_change_is_copied() {
        let mut lent = Lent::default();
        lent.start([1, 2], true);
        let mut doc = Document::new("a");
        lent.before_change(0, &doc);
        doc.set("f", "changed".into()).expect("set");
        lent.before_change(0, &doc);
        let before = lent.finish();
        assert_eq!(before[0].as_ref(), Some(&Document::new("a")));
        assert!(before[1].is_none());
    }
}
