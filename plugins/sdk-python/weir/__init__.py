"""Write Weir plugins in Python.

A plugin is a module `app.py` that defines one subclass of `weir.Stage`,
`weir.Connector` or `weir.Indexer`; `build.sh <world> <dir> <out.wasm>` makes it
a component (it finds the class, nothing to register):

    import weir

    class Upper(weir.Stage):
        def configure(self, config: weir.Config):
            self.field = config.string("field")              # required
            self.suffix = config.string("suffix", default="")

        def process(self, doc: weir.Document):
            value = doc.get(self.field)
            if isinstance(value, str):
                doc.set(self.field, value.upper() + self.suffix)

One object of the class serves every call of an instance, so state on `self`
lasts. Settings are read in `configure`, whose getters never raise: every missing,
mistyped or unknown setting is reported at once, by its path (`fields[2].source`).

Failures: an exception in `process` (or `index_batch`) fails that document (or
batch) with the exception's message, `TypeName: message`, and the run goes on;
raise `weir.Failure(message)` for exactly `message`, `weir.Transient(message)`
when trying again later may succeed, `weir.Fatal(message)` to stop the run.

Logs: `logging` (the root logger, `weir.log`) and `print` go to the host's log.

An indexer holds no documents (its world has no document interface, so
`weir.Document`, `weir.Stage` and `weir.Connector` exist only in the stage and
connector worlds): the host hands it each batch entry prepared as it asked.

A connector keeps state between runs and reports deletes with `weir.sync`
(`get`, `set`, `remove`, `entries`, `delete(publisher, id)`, ...): see its module.
A streaming connector (`build.sh streaming-connector`) reads a topic, a queue or
pushed documents with `weir.messages` (`receive`, `publish`, `finish`, `reject`,
`consume`): see its module.

Everything a plugin imports must be imported at module level: the component
holds the modules imported while it was built, and nothing else. For the same
reason, nothing at module level may call the host (make documents, ...).
"""

from ._config import Config
from ._errors import BatchError, DocumentFailure, Failure, Fatal, FieldError, PublishError, Transient
from ._indexing import BatchEntry, Indexer
from ._log import TRACE, log

__all__ = [
    "BatchEntry",
    "BatchError",
    "Config",
    "DocumentFailure",
    "Failure",
    "Fatal",
    "FieldError",
    "Indexer",
    "PublishError",
    "TRACE",
    "Transient",
    "log",
]

try:
    from wit_world.imports import document as _documents  # noqa: F401 (absent in the indexer world)
except ImportError:
    pass
else:
    from ._document import REMOVE, Document
    from ._plugins import Connector, Publisher, Stage

    __all__ += ["Connector", "Document", "Publisher", "REMOVE", "Stage"]

try:
    from wit_world.imports import sync as _sync  # noqa: F401 (only in the syncing-connector world)
except ImportError:
    pass
else:
    from . import sync

    __all__ += ["sync"]

try:
    # Imported here, at build time: componentize-py keeps the binding modules
    # loaded while it builds, and `Publisher.expect` imports this one later.
    from wit_world.imports import progress as _progress  # noqa: F401 (the connector worlds, from 0.2.5)
except ImportError:
    pass

try:
    from wit_world.imports import messages as _messages  # noqa: F401 (only in the streaming-connector world)
except ImportError:
    pass
else:
    from . import messages

    __all__ += ["messages"]
