"""Conformance stage `conformance-stage`: one operation per config (see ../../README.md)."""

import weir

OPERATIONS = ["copy", "rename", "split", "children", "drop", "fail"]


class ConformanceStage(weir.Stage):
    def configure(self, config: weir.Config):
        self.op = config.string("op", one_of=OPERATIONS)
        if self.op in ("copy", "rename"):
            self.source = config.string("from")
            self.target = config.string("to")
        elif self.op == "split":
            self.field = config.string("field")
            self.separator = config.string("separator")
        elif self.op == "children":
            self.field = config.string("field")
        elif self.op == "drop":
            self.field = config.string("field")
            self.equals = config.string("equals")

    def process(self, doc: weir.Document):
        return getattr(self, self.op)(doc)

    def copy(self, doc):
        if not doc.has(self.source):
            return
        if doc.is_multi_valued(self.source):
            doc.set_all(self.target, doc.get_all(self.source))
        else:
            doc.set(self.target, doc.get(self.source))

    def rename(self, doc):
        doc.rename(self.source, self.target, mode="overwrite")

    def split(self, doc):
        text = doc.get_string(self.field)
        if text is None:
            return
        pieces = [piece.strip() for piece in text.split(self.separator)]
        doc.set_all(self.field, [piece for piece in pieces if piece])

    def children(self, doc):
        children = []
        for position, value in enumerate(doc.get_all(self.field)):
            if isinstance(value, dict):
                children.append(weir.Document(f"{doc.id}-{position}", {**value, "parent_id": doc.id}))
        doc.remove(self.field)
        return children

    def drop(self, doc):
        if doc.get_string(self.field) == self.equals:
            doc.drop()

    def fail(self, doc):
        if doc.get("transient") is True:
            raise weir.Transient(f"service unavailable for {doc.id}")
        if doc.get("fail") is True:
            raise weir.Failure(f"cannot process {doc.id}")
