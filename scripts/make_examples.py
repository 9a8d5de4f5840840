#!/usr/bin/env python3
"""Build Nereid's example Triton-style model repository (ONNX models + configs).

Why this script exists
----------------------
It follows the workflow our first users come from with Triton: build a
PyTorch module, export it with
``torch.onnx.export`` at ``opset_version=17`` with ``dynamic_axes`` for the
batch (and sequence) dimensions, drop it into a Triton model repository as
``<model>/1/model.onnx`` next to a ``config.pbtxt``, and query it with
tritonclient using INT32 ``input_ids`` / ``attention_mask`` /
``token_type_ids`` and ``InferRequestedOutput("output")``.

Details that matter:

* ``dynamo=False``: newer torch defaults to the dynamo exporter, which
  ignores/upgrades ``opset_version`` and writes a newer IR.  The TorchScript
  exporter honours opset 17, as those users' scripts expect.
* IR pin: every file is rewritten with ``onnx`` to ``ir_version = 8`` (the IR
  that goes with opset 17).  onnxruntime 1.30 loads IR <= 13 only and newer
  exporters may write newer IRs; IR 8 loads everywhere (also in old Tritons).
* Every file is then checked with ``onnx.checker.check_model(full_check=True)``
  and run with onnxruntime against torch on shapes *other* than the export
  shapes (so the dynamic axes are really dynamic).  Seeds are fixed.

Models
------
simple        INPUT0, INPUT1 INT32 [-1,16] -> OUTPUT0 = a+b, OUTPUT1 = a-b (INT32)
              Triton's quick-start model; full config.pbtxt.
text_encoder  input_ids, attention_mask, token_type_ids INT32 [-1,-1]
              -> output FP32 [-1,-1,64]; tiny random BERT (2 layers, 4 heads).
              The output is named "output", the name those users' clients
              ask for, so such a client runs unchanged.
              PARTIAL config.pbtxt (name, backend, max_batch_size): inputs and
              outputs come from auto-complete.
classifier    INPUT FP32 [-1,8] -> PROBS FP32 [-1,5] (Linear + softmax);
              full config with label_filename and a KIND_CPU instance group.

Usage (needs torch, onnx, onnxruntime, numpy):
    python scripts/make_examples.py [--out examples/model_repository]
    python scripts/make_examples.py --bert DIR [--dtype fp32|fp16]
        only a BERT-base (12 layers, hidden 768, 12 heads, vocabulary 30522, INT32 inputs, output FP32/FP16
        [batch, sequence, 768], random weights) as DIR/model.onnx, for the GPU benchmark (bench/gpu.ts); fp16 is
        exported on CUDA (torch's CPU kernels lack some fp16 ops). Not part of the example repository.
    python scripts/make_examples.py --torchscript [--torch-out examples/pytorch_repository]
        only text_encoder_torch: the same text encoder (same seed, same weights as text_encoder's model.onnx)
        scripted to TorchScript (torch.jit.script) as <torch-out>/text_encoder_torch/1/model.pt with its full
        config.pbtxt, for the pytorch backend (Triton cannot auto-complete TorchScript, so the config declares the
        inputs by forward()'s argument names and the output "output", which the seed's client asks for). Needs
        torch only.
    python scripts/make_examples.py --bert-torchscript DIR [--dtype fp32|fp16]
        the BERT-base above as TorchScript, DIR/model.pt (for scripts/gpu/torch-on-device.sh). Needs torch only.
"""

from __future__ import annotations

import argparse
import inspect
import math
import os
import sys

import numpy as np
import torch
from torch import nn

# onnx and onnxruntime are imported where used: the TorchScript exports (--torchscript, --bert-torchscript) need
# torch only.

OPSET = 17
IR_VERSION = 8
SEED = 0

# --------------------------------------------------------------------------
# Models
# --------------------------------------------------------------------------


class Simple(nn.Module):
    """Triton quick-start 'simple': sum and difference of two INT32 vectors."""

    def forward(self, input0: torch.Tensor, input1: torch.Tensor):
        return input0 + input1, input0 - input1


