"""Models and plans for the TensorRT checks on the H200 (scripts/gpu/tensorrt-on-device.sh), made there, never
committed: PyTorch makes the models and the reference answers, TensorRT's Python API builds the plans that
`nereid convert` does not (several optimization profiles, a layer from TensorRT's own plugin library).

    python trt_models.py mlp OUT          MLP 64-256-64 (fp32): ONNX (opset 17, dynamic batch), plan with one
                                          profile 1/16/64 (TF32 off), reference rows from PyTorch (ref.json)
    python trt_models.py profiles OUT     MLP 2048-8192-2048: a plan with two profiles, 1/4/8 and 256/1024/2048
                                          (their activation memory differs by ~100x: what allocation strategy shows)
    python trt_models.py plugin OUT       a plan whose only layer is a plugin of libnvinfer_plugin; reference
    python trt_models.py plugin-check PLAN  deserializes PLAN without and then with TensorRT's plugins registered
    python trt_models.py seed001 OUT      the blog's flow: a BERT-like model exported exactly as seed 001 does
                                          (INT64 inputs, opset 17, output "outputs", dynamic batch), its TorchScript
                                          twin (model.pt), reference inputs and PyTorch answers (.npy)
    python trt_models.py bert OUT         BERT-base (fp32 ONNX, INT32 inputs, seq 128) for the benchmark
    python trt_models.py unsupported OUT  an ONNX model TensorRT cannot build (an op it lacks)
    python trt_models.py identity OUT     y = Identity(x) (OUT/model.onnx): tensorrt-onnx.ts's dry run on the double
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))  # scripts/: make_examples' models


def _trt():
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.WARNING)
    return trt, logger


def _mlp(inp: int, hidden: int, out: int, seed: int):
    import torch
    from torch import nn

    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(inp, hidden), nn.ReLU(), nn.Linear(hidden, out)).eval()


def _export_mlp(model, path: str, inp: int) -> None:
    import torch
    from make_examples import export

    export(model, (torch.zeros(2, inp),), path, ["x"], ["y"], {"x": {0: "batch"}, "y": {0: "batch"}})


def _build(network, builder, trt, profiles: list[dict], path: str) -> None:
    config = builder.create_builder_config()
    config.clear_flag(trt.BuilderFlag.TF32)  # exact comparison with PyTorch (TF32 off there too)
    for shapes in profiles:
        p = builder.create_optimization_profile()
        for name, (lo, opt, hi) in shapes.items():
            p.set_shape(name, lo, opt, hi)
        config.add_optimization_profile(p)
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        raise SystemExit(f"TensorRT could not build {path}")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(bytes(plan))
    print(f"[trt_models] {path}: {os.path.getsize(path)} bytes, {len(profiles)} profile(s)")


def _parse(path: str):
    trt, logger = _trt()
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    parser = trt.OnnxParser(network, logger)
    if not parser.parse_from_file(path):
        raise SystemExit(" | ".join(parser.get_error(i).desc() for i in range(parser.num_errors)))
    return trt, builder, network


def mlp(out: str) -> None:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    model = _mlp(64, 256, 64, 0)
    onnx_path = os.path.join(out, "mlp.onnx")
    _export_mlp(model, onnx_path, 64)
    x = np.random.default_rng(1).standard_normal((16, 64)).astype(np.float32)
    with torch.no_grad():
        y = model.cuda()(torch.from_numpy(x).cuda()).cpu().numpy()
    with open(os.path.join(out, "ref.json"), "w") as f:
        json.dump({"x": x.tolist(), "y": y.tolist()}, f)
    trt, builder, network = _parse(onnx_path)
    _build(network, builder, trt, [{"x": ((1, 64), (16, 64), (64, 64))}], os.path.join(out, "mlp", "1", "model.plan"))


def profiles(out: str) -> None:
    model = _mlp(2048, 8192, 2048, 2)
    onnx_path = os.path.join(out, "wide.onnx")
    _export_mlp(model, onnx_path, 2048)
    trt, builder, network = _parse(onnx_path)
    shapes = [{"x": ((1, 2048), (4, 2048), (8, 2048))}, {"x": ((256, 2048), (1024, 2048), (2048, 2048))}]
    _build(network, builder, trt, shapes, os.path.join(out, "wide", "1", "model.plan"))


# Plugins of libnvinfer_plugin tried in order (the first this TensorRT has and builds wins), each with its numpy
# reference. All are IPluginV2DynamicExt (explicit-batch networks need dynamic-shape plugins). On the H200 with
# 10.6, InstanceNormalization_TRT crashed the process in create_plugin or the build: each runs in its own process.
def _inorm_ref(x, scales, bias, eps):
    m = x.mean(axis=(2, 3), keepdims=True)
    v = x.var(axis=(2, 3), keepdims=True)
    return (x - m) / np.sqrt(v + eps) * scales[None, :, None, None] + bias[None, :, None, None]


def _plugin_candidates(trt, c: int):
    f32, i32 = trt.PluginFieldType.FLOAT32, trt.PluginFieldType.INT32
    scales = np.linspace(0.5, 1.5, c).astype(np.float32)
    bias = np.linspace(-0.2, 0.2, c).astype(np.float32)
    inorm = [
        trt.PluginField("epsilon", np.array([1e-5], np.float32), f32),
        trt.PluginField("scales", scales, f32),
        trt.PluginField("bias", bias, f32),
        trt.PluginField("relu", np.array([0], np.int32), i32),
        trt.PluginField("alpha", np.array([0.0], np.float32), f32),
    ]
    # GELU from TensorRT's BERT plugins (tanh form); LReLU_TRT is an IPluginV2, which explicit-batch networks refuse.
    gelu = lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))  # noqa: E731
    yield "CustomGeluPluginDynamic", "1", [trt.PluginField("type_id", np.array([0], np.int32), i32)], gelu
    yield "InstanceNormalization_TRT", "2", inorm, lambda x: _inorm_ref(x, scales, bias, 1e-5)
    yield "InstanceNormalization_TRT", "1", inorm, lambda x: _inorm_ref(x, scales, bias, 1e-5)


def plugin(out: str) -> None:
    """Tries each candidate in a process of its own (a plugin's creator can crash the process on bad fields)."""
    import subprocess

    tried = []
    for k in range(len(list(_plugin_candidates(_trt()[0], 4)))):
        r = subprocess.run([sys.executable, __file__, "plugin-try", out, str(k)], capture_output=True, text=True)
        if r.returncode == 0:
            print(r.stdout.strip().splitlines()[-1])
            return
        tried.append(f"candidate {k}: exit {r.returncode}: {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    raise SystemExit(f"no plugin candidate built: {tried}")


def plugin_try(out: str, which: str) -> None:
    trt, logger = _trt()
    trt.init_libnvinfer_plugins(logger, "")
    registry = trt.get_plugin_registry()
    shape = (2, 4, 8, 8)
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    name, version, fields, ref = list(_plugin_candidates(trt, shape[1]))[int(which)]
    keep = [getattr(f, "data", None) for f in fields]  # the creator reads the arrays: they must outlive create_plugin
    creator = registry.get_plugin_creator(name, version, "")
    if creator is None:
        raise SystemExit(f"{name} v{version}: not in this TensorRT")
    plug = creator.create_plugin("nereid_check", trt.PluginFieldCollection(fields))
    if plug is None:
        raise SystemExit(f"{name} v{version}: create_plugin returned None")
    builder = trt.Builder(logger)
    network = builder.create_network(0)
    t = network.add_input("x", trt.float32, (-1, *shape[1:]))  # dynamic batch: Nereid batches dim 0
    layer = network.add_plugin_v2([t], plug)
    y = layer.get_output(0)
    y.name = "y"
    network.mark_output(y)
    rest = shape[1:]
    _build(network, builder, trt, [{"x": ((1, *rest), (2, *rest), (4, *rest))}], os.path.join(out, "plugin", "1", "model.plan"))
    del keep
    with open(os.path.join(out, "plugin-ref.json"), "w") as f:
        json.dump({"plugin": f"{name} v{version}", "x": x.tolist(), "y": ref(x).astype(np.float32).tolist()}, f)
    print(f"[trt_models] plugin plan uses {name} version {version} from libnvinfer_plugin")


def plugin_check(plan: str) -> None:
    trt, logger = _trt()

    class Keep(trt.ILogger):
        def __init__(self):
            trt.ILogger.__init__(self)
            self.lines = []

        def log(self, sev, msg):
            if sev <= trt.ILogger.Severity.ERROR:
                self.lines.append(str(msg))

    keep = Keep()
    data = open(plan, "rb").read()
    runtime = trt.Runtime(keep)
    engine = runtime.deserialize_cuda_engine(data)
    print(f"[plugin-check] without TensorRT's plugins registered: engine={'loaded' if engine else 'REFUSED'}; TensorRT said: {' | '.join(keep.lines[:3]) or '-'}")
    keep.lines.clear()
    trt.init_libnvinfer_plugins(keep, "")
    engine = runtime.deserialize_cuda_engine(data)
    print(f"[plugin-check] after init_libnvinfer_plugins: engine={'loaded' if engine else 'REFUSED'}; {' | '.join(keep.lines[:3]) or 'no error'}")


def seed001(out: str) -> None:
    """Seed 001's export, verbatim but for the model (no hub here: a BERT-like encoder with random weights) and
    dynamo=False (torch >= 2.9 defaults to the new exporter, which needs onnxscript; the blog's torch used this one)."""
    import inspect

    import torch
    from make_examples import TextEncoder

    torch.manual_seed(0)
    vocab = 32000
    mannequin = TextEncoder(vocab=vocab, hidden=256, heads=4, layers=4, ffn=1024, max_pos=512).eval()
    input_ids = torch.randint(0, vocab, (8, 512))
    attention_masks = torch.randint(0, 1, (8, 512))
    token_type_ids = torch.randint(0, 1, (8, 512))
    with torch.no_grad():
        _ = mannequin(input_ids, attention_mask=attention_masks, token_type_ids=token_type_ids)
    dynamic_axes = {
        "input_ids": {0: "batch_size"},
        "attention_mask": {0: "batch_size"},
        "token_type_ids": {0: "batch_size"},
        "outputs": {0: "batch_size"},
    }
    os.makedirs(os.path.join(out, "weights"), exist_ok=True)
    extra = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(
        mannequin,
        (input_ids, attention_masks, token_type_ids),
        os.path.join(out, "weights", "mannequin.onnx"),
        export_params=True,
        opset_version=17,
        do_constant_folding=True,
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["outputs"],
        dynamic_axes=dynamic_axes,
        **extra,
    )
    ts = torch.jit.script(mannequin)
    os.makedirs(os.path.join(out, "model_1", "1"), exist_ok=True)
    ts.save(os.path.join(out, "model_1", "1", "model.pt"))
    rng = np.random.default_rng(5)
    ids = rng.integers(0, vocab, size=(4, 512)).astype(np.int32)
    mask = np.ones((4, 512), np.int32)
    mask[2:, 400:] = 0
    types = np.zeros((4, 512), np.int32)
    types[:, 256:] = 1
    with torch.no_grad():
        ref = mannequin(torch.from_numpy(ids).long(), torch.from_numpy(mask).long(), torch.from_numpy(types).long()).numpy()
        ref16 = mannequin.cuda().half()(*(torch.from_numpy(a).long().cuda() for a in (ids, mask, types))).float().cpu().numpy()
    for name, a in (("ids", ids), ("mask", mask), ("types", types), ("ref_fp32", ref), ("ref_fp16", ref16)):
        np.save(os.path.join(out, f"{name}.npy"), a)
    print(f"[trt_models] seed001: weights/mannequin.onnx {os.path.getsize(os.path.join(out, 'weights', 'mannequin.onnx'))} bytes, model_1/1/model.pt, reference {ref.shape}")


def bert(out: str) -> None:
    from make_examples import export_bert

    export_bert(out, "fp32")


def bert_pooled(out: str) -> None:
    """BERT-base answering the first token's hidden state, [batch, 768]: 3 KB a response instead of 393 KB, so
    that an HTTP row measures the server, not moving hidden states through the load generator."""
    from make_examples import export_bert

    export_bert(out, "fp32", pooled=True)


def identity(out: str) -> None:
    """y = Identity(x), x [-1, 4] FP32: the dry run of tensorrt-onnx.ts against the test double (which copies)."""
    import onnx
    from onnx import TensorProto, helper

    vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4])  # noqa: E731
    graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [vi("x")], [vi("y")])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    os.makedirs(out, exist_ok=True)
    onnx.save(m, os.path.join(out, "model.onnx"))


def unsupported(out: str) -> None:
    """A graph TensorRT's parser has no importer for (ai.onnx's StringNormalizer, a string op)."""
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("StringNormalizer", ["x"], ["y"], case_change_action="LOWER")
    graph = helper.make_graph(
        [node],
        "unsupported",
        [helper.make_tensor_value_info("x", TensorProto.STRING, [1])],
        [helper.make_tensor_value_info("y", TensorProto.STRING, [1])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    os.makedirs(out, exist_ok=True)
    onnx.save(m, os.path.join(out, "unsupported.onnx"))


def main() -> None:
    what, where = sys.argv[1], sys.argv[2]
    {
        "mlp": mlp,
        "profiles": profiles,
        "plugin": plugin,
        "plugin-check": plugin_check,
        "plugin-try": lambda where: plugin_try(where, sys.argv[3]),
        "seed001": seed001,
        "bert": bert,
        "bert-pooled": bert_pooled,
        "unsupported": unsupported,
        "identity": identity,
    }[what](where)


if __name__ == "__main__":
    main()
