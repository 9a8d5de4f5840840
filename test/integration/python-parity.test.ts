import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import type * as grpc from '@grpc/grpc-js';
import { setTimeout as sleep } from 'node:timers/promises';
import { createLogger } from '../../src/core/logger.js';
import { callUnary, inferenceClient } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Request rescheduling of Python models (request.set_release_flags(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)) with
 * sequence_batching { iterative_sequence: true }, and request.flags() / request.timeout(), through the real server
 * over HTTP and gRPC; the response sender's is_cancelled(); and the smaller pb_utils APIs of Triton's documented
 * surface (issue 27 items 5 and 6). The rescheduling models (test/fixtures/python_parity) count their runs of each
 * request, so the answers show how often the server ran it.
 */

const RESCHED = fileURLToPath(new URL('../fixtures/python_parity/', import.meta.url));

interface Output {
  name: string;
  data: (number | string)[];
}

async function iterCount(url: string, n: number, id: number, timeoutUs?: number) {
  const res = await fetch(`${url}/v2/models/iter_count/infer`, {
    method: 'POST',
    body: JSON.stringify({
      parameters: { sequence_id: id, ...(timeoutUs ? { timeout: timeoutUs } : {}) },
      inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], data: [n] }],
    }),
  });
  const body = (await res.json()) as { error?: string; outputs?: Output[] };
  assert.equal(res.status, 200, body.error);
  const out = (name: string) => body.outputs!.find((o) => o.name === name)!.data.map(Number);
  return { iterations: out('ITERATIONS')[0], flags: out('FLAGS'), timeout: out('TIMEOUT')[0] };
}

interface StreamResponse {
  error_message: string;
  infer_response?: { raw_output_contents: Buffer[]; parameters?: Record<string, { bool_param?: boolean }> };
}

