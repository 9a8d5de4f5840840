import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../src/core/logger.js';
import { callUnary, inferenceClient, int32Bytes, int32Of } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Regression for issue 22, item 7: sequences whose clients sent START and went away held the slots, one idle
 * period after another (3,000 of them blocked a model for minutes), and the backlog had no bound. Identity models
 * with one slot, over HTTP and gRPC; reaping is asserted on what the scheduler logged when it reaped (which
 * sequence, where, how long it had been idle), not on the test's clock.
 */

const identIo = `input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]
output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [ 1 ] }]`;
const IDLE_MS = 500;
const MODELS: Record<string, string> = {
  reap: `backend: "identity" max_batch_size: 1 ${identIo} instance_group [{ count: 1 kind: KIND_CPU }]
    sequence_batching { max_sequence_idle_microseconds: ${IDLE_MS * 1000} }`,
  capped: `backend: "identity" max_batch_size: 1 ${identIo} instance_group [{ count: 1 kind: KIND_CPU }]
    parameters { key: "max_sequence_backlog" value { string_value: "2" } }
    sequence_batching { max_sequence_idle_microseconds: 20000000 }`,
};

interface Reaped {
  correlationId: string;
  idleMs: number;
  limitMs: number;
  where: string;
}

/** Keeps the sequence batcher's reaping records (its debug lines carrying `idleMs`). */
function reapLogger(reaped: Reaped[]): Logger {
  const debug = (obj: object | string): void => {
    if (typeof obj === 'object' && 'idleMs' in obj) reaped.push(obj as Reaped);
  };
  const noop = (): void => {};
  const logger: Logger = {
    error: noop,
    warn: noop,
    info: noop,
    debug,
    trace: noop,
    child: () => logger,
    level: 'debug',
  };
  return logger;
}

interface Reply {
  status: number;
  body: { error?: string; outputs?: { data: number[] }[] };
}

async function infer(
  url: string,
  model: string,
  value: number,
  parameters: Record<string, unknown>,
  signal?: AbortSignal,
): Promise<Reply> {
  const res = await fetch(`${url}/v2/models/${model}/infer`, {
    method: 'POST',
    body: JSON.stringify({ inputs: [{ name: 'INPUT0', shape: [1, 1], datatype: 'INT32', data: [value] }], parameters }),
    signal,
  });
  return { status: res.status, body: (await res.json()) as Reply['body'] };
}

const grpcRequest = (model: string, value: number, id: string, end = false) => ({
  model_name: model,
  inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 1] }],
  raw_input_contents: [int32Bytes([value])],
  parameters: {
    sequence_id: { string_param: id },
    sequence_start: { bool_param: true },
    sequence_end: { bool_param: end },
  },
});

type UnaryFn = (req: object, cb: (err: grpc.ServiceError | null) => void) => grpc.ClientUnaryCall;

/** A gRPC START whose client goes away: the call is cancelled by the caller of the returned function. */
function grpcStartThenVanish(client: grpc.Client, model: string, id: string): () => void {
  const fn = (client as unknown as Record<string, UnaryFn>).ModelInfer;
  const call = fn.call(client, grpcRequest(model, 1, id), () => {});
  return () => call.cancel();
}

