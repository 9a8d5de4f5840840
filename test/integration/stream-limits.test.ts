import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { connect as connectHttp2 } from 'node:http2';
import { loadServices } from '../../src/protocol/grpc/proto.js';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * Regression (issue 22 item 6): a decoupled model's responses to a client that does not read grew the server by
 * hundreds of MB in seconds, and /generate held every response before refusing. Now the model's send() waits while
 * its client has not taken its responses (the process transport's window: 8 responses), a stream stalled past
 * --stream-stall-timeout-secs ends with RESOURCE_EXHAUSTED and cancels its request, and /generate refuses at the
 * second response. What is asserted is what the model saw: how many of its sends returned, and the cancellation.
 */

const REPO = fileURLToPath(new URL('../fixtures/python-streams/', import.meta.url));
/** Responses the model would send unhindered: COUNT x SIZE = 200 MiB per request. */
const COUNT = 200;
const SIZE = 1 << 20;

/** One gRPC message on the wire: flag byte, 4-byte big-endian length, the ModelInferRequest. */
function grpcFrame(request: object): Buffer {
  const { Inference } = loadServices();
  const body = Inference.service.ModelStreamInfer.requestSerialize(request);
  const head = Buffer.alloc(5);
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}

interface Progress {
  sent: number;
  cancelled: boolean;
  done: boolean;
}

/** Waits (bounded) for the model to finish its request and returns what it saw. */
async function finished(path: string): Promise<Progress> {
  for (let i = 0; i < 1200; i++) {
    try {
      const p = JSON.parse(readFileSync(path, 'utf8')) as Progress;
      if (p.done) return p;
    } catch {
      // not written yet
    }
    await sleep(50);
  }
  throw new Error(`the model never finished its request (${path})`);
}

describe('stream limits: a decoupled model and a client that does not read', () => {
  let s: TestServer;
  let dir: string;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'nereid-stream-limits-'));
    s = await startNereid({ repositories: [REPO], exitOnError: false, streamStallTimeoutSecs: 1 });
  });
  after(async () => {
    await s?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('gRPC ModelStreamInfer: send() waits, the stalled stream ends RESOURCE_EXHAUSTED and cancels the request', async () => {
    const progress = join(dir, 'grpc.json');
    // A raw HTTP/2 client whose stream is paused: it sends no WINDOW_UPDATE, so the server's writes stop being
    // taken (grpc-js's own client reads on into its buffer whatever its call's pause says).
    const session = connectHttp2(`http://127.0.0.1:${s.grpcPort}`);
    try {
      const stream = session.request({
        ':method': 'POST',
        ':path': '/inference.GRPCInferenceService/ModelStreamInfer',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      stream.pause();
      stream.write(
        grpcFrame({
          model_name: 'flood',
          inputs: [
            { name: 'COUNT', datatype: 'INT32', shape: [1], contents: { int_contents: [COUNT] } },
            { name: 'SIZE', datatype: 'INT32', shape: [1], contents: { int_contents: [SIZE] } },
          ],
          parameters: { progress_file: { string_param: progress } },
        }),
      );
      const seen = await finished(progress);
      assert.equal(seen.cancelled, true, `the request was not cancelled: ${JSON.stringify(seen)}`);
      assert.ok(seen.sent < 40, `send() did not wait: ${seen.sent} of ${COUNT} responses sent to a paused client`);
      // Reading now: what was written, then the stream's status in the trailers.
      const trailers = new Promise<Record<string, unknown>>((resolve) => stream.once('trailers', resolve));
      stream.on('data', () => undefined);
      stream.resume();
      const t = await trailers;
      assert.equal(t['grpc-status'], '8', `expected RESOURCE_EXHAUSTED, got ${JSON.stringify(t)}`);
      assert.match(decodeURIComponent(String(t['grpc-message'])), /took no response/);
      stream.close();
    } finally {
      session.close();
    }
  });

  it('SSE generate_stream: send() waits, the stalled stream cancels the request and ends with the error', async () => {
    const progress = join(dir, 'sse.json');
    const body = JSON.stringify({ COUNT, SIZE, progress_file: progress });
    const sock = connect(s.httpPort as number, '127.0.0.1');
    await new Promise((resolve) => sock.once('connect', resolve));
    sock.pause(); // never reads until the model is done
    sock.write(
      `POST /v2/models/flood/generate_stream HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
    const seen = await finished(progress);
    assert.equal(seen.cancelled, true, `the request was not cancelled: ${JSON.stringify(seen)}`);
    // Kernel socket buffers (a few MB on loopback) take some responses before the server sees backpressure.
    assert.ok(seen.sent < 60, `send() did not wait: ${seen.sent} of ${COUNT} responses sent to a client not reading`);
    let tail = '';
    sock.on('data', (chunk: Buffer) => (tail = (tail + chunk.toString('latin1')).slice(-4096)));
    sock.resume();
    await new Promise((resolve) => sock.once('close', resolve));
    assert.match(tail, /data: \{"error":"[^"]*took no response[^"]*"\}/);
  });

  it('/generate refuses at the second response of a decoupled model and cancels the request', async () => {
    const progress = join(dir, 'generate.json');
    const res = await fetch(`${s.url}/v2/models/flood/generate`, {
      method: 'POST',
      body: JSON.stringify({ COUNT: 100_000, SIZE: 1024, progress_file: progress }),
    });
    assert.equal(res.status, 400);
    const { error } = (await res.json()) as { error: string };
    assert.match(error, /generate expects exactly one response, but model 'flood' sent more than one/);
    const seen = await finished(progress);
    assert.equal(seen.cancelled, true, `the request was not cancelled: ${JSON.stringify(seen)}`);
  });
});
