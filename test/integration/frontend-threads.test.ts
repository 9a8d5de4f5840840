import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import http from 'node:http';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { serve } from '../../src/serve.js';
import { EXAMPLES, startNereid, type TestServer } from '../helpers/server.js';
import { startServerProcess, type ServerProcess } from '../hardening/server-process.js';

/**
 * Front-end threads (src/frontend/) on real sockets: requests from several threads meet in one scheduler, and the
 * faults of issue 15 — a malformed request, a thread that dies, a thread kept busy, SIGTERM — each on a server with
 * several threads. Which thread a connection lands on is the kernel's choice (SO_REUSEPORT hashes the connection),
 * so the tests open many connections (16 over 2 threads: all on one thread has odds 2^-15).
 */

const CONNECTIONS = 16;
const io = (dt: string) => `
input [{ name: "INPUT0" data_type: ${dt} dims: [ -1 ] }]
output [{ name: "OUTPUT0" data_type: ${dt} dims: [ -1 ] }]`;
const MODELS: Record<string, string> = {
  echo: `backend: "identity" max_batch_size: 8 ${io('TYPE_INT32')}`,
  // Waits for 8 requests (or 5 s): one execution proves they met in one queue, whichever thread read them.
  batched: `backend: "identity" max_batch_size: 8 ${io('TYPE_INT32')}
    dynamic_batching { max_queue_delay_microseconds: 5000000 }`,
  // In flight long enough to break something under it.
  slow: `backend: "identity" max_batch_size: 32 ${io('TYPE_INT32')}
    dynamic_batching { max_queue_delay_microseconds: 20000 }
    parameters { key: "execute_delay_ms" value { string_value: "1000" } }`,
};

async function makeRepo(): Promise<string> {
  const repo = await mkdtemp(join(tmpdir(), 'nereid-frontend-'));
  for (const [name, config] of Object.entries(MODELS)) {
    await mkdir(join(repo, name, '1'), { recursive: true });
    await writeFile(join(repo, name, 'config.pbtxt'), `name: "${name}"\n${config}`);
  }
  return repo;
}

interface Reply {
  status: number;
  body: string;
  ms: number;
}

/** One JSON infer on a connection of its own (so connections spread over the threads); 'reset' when it broke. */
function infer(port: number, model: string, value = 1): Promise<Reply | 'reset'> {
  const body = JSON.stringify({ inputs: [{ name: 'INPUT0', datatype: 'INT32', shape: [1, 2], data: [value, value] }] });
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: `/v2/models/${model}/infer`, method: 'POST', agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, ms: performance.now() - t0 }));
        res.on('error', () => resolve('reset'));
      },
    );
    req.on('error', () => resolve('reset'));
    req.end(body);
  });
}

const simple = (port: number): Promise<Reply | 'reset'> => {
  const data = Array.from({ length: 16 }, (_, i) => i);
  const body = JSON.stringify({
    inputs: [
      { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data },
      { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data },
    ],
  });
  const t0 = performance.now();
  return new Promise((resolve) => {
    const req = http.request(
      { host: '127.0.0.1', port, path: '/v2/models/simple/infer', method: 'POST', agent: false },
      (res) => {
        res.resume();
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: '', ms: performance.now() - t0 }));
      },
    );
    req.on('error', () => resolve('reset'));
    req.end(body);
  });
};

/** Raw bytes on a fresh connection; resolves with what came back before the server closed or went quiet. */
function raw(port: number, bytes: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(bytes));
    let got = '';
    socket.setEncoding('latin1');
    socket.on('data', (c: string) => {
      got += c;
      if (/\r\n\r\n/.test(got)) socket.end();
    });
    socket.setTimeout(5000, () => socket.destroy());
    socket.on('close', () => resolve(got));
    socket.on('error', () => undefined);
  });
}

async function statistics(port: number, model: string): Promise<{ execution_count: number; inference_count: number }> {
  const res = await fetch(`http://127.0.0.1:${port}/v2/models/${model}/stats`);
  return ((await res.json()) as { model_stats: { execution_count: number; inference_count: number }[] }).model_stats[0];
}

