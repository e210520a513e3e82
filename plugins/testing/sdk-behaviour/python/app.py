"""A stage that probes the Python SDK: state across calls, plain exceptions,
a lent document kept past its call, logging (see tests/all/sdk.rs)."""

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
