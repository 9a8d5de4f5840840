import assert from 'node:assert/strict';
import { Agent, request } from 'node:http';
import { connect, type Socket } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { startNereid, type TestServer } from '../helpers/server.js';

/**
 * The HTTP transport's limits on connections, each a regression test of a defect found by probing: stalled and
 * flooding clients (request and headers timeouts, --http-max-connections), keep-alive connections during a
 * shutdown, and a listener leaked per keep-alive connection per reload.
 */

/** A raw TCP connection; resolves when connected. */
function rawConnect(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1', () => resolve(sock));
    sock.once('error', reject);
  });
}

function closed(sock: Socket): Promise<string> {
  return new Promise((resolve) => {
    let data = '';
    sock.on('data', (d: Buffer) => (data += d.toString()));
    sock.on('error', () => undefined);
    sock.on('close', () => resolve(data));
  });
}

/** A raw connection the server has accepted: it has answered one keep-alive request on it, and it stays open. */
async function answeredKeepAlive(port: number): Promise<Socket> {
  const sock = await rawConnect(port);
  await new Promise<void>((resolve, reject) => {
    let data = '';
    const onData = (d: Buffer): void => {
      data += d.toString();
      if (!data.includes('\r\n\r\n')) return;
      sock.off('data', onData);
      if (data.startsWith('HTTP/1.1 200')) resolve();
      else reject(new Error(`a held connection was answered ${JSON.stringify(data)}`));
    };
    sock.on('data', onData);
    sock.once('close', () => reject(new Error('a held connection was closed before its answer')));
    sock.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\n\r\n');
  });
  return sock;
}

describe('HTTP transport limits', () => {
  let s: TestServer;
  before(async () => {
    s = await startNereid({
      allowGrpc: false,
      allowMetrics: false,
      httpMaxConnections: 6,
      httpHeadersTimeoutSecs: 1,
      httpRequestTimeoutSecs: 2,
    });
  });
  after(() => s.close());

  it('REGRESSION a stalled body - the request is cut (408) once the request timeout passes', async () => {
    const sock = await rawConnect(s.httpPort as number);
    const done = closed(sock);
    sock.write(
      'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 67108864\r\n\r\n{"inputs":',
    );
    const started = Date.now();
    const reply = await done;
    // Cut at the 2 s request timeout; Node's own default would be 300 s. 30 s: an order of magnitude above normal
    // (load cannot stretch a timer that far), still far below the default it guards against.
    assert.ok(Date.now() - started < 30_000, `cut after ${Date.now() - started} ms`);
    assert.match(reply, /^HTTP\/1\.1 408/);
  });

  it('BAD CALL - headers that never end are cut after the headers timeout', async () => {
    const sock = await rawConnect(s.httpPort as number);
    const done = closed(sock);
    sock.write('GET /v2/health/live HTTP/1.1\r\nHost: x\r\nX-Slow: a');
    const started = Date.now();
    await done;
    // Cut at the 1 s headers timeout (Node checks it every second: ~2 s); Node's own default would be 60 s. 20 s: an
    // order of magnitude above normal, still below the default it guards against.
    assert.ok(Date.now() - started < 20_000, `cut after ${Date.now() - started} ms`);
  });

  it('BAD CALL - connections past --http-max-connections are closed as they arrive; the server goes on', async () => {
    // Connected is not yet accepted: with front-end threads the kernel may hand the next connection to a thread
    // that accepts it before another thread has accepted its held ones, and the cap counts accepted connections.
    // An answer on each held connection proves it was accepted (and counted); keep-alive keeps it open for 65 s.
    const held = await Promise.all(Array.from({ length: 6 }, () => answeredKeepAlive(s.httpPort as number)));
    const extra = await rawConnect(s.httpPort as number);
    const reply = await closed(extra);
    assert.equal(reply, '', 'closed without an answer');
    for (const h of held) h.destroy();
    await new Promise((r) => setTimeout(r, 100));
    assert.equal((await fetch(`${s.url}/v2/health/live`)).status, 200);
  });
});

describe('Shutdown with open keep-alive connections', () => {
  it('REGRESSION requests on an open keep-alive connection after shutdown began - served (Triton), not 503', async () => {
    // The drain's idle grace is long (60 s) so that "it ended once the client closed" is told apart from "it ran
    // out" by a bound load cannot reach (below).
    const s = await startNereid({ allowGrpc: false, allowMetrics: false, httpDrainIdleMs: 60_000 });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const other = new Agent({ keepAlive: true, maxSockets: 1 });
    const get = (
      path: string,
      via = agent,
    ): Promise<{ status: number; socket: unknown; connection: string | undefined }> =>
      new Promise((resolve, reject) => {
        const req = request(`${s.url}${path}`, { agent: via }, (res) => {
          res.resume();
          res.on('end', () =>
            resolve({ status: res.statusCode ?? 0, socket: req.socket, connection: res.headers.connection }),
          );
        });
        req.on('error', reject);
        req.end();
      });
    const first = await get('/v2/health/live');
    assert.equal(first.status, 200);
    assert.equal((await get('/v2/health/live', other)).status, 200);
    const closing = s.close();
    await new Promise((r) => setTimeout(r, 1000));
    // Readiness is false, but the open connection is still served, on the same socket; during the drain a response
    // closes its connection (Connection: close), so a client in a keep-alive loop cannot hold the drain open.
    const again = await get('/v2/models/simple');
    assert.equal(again.status, 200);
    assert.equal(again.socket, first.socket, 'the same keep-alive connection');
    assert.equal(again.connection, 'close');
    assert.equal((await get('/v2/health/ready', other)).status, 400, 'not ready while draining');
    // A new connection is refused.
    await assert.rejects(fetch(`${s.url}/v2/health/live`, { headers: { connection: 'close' } }));
    agent.destroy();
    other.destroy();
    const t = Date.now();
    await closing;
    assert.ok(Date.now() - t < 30_000, 'the drain ends once the client closed its connection, not at its 60 s grace');
  });

  it('REGRESSION a listener leaked per keep-alive connection per reload - no MaxListenersExceededWarning', async () => {
    const s = await startNereid({
      allowGrpc: false,
      allowMetrics: false,
      modelControlMode: 'explicit',
      loadModels: ['simple'],
    });
    const warnings: string[] = [];
    const onWarning = (w: Error): void => void warnings.push(w.name);
    process.on('warning', onWarning);
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const call = (path: string, body?: string): Promise<number> =>
      new Promise((resolve, reject) => {
        const req = request(`${s.url}${path}`, { agent, method: body === undefined ? 'GET' : 'POST' }, (res) => {
          res.resume();
          res.on('end', () => resolve(res.statusCode ?? 0));
        });
        req.on('error', reject);
        req.end(body);
      });
    const data = Array.from({ length: 16 }, (_, i) => i);
    const infer = JSON.stringify({
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data },
      ],
    });
    try {
      for (let i = 0; i < 11; i++) {
        assert.equal(await call('/v2/models/simple/infer', infer), 200);
        const config = JSON.stringify({ name: 'simple', platform: 'onnxruntime_onnx', max_batch_size: 8 - (i % 2) });
        assert.equal(await call('/v2/repository/models/simple/load', JSON.stringify({ parameters: { config } })), 200);
      }
      await new Promise((r) => setImmediate(r));
      assert.ok(!warnings.includes('MaxListenersExceededWarning'), warnings.join(', '));
    } finally {
      process.off('warning', onWarning);
      agent.destroy();
      await s.close();
    }
  });
});