class EncoderLayer(nn.Module):
    """Post-LN BERT layer written out by hand (exports to plain ONNX ops)."""

    def __init__(self, hidden: int, heads: int, ffn: int) -> None:
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.o = nn.Linear(hidden, hidden)
        self.ln1 = nn.LayerNorm(hidden, eps=1e-12)
        self.ff1 = nn.Linear(hidden, ffn)
        self.ff2 = nn.Linear(ffn, hidden)
        self.ln2 = nn.LayerNorm(hidden, eps=1e-12)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x: torch.Tensor, mask_bias: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self._split(self.q(x)), self._split(self.k(x)), self._split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores + mask_bias, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2).reshape(b, s, h)
        x = self.ln1(x + self.o(ctx))
        return self.ln2(x + self.ff2(nn.functional.gelu(self.ff1(x))))


class TextEncoder(nn.Module):
    """Tiny BERT-style encoder with random weights, INT32 inputs."""

    def __init__(self, vocab=1000, hidden=64, heads=4, layers=2, ffn=256, max_pos=512, type_vocab=2):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.pos = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(type_vocab, hidden)
        self.ln = nn.LayerNorm(hidden, eps=1e-12)
        self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))

    def forward(self, input_ids, attention_mask, token_type_ids):
        # INT32 on the wire (as Triton users' clients send); embeddings need int64,
        # so torch inserts a Cast in the graph.
        ids = input_ids.long()
        types = token_type_ids.long()
        positions = torch.arange(ids.size(1), dtype=torch.long, device=ids.device).unsqueeze(0)
        x = self.ln(self.word(ids) + self.pos(positions) + self.token_type(types))
        # [b, s] -> additive bias [b, 1, 1, s]: 0 for tokens, -10000 for padding.
        # In the model's dtype (fp32, or fp16 for the GPU benchmark's BERT-base); the same graph for fp32.
        mask_bias = (1.0 - attention_mask.to(x.dtype))[:, None, None, :] * -10000.0
        for layer in self.layers:
            x = layer(x, mask_bias)
        return x


class Classifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.softmax(self.fc(x), dim=-1)


# --------------------------------------------------------------------------
# config.pbtxt texts
# --------------------------------------------------------------------------

SIMPLE_CONFIG = """\
name: "simple"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "INPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "INPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
output [
  {
    name: "OUTPUT0"
    data_type: TYPE_INT32
    dims: [ 16 ]
  },
  {
    name: "OUTPUT1"
    data_type: TYPE_INT32
    dims: [ 16 ]
  }
]
"""

# Partial on purpose: inputs and outputs are filled in by auto-complete from
# model.onnx (input_ids/attention_mask/token_type_ids INT32 [-1], output FP32 [-1, 64]).
TEXT_ENCODER_CONFIG = """\
# Partial config: inputs and outputs are auto-completed from model.onnx.
name: "text_encoder"
backend: "onnxruntime"
max_batch_size: 8
"""

CLASSIFIER_CONFIG = """\
name: "classifier"
platform: "onnxruntime_onnx"
max_batch_size: 8
input [
  {
    name: "INPUT"
    data_type: TYPE_FP32
    dims: [ 8 ]
  }
]
output [
  {
    name: "PROBS"
    data_type: TYPE_FP32
    dims: [ 5 ]
    label_filename: "labels.txt"
  }
]
instance_group [
  {
    count: 1
    kind: KIND_CPU
  }
]
"""

CLASSIFIER_LABELS = ["cat", "dog", "bird", "fish", "horse"]

# --------------------------------------------------------------------------
# Export / pin / check
# --------------------------------------------------------------------------


