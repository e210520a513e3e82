"""Conformance connector `conformance-connector` (see ../../README.md)."""

import weir


class ConformanceConnector(weir.Connector):
    def configure(self, config: weir.Config):
        self.count = config.integer("count", min=0)
        self.prefix = config.string("prefix", default="doc")

    def execute(self, publisher: weir.Publisher):
        for i in range(self.count):
            publisher.publish(weir.Document(f"{self.prefix}-{i}", {
                "n": i,
                "neg": -i - 1,
                "big": 18446744073709551616 + i,
                "half": i + 0.5,
                "text": f"ünï-😀-{i}",
                "nested": {"i": i, "list": [i, None, "x"]},
                "none": None,
                "tags": ["a", "b"],
            }))
