"""Custom metrics for ``model.py`` files: ``pb_utils.MetricFamily`` (COUNTER, GAUGE, HISTOGRAM) and its ``Metric``.

The values live in the Nereid server (``src/core/custom-metrics.ts``), which exports them on ``/metrics``; every
operation here is one round trip on the control channel, so a refused operation raises in the model at the line
that made it, with Triton's wording (``Failed to increment metric value: ...``). Deleting a ``MetricFamily``
invalidates the ``Metric`` objects made from it, as in Triton; their deletes are sent from finalizers without
waiting (a finalizer may run while this thread holds the channel).
"""

from __future__ import annotations

import enum
import weakref

from .errors import TritonModelException
from .runtime import STATE, round_trip


class MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


_WIRE_KIND = {MetricKind.COUNTER: "counter", MetricKind.GAUGE: "gauge", MetricKind.HISTOGRAM: "histogram"}

_CLEARED = (
    "Invalid metric operation as the corresponding 'MetricFamily' has been deleted. The 'MetricFamily' object "
    "should be deleted AFTER its corresponding 'Metric' objects have been deleted."
)


def _call(body: dict, prefix: str) -> dict:
    """One ``metric`` round trip; the answer, or its error raised after ``prefix`` (Triton's wording)."""
    body["op"] = "metric"
    answer = round_trip(body)
    err = answer.get("e")
    if err:
        raise TritonModelException(prefix + str(err.get("m", "")))
    return answer


def _forget(body: dict) -> None:
    """A delete from a finalizer: sent without an answer, and never raising (the process may be ending)."""
    ch = STATE.channel
    if ch is None or ch.closed:
        return
    body["op"] = "metric"
    try:
        ch.send(body)
    except Exception:  # noqa: BLE001 - nobody to tell: the host drops everything of this process when it ends
        pass


class Metric:
    """One series of a family (its labels); made by ``MetricFamily.Metric``, not directly."""

    def __init__(self, *args, **kwargs) -> None:
        raise TypeError("pb_utils.Metric has no constructor; create one with MetricFamily.Metric(labels=..., buckets=...)")

    @classmethod
    def _made(cls, mid: int) -> "Metric":
        m = cls.__new__(cls)
        m._id = mid
        m._cleared = False
        return m

    def _op(self, do: str, value, prefix: str) -> dict:
        if self._cleared:
            raise TritonModelException(prefix + _CLEARED)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"Metric.{do}() takes a number, got {type(value).__name__}")
        return _call({"do": do, "id": self._id, "v": float(value)}, prefix)

    def increment(self, value) -> None:
        self._op("increment", value, "Failed to increment metric value: ")

    def set(self, value) -> None:
        self._op("set", value, "Failed to set metric value: ")

    def observe(self, value) -> None:
        self._op("observe", value, "Failed to observe metric value: ")

    def value(self) -> float:
        if self._cleared:
            raise TritonModelException("Failed to get metric value: " + _CLEARED)
        return float(_call({"do": "value", "id": self._id}, "Failed to get metric value: ")["v"])

    def __del__(self) -> None:
        if not getattr(self, "_cleared", True):
            self._cleared = True
            _forget({"do": "metric_del", "id": self._id})


class MetricFamily:
    """A named family of metrics of one kind; creating it again with the same name and kind shares it."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name, description, kind) -> None:
        if not isinstance(name, str) or not isinstance(description, str):
            raise TypeError("MetricFamily(name, description, kind): name and description must be str")
        if isinstance(kind, bool) or not isinstance(kind, int) or int(kind) not in (0, 1, 2):
            raise TypeError(
                f"MetricFamily kind must be pb_utils.MetricFamily.COUNTER, GAUGE or HISTOGRAM, got {kind!r}"
            )
        self._kind = MetricKind(int(kind))
        self._metrics: weakref.WeakSet = weakref.WeakSet()
        self._id = None
        msg = {"do": "family_new", "name": name, "help": description, "kind": _WIRE_KIND[self._kind]}
        self._id = _call(msg, "Error when creating MetricFamily: ")["id"]

    def Metric(self, labels=None, buckets=None) -> Metric:  # noqa: N802 - Triton's name
        if labels is not None and not isinstance(labels, dict):
            raise TritonModelException("Failed to create metric. Labels must be a dictionary.")
        if buckets is not None:
            if not isinstance(buckets, list):
                raise TritonModelException("Failed to create metric. Buckets must be a list.")
            if self._kind != MetricKind.HISTOGRAM:
                raise TritonModelException("Failed to create metric. Unexpected buckets found.")
            buckets = [float(b) for b in buckets]
        elif self._kind == MetricKind.HISTOGRAM:
            raise TritonModelException("Failed to create metric. Missing required buckets.")
        body = {"do": "metric_new", "id": self._id, "labels": labels or {}}
        if buckets is not None:
            body["buckets"] = buckets
        metric = Metric._made(_call(body, "Error when creating Metric: ")["id"])
        self._metrics.add(metric)
        return metric

    def __del__(self) -> None:
        for m in list(getattr(self, "_metrics", ())):
            m._cleared = True
        if getattr(self, "_id", None) is not None:
            _forget({"do": "family_del", "id": self._id})