describe('front-end threads', () => {
  let repo: string;
  let n: TestServer;
  before(async () => {
    repo = await makeRepo();
    n = await startNereid({ repositories: [repo, EXAMPLES], httpThreadCount: 2, allowGrpc: false });
  });
  after(async () => {
    await n?.close();
    await rm(repo, { recursive: true, force: true });
  });

  it('batches requests read by different threads together: one scheduler per model', async () => {
    const port = n.httpPort as number;
    const replies = await Promise.all(Array.from({ length: 8 }, (_, i) => infer(port, 'batched', i)));
    for (const [i, r] of replies.entries()) {
      assert.ok(r !== 'reset' && r.status === 200, `request ${i}: ${JSON.stringify(r)}`);
      assert.match(r.body, new RegExp(`"data":\\[${i},${i}\\]`), 'each request got its own output back');
    }
    const stats = await statistics(port, 'batched');
    assert.equal(stats.inference_count, 8);
    assert.equal(stats.execution_count, 1, 'one batch of 8, whichever threads read the requests');
  });

  it('BAD CALL - answers malformed requests on every thread and keeps serving', async () => {
    const port = n.httpPort as number;
    const restarts = n.frontEnds?.restarts;
    const bad = await Promise.all(
      Array.from({ length: CONNECTIONS }, async (_, i) => {
        switch (i % 4) {
          case 0:
            return raw(port, 'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n{');
          case 1:
            return raw(
              port,
              'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nInference-Header-Content-Length: zz\r\nContent-Length: 2\r\n\r\n{}',
            );
          case 2:
            return raw(port, 'NONSENSE\r\n\r\n');
          default:
            return raw(port, 'GET /v2/models/%ZZ/ready HTTP/1.1\r\nHost: x\r\n\r\n');
        }
      }),
    );
    for (const [i, answer] of bad.entries()) assert.match(answer, /^HTTP\/1\.1 4\d\d /, `malformed request ${i}`);
    const good = await Promise.all(Array.from({ length: CONNECTIONS }, () => simple(port)));
    assert.ok(good.every((r) => r !== 'reset' && r.status === 200));
    assert.equal(n.frontEnds?.restarts, restarts, 'no thread died');
  });

  it('a slow client or a busy thread does not stall the other thread', async () => {
    const port = n.httpPort as number;
    // A client that sends half a body and then nothing.
    const slow = connect(port, '127.0.0.1', () =>
      slow.write('POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{"inp'),
    );
    slow.on('error', () => undefined);
    try {
      // Thread 1 is kept busy for 1.5 s, as by one expensive request.
      await n.frontEnds?.injectFault(1, 'block', 1500);
      // The order of events, not their times (load stretches those): a second, empty block of thread 1 begins only
      // once the first has ended, so it marks the end of the busy time.
      const events: string[] = [];
      const blockOver = n.frontEnds?.injectFault(1, 'block', 0).then(() => events.push('block over'));
      const replies = await Promise.all(
        Array.from({ length: CONNECTIONS }, () => simple(port).then((r) => (events.push('reply'), r))),
      );
      await blockOver;
      assert.ok(
        replies.every((r) => r !== 'reset' && r.status === 200),
        'every request answered',
      );
      assert.equal(events[0], 'reply', `thread 0 answered during the block (events: ${events})`);
      assert.equal(events.at(-1), 'reply', `requests on the busy thread waited for it (events: ${events})`);
    } finally {
      slow.destroy();
    }
  });

  it('a thread that fails answers its in-flight requests with an error and is replaced', async () => {
    const port = n.httpPort as number;
    const restarts = n.frontEnds?.restarts as number;
    const inflight = Array.from({ length: CONNECTIONS }, () => infer(port, 'slow'));
    await new Promise((r) => setTimeout(r, 300));
    await n.frontEnds?.injectFault(0, 'throw');
    const replies = await Promise.all(inflight);
    let failed = 0;
    for (const r of replies) {
      assert.ok(r !== 'reset', 'answered, not cut');
      if (r.status === 200) continue;
      failed++;
      assert.equal(r.status, 500);
      assert.match(r.body, /front-end thread 0 failed while the request was in flight/);
    }
    assert.ok(
      failed > 0 && failed < CONNECTIONS,
      `the failed thread's requests failed, the others did not (${failed})`,
    );
    assert.equal(n.frontEnds?.restarts, restarts + 1);
    const after = await Promise.all(Array.from({ length: CONNECTIONS }, () => simple(port)));
    assert.ok(
      after.every((r) => r !== 'reset' && r.status === 200),
      'the replacement serves',
    );
  });

  it('a thread that is terminated is replaced; the other thread answers its requests', async () => {
    const port = n.httpPort as number;
    const restarts = n.frontEnds?.restarts as number;
    const inflight = Array.from({ length: CONNECTIONS }, () => infer(port, 'slow'));
    await new Promise((r) => setTimeout(r, 300));
    await n.frontEnds?.injectFault(1, 'terminate');
    const replies = await Promise.all(inflight);
    // The dead thread's connections died with it; nothing else did.
    const cut = replies.filter((r) => r === 'reset').length;
    assert.ok(cut > 0 && cut < CONNECTIONS, `cut ${cut}`);
    assert.ok(replies.every((r) => r === 'reset' || r.status === 200));
    assert.equal(n.frontEnds?.restarts, restarts + 1);
    const after = await Promise.all(Array.from({ length: CONNECTIONS }, () => simple(port)));
    assert.ok(
      after.every((r) => r !== 'reset' && r.status === 200),
      'the replacement serves',
    );
  });
});

