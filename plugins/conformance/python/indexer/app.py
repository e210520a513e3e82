"""Conformance indexer `conformance-indexer` (see ../../README.md)."""

import weir


class ConformanceIndexer(weir.Indexer):
    wants_json = True
    pick = ["reject", "busy"]
    file = None

    def configure(self, config: weir.Config):
        self.path = config.string("path")

    def start(self):
        self.file = open(self.path, "a", encoding="utf-8")

    def index_batch(self, entries):
        failures = []
        for entry in entries:
            if entry.picked["reject"] == ["true"]:
                failures.append(weir.DocumentFailure(entry.index, f"rejected {entry.id}"))
            elif entry.picked["busy"] == ["true"]:
                failures.append(weir.DocumentFailure(entry.index, f"busy {entry.id}", status=503, transient=True))
            else:
                self.file.write(entry.json + "\n")
        self.file.flush()
        return failures

    def close(self):
        if self.file is not None:
            self.file.close()
