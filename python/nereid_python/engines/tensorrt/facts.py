"""What a deserialized engine declares, as plain data for the host (auto-complete, request checks) and for the
instances: I/O tensors (name, direction, datatype, dims with -1 for dynamic, shape tensor or not) and, per
optimization profile, the min/opt/max shape of every input.
"""

from __future__ import annotations

#: TensorRT DataType names -> KServe datatype names. FP8/INT4/FP4/E8M0 have none: such I/O cannot be served.
DATATYPES = {
    "FLOAT": "FP32",
    "HALF": "FP16",
    "BF16": "BF16",
    "INT8": "INT8",
    "INT32": "INT32",
    "INT64": "INT64",
    "BOOL": "BOOL",
    "UINT8": "UINT8",
}


def _name(enum_value) -> str:
    return getattr(enum_value, "name", str(enum_value)).split(".")[-1]


def _dims(d) -> list[int]:
    return [int(x) for x in d]


def engine_facts(trt, engine) -> dict:
    io = []
    for i in range(engine.num_io_tensors):
        name = engine.get_tensor_name(i)
        mode = _name(engine.get_tensor_mode(name))
        trt_dtype = _name(engine.get_tensor_dtype(name))
        io.append(
            {
                "name": name,
                "mode": "input" if mode == "INPUT" else "output",
                "trt_dtype": trt_dtype,
                "datatype": DATATYPES.get(trt_dtype),
                "dims": _dims(engine.get_tensor_shape(name)),
                "shape_tensor": bool(engine.is_shape_inference_io(name)),
                "location": _name(engine.get_tensor_location(name)).lower(),
            }
        )
    profiles = []
    for p in range(engine.num_optimization_profiles):
        shapes = {}
        for t in io:
            if t["mode"] != "input":
                continue
            if t["shape_tensor"]:
                continue  # shape tensors are refused at load (see model.py); their profile values are not needed
            lo, opt, hi = engine.get_tensor_profile_shape(t["name"], p)
            shapes[t["name"]] = {"min": _dims(lo), "opt": _dims(opt), "max": _dims(hi)}
        profiles.append({"index": p, "inputs": shapes})
    memory = {}
    try:
        memory["static"] = int(engine.device_memory_size_v2)
        memory["per_profile"] = [int(engine.get_device_memory_size_for_profile_v2(p)) for p in range(engine.num_optimization_profiles)]
    except AttributeError:
        pass
    return {"trt_version": trt.__version__, "io": io, "profiles": profiles, "device_memory": memory}