def export(model: nn.Module, args: tuple, path: str, input_names, output_names, dynamic_axes) -> None:
    import onnx

    os.makedirs(os.path.dirname(path), exist_ok=True)
    model.eval()
    kwargs = dict(
        export_params=True,
        opset_version=OPSET,
        do_constant_folding=True,
        input_names=input_names,
        output_names=output_names,
        dynamic_axes=dynamic_axes,
    )
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False  # TorchScript exporter: honours opset 17
    with torch.no_grad():
        torch.onnx.export(model, args, path, **kwargs)

    m = onnx.load(path)
    exported_ir = m.ir_version
    m.ir_version = IR_VERSION
    opsets = {o.domain or "ai.onnx": o.version for o in m.opset_import}
    assert opsets.get("ai.onnx") == OPSET, f"{path}: opset {opsets}"
    onnx.checker.check_model(m, full_check=True)
    onnx.save(m, path)
    m = onnx.load(path)
    assert m.ir_version == IR_VERSION
    print(
        f"[export] {path}: exported IR {exported_ir} -> {m.ir_version}, opsets {opsets}, "
        f"{os.path.getsize(path)} bytes, torch {torch.__version__}, onnx {onnx.__version__}"
    )
    for kind, vals in (("input", m.graph.input), ("output", m.graph.output)):
        for v in vals:
            t = v.type.tensor_type
            dims = [d.dim_param or d.dim_value for d in t.shape.dim]
            print(f"    {kind} {v.name}: {onnx.TensorProto.DataType.Name(t.elem_type)} {dims}")


def session(path: str):
    import onnxruntime as ort

    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def check_simple(path: str) -> None:
    s = session(path)
    rng = np.random.default_rng(SEED)
    for batch in (1, 3, 8):
        a = rng.integers(-1000, 1000, size=(batch, 16), dtype=np.int32)
        b = rng.integers(-1000, 1000, size=(batch, 16), dtype=np.int32)
        o0, o1 = s.run(["OUTPUT0", "OUTPUT1"], {"INPUT0": a, "INPUT1": b})
        assert o0.dtype == np.int32 and o1.dtype == np.int32
        np.testing.assert_array_equal(o0, a + b)
        np.testing.assert_array_equal(o1, a - b)
    print("[check] simple: OUTPUT0 == a+b, OUTPUT1 == a-b for batch 1, 3, 8")


