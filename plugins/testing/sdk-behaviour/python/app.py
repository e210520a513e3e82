"""A stage that probes the Python SDK: state across calls, plain exceptions,
a lent document kept past its call, logging, fields read and written several
at a time, a field read again after a change, changes kept for the end of the
batch (see tests/all/sdk.rs)."""

import logging

import weir


class Probe(weir.Stage):
    def configure(self, config: weir.Config):
        self.calls = 0
        self.kept = None

    def process(self, doc: weir.Document):
        self.calls += 1
        doc.set("calls", self.calls)
        action = doc.get("action")
        if action == "raise":
            raise ValueError(f"bad value in {doc.id}")
        if action == "keep":
            self.kept = doc
        if action == "use-kept":
            self.kept.get("action")
        if action == "log":
            logging.warning("probe saw %s", doc.id)
            print("printed", doc.id)
        if action == "fields":
            got = {
                "first": doc.get_many(["a", "missing"]),
                "every": doc.get_all_many(["a", "b", "missing"]),
                "texts": doc.get_strings_many(["b", "missing"]),
            }
            doc.update({"got": got, "a": weir.REMOVE})
        if action == "reread":
            before = doc.get("a")
            doc.set("a", before + 1)
            doc.set("seen", [before, doc.get("a"), doc.has("a"), doc.is_multi_valued("a")])
        if action == "buffered":
            doc.set("x", "new")
            doc.update({"y": [1, 2], "action": weir.REMOVE})
            doc.set("seen", [doc.get("x"), doc.get_all("y"), doc.has("action")])
            doc.set("names", doc.field_names())  # asks the host: the changes are made first
        if action == "grow":
            doc.set("big", "x" * (2 << 20))  # over a 1 MiB limit: refused with the batch's changes
            doc.set("after", doc.get("big") is not None)
