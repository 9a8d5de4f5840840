"""``Logger``: log records that go to Nereid's log through the control channel, with where they were written."""

from __future__ import annotations

import sys

from .runtime import STATE


class Logger:
    """Log records that go to Nereid's log, with the model and instance they come from."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3
    _LEVELS = ("info", "warn", "error", "verbose")

    class LogLevel:
        """Triton's ``Logger.LogLevel`` (the same values as ``Logger.INFO`` ...)."""

        INFO, WARNING, ERROR, VERBOSE = 0, 1, 2, 3

    @staticmethod
    def log(message, level: int = INFO) -> None:
        if not isinstance(level, int) or not 0 <= level < 4:
            level = Logger.INFO
        # The record names the model's line, not this module's log_info / log wrappers.
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename == __file__:
            frame = frame.f_back
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else ""
        ch = STATE.channel
        if ch is None:
            print(f"[{Logger._LEVELS[level]}] {where} {message}", file=sys.stderr)
            return
        ch.send({"op": "log", "lvl": Logger._LEVELS[level], "msg": str(message), "at": where, "inst": _instance()})

    @staticmethod
    def log_info(message) -> None:
        Logger.log(message, Logger.INFO)

    @staticmethod
    def log_warn(message) -> None:
        Logger.log(message, Logger.WARNING)

    @staticmethod
    def log_error(message) -> None:
        Logger.log(message, Logger.ERROR)

    @staticmethod
    def log_verbose(message) -> None:
        Logger.log(message, Logger.VERBOSE)


def _instance():
    return getattr(STATE.local, "instance", None)
