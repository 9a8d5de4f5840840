import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { int32Bytes, simpleRaw, startGrpcNereid, type GrpcNereid } from '../helpers/grpc.js';

/** Black-box: every bad ModelInfer input answers Triton's status code and key phrase; faults leave the server serving. */

type StatusError = Error & { code: number; details: string };

async function rejects(p: Promise<unknown>, code: grpc.status, phrase?: RegExp): Promise<StatusError> {
  const err = (await p.then(
    () => assert.fail(`expected ${grpc.status[code]}`),
    (e: unknown) => e,
  )) as StatusError;
  assert.equal(err.code, code, `got ${grpc.status[err.code]}: ${err.details}`);
  if (phrase) assert.match(err.details, phrase);
  return err;
}

const zeros = (n: number): Buffer => int32Bytes(Array(n).fill(0));
const input = (name: string, shape: number[], datatype = 'INT32', extra: object = {}): object => ({
  name,
  datatype,
  shape,
  ...extra,
});

describe('gRPC ModelInfer bad input', () => {
  let n: GrpcNereid;
  const infer = (req: object): Promise<unknown> => n.unary('ModelInfer', req);
  before(async () => {
    n = await startGrpcNereid();
  });
  after(async () => {
    await n.close();
  });

  it('BAD CALL - an unknown model or version is NOT_FOUND (before the body is looked at)', async () => {
    await rejects(
      infer({ model_name: 'nope', raw_input_contents: [Buffer.alloc(1)] }),
      grpc.status.NOT_FOUND,
      /'nope'/,
    );
    await rejects(infer(simpleRaw({ model_version: '99' })), grpc.status.NOT_FOUND, /99/);
  });

  it('BAD CALL - more raw_input_contents than inputs', async () => {
    const req = simpleRaw();
    (req.raw_input_contents as Buffer[]).push(zeros(16));
    await rejects(infer(req), grpc.status.INVALID_ARGUMENT, /raw_input_contents/);
  });

  it('BAD CALL - fewer raw_input_contents than inputs: no data for the last input', async () => {
    const req = simpleRaw();
    (req.raw_input_contents as Buffer[]).pop();
    await rejects(infer(req), grpc.status.INVALID_ARGUMENT, /unable to find data for input tensor 'INPUT1'/);
  });

  it('BAD CALL - typed contents together with raw contents', async () => {
    const req = simpleRaw();
    (req.inputs as Record<string, unknown>[])[0].contents = { int_contents: Array(16).fill(0) };
    await rejects(
      infer(req),
      grpc.status.INVALID_ARGUMENT,
      /contents field must not be specified when using raw_input_contents for 'INPUT0'/,
    );
  });

  it('BAD CALL - no data at all for an input', async () => {
    await rejects(
      infer({ model_name: 'simple', inputs: [input('INPUT0', [1, 16]), input('INPUT1', [1, 16])] }),
      grpc.status.INVALID_ARGUMENT,
      /unable to find data for input tensor 'INPUT0'/,
    );
  });

  it('BAD CALL - raw size not matching shape × datatype', async () => {
    const req = simpleRaw();
    (req.raw_input_contents as Buffer[])[1] = zeros(15);
    await rejects(
      infer(req),
      grpc.status.INVALID_ARGUMENT,
      /input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 60/,
    );
  });

  it('BAD CALL - typed contents of the wrong kind or count', async () => {
    const typed = (contents: object): object => ({
      model_name: 'simple',
      inputs: [
        input('INPUT0', [1, 16], 'INT32', { contents }),
        input('INPUT1', [1, 16], 'INT32', { contents: { int_contents: Array(16).fill(0) } }),
      ],
    });
    await rejects(
      infer(typed({ fp32_contents: Array(16).fill(0) })),
      grpc.status.INVALID_ARGUMENT,
      /unexpected explicit tensor data for input tensor 'INPUT0'/,
    );
    await rejects(
      infer(typed({ int_contents: Array(15).fill(0) })),
      grpc.status.INVALID_ARGUMENT,
      /byte size mismatch/,
    );
    await rejects(
      infer(typed({ int_contents: Array(16).fill(0), int64_contents: Array(16).fill(0) })),
      grpc.status.INVALID_ARGUMENT,
      /already supplied/,
    );
  });

  it('BAD CALL - wrong datatype', async () => {
    const req = simpleRaw();
    (req.inputs as Record<string, unknown>[])[0].datatype = 'FP32';
    await rejects(infer(req), grpc.status.INVALID_ARGUMENT, /data-type is 'FP32', but model 'simple' expects 'INT32'/);
    (req.inputs as Record<string, unknown>[])[0].datatype = 'FLOAT';
    await rejects(infer(req), grpc.status.INVALID_ARGUMENT, /unknown datatype 'FLOAT'/);
  });

  it('BAD CALL - wrong shape, missing batch dim, batch too big', async () => {
    await rejects(
      infer({ ...simpleRaw(), inputs: [input('INPUT0', [1, 8, 2]), input('INPUT1', [1, 16])] }),
      grpc.status.INVALID_ARGUMENT,
      /unexpected shape for input 'INPUT0'/,
    );
    await rejects(
      infer({ ...simpleRaw(), inputs: [input('INPUT0', [16]), input('INPUT1', [16])] }),
      grpc.status.INVALID_ARGUMENT,
      /unexpected shape/,
    );
    await rejects(
      infer({
        model_name: 'simple',
        inputs: [input('INPUT0', [9, 16]), input('INPUT1', [9, 16])],
        raw_input_contents: [zeros(144), zeros(144)],
      }),
      grpc.status.INVALID_ARGUMENT,
      /batch-size must be <= 8/,
    );
  });

  it('BAD CALL - a missing input, an unknown input, an unknown or duplicate output', async () => {
    await rejects(
      infer({ model_name: 'simple', inputs: [input('INPUT0', [1, 16])], raw_input_contents: [zeros(16)] }),
      grpc.status.INVALID_ARGUMENT,
      /missing required input\(s\) \['INPUT1'\]/,
    );
    const extra = simpleRaw();
    (extra.inputs as object[]).push(input('INPUT9', [1, 16]));
    (extra.raw_input_contents as Buffer[]).push(zeros(16));
    await rejects(infer(extra), grpc.status.INVALID_ARGUMENT, /unexpected inference input 'INPUT9'/);
    await rejects(
      infer(simpleRaw({ outputs: [{ name: 'DUMMY' }] })),
      grpc.status.INVALID_ARGUMENT,
      /unexpected inference output 'DUMMY'/,
    );
    await rejects(
      infer(simpleRaw({ outputs: [{ name: 'OUTPUT0' }, { name: 'OUTPUT0' }] })),
      grpc.status.INVALID_ARGUMENT,
      /already exists/,
    );
  });

  it('BAD CALL - parameters of kinds Triton refuses', async () => {
    await rejects(
      infer(simpleRaw({ parameters: { x: { double_param: 1.5 } } })),
      grpc.status.INVALID_ARGUMENT,
      /invalid value type for 'x' parameter, expected int64_param, bool_param, or string_param/,
    );
    await rejects(infer(simpleRaw({ parameters: { x: { uint64_param: 1 } } })), grpc.status.INVALID_ARGUMENT);
    await rejects(
      infer(simpleRaw({ parameters: { priority: { string_param: 'high' } } })),
      grpc.status.INVALID_ARGUMENT,
      /'priority'/,
    );
    await rejects(
      infer(simpleRaw({ parameters: { triton_secret: { bool_param: true } } })),
      grpc.status.INVALID_ARGUMENT,
      /reserved/,
    );
  });

  it('BAD CALL - shared-memory tensor parameters naming no registered region are NOT_FOUND, not ignored', async () => {
    const req: Record<string, unknown> = { ...simpleRaw(), raw_input_contents: [zeros(16)] };
    (req.inputs as Record<string, unknown>[])[0].parameters = { shared_memory_region: { string_param: 'r' } };
    await rejects(infer(req), grpc.status.NOT_FOUND, /Unable to find shared memory region: 'r'/);
  });

  it('BAD CALL - a BYTES raw input whose length prefix runs past the data', async () => {
    const req = {
      model_name: 'simple',
      // One element, so the bytes could hold it: the prefix, not the element count, is what is wrong.
      inputs: [input('INPUT0', [1, 1], 'BYTES'), input('INPUT1', [1, 16])],
      raw_input_contents: [Buffer.from([9, 0, 0, 0, 1]), zeros(16)],
    };
    await rejects(infer(req), grpc.status.INVALID_ARGUMENT, /input 'INPUT0': string element 0 has length 9/);
  });
});

