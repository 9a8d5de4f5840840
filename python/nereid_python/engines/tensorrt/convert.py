"""``python -m nereid_python.engines.tensorrt.convert --spec JSON``: ONNX -> TensorRT plan, the seed's builder-API
recipe with trtexec's common options. ``nereid convert`` (src/cli/convert.ts) parses the command line and passes
the spec: ``{"onnx", "output", "shapes": {input: {"min", "opt", "max"}}, "precision": "fp32"|"fp16"|"bf16",
"int8": bool, "calibration_cache", "workspace_mib", "version_compatible", "timing_cache", "device", "batch": {"opt", "max"}, "shapes_from"}`` (the last two from the tensorrt backend's
ONNX loads: the batch range of inputs given no shapes, and what to name where shapes are missing).

Progress and TensorRT's warnings go to stderr as lines; the last stdout line is the JSON answer:
``{"plan": path, "bytes": n, "trt_version": v, ...}`` or ``{"error": {"c": code, "m": message}}``.

Precision: TensorRT 10 takes FP16/BF16 as builder flags; TensorRT 11 removed them (networks are strongly typed),
so the ONNX model's weights and activations are converted first (``precision.py``) and the network is built
strongly typed. INT8 with a calibration cache needs TensorRT's calibrator API (TensorRT 10); TensorRT 11 removed
it: quantize the ONNX model with Q/DQ nodes instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time


class ConvertError(Exception):
    def __init__(self, message: str, code: str = "INVALID_ARG") -> None:
        super().__init__(message)
        self.code = code


def _say(msg: str) -> None:
    print(f"[convert] {msg}", file=sys.stderr, flush=True)


def _gpu_name(device: int) -> str:
    try:
        from . import gpu

        return gpu.device_name(device)
    except Exception as e:  # noqa: BLE001 - only for the message
        return f"GPU {device} (unknown: {e})"


def _builder_failure(trt, errors: list[str], device: int) -> ConvertError:
    text = " | ".join(errors) or "TensorRT logged no reason"
    missing = next((e for e in errors if "builder_resource" in e), None)
    if missing is not None:
        lib = missing.split("library:")[-1].strip() if "library:" in missing else "libnvinfer_builder_resource_smXX"
        return ConvertError(
            f"TensorRT {trt.__version__} cannot build engines on {_gpu_name(device)}: its builder needs {lib}, which this "
            "TensorRT installation does not have (the Maven Central redistributable that 'nereid tensorrt setup' falls "
            "back to ships only the PTX builder resource, and building from it fails). Install NVIDIA's own wheels "
            f"(pip install tensorrt-cu13=={trt.__version__}, from pypi.nvidia.com) or build the plan on a machine that "
            f"has them. TensorRT said: {text}",
            "UNAVAILABLE",
        )
    return ConvertError(f"TensorRT {trt.__version__} could not create its builder: {text}", "UNAVAILABLE")


_IO_TYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "int32": "int32", "int64": "int64", "int8": "int8", "uint8": "uint8", "bool": "bool"}


def _apply_io_formats(trt, network, inputs, formats: dict) -> None:
    """trtexec's --inputIOFormats/--outputIOFormats: the network's I/O tensors take the given types (in the network's
    order; one entry applies to all), linear layout. TensorRT 10 sets a network tensor's type before the build;
    TensorRT 11's networks are strongly typed (the type is read-only), so a type other than the model's is refused
    there with what to do instead."""
    outputs = [network.get_output(i) for i in range(network.num_outputs)]
    for side, tensors in (("inputs", inputs), ("outputs", outputs)):
        given = formats.get(side)
        if not given:
            continue
        if len(given) != 1 and len(given) != len(tensors):
            flag = "--inputIOFormats" if side == "inputs" else "--outputIOFormats"
            raise ConvertError(f"{flag} gives {len(given)} formats; the model has {len(tensors)} {side} ({[t.name for t in tensors]}): give one per {side[:-1]}, in that order, or one for all")
        for k, t in enumerate(tensors):
            f = given[0] if len(given) == 1 else given[k]
            want = getattr(trt, _IO_TYPES[f["dtype"]])
            if t.dtype != want:
                try:
                    t.dtype = want
                except AttributeError:
                    raise ConvertError(
                        f"TensorRT {trt.__version__} builds strongly typed networks, where {side[:-1]} '{t.name}' keeps the model's type "
                        f"{t.dtype}: export the ONNX model with {f['dtype']} {side} instead of asking for {f['dtype']}",
                        "UNSUPPORTED",
                    ) from None
                _say(f"{side[:-1]} '{t.name}': {f['dtype']}")
            t.allowed_formats = 1 << int(trt.TensorFormat.LINEAR)


def _batch_only(dims: list[int], batch: dict | None) -> dict | None:
    """The tensorrt backend's ONNX loads (``"batch": {"opt", "max"}``): an input whose only dynamic dim is the first
    gets the profile 1..max (opt) in it, the model config's max_batch_size."""
    if not batch or not dims or dims[0] >= 0 or any(d < 0 for d in dims[1:]):
        return None
    rest = dims[1:]
    return {"min": [1, *rest], "opt": [int(batch["opt"]), *rest], "max": [int(batch["max"]), *rest]}


