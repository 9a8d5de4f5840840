"""``ModelConfig``: the config a model's ``auto_complete_config`` reads and completes, refusing changes that
contradict what the configuration file already says (as Triton does)."""

from __future__ import annotations

import json

_INPUT_KEYS = {"name", "data_type", "dims", "format", "reshape", "is_shape_tensor", "allow_ragged_batch", "optional", "is_non_linear_format_io"}
_OUTPUT_KEYS = {"name", "data_type", "dims", "reshape", "label_filename", "is_shape_tensor", "is_non_linear_format_io"}


class ModelConfig:
    """The config handed to ``auto_complete_config``: read it with ``as_dict``, change it with the setters."""

    def __init__(self, model_config) -> None:
        self._config = json.loads(model_config) if isinstance(model_config, str) else model_config

    def as_dict(self) -> dict:
        return self._config

    def _name(self) -> str:
        return self._config.get("name", "")

    def set_max_batch_size(self, max_batch_size: int) -> None:
        if not isinstance(max_batch_size, int) or isinstance(max_batch_size, bool) or max_batch_size < 0:
            raise ValueError(f"max_batch_size must be a non-negative int, got {max_batch_size!r}")
        current = int(self._config.get("max_batch_size", 0) or 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but auto_complete_config of model "
                f"'{self._name()}' set max_batch_size {max_batch_size}"
            )
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        if self._config.get("sequence_batching") is not None:
            raise ValueError(
                f"model '{self._name()}': configuration already uses sequence_batching; cannot set dynamic_batching"
            )
        if self._config.get("dynamic_batching") is None:
            self._config["dynamic_batching"] = {}

    def set_model_transaction_policy(self, transaction_policy_dict: dict) -> None:
        if not isinstance(transaction_policy_dict, dict) or set(transaction_policy_dict) - {"decoupled"}:
            raise ValueError("model_transaction_policy takes a dict with the key 'decoupled' only")
        current = self._config.get("model_transaction_policy")
        wanted = bool(transaction_policy_dict.get("decoupled", False))
        if current is not None and bool(current.get("decoupled", False)) != wanted:
            raise ValueError(
                f"model '{self._name()}': configuration sets model_transaction_policy decoupled "
                f"{bool(current.get('decoupled', False))}, but auto_complete_config sets {wanted}"
            )
        self._config["model_transaction_policy"] = {"decoupled": wanted}

    def add_input(self, input: dict) -> None:
        self._add("input", input, _INPUT_KEYS)

    def add_output(self, output: dict) -> None:
        self._add("output", output, _OUTPUT_KEYS)

    def _add(self, kind: str, tensor: dict, allowed: set) -> None:
        if not isinstance(tensor, dict):
            raise ValueError(f"add_{kind} takes a dict, got {type(tensor).__name__}")
        unknown = set(tensor) - allowed
        if unknown:
            raise ValueError(f"model '{self._name()}': {kind} has unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
        for key in ("name", "data_type", "dims"):
            if key not in tensor:
                raise ValueError(f"model '{self._name()}': {kind} {tensor.get('name', '')!r} needs '{key}'")
        tensor = dict(tensor)
        tensor["dims"] = [int(d) for d in tensor["dims"]]
        entries = self._config.setdefault(kind, [])
        for existing in entries:
            if existing.get("name") == tensor["name"]:
                self._merge(kind, existing, tensor)
                return
        entries.append(tensor)

    def _merge(self, kind: str, existing: dict, tensor: dict) -> None:
        """Fills what the configuration left out of an entry it names; what it set must agree."""
        for key in ("data_type", "dims"):
            have = existing.get(key)
            if key == "dims":
                have = [int(d) for d in (have or [])]
                if not have:
                    existing["dims"] = tensor["dims"]
                    continue
            elif have in (None, "", "TYPE_INVALID"):
                existing[key] = tensor[key]
                continue
            if have != tensor[key]:
                raise ValueError(
                    f"model '{self._name()}': {kind} '{tensor['name']}' has {key} {have} in the configuration, "
                    f"but auto_complete_config sets {tensor[key]}"
                )