describe('gRPC transport faults', () => {
  let n: GrpcNereid;
  before(async () => {
    n = await startGrpcNereid({ maxMessageSize: 1024 * 1024 });
  });
  after(async () => {
    await n.close();
  });

  it('BAD CALL - a message over the maximum size is RESOURCE_EXHAUSTED and the server goes on', async () => {
    const big = 'x'.repeat(2 * 1024 * 1024);
    await rejects(
      n.unary('ModelInfer', simpleRaw({ parameters: { big: { string_param: big } } })),
      grpc.status.RESOURCE_EXHAUSTED,
    );
    const ok = await n.unary<{ outputs: unknown[] }>('ModelInfer', simpleRaw());
    assert.equal(ok.outputs.length, 2);
  });

  it('a deadline shorter than the work answers DEADLINE_EXCEEDED; queued requests are dropped, not run', async () => {
    const ids = int32Bytes(Array(8 * 512).fill(1));
    const req = {
      model_name: 'text_encoder',
      inputs: ['input_ids', 'attention_mask', 'token_type_ids'].map((name) => input(name, [8, 512])),
      raw_input_contents: [ids, ids, ids],
    };
    const count = async (): Promise<number> => {
      const s = await n.unary<{ model_stats: { inference_count: string }[] }>('ModelStatistics', {
        name: 'text_encoder',
      });
      return Number(s.model_stats[0].inference_count);
    };
    const before = await count();
    const burst = 6;
    const results = await Promise.allSettled(
      Array.from({ length: burst }, () => n.unary('ModelInfer', req, { deadline: Date.now() + 60 })),
    );
    for (const r of results) {
      if (r.status === 'rejected') assert.equal((r.reason as StatusError).code, grpc.status.DEADLINE_EXCEEDED);
    }
    assert.ok(
      results.some((r) => r.status === 'rejected'),
      'some requests ran past the deadline',
    );
    // Let work already running finish, then check that the queued ones never ran.
    await new Promise((r) => setTimeout(r, 800));
    const ran = ((await count()) - before) / 8;
    assert.ok(ran < burst, `only requests that had started may run (ran ${ran} of ${burst})`);
    const ok = await n.unary<{ outputs: unknown[] }>('ModelInfer', simpleRaw());
    assert.equal(ok.outputs.length, 2);
  });

  it('a client that cancels a unary call leaves the server serving', async () => {
    const call = (
      n.client as unknown as Record<string, (r: object, cb: (e: Error | null) => void) => grpc.ClientUnaryCall>
    ).ModelInfer(simpleRaw(), () => {});
    call.cancel();
    const ok = await n.unary<{ outputs: unknown[] }>('ModelInfer', simpleRaw());
    assert.equal(ok.outputs.length, 2);
  });
});
