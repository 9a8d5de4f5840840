/**
 * One process of the GPU benchmark's closed-loop load generator (KServe v2 HTTP with binary tensor data,
 * keep-alive): `concurrency` connections, each sending the same prebuilt request body back to back. bench/gpu.ts
 * starts several of these (perf_analyzer is not on the GPU machine) so that the client is never the bottleneck,
 * and measures their ceiling against a canned server (`--canned`).
 *
 *   node loadgen-binary.js '{"url":"127.0.0.1:8000","path":"/v2/models/m/infer","body":"/tmp/body.bin",
 *     "headers":{...},"concurrency":16,"warmupMs":1000,"durationMs":3000}'
 *   node loadgen-binary.js --canned RESPONSE_BYTES   (prints the port; answers every request with that many bytes)
 *
 * Prints one JSON line: {"ok": n, "errors": n, "latencies_us": [...]} (latencies of requests started after the
 * warm-up and finished before the end).
 */
import { readFileSync } from 'node:fs';
import net from 'node:net';

interface Job {
  url: string;
  path: string;
  body: string;
  headers: Record<string, string>;
  concurrency: number;
  warmupMs: number;
  durationMs: number;
}

/**
 * One keep-alive connection's closed loop over a raw socket: the request (head and body prebuilt once) written
 * whole, the response parsed only as far as its status line and content-length, its body counted and dropped.
 * node:http's client parses and allocates per response (its ceiling against the canned server was 9–12k
 * responses/s of 393 KB on the H200 host, below bare TensorRT's 12–15k seq/s): this loop costs one indexOf per
 * response, so the client is not what a GPU benchmark measures.
 */
function connection(
  host: string,
  port: number,
  request: Buffer,
  onDone: (ok: boolean, why: string, fatal: boolean) => void,
): { send(): void; close(): void } {
  const sock = net.connect({ host, port, noDelay: true });
  let head: Buffer | null = null; // bytes of a response head not yet complete
  let left = -1; // body bytes still to come, -1 while reading a head
  let status = 0;
  let over = false;
  const fail = (why: string): void => {
    if (over) return;
    over = true;
    onDone(false, why, true);
  };
  sock.on('error', (err) => fail(err.message));
  sock.on('close', () => fail('connection closed by the server'));
  sock.on('data', (chunk: Buffer) => {
    let at = 0;
    while (at < chunk.length) {
      if (left < 0) {
        const buf = head ? Buffer.concat([head, chunk.subarray(at)]) : chunk.subarray(at);
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) {
          head = Buffer.from(buf);
          return;
        }
        const text = buf.subarray(0, end).toString('latin1');
        status = Number(text.slice(9, 12));
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(text);
        const consumed = end + 4 - (head ? head.length : 0);
        head = null;
        at += consumed;
        left = m ? Number(m[1]) : 0;
      }
      const take = Math.min(left, chunk.length - at);
      left -= take;
      at += take;
      if (left === 0) {
        left = -1;
        onDone(status === 200, status === 200 ? '' : `HTTP ${status}`, false);
      }
    }
  });
  return {
    send(): void {
      sock.write(request);
    },
    close(): void {
      over = true;
      sock.destroy();
    },
  };
}

async function load(job: Job): Promise<void> {
  const [host, port] = job.url.split(':');
  const body = readFileSync(job.body);
  const headers = { ...job.headers, host: job.url, 'content-length': String(body.length) };
  const head = `POST ${job.path} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('')}\r\n`;
  const request = Buffer.concat([Buffer.from(head, 'latin1'), body]);
  let errors = 0;
  let firstError = '';
  const latencies: number[] = [];
  const start = performance.now();
  const from = start + job.warmupMs;
  const end = from + job.durationMs;
  await Promise.all(
    Array.from(
      { length: job.concurrency },
      () =>
        new Promise<void>((resolve) => {
          let t = 0;
          const c = connection(host!, Number(port), request, (ok, why, fatal) => {
            const done = performance.now();
            if (!ok) {
              errors++;
              if (firstError === '') firstError = why;
            } else if (t >= from && done <= end) latencies.push((done - t) * 1000);
            if (done >= end || fatal) {
              c.close();
              resolve();
              return;
            }
            t = performance.now();
            c.send();
          });
          t = performance.now();
          c.send();
        }),
    ),
  );
  process.stdout.write(`${JSON.stringify({ ok: latencies.length, errors, firstError, latencies_us: latencies })}\n`);
}

/**
 * A server that answers every HTTP request with a fixed response of `size` body bytes, parsing only what it
 * must (header end, content-length): the ceiling the load generator reaches when the server costs nothing.
 */
function canned(size: number): void {
  const payload = Buffer.alloc(size, 1);
  const head = Buffer.from(
    `HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ninference-header-content-length: 0\r\n` +
      `content-length: ${size}\r\nconnection: keep-alive\r\n\r\n`,
  );
  const server = net.createServer((sock) => {
    sock.setNoDelay(true);
    let buf = Buffer.alloc(0);
    sock.on('data', (chunk) => {
      buf = buf.length === 0 ? chunk : Buffer.concat([buf, chunk]);
      for (;;) {
        const end = buf.indexOf('\r\n\r\n');
        if (end < 0) return;
        const m = /content-length:\s*(\d+)/i.exec(buf.subarray(0, end).toString('latin1'));
        const total = end + 4 + (m ? Number(m[1]) : 0);
        if (buf.length < total) return;
        buf = buf.subarray(total);
        sock.cork();
        sock.write(head);
        sock.write(payload);
        sock.uncork();
      }
    });
    sock.on('error', () => undefined);
  });
  server.listen(0, '127.0.0.1', () => {
    process.stdout.write(`${(server.address() as net.AddressInfo).port}\n`);
  });
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

if (process.argv[2] === '--canned') canned(Number(process.argv[3]));
else await load(JSON.parse(process.argv[2]) as Job);
