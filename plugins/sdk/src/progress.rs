//! How much a connector will publish, when it knows (contract 0.2.5,
//! `progress`): the host shows the run's progress against it, a share done
//! and the time left. Say it once the number is known (a listing counted, a
//! table's rows counted), before or while publishing; say it again if it
//! changes. A connector that does not know says nothing.

use crate::Publisher;

/// This `execute` will publish about `documents` documents in all.
pub fn expect(publisher: &Publisher, documents: u64) {
    crate::bindings::connector::weir::plugin::progress::expect(publisher, documents);
}
