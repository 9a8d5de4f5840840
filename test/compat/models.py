"""Tiny ONNX models the example repository lacks, written into a temporary model repository for the suite.

They mirror models of Triton's own QA repository that Triton's client examples call, so the same flows can be
exercised against Nereid:

- ``simple_string``: INPUT0, INPUT1 BYTES [16] holding decimal integers; OUTPUT0 = sum and OUTPUT1 = difference,
  as decimal strings (Cast string -> int32, Add/Sub, Cast int32 -> string).
- ``simple_int8``: ``simple`` with INT8 tensors.
- ``simple_identity``: INPUT0 BYTES [-1] returned unchanged as OUTPUT0 (max_batch_size 8).
- ``simple_sequence``: a sequence model with implicit state: OUTPUT = the running sum of INPUT over the sequence
  (INT32 [1]; controls START/END/READY, state STATE_IN/STATE_OUT kept by the server between requests).
- ``simple_dyna_sequence``: the same with a UINT64 CORRID control, oldest strategy; the END request's OUTPUT adds
  the correlation id (the shape of Triton's dyna sequence examples).
- ``simple_string_dyna_sequence``: the same with a STRING CORRID (decimal ids, cast to INT32 by the model).
- ``simple_cached``: ``simple`` with ``response_cache { enable: true }`` (the servers run with
  ``--cache-config=local,size=1048576``).
- ``simple_ensemble``: an ensemble of two ``simple`` steps (from the example repository): S, D = A+B, A-B, then
  OUTPUT0, OUTPUT1 = S+D, S-D (= 2A, 2B). No model file: only its config and an empty version folder.

ONNX IR version 8, opset 17, like the bundled examples.
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import TensorProto, helper

IR_VERSION = 8
OPSET = 17


def _save(model: onnx.ModelProto, path: Path) -> None:
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))


def _add_sub(name: str, elem: int, via_int: bool) -> onnx.ModelProto:
    """INPUT0 + INPUT1 and INPUT0 - INPUT1 over [batch, 16]; with ``via_int`` the tensors are strings cast to int32."""
    shape = ["batch", 16]
    inputs = [helper.make_tensor_value_info(n, elem, shape) for n in ("INPUT0", "INPUT1")]
    outputs = [helper.make_tensor_value_info(n, elem, shape) for n in ("OUTPUT0", "OUTPUT1")]
    nodes = []
    a, b = "INPUT0", "INPUT1"
    if via_int:
        nodes += [
            helper.make_node("Cast", ["INPUT0"], ["a"], to=TensorProto.INT32),
            helper.make_node("Cast", ["INPUT1"], ["b"], to=TensorProto.INT32),
        ]
        a, b = "a", "b"
        nodes += [
            helper.make_node("Add", [a, b], ["sum"]),
            helper.make_node("Sub", [a, b], ["diff"]),
            helper.make_node("Cast", ["sum"], ["OUTPUT0"], to=TensorProto.STRING),
            helper.make_node("Cast", ["diff"], ["OUTPUT1"], to=TensorProto.STRING),
        ]
    else:
        nodes += [
            helper.make_node("Add", [a, b], ["OUTPUT0"]),
            helper.make_node("Sub", [a, b], ["OUTPUT1"]),
        ]
    graph = helper.make_graph(nodes, name, inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _identity_bytes() -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node("Identity", ["INPUT0"], ["OUTPUT0"])],
        "simple_identity",
        [helper.make_tensor_value_info("INPUT0", TensorProto.STRING, ["batch", "n"])],
        [helper.make_tensor_value_info("OUTPUT0", TensorProto.STRING, ["batch", "n"])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _accumulator(name: str, corrid: int | None) -> onnx.ModelProto:
    """STATE_OUT = STATE_IN + INPUT; OUTPUT = STATE_OUT (+ END * CORRID when there is a CORRID input)."""
    shape = ["batch", 1]
    names = ["INPUT", "START", "END", "READY", "STATE_IN"]
    inputs = [helper.make_tensor_value_info(n, TensorProto.INT32, shape) for n in names]
    nodes = [helper.make_node("Add", ["STATE_IN", "INPUT"], ["STATE_OUT"])]
    if corrid is None:
        nodes.append(helper.make_node("Identity", ["STATE_OUT"], ["OUTPUT"]))
    else:
        inputs.append(helper.make_tensor_value_info("CORRID", corrid, shape))
        nodes += [
            helper.make_node("Cast", ["CORRID"], ["corrid32"], to=TensorProto.INT32),
            helper.make_node("Mul", ["END", "corrid32"], ["at_end"]),
            helper.make_node("Add", ["STATE_OUT", "at_end"], ["OUTPUT"]),
        ]
    outputs = [helper.make_tensor_value_info(n, TensorProto.INT32, shape) for n in ("OUTPUT", "STATE_OUT")]
    graph = helper.make_graph(nodes, name, inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])


def _sequence_config(name: str, corrid: str | None, strategy: str) -> str:
    controls = [
        f'{{ name: "{n}" control [{{ kind: CONTROL_SEQUENCE_{n} int32_false_true: [ 0, 1 ] }}] }}'
        for n in ("START", "END", "READY")
    ]
    if corrid is not None:
        controls.append(f'{{ name: "CORRID" control [{{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid} }}] }}')
    return (
        f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
        'input { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] }\n'
        'output { name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }\n'
        'instance_group [{ count: 1 kind: KIND_CPU }]\n'
        # 10 s idle instead of Triton's 1 s: perf_analyzer ends the sequences it still has open only after its
        # measurement ends, which on a loaded 2-core CI machine can come more than a second after their last request
        # (the server then rightly refused the closing request, without START: seen once in CI, perf_analyzer's
        # "Thread [0] had error: ... must specify the START flag").
        f"sequence_batching {{ max_sequence_idle_microseconds: 10000000 {strategy} control_input [ {', '.join(controls)} ]\n"
        '  state [{ input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] }] }\n'
    )


def _add_sub_config(name: str, dtype: str) -> str:
    io = "\n".join(
        f'{kind} {{ name: "{n}" data_type: {dtype} dims: [ 16 ] }}'
        for kind, n in (("input", "INPUT0"), ("input", "INPUT1"), ("output", "OUTPUT0"), ("output", "OUTPUT1"))
    )
    return f'name: "{name}"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n{io}\n'


def write_extra_repository(root: Path) -> list[str]:
    """Writes the models under ``root`` (a model repository) and returns their names."""
    models = {
        "simple_string": (_add_sub("simple_string", TensorProto.STRING, True), _add_sub_config("simple_string", "TYPE_STRING")),
        "simple_int8": (_add_sub("simple_int8", TensorProto.INT8, False), _add_sub_config("simple_int8", "TYPE_INT8")),
        "simple_cached": (
            _add_sub("simple_cached", TensorProto.INT32, False),
            _add_sub_config("simple_cached", "TYPE_INT32") + "response_cache { enable: true }\n",
        ),
        "simple_identity": (
            _identity_bytes(),
            'name: "simple_identity"\nplatform: "onnxruntime_onnx"\nmax_batch_size: 8\n'
            'input { name: "INPUT0" data_type: TYPE_STRING dims: [ -1 ] }\n'
            'output { name: "OUTPUT0" data_type: TYPE_STRING dims: [ -1 ] }\n',
        ),
        "simple_sequence": (_accumulator("simple_sequence", None), _sequence_config("simple_sequence", None, "")),
        "simple_dyna_sequence": (
            _accumulator("simple_dyna_sequence", TensorProto.UINT64),
            _sequence_config("simple_dyna_sequence", "TYPE_UINT64", "oldest { max_candidate_sequences: 4 }"),
        ),
        "simple_string_dyna_sequence": (
            _accumulator("simple_string_dyna_sequence", TensorProto.STRING),
            _sequence_config("simple_string_dyna_sequence", "TYPE_STRING", ""),
        ),
    }
    for name, (model, config) in models.items():
        _save(model, root / name / "1" / "model.onnx")
        (root / name / "config.pbtxt").write_text(config)
    (root / "simple_ensemble" / "1").mkdir(parents=True, exist_ok=True)
    (root / "simple_ensemble" / "config.pbtxt").write_text(_ENSEMBLE_CONFIG)
    return sorted([*models, "simple_ensemble"])


def _step(inputs: tuple[str, str], outputs: tuple[str, str]) -> str:
    imap = " ".join(f'input_map {{ key: "INPUT{i}" value: "{t}" }}' for i, t in enumerate(inputs))
    omap = " ".join(f'output_map {{ key: "OUTPUT{i}" value: "{t}" }}' for i, t in enumerate(outputs))
    return f'{{ model_name: "simple" model_version: -1 {imap} {omap} }}'


_ENSEMBLE_CONFIG = (
    'name: "simple_ensemble"\nplatform: "ensemble"\nmax_batch_size: 8\n'
    + "".join(f'input {{ name: "INPUT{i}" data_type: TYPE_INT32 dims: [ 16 ] }}\n' for i in range(2))
    + "".join(f'output {{ name: "OUTPUT{i}" data_type: TYPE_INT32 dims: [ 16 ] }}\n' for i in range(2))
    + "ensemble_scheduling { step [ "
    + _step(("INPUT0", "INPUT1"), ("S", "D"))
    + ", "
    + _step(("S", "D"), ("OUTPUT0", "OUTPUT1"))
    + " ] }\n"
)


if __name__ == "__main__":
    import sys

    print(write_extra_repository(Path(sys.argv[1])))
