"""An ONNX model's float32 weights and activations in FP16 or BF16, for TensorRT 11's strongly typed networks
(TensorRT 11 has no FP16/BF16 builder flag: a network computes in the types its ONNX model declares).

What changes: float32 initializers and Constant values become the target type; Cast nodes to float32 cast to the
target instead; float32 intermediate value_info follows; ops that create tensors from a dtype attribute
(ConstantOfShape, RandomNormal/Uniform(Like), EyeLike) produce the target type. What stays float32: the graph's
inputs and outputs (a Cast at each, so clients and the config keep FP32, as trtexec's --fp16 keeps the I/O
types), and the inputs of ops where float32 carries shapes or scales (Resize scales/roi, Upsample scales), which
are cast back. Subgraphs (If/Loop/Scan bodies) are converted the same way.

Only the ``onnx`` package is needed (and ``ml_dtypes`` for BF16 when present; else BF16 is rounded here).
"""

from __future__ import annotations

import numpy as np

FLOAT = 1
FLOAT16 = 10
BFLOAT16 = 16

#: op type -> input positions that must stay float32.
KEEP_FP32_INPUTS = {"Resize": (1, 2), "Upsample": (1,)}
#: ops whose output type comes from an attribute.
DTYPE_ATTR_OPS = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "EyeLike"}


def _to_bf16_bits(a: np.ndarray) -> np.ndarray:
    """float32 -> bfloat16 bits (round to nearest even), as uint16."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = bits + 0x7FFF + ((bits >> 16) & 1)
    out = (rounded >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def _convert_tensor(t, target: int) -> None:
    from onnx import numpy_helper

    if t.data_type != FLOAT:
        return
    a = numpy_helper.to_array(t).astype(np.float32)
    name = t.name
    t.Clear()
    t.name = name
    t.data_type = target
    t.dims.extend(a.shape)
    if target == FLOAT16:
        t.raw_data = a.astype(np.float16).tobytes()
    else:
        t.raw_data = _to_bf16_bits(a).tobytes()


def _convert_graph(graph, target: int, top: bool, counter: list[int]) -> None:
    from onnx import AttributeProto, TensorProto, helper

    keep = set()
    for node in graph.node:
        for pos in KEEP_FP32_INPUTS.get(node.op_type, ()):
            if pos < len(node.input) and node.input[pos]:
                keep.add((id(node), pos))
    init_names = set()
    for init in graph.initializer:
        init_names.add(init.name)
    # Initializers feeding a kept-float input must stay float: find them first.
    kept_inits = set()
    for node in graph.node:
        for pos in KEEP_FP32_INPUTS.get(node.op_type, ()):
            if pos < len(node.input) and node.input[pos] in init_names:
                kept_inits.add(node.input[pos])
    for init in graph.initializer:
        if init.name not in kept_inits:
            _convert_tensor(init, target)
    new_nodes = []
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                _convert_graph(attr.g, target, False, counter)
            elif attr.type == AttributeProto.GRAPHS:
                for g in attr.graphs:
                    _convert_graph(g, target, False, counter)
        if node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == FLOAT:
                    _convert_tensor(attr.t, target)
        elif node.op_type == "Cast":
            for attr in node.attribute:
                if attr.name == "to" and attr.i == FLOAT:
                    attr.i = target
        elif node.op_type == "ConstantOfShape":
            for attr in node.attribute:
                if attr.name == "value" and attr.t.data_type == FLOAT:
                    _convert_tensor(attr.t, target)
        elif node.op_type in DTYPE_ATTR_OPS:
            for attr in node.attribute:
                if attr.name == "dtype" and attr.i == FLOAT:
                    attr.i = target
        for pos in KEEP_FP32_INPUTS.get(node.op_type, ()):
            if pos < len(node.input) and node.input[pos] and node.input[pos] not in kept_inits:
                counter[0] += 1
                back = f"{node.input[pos]}__fp32_{counter[0]}"
                new_nodes.append(helper.make_node("Cast", [node.input[pos]], [back], to=FLOAT, name=f"nereid_keep_fp32_{counter[0]}"))
                node.input[pos] = back
        new_nodes.append(node)
    del graph.node[:]
    graph.node.extend(new_nodes)
    for vi in graph.value_info:
        if vi.type.tensor_type.elem_type == FLOAT:
            vi.type.tensor_type.elem_type = target
    if not top:
        for vi in list(graph.input) + list(graph.output):
            if vi.type.tensor_type.elem_type == FLOAT:
                vi.type.tensor_type.elem_type = target
        return
    # Graph inputs and outputs keep float32: cast at the edges.
    head, tail = [], []
    for vi in graph.input:
        if vi.name in init_names or vi.type.tensor_type.elem_type != FLOAT:
            continue
        inner = f"{vi.name}__{TensorProto.DataType.Name(target).lower()}"
        for node in graph.node:
            for i, x in enumerate(node.input):
                if x == vi.name:
                    node.input[i] = inner
        for out in graph.output:
            if out.name == vi.name:
                pass
        head.append(helper.make_node("Cast", [vi.name], [inner], to=target, name=f"nereid_in_{vi.name}"))
    for vo in graph.output:
        if vo.type.tensor_type.elem_type != FLOAT:
            continue
        inner = f"{vo.name}__{TensorProto.DataType.Name(target).lower()}"
        for node in graph.node:
            for i, x in enumerate(node.output):
                if x == vo.name:
                    node.output[i] = inner
            for i, x in enumerate(node.input):
                if x == vo.name:
                    node.input[i] = inner
        tail.append(helper.make_node("Cast", [inner], [vo.name], to=FLOAT, name=f"nereid_out_{vo.name}"))
    nodes = head + list(graph.node) + tail
    del graph.node[:]
    graph.node.extend(nodes)


def convert(src: str, dst: str, precision: str) -> dict:
    """Writes ``src`` converted to ``precision`` ('fp16' or 'bf16') as ``dst``; returns what changed."""
    import onnx

    target = {"fp16": FLOAT16, "bf16": BFLOAT16}[precision]
    model = onnx.load(src)
    before = sum(1 for i in model.graph.initializer if i.data_type == FLOAT)
    _convert_graph(model.graph, target, True, [0])
    if target == BFLOAT16:
        # Cast to/from bfloat16 needs opset 13.
        for op in model.opset_import:
            if op.domain in ("", "ai.onnx") and op.version < 13:
                op.version = 13
    onnx.checker.check_model(model)
    onnx.save(model, dst)
    return {"initializers_converted": before, "precision": precision}