describe('python models: request rescheduling, request and sender state, the rest of pb_utils', () => {
  let s: TestServer;
  const logs: string[] = [];
  before(async () => {
    s = await startNereid({ repositories: [RESCHED], logger: createLogger({ write: (l) => void logs.push(l) }) });
  });
  /** What sender_cancel logged when its sender reported the cancellation. */
  const cancelLines = () =>
    logs.map((l) => (JSON.parse(l) as { msg: string }).msg).filter((m) => m.startsWith('sender_cancel:'));
  after(() => s?.close());

  it('runs a rescheduled request again until the model answers it; concurrent sequences batch together (HTTP)', async () => {
    const wants = [1, 3, 5, 2];
    const answers = await Promise.all(wants.map((n, k) => iterCount(s.url, n, 100 + k)));
    assert.deepEqual(
      answers.map((a) => a.iterations),
      wants,
    );
    for (const a of answers) {
      assert.equal(a.flags[0]! & 1, 1, 'the first run has the sequence START flag');
      assert.equal(a.flags[1]! & 2, 2, 'an iterative request is the whole sequence: END is set');
    }
    for (const a of answers.filter((x) => x.iterations > 1)) assert.equal(a.flags[1]! & 1, 0, 'START only once');
    const stats = (await (await fetch(`${s.url}/v2/models/iter_count/stats`)).json()) as {
      model_stats: { inference_stats: { success: { count: number } } }[];
    };
    assert.equal(stats.model_stats[0]!.inference_stats.success.count, wants.length, 'one success per request');
  });

  it('gives the model request.timeout() from the timeout parameter, and 0 without one', async () => {
    assert.equal((await iterCount(s.url, 2, 200, 7_000_000)).timeout, 7_000_000);
    assert.equal((await iterCount(s.url, 1, 201)).timeout, 0);
  });

  it('does the same over gRPC', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const res = await callUnary<{ outputs: { name: string }[]; raw_output_contents: Buffer[] }>(
        client,
        'ModelInfer',
        {
          model_name: 'iter_count',
          parameters: { sequence_id: { int64_param: 300 } },
          inputs: [{ name: 'IN', datatype: 'INT32', shape: [1, 1], contents: { int_contents: [4] } }],
        },
      );
      const i = res.outputs.findIndex((o) => o.name === 'ITERATIONS');
      assert.equal(Buffer.from(res.raw_output_contents[i]!).readInt32LE(0), 4);
    } finally {
      client.close();
    }
  });

  it('streams each run of a decoupled rescheduled request, then its final (gRPC ModelStreamInfer)', async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const call = (
        client as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, StreamResponse> }
      ).ModelStreamInfer();
      const out: StreamResponse[] = [];
      const done = new Promise<void>((resolve, reject) => {
        call.on('data', (r: StreamResponse) => {
          out.push(r);
          if (out.length === 3) call.end();
        });
        call.on('error', reject);
        call.on('end', resolve);
      });
      call.write({
        model_name: 'iter_stream',
        parameters: { sequence_id: { int64_param: 400 } },
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], contents: { int_contents: [3] } }],
      });
      await done;
      assert.deepEqual(
        out.map((r) => r.error_message),
        ['', '', ''],
      );
      assert.deepEqual(
        out.map((r) => Buffer.from(r.infer_response!.raw_output_contents[0]!).readInt32LE(0)),
        [2, 1, 0],
      );
    } finally {
      client.close();
    }
  });

  it('streams the same over HTTP generate_stream', async () => {
    const res = await fetch(`${s.url}/v2/models/iter_stream/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ IN: [4], parameters: { sequence_id: 500 } }),
    });
    assert.equal(res.status, 200);
    const events = (await res.text())
      .split('\n\n')
      .filter((e) => e.startsWith('data: '))
      .map((e) => JSON.parse(e.slice(6)) as { OUT: number | number[]; error?: string });
    assert.deepEqual(
      events.map((e) => (Array.isArray(e.OUT) ? e.OUT[0] : e.OUT)),
      [3, 2, 1, 0],
    );
  });

  it('BAD MODEL - rescheduling without iterative_sequence, or an unknown release flag, raises naming the API', async () => {
    const res = await fetch(`${s.url}/v2/models/no_iter/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }] }),
    });
    const body = (await res.json()) as { error?: string; outputs?: Output[] };
    assert.equal(res.status, 200, body.error);
    const [resched, unknown] = body.outputs![0]!.data as string[];
    assert.match(
      resched!,
      /InferenceRequest\.set_release_flags\(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE\): request rescheduling needs sequence_batching \{ iterative_sequence: true \}/,
    );
    assert.match(unknown!, /InferenceRequest\.set_release_flags: flags must be TRITONSERVER_REQUEST_RELEASE_ALL or/);
  });

  it("tells a decoupled model's response sender that its gRPC stream was cancelled (is_cancelled())", async () => {
    const client = inferenceClient(`127.0.0.1:${s.grpcPort}`);
    try {
      const call = (
        client as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, StreamResponse> }
      ).ModelStreamInfer();
      let got = 0;
      const ended = new Promise<void>((resolve) => {
        call.on('data', () => {
          if (++got === 2) call.cancel();
        });
        call.on('error', () => resolve());
        call.on('end', () => resolve());
      });
      call.write({
        model_name: 'sender_cancel',
        inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], contents: { int_contents: [1] } }],
      });
      await ended;
      await waitFor(() => cancelLines().length >= 1);
      assert.match(cancelLines()[0]!, /^sender_cancel: cancelled=True after \d+ responses$/);
    } finally {
      client.close();
    }
  });

  it('does the same for an HTTP generate_stream client that goes away', async () => {
    const before = cancelLines().length;
    const ctl = new AbortController();
    const res = await fetch(`${s.url}/v2/models/sender_cancel/generate_stream`, {
      method: 'POST',
      body: JSON.stringify({ IN: [1] }),
      signal: ctl.signal,
    });
    const reader = res.body!.getReader();
    await reader.read();
    ctl.abort();
    await waitFor(() => cancelLines().length > before);
    assert.match(cancelLines()[before]!, /^sender_cancel: cancelled=True after \d+ responses$/);
  });

  it("answers Triton's smaller pb_utils APIs, refuses a name it lacks naming it, and logs that it ignores is_ready()", async () => {
    const res = await fetch(`${s.url}/v2/models/surface/infer`, {
      method: 'POST',
      body: JSON.stringify({ inputs: [{ name: 'IN', datatype: 'INT32', shape: [1], data: [1] }] }),
    });
    const body = (await res.json()) as { error?: string; outputs?: Output[] };
    assert.equal(res.status, 200, body.error);
    const lines = Object.fromEntries(
      (body.outputs![0]!.data as string[]).map((l) => [l.slice(0, l.indexOf(': ')), l.slice(l.indexOf(': ') + 2)]),
    );
    assert.deepEqual(
      [lines.string_to_numpy, lines.string_to_numpy_string, lines.set_flags, lines.trace_context, lines.log_level],
      ['True', 'True', 'True', 'True', 'True'],
    );
    assert.equal(lines.hasattr_missing, 'False');
    assert.match(
      lines.no_such_api!,
      /^triton_python_backend_utils has no attribute 'no_such_api': Nereid does not provide it/,
    );
    assert.match(lines.shared_memory!, /^triton_python_backend_utils\.shared_memory is not supported by Nereid: /);
    const msgs = logs.map((l) => JSON.parse(l) as { msg: string; model?: string; level: number });
    assert.ok(msgs.some((m) => m.msg === 'surface: a warning through LogLevel' && m.level === 40));
    assert.ok(msgs.some((m) => /defines is_ready\(\), which Nereid does not call/.test(m.msg) && m.level === 40));
  });
});

async function waitFor(check: () => boolean): Promise<void> {
  for (let i = 0; i < 3000 && !check(); i++) await sleep(10);
  assert.ok(check(), 'timed out');
}
