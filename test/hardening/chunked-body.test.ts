import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { EXAMPLES } from '../helpers/server.js';
import { startServerProcess, type ServerProcess } from './server-process.js';

/**
 * Chunked bodies of many tiny chunks, measured on the server process itself (its peak resident memory, VmHWM, read
 * from /proc): a memory ceiling, not a time, so machine load cannot break it.
 */

const CONNECTIONS = 100;
/** One-byte chunks per request: past the server's cap of 65536, so every request is refused. */
const CHUNKS = 100_000;
const PIECE = Buffer.from('1\r\nx\r\n'.repeat(10_000));

/** One chunked request of CHUNKS one-byte chunks; resolves with the status line the server answered. */
function tinyChunks(port: number): Promise<string> {
  return new Promise((resolve) => {
    const sock = connect(port, '127.0.0.1');
    let reply = '';
    sock.on('data', (d: Buffer) => (reply += d.toString('latin1')));
    sock.on('error', () => undefined);
    sock.on('close', () => resolve(reply.split('\r\n')[0]));
    sock.write('POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n');
    let sent = 0;
    const pump = (): void => {
      while (sent < CHUNKS) {
        sent += 10_000;
        if (!sock.write(PIECE)) return void sock.once('drain', pump);
      }
      sock.end('0\r\n\r\n');
    };
    pump();
  });
}

describe('Chunked request bodies of tiny chunks', () => {
  let server: ServerProcess;
  before(async () => {
    server = await startServerProcess([
      `--model-repository=${EXAMPLES}`,
      '--model-control-mode=explicit',
      '--load-model=simple',
    ]);
  });
  after(() => server.stop());

  it('REGRESSION 100 refused requests of 10^5 one-byte chunks grew the server by 200 MiB - memory stays flat', async (t) => {
    // A warm-up round first: the first requests compile code and size the young generation, which is not growth.
    await Promise.all(Array.from({ length: 4 }, () => tinyChunks(Number(new URL(server.httpUrl).port))));
    const before = server.memory();
    server.resetPeak();
    const port = Number(new URL(server.httpUrl).port);
    const answers = await Promise.all(Array.from({ length: CONNECTIONS }, () => tinyChunks(port)));
    const after = server.memory();
    t.diagnostic(`RSS before ${before.rssMiB} MiB, peak ${after.peakMiB} MiB, after ${after.rssMiB} MiB`);
    for (const a of answers) assert.match(a, /^HTTP\/1\.1 400 /);
    // Each refused request used to keep every chunk that arrived after its refusal (about 2 MiB of small buffers
    // per connection: +214 MiB for 100 of them). Bounded, the peak stays within the young generation's churn.
    assert.ok(after.peakMiB - before.rssMiB < 80, `peak grew by ${after.peakMiB - before.rssMiB} MiB`);
    assert.equal((await fetch(`${server.httpUrl}/v2/health/live`)).status, 200);
  });
});
