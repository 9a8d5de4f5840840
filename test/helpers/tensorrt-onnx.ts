import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PYTHON } from './tensorrt.js';

/**
 * ONNX models for the tensorrt backend's ONNX loads against the TEST DOUBLE (which reads the model's inputs and
 * outputs with the onnx package, and "builds" a JSON plan whose outputs copy the first input), and the double's
 * build events: the plan cache's tests count builds with them.
 */

/** A model with FP32 inputs INPUT0, INPUT1 [batch, 4] and output OUTPUT0 = INPUT0 + INPUT1 (bytes of model.onnx). */
export function addOnnx(opset = 13): Buffer {
  const script = `
import sys, onnx
from onnx import helper, TensorProto as T
io = lambda n: helper.make_tensor_value_info(n, T.FLOAT, ["batch", 4])
g = helper.make_graph([helper.make_node("Add", ["INPUT0", "INPUT1"], ["OUTPUT0"])], "add", [io("INPUT0"), io("INPUT1")], [io("OUTPUT0")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", ${opset})])
sys.stdout.buffer.write(m.SerializeToString())
`;
  return execFileSync(PYTHON, ['-c', script]);
}

export const ADD_CONFIG = (name: string, extra = ''): string => `name: "${name}"
backend: "tensorrt"
max_batch_size: 8
input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] }, { name: "INPUT1" data_type: TYPE_FP32 dims: [4] }]
output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] }]
${extra}`;

/** `<root>/<name>/config.pbtxt` and `<root>/<name>/1/model.onnx`; returns the model folder. */
export function writeOnnxModel(root: string, name: string, onnx: Buffer, config = ADD_CONFIG(name)): string {
  const dir = join(root, name);
  mkdirSync(join(dir, '1'), { recursive: true });
  writeFileSync(join(dir, 'config.pbtxt'), config);
  writeFileSync(join(dir, '1', 'model.onnx'), onnx);
  return dir;
}

export function tempDir(prefix: string): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

/** Builds the double ran, from its event log (NEREID_TRT_DOUBLE_LOG). */
export function buildsIn(log: string): number {
  let text = '';
  try {
    text = readFileSync(log, 'utf8');
  } catch {
    return 0;
  }
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .filter((l) => (JSON.parse(l) as { ev?: string }).ev === 'build').length;
}

/** The cache's entry folders (one per key). */
export function entries(cache: string): string[] {
  return readdirSync(cache, { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name);
}
