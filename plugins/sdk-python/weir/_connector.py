"""The connector world's export (`syncing-connector`), `weir:plugin/connector-api`, for the app's `weir.Connector` subclass."""

from __future__ import annotations

from typing import Any

from . import _runtime
from ._plugins import Connector, Publisher


def export(app: Any) -> type:
    """The `ConnectorApi` class componentize-py exports, for the connector that `app` defines."""
    cls = _runtime.plugin_class(app, Connector)
    if cls.execute is Connector.execute:
        raise TypeError(f"{cls.__name__} must define execute(self, publisher)")

    class ConnectorApi:
        def check_config(self, config: str) -> list:
            return _runtime.check_config(cls, config)

        def pre_execute(self, config: str, run_id: str) -> None:
            _runtime.start(cls, config, lambda plugin: plugin.pre_execute(run_id), "pre_execute()")

        def execute(self, handle: Any) -> None:
            publisher = Publisher(handle)
            try:
                _runtime.lifecycle("execute()", lambda: _runtime.plugin.execute(publisher))
            finally:
                publisher._revoke()

        def post_execute(self) -> None:
            _runtime.lifecycle("post_execute()", lambda: _runtime.plugin.post_execute())

        def close(self) -> None:
            # Always called, even when pre_execute failed before making the plugin.
            made, _runtime.plugin = _runtime.plugin, None
            if made is not None:
                _runtime.lifecycle("close()", made.close)

    return ConnectorApi