describe('sequence batcher: abandoned sequences and a bounded backlog', () => {
  let repo: string;
  let s: TestServer;
  let client: grpc.Client;
  const reaped: Reaped[] = [];

  /** The model's queued requests, from the metrics endpoint. */
  async function pending(model: string): Promise<number> {
    const text = await (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text();
    const m = new RegExp(`^nv_inference_pending_request_count\\{model="${model}",version="1"\\} (\\d+)`, 'm').exec(
      text,
    );
    return Number(m?.[1] ?? -1);
  }
  async function waitPending(model: string, n: number): Promise<void> {
    while ((await pending(model)) !== n) await sleep(20);
  }

  before(async () => {
    repo = await mkdtemp(join(tmpdir(), 'nereid-seq-reap-'));
    for (const [name, config] of Object.entries(MODELS)) {
      await mkdir(join(repo, name, '1'), { recursive: true });
      await writeFile(join(repo, name, 'config.pbtxt'), config);
    }
    s = await startNereid({ repositories: [repo], logger: reapLogger(reaped) });
    client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
  });
  after(async () => {
    client?.close();
    await s?.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('reaps abandoned STARTs by their last arrival, in the backlog too, so a new sequence is served', async (t) => {
    // One slot, held by a sequence that never sends again.
    assert.equal((await infer(s.url, 'reap', 1, { sequence_id: 'hold', sequence_start: true })).status, 200);
    // 60 STARTs wait in the backlog, then their clients go away (HTTP disconnect, gRPC cancel).
    const GONE = 60;
    const controllers: AbortController[] = [];
    const cancels: (() => void)[] = [];
    const gone: Promise<unknown>[] = [];
    for (let i = 0; i < GONE / 2; i++) {
      const c = new AbortController();
      controllers.push(c);
      gone.push(infer(s.url, 'reap', 1, { sequence_id: `gone-h${i}`, sequence_start: true }, c.signal).catch(() => {}));
      cancels.push(grpcStartThenVanish(client, 'reap', `gone-g${i}`));
    }
    await waitPending('reap', GONE);
    for (const c of controllers) c.abort();
    for (const cancel of cancels) cancel();
    await Promise.all(gone);
    await waitPending('reap', 0);
    // 20 more STARTs whose clients wait for their answer and then never send again.
    const RAN = 20;
    const ran: Promise<number>[] = [];
    for (let i = 0; i < RAN / 2; i++) {
      ran.push(infer(s.url, 'reap', 2, { sequence_id: `ran-h${i}`, sequence_start: true }).then((r) => r.status));
      ran.push(
        callUnary<{ raw_output_contents: Buffer[] }>(client, 'ModelInfer', grpcRequest('reap', 2, `ran-g${i}`)).then(
          (r) => (int32Of(r.raw_output_contents[0])[0] === 2 ? 200 : 0),
        ),
      );
    }
    const started = performance.now();
    // Behind all of them, a new sequence must be served.
    // (Before the fix it waited forever: a sequence given the slot by the pump had no timer to reap it. The signal
    // turns that hang into a failure; it is 120 idle periods, not a bound on the fixed scheduler.)
    const fresh = await infer(
      s.url,
      'reap',
      7,
      { sequence_id: 'fresh', sequence_start: true, sequence_end: true },
      AbortSignal.timeout(120 * IDLE_MS),
    );
    const servedMs = performance.now() - started;
    assert.equal(fresh.status, 200, JSON.stringify(fresh.body));
    assert.deepEqual(fresh.body.outputs?.[0].data, [7]);
    assert.deepEqual((await Promise.all(ran)).sort(), [
      ...Array<number>(RAN / 2).fill(200),
      ...Array<number>(RAN / 2).fill(200),
    ]);

    // What the scheduler saw: every abandoned sequence was reaped; those whose idle time ran out while they waited
    // left the backlog without taking the slot, the others gave it back when their idle time (counted from their
    // last request, as Triton counts it) ran out or as soon as their START had run.
    const byId = new Map(reaped.map((r) => [r.correlationId, r]));
    const ids = [
      'hold',
      ...[...Array(GONE / 2).keys()].flatMap((i) => [`gone-h${i}`, `gone-g${i}`]),
      ...[...Array(RAN / 2).keys()].flatMap((i) => [`ran-h${i}`, `ran-g${i}`]),
    ];
    assert.deepEqual(
      ids.filter((id) => !byId.has(id)),
      [],
      'every abandoned sequence reaped',
    );
    assert.ok(
      [...byId.values()].some((r) => r.where === 'backlog'),
      'sequences idle in the backlog leave it without taking the slot',
    );
    // Without the fix the k-th sequence to get the slot was reaped k idle periods after its last request; here
    // each is reaped about one idle period after it (the ratio leaves room for a loaded machine's late timers).
    const ratios = [...byId.values()].map((r) => r.idleMs / r.limitMs);
    assert.ok(Math.max(...ratios) < RAN / 2, `idle/limit at reaping: max ${Math.max(...ratios)}`);
    const ms = (where: string) =>
      reaped
        .filter((r) => r.where === where)
        .map((r) => r.idleMs)
        .sort((a, b) => a - b);
    const summary = (xs: number[]) => `min ${xs[0]} median ${xs[xs.length >> 1]} max ${xs[xs.length - 1]} ms`;
    t.diagnostic(
      `limit ${IDLE_MS} ms; idle at reaping: backlog ${summary(ms('backlog'))}; slot ${summary(ms('slot'))}`,
    );
    t.diagnostic(`a new sequence behind ${GONE + RAN} abandoned ones was served in ${Math.round(servedMs)} ms`);
  });

  it('UNAVAILABLE - refuses a new sequence when every slot is taken and the backlog is full (HTTP and gRPC)', async () => {
    assert.equal((await infer(s.url, 'capped', 1, { sequence_id: 'h', sequence_start: true })).status, 200);
    const waiting = [1, 2].map((i) => infer(s.url, 'capped', i, { sequence_id: `w${i}`, sequence_start: true }));
    await waitPending('capped', 2);
    const message =
      "inference request for sequence x to model 'capped' was refused: every sequence slot is taken and 2 sequences already wait for one (the backlog limit, model parameter 'max_sequence_backlog'); retry later";
    const r = await infer(s.url, 'capped', 3, { sequence_id: 'x', sequence_start: true });
    assert.equal(r.status, 503);
    assert.equal(r.body.error, message);
    await assert.rejects(
      callUnary(client, 'ModelInfer', grpcRequest('capped', 3, 'x')),
      (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE && e.details === message,
    );
    // The sequences already admitted go on: a request of the one holding the slot is still served.
    assert.equal((await infer(s.url, 'capped', 4, { sequence_id: 'h', sequence_end: true })).status, 200);
    const ends = [1, 2].map((i) => infer(s.url, 'capped', 5, { sequence_id: `w${i}`, sequence_end: true }));
    assert.deepEqual(
      (await Promise.all([...waiting, ...ends])).map((x) => x.status),
      [200, 200, 200, 200],
    );
    const again = await infer(s.url, 'capped', 6, { sequence_id: 'x', sequence_start: true, sequence_end: true });
    assert.deepEqual(again.body.outputs?.[0].data, [6]);
  });
});
