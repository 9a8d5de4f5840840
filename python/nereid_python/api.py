"""The API a ``model.py`` sees as ``triton_python_backend_utils`` (Triton's Python backend), written for Nereid.

This module only gathers the names; each concept lives in its own module of the package:

- constants.py: the ``TRITONSERVER_*`` flag and memory-kind numbers
- errors.py: ``TritonError``, ``TritonModelException``, and the traceback text of a model's exception
- request.py: ``InferenceRequest`` (handed to ``execute``, or built for Business Logic Scripting)
- response.py: ``InferenceResponse`` and ``InferenceResponseSender``
- bls.py: a BLS call in flight and the iterator over a decoupled call's responses (through the control channel)
- logger.py: ``Logger``
- auto_complete.py: the ``ModelConfig`` of ``auto_complete_config``
- helpers.py: the module-level config, tensor and data type helpers
- loading.py: the model loading API (``load_model``, ``unload_model``, ``is_model_ready``)
"""

from __future__ import annotations

from .auto_complete import ModelConfig
from .constants import (
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_CPU_PINNED,
    TRITONSERVER_MEMORY_GPU,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
)
from .errors import TritonError, TritonModelException, format_exception
from .helpers import (
    deserialize_bytes_tensor,
    get_input_config_by_name,
    get_input_tensor_by_name,
    get_output_config_by_name,
    get_output_tensor_by_name,
    numpy_to_triton_type,
    serialize_byte_tensor,
    triton_string_to_numpy,
    triton_to_numpy_type,
)
from .loading import is_model_ready, load_model, unload_model
from .logger import Logger
from .request import InferenceRequest
from .response import InferenceResponse, InferenceResponseSender
from .tensor import Tensor

__all__ = [
    "TRITONSERVER_MEMORY_CPU",
    "TRITONSERVER_MEMORY_CPU_PINNED",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "Logger",
    "ModelConfig",
    "Tensor",
    "TritonError",
    "TritonModelException",
    "deserialize_bytes_tensor",
    "format_exception",
    "get_input_config_by_name",
    "get_input_tensor_by_name",
    "get_output_config_by_name",
    "get_output_tensor_by_name",
    "is_model_ready",
    "load_model",
    "numpy_to_triton_type",
    "serialize_byte_tensor",
    "triton_string_to_numpy",
    "triton_to_numpy_type",
    "unload_model",
]
