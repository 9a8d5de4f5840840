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
import http from 'node:http';
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

async function load(job: Job): Promise<void> {
  const [host, port] = job.url.split(':');
  const body = readFileSync(job.body);
  const agent = new http.Agent({ keepAlive: true, maxSockets: job.concurrency });
  const headers = { ...job.headers, 'content-length': String(body.length) };
  let errors = 0;
  let firstError = '';
  const once = (): Promise<boolean> =>
    new Promise((resolve) => {
      const req = http.request({ host, port: Number(port), path: job.path, method: 'POST', agent, headers }, (res) => {
        res.on('data', () => undefined);
        res.on('end', () => {
          if (res.statusCode !== 200 && firstError === '') firstError = `HTTP ${res.statusCode}`;
          resolve(res.statusCode === 200);
        });
        res.on('error', () => resolve(false));
      });
      req.on('error', (err) => {
        if (firstError === '') firstError = err.message;
        resolve(false);
      });
      req.end(body);
    });
  const latencies: number[] = [];
  const start = performance.now();
  const from = start + job.warmupMs;
  const end = from + job.durationMs;
  await Promise.all(
    Array.from({ length: job.concurrency }, async () => {
      while (performance.now() < end) {
        const t = performance.now();
        const ok = await once();
        const done = performance.now();
        if (!ok) errors++;
        else if (t >= from && done <= end) latencies.push((done - t) * 1000);
      }
    }),
  );
  agent.destroy();
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
