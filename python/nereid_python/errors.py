"""Errors of the model API: ``TritonError`` (returned in a response), ``TritonModelException`` (raised), and the
traceback text Triton's python backend reports for an exception a model raised.

Imports nothing of this package, so any module (tensor.py, loading.py ...) can import it at the top.
"""

from __future__ import annotations

import asyncio
import os
import traceback


class TritonError:
    """An error a model returns in a response (not raised). Codes as TRITONSERVER_Error_Code."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    _NAMES = ("UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED")

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        if not isinstance(code, int) or not 0 <= code < len(self._NAMES):
            raise ValueError(f"TritonError code must be one of TritonError.UNKNOWN .. TritonError.CANCELLED, got {code!r}")
        self._message = str(message)
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def _wire(self) -> dict:
        return {"c": self._NAMES[self._code], "m": self._message}

    @classmethod
    def _from_wire(cls, e: dict) -> "TritonError":
        code = cls._NAMES.index(e["c"]) if e.get("c") in cls._NAMES else cls.INTERNAL
        return cls(e.get("m", ""), code)

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {self._NAMES[self._code]})"


class TritonModelException(Exception):
    """Raised by a model (or by this package) to fail the current call; its message goes to the client."""

    def message(self) -> str:
        return str(self)


_OWN = os.path.dirname(os.path.abspath(__file__)) + os.sep
_ASYNCIO = os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep


def format_exception(e: BaseException) -> str:
    """``Type: message`` then the model's frames, innermost first, as Triton's python backend reports them (the
    stub's own frames and asyncio's are left out: they say nothing about the model)."""
    head = f"{type(e).__name__}: {e}"
    frames = [
        f
        for f in traceback.extract_tb(e.__traceback__)
        if not f.filename.startswith(_OWN) and not f.filename.startswith(_ASYNCIO)
    ]
    if not frames:
        return head
    lines = "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in reversed(frames))
    return f"{head}\n\nAt:\n{lines}"
