"""Python's `logging` and `print` sent to the host's log (`weir:plugin/log`).

The root logger gets a handler that records through the host, and its level
follows the host's (asked at the start of each lifecycle call), so a disabled
`log.debug(...)` costs one comparison. `print` goes to the log at info level,
standard error at warn level, one record per line.

Nothing here calls the host before the plugin's first call: while the component
is being built (module import time), output goes to the build's own console.
"""

from __future__ import annotations

import logging
import sys

from wit_world.imports import log as host
from wit_world.imports.log import Level

from ._codec import safe_text

TRACE = 5
"""A level below DEBUG, for `log.log(weir.TRACE, ...)`; the host's `trace`."""
logging.addLevelName(TRACE, "TRACE")

# Python level -> host level, most verbose first.
_LEVELS = (
    (TRACE, Level.TRACE),
    (logging.DEBUG, Level.DEBUG),
    (logging.INFO, Level.INFO),
    (logging.WARNING, Level.WARN),
    (logging.ERROR, Level.ERROR),
)

_live = False


def go_live() -> None:
    """Called on entering every plugin call: from now on, output goes to the host."""
    global _live
    _live = True


def sync_level() -> None:
    """Set the root logger's level to the most verbose level the host records."""
    for python_level, level in _LEVELS:
        if host.enabled(level):
            log.setLevel(python_level)
            return
    log.setLevel(logging.CRITICAL + 1)


def host_level(levelno: int) -> Level:
    """The host level for a Python level (between two, the lower)."""
    chosen = Level.TRACE
    for python_level, level in _LEVELS:
        if levelno >= python_level:
            chosen = level
    return chosen


class _HostHandler(logging.Handler):
    """Records log records through the host."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            if record.name != "root":
                message = f"{record.name}: {message}"
            if _live:
                host.log(host_level(record.levelno), safe_text(message))
            else:
                print(f"{record.levelname}: {message}", file=sys.__stderr__)
        except Exception:
            self.handleError(record)


class _HostStream:
    """A text stream (stdout or stderr) whose lines go to the host's log."""

    def __init__(self, level: Level, build_stream):
        self._level = level
        self._build_stream = build_stream
        self._pending = ""

    def write(self, text: str) -> int:
        if not _live:
            return self._build_stream.write(text)
        *lines, self._pending = (self._pending + text).split("\n")
        for line in lines:
            host.log(self._level, safe_text(line))
        return len(text)

    def flush(self) -> None:
        """Record a last line that has no newline yet."""
        if self._pending:
            host.log(self._level, safe_text(self._pending))
            self._pending = ""

    def isatty(self) -> bool:
        return False


log = logging.getLogger()
"""The root logger (`weir.log`): `weir.log.info("read %d rows", n)`."""
log.handlers[:] = [_HostHandler()]
log.setLevel(logging.INFO)

_stdout = _HostStream(Level.INFO, sys.__stdout__)
_stderr = _HostStream(Level.WARN, sys.__stderr__)
sys.stdout = _stdout
sys.stderr = _stderr


def flush() -> None:
    """Record any partial line left in stdout or stderr (end of a plugin call)."""
    if _stdout._pending:
        _stdout.flush()
    if _stderr._pending:
        _stderr.flush()