describe('front-end threads: state every thread shares', () => {
  // Each request on a connection of its own: over 2 threads, 16 of them all on one thread has odds 2^-15.
  const tag = `nereid-fe-shm-${process.pid}`;
  const files: string[] = [];
  let n: TestServer;
  before(async () => {
    n = await startNereid({
      httpThreadCount: 2,
      allowClientShm: true,
      httpRestrictedApi: ['inference:infer-key=secret'],
    });
  });
  after(async () => {
    await n?.close();
    for (const f of files) await rm(f, { force: true });
  });

  const post = (path: string, body: unknown, headers: Record<string, string> = {}): Promise<Reply | 'reset'> =>
    new Promise((resolve) => {
      const t0 = performance.now();
      const req = http.request(
        { host: '127.0.0.1', port: n.httpPort, path, method: 'POST', agent: false, headers },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => (text += c));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, ms: performance.now() - t0 }));
        },
      );
      req.on('error', () => resolve('reset'));
      req.end(JSON.stringify(body));
    });

  it('a shared-memory region registered through one thread serves requests on every thread, until unregistered', async () => {
    const in0 = `/dev/shm/${tag}-in0`;
    files.push(in0);
    await writeFile(in0, Buffer.from(new Int32Array(Array.from({ length: 16 }, (_, i) => i)).buffer));
    const reg = await post('/v2/systemsharedmemory/region/fe_in0/register', { key: `/${tag}-in0`, byte_size: 64 });
    assert.ok(reg !== 'reset' && reg.status === 200, JSON.stringify(reg));
    const request = {
      inputs: [
        {
          name: 'INPUT0',
          datatype: 'INT32',
          shape: [1, 16],
          parameters: { shared_memory_region: 'fe_in0', shared_memory_byte_size: 64 },
        },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
      ],
      outputs: [{ name: 'OUTPUT0' }],
    };
    const auth = { 'infer-key': 'secret' };
    const replies = await Promise.all(
      Array.from({ length: CONNECTIONS }, () => post('/v2/models/simple/infer', request, auth)),
    );
    for (const r of replies) {
      assert.ok(r !== 'reset' && r.status === 200, JSON.stringify(r));
      assert.match(r.body, /"data":\[1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16\]/, 'INPUT0 was read from the region');
    }
    const unreg = await post('/v2/systemsharedmemory/region/fe_in0/unregister', undefined);
    assert.ok(unreg !== 'reset' && unreg.status === 200);
    const gone = await Promise.all(
      Array.from({ length: CONNECTIONS }, () => post('/v2/models/simple/infer', request, auth)),
    );
    for (const r of gone) {
      assert.ok(r !== 'reset' && r.status === 404, JSON.stringify(r));
      assert.match(r.body, /Unable to find shared memory region: 'fe_in0'/, 'every thread sees the region gone');
    }
  });

  it('BAD CALL - a restricted API is refused on every thread without its header, served with it', async () => {
    const request = {
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
        { name: 'INPUT1', datatype: 'INT32', shape: [1, 16], data: Array(16).fill(1) },
      ],
    };
    const refused = await Promise.all(
      Array.from({ length: CONNECTIONS }, () => post('/v2/models/simple/infer', request, { 'infer-key': 'wrong' })),
    );
    for (const r of refused) {
      assert.ok(r !== 'reset' && r.status === 403, JSON.stringify(r));
      assert.match(r.body, /This API is restricted, expecting header 'infer-key'/);
    }
    const served = await Promise.all(
      Array.from({ length: CONNECTIONS }, () => post('/v2/models/simple/infer', request, { 'infer-key': 'secret' })),
    );
    for (const r of served) assert.ok(r !== 'reset' && r.status === 200, JSON.stringify(r));
  });
});

