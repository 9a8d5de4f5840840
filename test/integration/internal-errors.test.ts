/**
 * What a client learns when something breaks inside the server. The real server runs on real sockets; the fault is
 * injected by replacing one method of its facade (InferenceServer) with one that throws, since a bug cannot be
 * provoked on demand otherwise. The rule under test (src/protocol/kserve/client-error.ts): an error Nereid raised on
 * purpose keeps its message; anything else is logged with an id and answered with a generic message naming it.
 */
import assert from 'node:assert/strict';
import type * as grpc from '@grpc/grpc-js';
import { after, before, describe, it } from 'node:test';
import { InternalError, NereidError, type Logger } from '../../src/index.js';
import type { InferenceServerApi } from '../../src/server/api.js';
import { callUnary, inferenceClient, simpleRaw } from '../helpers/grpc.js';
import { startNereid, type TestServer } from '../helpers/server.js';

interface LogEntry {
  level: string;
  obj: Record<string, unknown>;
  msg?: string;
}

/** A Logger that keeps every entry, so a test can find the one the client's error id points at. */
function recordingLogger(entries: LogEntry[]): Logger {
  const at =
    (level: string) =>
    (obj: object | string, msg?: string): void => {
      entries.push(typeof obj === 'string' ? { level, obj: {}, msg: obj } : { level, obj: { ...obj }, msg });
    };
  const logger: Logger = {
    error: at('error'),
    warn: at('warn'),
    info: at('info'),
    debug: at('debug'),
    trace: at('trace'),
    child: () => logger,
    level: 'trace',
  };
  return logger;
}

/** An error whose text is what must never reach a client: a bug's message with an absolute server path. */
const SECRET_PATH = '/srv/nereid/private/dist/server/server.js';
const bug = (): TypeError => new TypeError(`Cannot read properties of undefined (reading 'dims') at ${SECRET_PATH}:12`);

const GENERIC = /^internal error \(id ([0-9a-f]{8})\); see the server log$/;

const SIMPLE_JSON = JSON.stringify({
  inputs: [
    { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: Array(16).fill(1) },
    { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: Array(16).fill(1) },
  ],
});

interface StreamResponse {
  error_message: string;
}

