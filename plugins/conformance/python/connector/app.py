"""Conformance connector `conformance-connector` (see ../../README.md)."""

import weir

# How deep `deep_at`'s document nests: deeper than a document may be.
TOO_DEEP = 200


class ConformanceConnector(weir.Connector):
    def configure(self, config: weir.Config):
        self.count = config.integer("count", min=0)
        self.prefix = config.string("prefix", default="doc")
        self.packed = config.boolean("packed", default=False)
        self.deep_at = config.integer("deep_at", default=-1, min=-1)
        self.fail_at = config.integer("fail_at", default=-1, min=-1)

    def fields(self, i: int) -> dict:
        if i == self.fail_at:
            raise weir.Fatal(f"configured to fail at {self.prefix}-{i}")
        if i == self.deep_at:
            deep = 1
            for _ in range(TOO_DEEP):
                deep = [deep]
            return {"deep": deep}
        return {
            "n": i,
            "neg": -i - 1,
            "big": 18446744073709551616 + i,
            "half": i + 0.5,
            "text": f"ünï-😀-{i}",
            "nested": {"i": i, "list": [i, None, "x"]},
            "none": None,
            "tags": ["a", "b"],
        }

    def execute(self, publisher: weir.Publisher):
        publisher.expect(self.count)
        documents = ((f"{self.prefix}-{i}", self.fields(i)) for i in range(self.count))
        if self.packed:
            publisher.publish_all(documents)
            return
        for id, fields in documents:
            publisher.publish(weir.Document(id, fields))