def check_text_encoder(path: str, model: TextEncoder) -> None:
    s = session(path)
    rng = np.random.default_rng(SEED)
    worst = 0.0
    for batch, seq in ((1, 5), (3, 7), (8, 128)):
        ids = rng.integers(0, 1000, size=(batch, seq), dtype=np.int32)
        mask = np.ones((batch, seq), dtype=np.int32)
        for i in range(batch):  # right padding of varying length
            mask[i, seq - (i % max(1, seq // 2)) :] = 0
        types = np.zeros((batch, seq), dtype=np.int32)
        types[:, seq // 2 :] = 1
        (out,) = s.run(["output"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
        with torch.no_grad():
            ref = model(torch.from_numpy(ids), torch.from_numpy(mask), torch.from_numpy(types)).numpy()
        assert out.shape == (batch, seq, 64) and out.dtype == np.float32, out.shape
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)
        worst = max(worst, float(np.abs(out - ref).max()))
    # The mask must matter: padding tokens do not change the real tokens' outputs.
    ids = rng.integers(0, 1000, size=(1, 10), dtype=np.int32)
    types = np.zeros((1, 10), dtype=np.int32)
    mask = np.array([[1] * 6 + [0] * 4], dtype=np.int32)
    (padded,) = s.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": types})
    (short,) = s.run(
        None, {"input_ids": ids[:, :6], "attention_mask": mask[:, :6], "token_type_ids": types[:, :6]}
    )
    np.testing.assert_allclose(padded[:, :6], short, rtol=1e-4, atol=1e-4)
    print(f"[check] text_encoder: ORT == torch (max abs diff {worst:.2e}); padding is masked")


def check_classifier(path: str, model: Classifier) -> None:
    s = session(path)
    rng = np.random.default_rng(SEED)
    for batch in (1, 4, 8):
        x = rng.standard_normal((batch, 8)).astype(np.float32)
        (probs,) = s.run(["PROBS"], {"INPUT": x})
        with torch.no_grad():
            ref = model(torch.from_numpy(x)).numpy()
        assert probs.shape == (batch, 5) and probs.dtype == np.float32
        np.testing.assert_allclose(probs, ref, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-5)
    print("[check] classifier: ORT == torch, rows sum to 1")


def write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def bert_base() -> TextEncoder:
    """BERT-base's shape with random weights (seeded): what the GPU benchmark serves."""
    torch.manual_seed(SEED)
    return TextEncoder(vocab=30522, hidden=768, heads=12, layers=12, ffn=3072, max_pos=512).eval()


class Pooled(nn.Module):
    """The first token's hidden state, [batch, hidden]: what an embedding service returns (issue 31's pooled row)."""

    def __init__(self, enc: nn.Module) -> None:
        super().__init__()
        self.enc = enc

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.enc(input_ids, attention_mask, token_type_ids)[:, 0, :]


def export_bert(out_dir: str, dtype: str, pooled: bool = False) -> None:
    device = "cuda" if dtype == "fp16" or torch.cuda.is_available() else "cpu"
    enc = bert_base().to(device)
    if dtype == "fp16":
        enc = enc.half()
    ids = torch.randint(0, 30522, (2, 128), dtype=torch.int32, device=device)
    mask = torch.ones(2, 128, dtype=torch.int32, device=device)
    types = torch.zeros(2, 128, dtype=torch.int32, device=device)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names}
    axes["output"] = {0: "batch"} if pooled else {0: "batch", 1: "sequence"}
    model = Pooled(enc).eval() if pooled else enc
    export(model, (ids, mask, types), os.path.join(out_dir, "model.onnx"), names, ["output"], axes)


def text_encoder_torch_config(name: str = "text_encoder_torch") -> str:
    return f"""\
# TorchScript (model.pt, made by scripts/make_examples.py --torchscript): Triton's pytorch backend cannot read a
# TorchScript file's inputs and outputs, so they are declared here. Inputs are named after forward()'s arguments
# (Triton's naming rule); the single output takes the name the seed's client asks for. No instance_group: KIND_AUTO,
# the CPU here and the GPU where torch can use one.
name: "{name}"
platform: "pytorch_libtorch"
max_batch_size: 32
input [
  {{ name: "input_ids" data_type: TYPE_INT32 dims: [ -1 ] }},
  {{ name: "attention_mask" data_type: TYPE_INT32 dims: [ -1 ] }},
  {{ name: "token_type_ids" data_type: TYPE_INT32 dims: [ -1 ] }}
]
output [
  {{ name: "output" data_type: TYPE_FP32 dims: [ -1, -1 ] }}
]
parameters {{ key: "INFERENCE_MODE" value {{ string_value: "true" }} }}
"""


def export_torchscript(model: nn.Module, path: str) -> None:
    import warnings

    os.makedirs(os.path.dirname(path), exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.jit.script's deprecation notice: TorchScript is what Triton serves
        scripted = torch.jit.script(model.eval())
    scripted.save(path)
    loaded = torch.jit.load(path, map_location="cpu" if next(model.parameters()).device.type == "cpu" else None)
    args = ", ".join(f"{a.name}: {a.type}" for a in loaded.forward.schema.arguments[1:])
    print(f"[torchscript] {path}: {os.path.getsize(path)} bytes, forward({args}), torch {torch.__version__}")


def check_text_encoder_torch(path: str, model: TextEncoder) -> None:
    scripted = torch.jit.load(path)
    rng = np.random.default_rng(SEED)
    for batch, seq in ((1, 5), (3, 7)):
        ids = torch.from_numpy(rng.integers(0, 1000, size=(batch, seq), dtype=np.int32))
        mask = torch.ones(batch, seq, dtype=torch.int32)
        types = torch.zeros(batch, seq, dtype=torch.int32)
        with torch.no_grad():
            np.testing.assert_allclose(scripted(ids, mask, types).numpy(), model(ids, mask, types).numpy(), rtol=1e-5, atol=1e-5)
    print("[check] text_encoder_torch: TorchScript == eager torch")


def export_bert_torchscript(out_dir: str, dtype: str) -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    enc = bert_base().to(device)
    if dtype == "fp16":
        enc = enc.half()
    export_torchscript(enc, os.path.join(out_dir, "model.pt"))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default=os.path.join("examples", "model_repository"))
    p.add_argument("--bert", metavar="DIR", help="export only a BERT-base to DIR/model.onnx (GPU benchmark)")
    p.add_argument("--bert-torchscript", metavar="DIR", help="export only a BERT-base to DIR/model.pt (TorchScript)")
    p.add_argument("--torchscript", action="store_true", help="write only text_encoder_torch (TorchScript)")
    p.add_argument("--torch-out", default=os.path.join("examples", "pytorch_repository"))
    p.add_argument("--dtype", choices=("fp32", "fp16"), default="fp32")
    p.add_argument("--pooled", action="store_true", help="with --bert: output the first token's hidden state [batch, 768]")
    args = p.parse_args()
    if args.bert:
        export_bert(args.bert, args.dtype, args.pooled)
        return 0
    if args.bert_torchscript:
        export_bert_torchscript(args.bert_torchscript, args.dtype)
        return 0
    if args.torchscript:
        torch.manual_seed(SEED)
        enc = TextEncoder().eval()  # the same seed and construction as text_encoder below: the same weights
        path = os.path.join(args.torch_out, "text_encoder_torch", "1", "model.pt")
        export_torchscript(enc, path)
        write(os.path.join(args.torch_out, "text_encoder_torch", "config.pbtxt"), text_encoder_torch_config())
        check_text_encoder_torch(path, enc)
        return 0
    out = args.out
    torch.manual_seed(SEED)
    torch.use_deterministic_algorithms(True)

    # 1. simple
    path = os.path.join(out, "simple", "1", "model.onnx")
    ex = torch.zeros(2, 16, dtype=torch.int32)
    export(
        Simple(), (ex, ex), path, ["INPUT0", "INPUT1"], ["OUTPUT0", "OUTPUT1"],
        {n: {0: "batch"} for n in ("INPUT0", "INPUT1", "OUTPUT0", "OUTPUT1")},
    )
    write(os.path.join(out, "simple", "config.pbtxt"), SIMPLE_CONFIG)
    check_simple(path)

    # 2. text_encoder (INT32 input_ids/attention_mask/token_type_ids)
    torch.manual_seed(SEED)
    enc = TextEncoder().eval()
    path = os.path.join(out, "text_encoder", "1", "model.onnx")
    ids = torch.randint(0, 1000, (2, 16), dtype=torch.int32)
    mask = torch.ones(2, 16, dtype=torch.int32)
    types = torch.zeros(2, 16, dtype=torch.int32)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {n: {0: "batch", 1: "sequence"} for n in names + ["output"]}
    export(enc, (ids, mask, types), path, names, ["output"], axes)
    write(os.path.join(out, "text_encoder", "config.pbtxt"), TEXT_ENCODER_CONFIG)
    check_text_encoder(path, enc)

    # 3. classifier
    torch.manual_seed(SEED)
    clf = Classifier().eval()
    path = os.path.join(out, "classifier", "1", "model.onnx")
    export(clf, (torch.randn(2, 8),), path, ["INPUT"], ["PROBS"], {"INPUT": {0: "batch"}, "PROBS": {0: "batch"}})
    write(os.path.join(out, "classifier", "config.pbtxt"), CLASSIFIER_CONFIG)
    write(os.path.join(out, "classifier", "labels.txt"), "\n".join(CLASSIFIER_LABELS) + "\n")
    check_classifier(path, clf)

    for root, _, files in sorted(os.walk(out)):
        for f in sorted(files):
            fp = os.path.join(root, f)
            size = os.path.getsize(fp)
            assert size < 5 * 1024 * 1024, f"{fp} is {size} bytes"
            print(f"[file] {fp} {size}")
    import onnxruntime as ort

    print(f"ok (onnxruntime {ort.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
