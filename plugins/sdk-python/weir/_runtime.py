"""What the three world adapters share: the plugin object, configuring it, and
turning exceptions into the contract's errors.

componentize-py makes a fresh export object for every call, so the plugin object
lives here, at module level, for the life of the instance.
"""

from __future__ import annotations

import logging
import os
import re
from typing import Any, Callable

from componentize_py_types import Err
from wit_world.imports.types import ConfigIssue, PluginError_Document, PluginError_Fatal, PluginError_Transient

from . import _log
from ._codec import safe_text
from ._config import Config
from ._errors import Failure, Fatal, Transient

plugin: Any = None
"""The plugin object of this instance, made by `start` (or `pre_execute`)."""

_SDK_DIR = os.path.dirname(__file__)


def plugin_class(app: Any, base: type) -> type:
    """The subclass of `base` that the app module defines (at build time)."""
    found = [
        value for value in vars(app).values()
        if isinstance(value, type) and issubclass(value, base) and value is not base
    ]
    # A class that others in the module derive from is a base of the plugin, not the plugin.
    leaves = [cls for cls in found if not any(other is not cls and issubclass(other, cls) for other in found)]
    kind = f"weir.{base.__name__}"
    if len(leaves) != 1:
        names = ", ".join(sorted(cls.__name__ for cls in leaves))
        problem = f"defines several ({names})" if leaves else "defines none"
        raise TypeError(f"app.py must define exactly one subclass of {kind} (the plugin), but {problem}")
    return leaves[0]


def configure(cls: type, text: str) -> tuple[Any, list[tuple[str, str]]]:
    """A new plugin object configured with the settings in `text`, and every problem found."""
    config = Config._parse(text)
    try:
        made = cls()
        made.configure(config)
    except BaseException as error:
        # Settings already reported are the likely cause: report them alone.
        if not config._problems:
            config.problem("", describe(error))
            log_unexpected(error, "configure()")
        return None, config._problems
    return made, config.problems()


def check_config(cls: type, text: str) -> list[ConfigIssue]:
    """Every problem in `text` (the export `check-config`)."""
    _log.go_live()
    _log.sync_level()
    _, problems = configure(cls, text)
    _log.flush()
    return [ConfigIssue(safe_text(path), safe_text(message)) for path, message in problems]


def start(cls: type, text: str, then: Callable[[Any], Any], call: str) -> Any:
    """Make and configure this instance's plugin, then run `then(plugin)` (its
    `start` or `pre_execute`) and return what it returns. Config problems are fatal."""
    global plugin
    _log.go_live()
    _log.sync_level()
    made, problems = configure(cls, text)
    if problems:
        listed = "; ".join(f"{path}: {message}" if path else message for path, message in problems)
        raise Err(PluginError_Fatal(safe_text(f"invalid config: {listed}")))
    plugin = made
    return lifecycle(call, then, made)


def lifecycle(call: str, method: Callable, *args: Any) -> Any:
    """Run a lifecycle method; an exception becomes a `plugin-error`, `fatal` for a
    plain exception (the plugin cannot go on)."""
    _log.go_live()
    try:
        return method(*args)
    except BaseException as error:
        raise Err(plugin_error(error, call, PluginError_Fatal)) from None
    finally:
        _log.flush()


def plugin_error(error: BaseException, call: str, plain: type = PluginError_Document) -> Any:
    """The `plugin-error` for `error`, raised by `call`; `plain` for an exception the
    plugin did not raise on purpose (logged with where it was raised)."""
    if isinstance(error, Transient):
        return PluginError_Transient(describe(error))
    if isinstance(error, Fatal):
        return PluginError_Fatal(describe(error))
    if isinstance(error, Failure):
        return PluginError_Document(describe(error))
    log_unexpected(error, call)
    return plain(describe(error))


def describe(error: BaseException) -> str:
    """The message for `error`: its own for weir's exceptions, else `TypeName: message`."""
    text = safe_text(str(error))
    if isinstance(error, (Failure, Transient, Fatal)):
        return text
    name = type(error).__name__
    return f"{name}: {text}" if text else name


def log_unexpected(error: BaseException, call: str) -> None:
    """Log `error` with the place it was raised: the innermost frame of the plugin's own
    code (outside the SDK and generated code), else the innermost."""
    innermost = outside = None
    frame = error.__traceback__
    while frame is not None:
        innermost = frame
        filename = frame.tb_frame.f_code.co_filename
        if not filename.startswith((_SDK_DIR, "<")):
            outside = frame
        frame = frame.tb_next
    frame = outside or innermost
    where = "unknown place"
    if frame is not None:
        # Files are bundled under /<n>/ (the build's search path): drop that.
        where = f"{re.sub(r'^/[0-9]+/', '', frame.tb_frame.f_code.co_filename)}:{frame.tb_lineno}"
    logging.getLogger().warning("%s raised %s (at %s)", call, describe(error), where)