describe('internal errors at the protocol boundary', () => {
  let srv: TestServer;
  let client: grpc.Client;
  const logs: LogEntry[] = [];
  /** The facade's own methods, restored after each fault. */
  let api: InferenceServerApi;

  before(async () => {
    srv = await startNereid({ logger: recordingLogger(logs) });
    api = srv.server;
    client = inferenceClient(`127.0.0.1:${srv.grpcPort}`);
  });
  after(async () => {
    client.close();
    await srv.close();
  });

  /** Runs `f` with one facade method replaced; the override is an own property that shadows the class's method. */
  async function withFault<K extends 'infer' | 'modelMetadata'>(
    method: K,
    fault: InferenceServerApi[K],
    f: () => Promise<void>,
  ): Promise<void> {
    Object.defineProperty(srv.server, method, { value: fault, configurable: true, writable: true });
    try {
      await f();
    } finally {
      delete (srv.server as unknown as Record<string, unknown>)[method];
    }
  }

  /** Asserts a generic message and returns the log entry its id names. */
  function logged(message: string): LogEntry {
    const m = GENERIC.exec(message);
    assert.ok(m, `generic message expected, got: ${message}`);
    assert.ok(!message.includes(SECRET_PATH) && !message.includes('TypeError') && !/\n\s+at /.test(message));
    const entry = logs.find((e) => e.obj.errorId === m[1]);
    assert.ok(entry, `a log entry with errorId ${m[1]}`);
    assert.equal(entry.level, 'error');
    return entry;
  }

  /**
   * The logged cause is the thrown error: the object itself, or (from a front-end thread, where errors cross as
   * plain data) its name, message and stack.
   */
  function assertLoggedCause(logged: unknown, thrown: Error): void {
    const e = logged as { name?: string; type?: string; message?: string; stack?: string };
    assert.equal(e.message, thrown.message);
    assert.equal(e.stack, thrown.stack);
    assert.equal(e instanceof Error ? e.name : e.type, thrown.name);
  }

  const httpInfer = (): Promise<Response> =>
    fetch(`${srv.url}/v2/models/simple/infer`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: SIMPLE_JSON,
    });

  it('HTTP: a thrown bug is 500 with an id; the log has the id, the cause and the request', async () => {
    const thrown = bug();
    await withFault(
      'modelMetadata',
      () => {
        throw thrown;
      },
      async () => {
        const res = await fetch(`${srv.url}/v2/models/simple`);
        assert.equal(res.status, 500);
        const body = (await res.json()) as { error: string };
        const entry = logged(body.error);
        assertLoggedCause(entry.obj.err, thrown);
        assert.equal(entry.obj.protocol, 'http');
        assert.equal(entry.obj.url, '/v2/models/simple');
      },
    );
    // The fault is gone: the same route answers again.
    assert.equal((await fetch(`${srv.url}/v2/models/simple`)).status, 200);
  });

  it('HTTP: a bug NereidError.from() wrapped on the way (as the scheduler does) is masked too', async () => {
    const thrown = bug();
    await withFault(
      'infer',
      () => Promise.reject(NereidError.from(thrown)),
      async () => {
        const res = await httpInfer();
        assert.equal(res.status, 500);
        const entry = logged(((await res.json()) as { error: string }).error);
        assertLoggedCause(entry.obj.err, thrown); // the original throwable, not the wrapper
      },
    );
  });

  it('HTTP: a deliberate INTERNAL error keeps its message and logs no error id', async () => {
    const before = logs.length;
    await withFault(
      'infer',
      () => Promise.reject(new InternalError('instance simple_0 died: exit code 70')),
      async () => {
        const res = await httpInfer();
        assert.equal(res.status, 500);
        assert.deepEqual(await res.json(), { error: 'instance simple_0 died: exit code 70' });
      },
    );
    assert.equal(logs.slice(before).filter((e) => e.obj.errorId !== undefined).length, 0);
  });

  it('HTTP: each failure gets its own id', async () => {
    await withFault(
      'modelMetadata',
      () => {
        throw bug();
      },
      async () => {
        const a = ((await (await fetch(`${srv.url}/v2/models/simple`)).json()) as { error: string }).error;
        const b = ((await (await fetch(`${srv.url}/v2/models/simple`)).json()) as { error: string }).error;
        assert.notEqual(GENERIC.exec(a)?.[1], GENERIC.exec(b)?.[1]);
      },
    );
  });

  it('gRPC: a thrown bug is INTERNAL with an id; the log names the rpc', async () => {
    const thrown = bug();
    await withFault(
      'modelMetadata',
      () => {
        throw thrown;
      },
      async () => {
        await assert.rejects(callUnary(client, 'ModelMetadata', { name: 'simple' }), (err: grpc.ServiceError) => {
          assert.equal(err.code, 13);
          const entry = logged(err.details);
          assertLoggedCause(entry.obj.err, thrown);
          assert.equal(entry.obj.rpc, 'ModelMetadata');
          return true;
        });
      },
    );
  });

  it('gRPC: a deliberate INTERNAL error keeps its message', async () => {
    await withFault(
      'infer',
      () => Promise.reject(new InternalError('instance simple_0 died: exit code 70')),
      async () => {
        await assert.rejects(callUnary(client, 'ModelInfer', simpleRaw()), (err: grpc.ServiceError) => {
          assert.equal(err.code, 13);
          assert.equal(err.details, 'instance simple_0 died: exit code 70');
          return true;
        });
      },
    );
  });

  it('gRPC stream: a bug answers a generic error_message with an id and the stream goes on', async () => {
    let calls = 0;
    const real = api.infer.bind(api);
    await withFault(
      'infer',
      (request, opts) => (++calls === 1 ? Promise.reject(bug()) : real(request, opts)),
      async () => {
        const call = (
          client as unknown as { ModelStreamInfer(): grpc.ClientDuplexStream<object, StreamResponse> }
        ).ModelStreamInfer();
        const out: StreamResponse[] = [];
        const done = new Promise<void>((resolve, reject) => {
          call.on('data', (r: StreamResponse) => out.push(r));
          call.on('error', reject);
          call.on('end', resolve);
        });
        call.write(simpleRaw({ id: '1' }));
        call.write(simpleRaw({ id: '2' }));
        call.end();
        await done;
        assert.equal(out.length, 2);
        const entry = logged(out[0].error_message);
        assert.equal(entry.obj.rpc, 'ModelStreamInfer');
        assert.equal(out[1].error_message, '');
      },
    );
  });
});