describe('front-end threads: options', () => {
  it('BAD CALL - refuses a thread count that is not a positive integer before loading anything', async () => {
    for (const httpThreadCount of [0, -1, 1.5, NaN]) {
      await assert.rejects(
        serve({ repositories: ['/nonexistent'], httpThreadCount }),
        /--http-thread-count must be a positive integer/,
      );
    }
  });
});

describe('--reuse-http-port and --reuse-grpc-port', () => {
  it('let a second server share both ports when both ask; a server that does not ask cannot bind them', async () => {
    const repo = await makeRepo();
    const base = { repositories: [repo], httpAddress: '127.0.0.1', grpcAddress: '127.0.0.1', allowMetrics: false };
    const a = await serve({ ...base, httpPort: 0, grpcPort: 0, reuseHttpPort: true, reuseGrpcPort: true });
    try {
      const ports = { httpPort: a.httpPort as number, grpcPort: a.grpcPort as number };
      // One front-end thread each: the main thread's own listeners take the flags.
      const b = await serve({ ...base, ...ports, reuseHttpPort: true, reuseGrpcPort: true });
      try {
        assert.equal(b.httpPort, a.httpPort);
        assert.equal(b.grpcPort, a.grpcPort);
        const replies = await Promise.all(Array.from({ length: 8 }, () => infer(ports.httpPort, 'echo')));
        assert.ok(replies.every((r) => r !== 'reset' && r.status === 200));
      } finally {
        await b.close();
      }
      // Refused before any model loads, naming the flag (src/port-check.ts), or by the bind itself.
      await assert.rejects(serve({ ...base, ...ports, allowGrpc: false }), /EADDRINUSE|already in use/);
      await assert.rejects(
        serve({ ...base, ...ports, allowHttp: false }),
        /EADDRINUSE|No address added|already in use/,
      );
    } finally {
      await a.close();
      await rm(repo, { recursive: true, force: true });
    }
  });
});

describe('front-end threads: SIGTERM', () => {
  it('drains every thread: requests in flight on each are answered, then the process exits 0', async () => {
    const repo = await makeRepo();
    let server: ServerProcess | undefined;
    try {
      server = await startServerProcess([`--model-repository=${repo}`, '--http-thread-count=3'], [], {
        ready: /Started HTTPService at [^:]+:\d+ \(3 threads\)/,
      });
      const { child } = server;
      const port = Number(new URL(server.httpUrl).port);
      const inflight = Array.from({ length: CONNECTIONS }, () => infer(port, 'slow'));
      await new Promise((r) => setTimeout(r, 400));
      child.kill('SIGTERM');
      const exited = once(child, 'exit');
      const replies = await Promise.all(inflight);
      assert.ok(
        replies.every((r) => r !== 'reset' && r.status === 200),
        `every request in flight answered 200: ${JSON.stringify(replies.map((r) => (r === 'reset' ? r : r.status)))}`,
      );
      const [code] = (await exited) as [number | null];
      assert.equal(code, 0, server.logs());
      // New connections are refused once the threads stopped listening.
      assert.equal(await simple(port), 'reset');
    } finally {
      if (server?.child.exitCode === null) server.child.kill('SIGKILL');
      await rm(repo, { recursive: true, force: true });
    }
  });
});
