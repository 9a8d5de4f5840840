"""One PyTorch model instance: a TorchScript module on the CPU or one CUDA device (with a CUDA stream of its own),
fed from the transport's shared memory.

A batch: requests whose inputs agree beyond the batch dim run as one forward() (their inputs joined along dim 0:
a view when the host laid them back to back, which it does, else one copy); each input becomes a tensor with
``torch.from_numpy`` (no copy on the CPU; one host-to-device copy on a GPU); the outputs the config declares are
taken from what forward() returns (a tensor, or a tuple/list of them) by Triton's naming rules, moved to the host
and split back into one response per request (views; the stub copies them into shared memory once).

Client CUDA shared memory (a KIND_GPU instance on the region's device): an input there arrives as a GPU
``pb_utils.Tensor`` and becomes a torch tensor over the client's memory through DLPack (no copy); an output the
client placed there is copied device to device into a torch view over its buffer on the instance's stream, which
is synchronized before the response goes (the runner then has nothing to copy). Nothing goes through the host.

Strings: a ``TYPE_STRING`` input or output is a ``List[str]`` argument or return value (UTF-8), one dimension only
(the batch dim counts), as Triton's pytorch backend.

Threading: one instance is driven by one thread (the stub's), one batch at a time.
"""

from __future__ import annotations

import contextlib
import json
import warnings

import numpy as np

from nereid_python import datatypes
from nereid_python.api import InferenceResponse, TritonError
from nereid_python.tensor import Tensor, slot_tensor

from . import naming, runtime
from .runtime import PyTorchError

# The transport's shared memory is mapped read-only on this side for inputs; torch warns about wrapping it even
# though nothing here writes to an input.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable")


#: How torch names a List[str] argument's type (it has used both spellings).
_STRING_LISTS = ("List[str]", "str[]")


