"""Config helpers of ``triton_python_backend_utils`` that read the model config dict (``json.loads(args["model_config"])``)
and are not part of the request/response vocabulary (request.py, response.py).
"""

from __future__ import annotations


def using_decoupled_model_transaction_policy(model_config) -> bool:
    """True when the config's ``model_transaction_policy`` makes the model decoupled (Triton's helper, used by models
    that serve both ways). A config without the section, or with ``decoupled`` left out, is not decoupled."""
    if not isinstance(model_config, dict):
        raise TypeError(
            f"using_decoupled_model_transaction_policy takes the model config as a dict, got {type(model_config).__name__}"
        )
    policy = model_config.get("model_transaction_policy") or {}
    return bool(policy.get("decoupled", False))
