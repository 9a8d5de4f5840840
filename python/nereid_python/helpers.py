"""The module-level helpers of ``triton_python_backend_utils``: finding tensors and config entries by name, data
type conversions, and Triton's length-prefixed BYTES form."""

from __future__ import annotations

import numpy as np

from . import datatypes
from .shm import decode_bytes_elements, encode_bytes_elements
from .tensor import Tensor


def get_input_tensor_by_name(inference_request, name: str) -> Tensor | None:
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response, name: str) -> Tensor | None:
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


def get_input_config_by_name(model_config: dict, name: str) -> dict | None:
    for entry in model_config.get("input", []) or []:
        if entry.get("name") == name:
            return entry
    return None


def get_output_config_by_name(model_config: dict, name: str) -> dict | None:
    for entry in model_config.get("output", []) or []:
        if entry.get("name") == name:
            return entry
    return None


def triton_string_to_numpy(triton_type_string: str):
    return datatypes.config_to_numpy(triton_type_string)


_TYPE_NUMBERS = ["INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"]


def triton_to_numpy_type(data_type: int):
    """Config enum number (TYPE_FP32 = 11) -> numpy type."""
    name = _TYPE_NUMBERS[data_type] if 0 < data_type < len(_TYPE_NUMBERS) else None
    return None if name is None else datatypes.TO_NUMPY[name].type


def numpy_to_triton_type(data_type) -> int | None:
    try:
        return _TYPE_NUMBERS.index(datatypes.from_numpy(np.dtype(data_type)))
    except TypeError:
        return None


def serialize_byte_tensor(input_tensor: np.ndarray) -> np.ndarray:
    """Object/bytes array -> Triton's length-prefixed BYTES form, as a uint8 array."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.uint8)
    return np.frombuffer(encode_bytes_elements(input_tensor.reshape(-1)), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor) -> np.ndarray:
    """Triton's length-prefixed BYTES form -> an object array of bytes."""
    buf = np.frombuffer(encoded_tensor, dtype=np.uint8) if not isinstance(encoded_tensor, np.ndarray) else encoded_tensor
    count = 0
    off = 0
    mv = memoryview(buf)
    while off + 4 <= len(mv):
        off += 4 + int.from_bytes(mv[off : off + 4], "little")
        count += 1
    return decode_bytes_elements(buf, count)