def _ptr(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def join_rows(arrays: list[np.ndarray]) -> np.ndarray:
    """The arrays joined along dim 0: a view when they lie back to back in one buffer, else a copy."""
    if len(arrays) == 1:
        return arrays[0]
    first = arrays[0]
    adjacent = all(a.flags.c_contiguous and a.dtype == first.dtype for a in arrays) and all(
        _ptr(arrays[i + 1]) == _ptr(arrays[i]) + arrays[i].nbytes for i in range(len(arrays) - 1)
    )
    if adjacent and first.ndim > 0:
        rows = sum(a.shape[0] for a in arrays)
        return np.lib.stride_tricks.as_strided(first, shape=(rows, *first.shape[1:]), strides=first.strides, writeable=False)
    return np.concatenate(arrays, axis=0)


class Instance:
    def __init__(self, args: dict, log, warn) -> None:
        self.torch = torch = runtime.import_torch()
        self.name = args["instance_name"]
        self.model = args["model_name"]
        self.log = log
        o = json.loads(args["options"])
        io = json.loads(args["io"])
        self.device = args["device"]
        self.cuda = self.device.startswith("cuda")
        if self.cuda:
            index = int(self.device.split(":")[1])
            count = torch.cuda.device_count() if torch.cuda.is_available() else 0
            if index >= count:
                raise PyTorchError(
                    f"instance {self.name} is on {self.device}, but torch {torch.__version__} (CUDA {torch.version.cuda or 'none: a CPU-only build'}) sees {count} CUDA device(s)",
                    "UNAVAILABLE",
                )
            torch.cuda.set_device(index)
        settings = runtime.apply_settings(torch, o, warn)
        self.module, shared = runtime.load(torch, args["model_path"], self.device, bool(o.get("weight_sharing")))
        self.inference_mode = bool(o.get("inference_mode"))
        self.optimize = not bool(o.get("disable_optimized_execution"))
        self.cache_cleaning = bool(o.get("cache_cleaning"))
        self.batching = int(io["max_batch_size"]) > 0
        self.stream = torch.cuda.Stream(device=self.device) if self.cuda else None
        self._bind(io, warn)
        self.log(
            f"instance {self.name} on {self.device}: torch {torch.__version__}; inputs by {self.input_rule}, outputs by "
            f"{self.output_rule}; intra-op threads {settings['intra_op_threads']}, inter-op threads "
            f"{settings['inter_op_threads']}, optimized execution {'on' if self.optimize else 'off'}, inference mode "
            f"{'on' if self.inference_mode else 'off'}, jit executor {_onoff(settings['jit_executor'])}, jit profiling "
            f"{_onoff(settings['jit_profiling'])}, tensor fuser {_onoff(settings['tensor_fuser'])}, weight sharing "
            f"{'on (weights shared with an earlier instance)' if shared else 'on' if o.get('weight_sharing') else 'off'}, "
            f"cache cleaning {'on' if self.cache_cleaning and self.cuda else 'on (no effect on the CPU)' if self.cache_cleaning else 'off'}"
        )

    # -- set-up ---------------------------------------------------------------------------------------------------

    def _bind(self, io: dict, warn) -> None:
        args = self.module.forward.schema.arguments[1:]
        names = [a.name for a in args]
        types = [str(a.type) for a in args]
        inputs = io["inputs"]
        self.inputs = inputs
        self.outputs = {o["name"]: o for o in io["outputs"]}
        self.dict_input = len(args) == 1 and types[0].startswith("Dict")
        config_names = [i["name"] for i in inputs]
        if self.dict_input:
            self.input_pos = {n: i for i, n in enumerate(config_names)}
            self.input_rule = f"name (forward() takes one {types[0]})"
        else:
            for n, t in zip(names, types):
                if t != "Tensor" and t not in _STRING_LISTS:
                    raise PyTorchError(f"forward() argument '{n}' is {t}; the pytorch backend passes Tensor, List[str] or one Dict[str, Tensor]", "INVALID_ARG")
            if len(args) != len(inputs):
                raise PyTorchError(
                    f"model '{self.model}': config.pbtxt declares {len(inputs)} input(s) {config_names}, but forward() takes {len(args)} ({', '.join(f'{n}: {t}' for n, t in zip(names, types))})",
                    "INVALID_ARG",
                )
            self.input_pos, self.input_rule, w = naming.map_inputs(config_names, names)
            if w:
                warn(f"model '{self.model}': {w}")
            problem = naming.check_inputs(self.input_pos, len(args))
            if problem:
                raise PyTorchError(f"model '{self.model}': {problem}", "INVALID_ARG")
            for i in inputs:
                t = types[self.input_pos[i["name"]]]
                if (i["datatype"] == "BYTES") != (t in _STRING_LISTS):
                    raise PyTorchError(
                        f"model '{self.model}': input '{i['name']}' is {i['datatype']} in config.pbtxt, but its forward() argument '{names[self.input_pos[i['name']]]}' is {t} (TYPE_STRING goes with List[str], every other type with Tensor)",
                        "INVALID_ARG",
                    )
        for t in [*inputs, *io["outputs"]]:
            if t["datatype"] == "BYTES" and len(t["dims"]) + (1 if self.batching else 0) != 1:
                raise PyTorchError(f"model '{self.model}': '{t['name']}' is TYPE_STRING with dims {t['dims']}; strings (List[str]) have exactly one dimension, the batch dim included", "INVALID_ARG")
        self.output_pos, self.output_rule, w = naming.map_outputs(list(self.outputs))
        if w:
            warn(f"model '{self.model}': {w}")

    # -- execution ------------------------------------------------------------------------------------------------

    def run(self, requests) -> list:
        responses: list = [None] * len(requests)
        groups: dict[tuple, list[int]] = {}
        for i, req in enumerate(requests):
            if not self.batching:
                groups[(i,)] = [i]
                continue
            key = tuple((t.name(), tuple(t.shape()[1:])) for t in sorted(req.inputs(), key=lambda t: t.name()))
            groups.setdefault(key, []).append(i)
        for members in groups.values():
            try:
                for i, resp in zip(members, self._run([requests[i] for i in members])):
                    responses[i] = resp
            except Exception as e:  # noqa: BLE001 - the model's failure answers these requests, the instance serves on
                err = TritonError(f"model instance '{self.name}': forward() failed: {_first_line(e)}", TritonError.INTERNAL)
                for i in members:
                    responses[i] = InferenceResponse(error=err)
        if self.cache_cleaning and self.cuda:
            self.torch.cuda.empty_cache()
        return responses

    def _run(self, requests) -> list:
        torch = self.torch
        per_request = [{t.name(): t for t in r.inputs()} for r in requests]
        rows = [int(d[self.inputs[0]["name"]].shape()[0]) if self.batching else 1 for d in per_request]
        wanted: list[str] = []
        for r in requests:
            for n in r.requested_output_names() or list(self.outputs):
                if n not in wanted:
                    wanted.append(n)
        values: dict[str, object] = {}
        for spec in self.inputs:
            n = spec["name"]
            if spec["datatype"] == "BYTES":
                values[n] = [_text(v) for d in per_request for v in d[n].as_numpy().reshape(-1)]
            elif all(d[n].is_cpu() for d in per_request):
                pieces = [d[n].as_numpy() for d in per_request]
                values[n] = self._to_torch(join_rows(pieces) if self.batching else pieces[0], spec["datatype"])
            else:
                on_device = [self._from_device(d[n], spec["datatype"]) for d in per_request]
                values[n] = on_device[0] if len(on_device) == 1 else torch.cat(on_device, 0)
        torch._C._set_graph_executor_optimize(self.optimize)
        grad = torch.inference_mode() if self.inference_mode else torch.no_grad()
        stream = torch.cuda.stream(self.stream) if self.cuda else contextlib.nullcontext()
        with grad, stream:
            if self.dict_input:
                result = self.module(values)
            else:
                ordered = sorted(values.items(), key=lambda kv: self.input_pos[kv[0]])
                result = self.module(*[v for _, v in ordered])
            returned = list(result) if isinstance(result, (tuple, list)) and not _is_strings(result) else [result]
            produced: dict[str, object] = {}
            for n in wanted:
                k = self.output_pos[n]
                if k >= len(returned):
                    raise PyTorchError(f"config output '{n}' is forward()'s value {k} ({self.output_rule}), but forward() returned {len(returned)} value(s)")
                produced[n] = returned[k]
        total = sum(rows)
        host: dict[str, np.ndarray] = {}
        in_place = False
        out = []
        row = 0
        for r, n_rows in zip(requests, rows):
            tensors = []
            slots = r._slots or {}
            for n in r.requested_output_names() or list(self.outputs):
                placed = self._write_in_place(n, produced[n], slots.get(n), row, n_rows, total)
                if placed is not None:
                    tensors.append(placed)
                    in_place = True
                    continue
                if n not in host:
                    host[n] = self._to_numpy(n, produced[n])
                a = host[n]
                if self.batching:
                    if a.ndim == 0 or a.shape[0] != total:
                        raise PyTorchError(f"forward() returned '{n}' with shape {list(a.shape)}, but the batch has {total} row(s) along dim 0")
                    a = a[row : row + n_rows]
                tensors.append(Tensor._wrap(n, a, datatypes.from_numpy(a.dtype) if a.dtype != np.object_ else "BYTES"))
            out.append(InferenceResponse(output_tensors=tensors))
            row += n_rows
        if in_place and self.cuda:
            self.stream.synchronize()  # the client reads its buffers once the response arrives
        return out

    def _from_device(self, t, datatype: str):
        """A torch tensor over a GPU input's memory (the client's CUDA region), through DLPack: no copy."""
        v = self.torch.from_dlpack(t.to_dlpack())
        if self.cuda and v.device != self.torch.device(self.device):
            v = v.to(self.device)  # not expected: the host sends device tensors only to an instance on their GPU
        return v

    def _write_in_place(self, name: str, value, slot, row: int, n_rows: int, total: int):
        """Copies an output into the client's device buffer (device to device, on the instance's stream) and
        returns the GPU Tensor over that buffer; None when there is no buffer or the output cannot go there
        (strings, a dtype Triton lacks, too small a buffer: then it goes through the host as usual)."""
        torch = self.torch
        if slot is None or not isinstance(value, torch.Tensor):
            return None
        datatype = _TRITON_OF.get(str(value.dtype).replace("torch.", ""))
        if datatype is None:
            return None
        part = value.detach()
        if self.batching:
            if part.ndim == 0 or part.shape[0] != total:
                raise PyTorchError(f"forward() returned '{name}' with shape {list(part.shape)}, but the batch has {total} row(s) along dim 0")
            part = part[row : row + n_rows]
        target = slot_tensor(slot, name, datatype, list(part.shape))
        if target is None:
            return None
        stream = torch.cuda.stream(self.stream) if self.cuda else contextlib.nullcontext()
        with stream:
            torch.from_dlpack(target.to_dlpack()).copy_(part)
        return target

    def _to_torch(self, a: np.ndarray, datatype: str):
        torch = self.torch
        if datatype == "BF16":
            t = torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(torch.bfloat16)
        else:
            t = torch.from_numpy(a)
        return t.to(self.device, non_blocking=True) if self.cuda else t

    def _to_numpy(self, name: str, v) -> np.ndarray:
        torch = self.torch
        if _is_strings(v):
            return np.array([s.encode("utf-8") if isinstance(s, str) else bytes(s) for s in v], dtype=np.object_)
        if not isinstance(v, torch.Tensor):
            raise PyTorchError(f"forward() returned {type(v).__name__} for output '{name}'; expected a Tensor (or List[str] for TYPE_STRING)")
        t = v.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        if t.dtype == torch.bfloat16:
            return t.view(torch.int16).numpy().view(datatypes.TO_NUMPY["BF16"])
        try:
            return t.numpy()
        except TypeError as e:
            raise PyTorchError(f"output '{name}' is {t.dtype}, which has no Triton datatype ({e})") from None

    def close(self) -> None:
        if self.cuda and self.stream is not None:
            self.stream.synchronize()
        self.module = None


#: torch dtype name -> Triton datatype, for outputs written into client device memory.
_TRITON_OF = {
    "bool": "BOOL",
    "uint8": "UINT8",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float16": "FP16",
    "float32": "FP32",
    "float64": "FP64",
    "bfloat16": "BF16",
}


def _is_strings(v) -> bool:
    return isinstance(v, list) and (len(v) == 0 or isinstance(v[0], str))


def _text(v) -> str:
    return v.decode("utf-8") if isinstance(v, (bytes, bytearray)) else str(v)


def _onoff(v: bool) -> str:
    return "on" if v else "off"


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    # TorchScript errors carry the TorchScript traceback first; the exception's own message is the last line.
    lines = [ln for ln in text.splitlines() if ln.strip()]
    msg = lines[-1].strip() if lines else ""
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__
