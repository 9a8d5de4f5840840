"""Triton datatype names <-> numpy dtypes (one table, used by tensors, auto-complete and the wire)."""

from __future__ import annotations

import numpy as np

try:  # BF16 has no numpy dtype; ml_dtypes gives one when installed, else BF16 travels as raw uint16 bits.
    from ml_dtypes import bfloat16 as _BF16
except ImportError:  # pragma: no cover - depends on the environment
    _BF16 = np.uint16

#: KServe datatype name -> numpy dtype.
TO_NUMPY = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BF16": np.dtype(_BF16),
    "BYTES": np.dtype(np.object_),
}

_FROM_NUMPY = {v: k for k, v in TO_NUMPY.items() if k != "BF16"}
if _BF16 is not np.uint16:
    _FROM_NUMPY[np.dtype(_BF16)] = "BF16"


def from_numpy(dtype: np.dtype) -> str:
    """The KServe datatype of a numpy dtype; strings and bytes (``U``/``S``/object) are BYTES."""
    name = _FROM_NUMPY.get(dtype)
    if name is not None:
        return name
    dtype = np.dtype(dtype)
    name = _FROM_NUMPY.get(dtype.newbyteorder("=") if dtype.byteorder not in "=|" else dtype)
    if name is not None:
        return name
    if dtype.kind in "OSU":
        return "BYTES"
    raise TypeError(f"numpy dtype {dtype} has no Triton datatype")


def config_to_numpy(config_name: str):
    """``TYPE_FP32`` -> ``np.float32`` (Triton's ``triton_string_to_numpy``); ``TYPE_STRING`` -> ``np.object_``."""
    if config_name == "TYPE_STRING":
        return np.object_
    if not config_name.startswith("TYPE_") or config_name[5:] not in TO_NUMPY:
        raise KeyError(config_name)
    return TO_NUMPY[config_name[5:]].type


def config_to_triton(config_name: str) -> str:
    """``TYPE_FP32`` -> ``FP32``; ``TYPE_STRING`` -> ``BYTES``."""
    return "BYTES" if config_name == "TYPE_STRING" else config_name[5:]