def run(spec: dict) -> dict:
    from . import loader

    try:
        import tensorrt as trt
    except ImportError as e:
        raise ConvertError(f"{loader.install_hint()} (import tensorrt: {e})", "UNAVAILABLE") from None
    major = int(trt.__version__.split(".")[0])
    messages: list[tuple[str, str]] = []

    def forward(sev: str, msg: str) -> None:
        messages.append((sev, msg))
        if sev in ("ERROR", "INTERNAL_ERROR", "WARNING"):
            print(f"[TensorRT] {sev}: {msg}", file=sys.stderr, flush=True)

    logger = loader.make_logger(trt, forward)
    onnx_path = spec["onnx"]
    if not os.path.isfile(onnx_path):
        raise ConvertError(f"ONNX model '{onnx_path}' does not exist", "NOT_FOUND")
    device = int(spec.get("device", 0))
    try:
        from . import gpu

        gpu.set_device(device)
    except Exception as e:  # noqa: BLE001
        raise ConvertError(f"no CUDA GPU is usable to build on: {e}", "UNAVAILABLE") from None
    precision = spec.get("precision", "fp32")
    flags = 0
    strongly_typed = hasattr(trt.NetworkDefinitionCreationFlag, "STRONGLY_TYPED")
    use_builder_flag = precision != "fp32" and hasattr(trt.BuilderFlag, precision.upper())
    tmp = None
    if precision != "fp32" and not use_builder_flag:
        from . import precision as prec

        try:
            import onnx  # noqa: F401
        except ImportError:
            raise ConvertError(
                f"--{precision} on TensorRT {trt.__version__} converts the ONNX model first, which needs the onnx package: "
                f"pip install onnx into {sys.executable}",
                "UNAVAILABLE",
            ) from None
        tmp = tempfile.NamedTemporaryFile(suffix=f".{precision}.onnx", delete=False)
        tmp.close()
        _say(f"TensorRT {trt.__version__} has no {precision.upper()} builder flag: converting the ONNX model's weights and activations to {precision.upper()} (inputs and outputs stay as they are)")
        info = prec.convert(onnx_path, tmp.name, precision)
        _say(f"converted {info['initializers_converted']} float32 initializer(s)")
        onnx_path = tmp.name
    if strongly_typed and (major >= 11 or not use_builder_flag):
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.STRONGLY_TYPED)
    elif hasattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH"):
        flags |= 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    calibrator = None
    if spec.get("int8"):
        if not (hasattr(trt.BuilderFlag, "INT8") and hasattr(trt, "IInt8EntropyCalibrator2")):
            raise ConvertError(
                f"TensorRT {trt.__version__} offers no INT8 calibration (TensorRT 11 removed the calibrator API): quantize the "
                "ONNX model with Q/DQ nodes (e.g. NVIDIA ModelOpt) and convert it without --int8",
                "UNSUPPORTED",
            )
        cache_path = spec.get("calibration_cache")
        if not cache_path or not os.path.isfile(cache_path):
            raise ConvertError("--int8 needs --calib=<calibration cache file> (Nereid does not run calibration itself)")
        with open(cache_path, "rb") as f:
            cache = f.read()

        class _CacheCalibrator(trt.IInt8EntropyCalibrator2):  # type: ignore[name-defined]
            def __init__(self) -> None:
                trt.IInt8EntropyCalibrator2.__init__(self)

            def get_batch_size(self):
                return 1

            def get_batch(self, names):
                return None

            def read_calibration_cache(self):
                return cache

            def write_calibration_cache(self, data):
                return None

        calibrator = _CacheCalibrator()

    builder, errors = loader.create_builder(trt, logger)
    if builder is None:
        raise _builder_failure(trt, errors, device)
    network = builder.create_network(flags)
    parser = trt.OnnxParser(network, logger)
    _say(f"parsing {spec['onnx']}")
    if not parser.parse_from_file(onnx_path):
        errs = [parser.get_error(i).desc() for i in range(parser.num_errors)]
        raise ConvertError(f"TensorRT's ONNX parser rejected '{spec['onnx']}': {' | '.join(errs) or ' | '.join(logger.take())}")
    config = builder.create_builder_config()
    inputs = [network.get_input(i) for i in range(network.num_inputs)]
    _apply_io_formats(trt, network, inputs, spec.get("io_formats") or {})
    shapes = spec.get("shapes") or {}
    unknown = sorted(set(shapes) - {t.name for t in inputs})
    if unknown:
        raise ConvertError(f"shapes are given for {unknown}, which the model has no input named; its inputs are {[t.name for t in inputs]}")
    profile = builder.create_optimization_profile()
    needs_profile = False
    for t in inputs:
        dims = [int(d) for d in t.shape]
        s = shapes.get(t.name) or _batch_only(dims, spec.get("batch"))
        if s is None:
            if any(d < 0 for d in dims):
                shown = "[" + ",".join(map(str, dims)) + "]"
                example = "x".join(str(d) if d >= 0 else "N" for d in dims)
                raise ConvertError(f"input '{t.name}' has dynamic dims {shown}: give {spec.get('shapes_from') or '--minShapes/--optShapes/--maxShapes'} for it ({t.name}:{example} with N filled in)")
            continue
        lo, opt, hi = s["min"], s["opt"], s["max"]
        for name, shape in (("min", lo), ("opt", opt), ("max", hi)):
            if len(shape) != len(dims) or any(d >= 0 and d != x for d, x in zip(dims, shape)):
                raise ConvertError(f"input '{t.name}': {name} shape {shape} does not fit its dims {dims}")
        if any(not (a <= b <= c) for a, b, c in zip(lo, opt, hi)):
            raise ConvertError(f"input '{t.name}': shapes must satisfy min <= opt <= max in every dim (min {lo}, opt {opt}, max {hi})")
        profile.set_shape(t.name, lo, opt, hi)
        needs_profile = True
    if needs_profile:
        config.add_optimization_profile(profile)
    if spec.get("workspace_mib"):
        config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, int(spec["workspace_mib"]) << 20)
    if use_builder_flag:
        config.set_flag(getattr(trt.BuilderFlag, precision.upper()))
    if calibrator is not None:
        config.set_flag(trt.BuilderFlag.INT8)
        config.int8_calibrator = calibrator
    if spec.get("version_compatible"):
        config.set_flag(trt.BuilderFlag.VERSION_COMPATIBLE)
        if spec.get("exclude_lean_runtime"):
            config.set_flag(trt.BuilderFlag.EXCLUDE_LEAN_RUNTIME)
    cache_file = spec.get("timing_cache")
    if cache_file:
        data = b""
        if os.path.isfile(cache_file):
            with open(cache_file, "rb") as f:
                data = f.read()
            _say(f"timing cache: read {len(data)} bytes from {cache_file}")
        cache = config.create_timing_cache(data)
        config.set_timing_cache(cache, False)

    class _Progress(trt.IProgressMonitor):
        def __init__(self) -> None:
            trt.IProgressMonitor.__init__(self)
            self._steps: dict = {}

        def phase_start(self, phase_name, parent_phase, num_steps):
            self._steps[phase_name] = num_steps
            _say(f"{phase_name}: started ({num_steps} steps)")

        def step_complete(self, phase_name, step):
            _say(f"{phase_name}: step {step + 1}/{self._steps.get(phase_name, '?')}")
            return True

        def phase_finish(self, phase_name):
            _say(f"{phase_name}: done")

    if hasattr(config, "progress_monitor"):
        config.progress_monitor = _Progress()
    _say(f"building with TensorRT {trt.__version__} ({precision}{', strongly typed' if flags and strongly_typed and (major >= 11 or not use_builder_flag) else ''}{', version-compatible' if spec.get('version_compatible') else ''})")
    t0 = time.monotonic()
    logger.take()
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise ConvertError(f"TensorRT could not build the engine: {' | '.join(logger.take()) or 'no reason logged'}", "INTERNAL")
    data = bytes(plan)
    out = spec["output"]
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out, "wb") as f:
        f.write(data)
    if cache_file:
        tc = config.get_timing_cache()
        if tc is not None:
            with open(cache_file, "wb") as f:
                f.write(bytes(tc.serialize()))
            _say(f"timing cache: wrote {cache_file}")
    if tmp is not None:
        os.unlink(tmp.name)
    return {"plan": out, "bytes": len(data), "trt_version": trt.__version__, "seconds": round(time.monotonic() - t0, 3), "precision": precision}


def main() -> None:
    ap = argparse.ArgumentParser(prog="nereid_python.engines.tensorrt.convert")
    ap.add_argument("--spec", required=True)
    args = ap.parse_args()
    out = sys.stdout
    sys.stdout = sys.stderr
    try:
        answer = run(json.loads(args.spec))
    except ConvertError as e:
        answer = {"error": {"c": e.code, "m": str(e)}}
    except Exception as e:  # noqa: BLE001 - whatever went wrong, the command gets an answer it can print
        import traceback

        traceback.print_exc()
        answer = {"error": {"c": "INTERNAL", "m": f"the builder failed: {type(e).__name__}: {e}"}}
    out.write(json.dumps(answer) + "\n")
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
