"""Triton's ``triton_python_backend_utils`` API for ``model.py`` files served by Nereid's python backend.

Usage as with Triton: ``import triton_python_backend_utils as pb_utils``. The implementation is Nereid's own
(``nereid_python.api``); this module only gives it the name model files import.
"""

from nereid_python.api import (  # noqa: F401
    TRITONSERVER_MEMORY_CPU,
    TRITONSERVER_MEMORY_CPU_PINNED,
    TRITONSERVER_MEMORY_GPU,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
    TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    TRITONSERVER_RESPONSE_COMPLETE_FINAL,
    InferenceRequest,
    InferenceResponse,
    InferenceResponseSender,
    Logger,
    ModelConfig,
    TritonError,
    TritonModelException,
    deserialize_bytes_tensor,
    get_input_config_by_name,
    get_input_tensor_by_name,
    get_output_config_by_name,
    get_output_tensor_by_name,
    is_model_ready,
    load_model,
    numpy_to_triton_type,
    serialize_byte_tensor,
    triton_string_to_numpy,
    triton_to_numpy_type,
    unload_model,
)
from nereid_python.tensor import Tensor  # noqa: F401

# -- config helpers (model_config_utils) -------------------------------------------------------------------------
from nereid_python.model_config_utils import using_decoupled_model_transaction_policy  # noqa: F401, E402

# -- custom metrics (metrics.py) -----------------------------------------------------------------------------------
from nereid_python.metrics import Metric, MetricFamily, MetricKind  # noqa: F401, E402

# -- the rest of Triton's documented surface, and names Nereid refuses (nereid_python/surface.py) ----------------

from nereid_python.surface import TRITON_STRING_TO_NUMPY, InferenceTrace, PreferredMemory  # noqa: E402,F401
from nereid_python.surface import missing as _missing  # noqa: E402


def __getattr__(name: str):
    """A name Nereid does not provide fails with an error naming it (an AttributeError, so hasattr still works)."""
    if name.startswith("__"):
        raise AttributeError(name)
    raise _missing(name)

