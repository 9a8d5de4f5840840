import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { HANG_MS, type HttpCase } from './fuzz-harness.js';
import { mutateBytes, mutateValue, type Rng } from './mutate.js';

/**
 * HTTP cases for the hardening fuzz: well-formed requests to mutate (body, headers, method, path), and raw HTTP/1.1
 * abuse the fetch API cannot send.
 */

/** A well-formed request: [method, path, JSON body or undefined]. */
export type HttpTemplate = [string, string, unknown];

const range16 = Array.from({ length: 16 }, (_, i) => i);

/** Well-formed HTTP requests the mutations start from: [method, path, JSON body or undefined]. */
export const HTTP_TEMPLATES: HttpTemplate[] = [
  [
    'POST',
    '/v2/models/simple/infer',
    {
      id: 'r',
      inputs: [
        { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', data: range16 },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: range16 },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { binary_data: false } }, { name: 'OUTPUT1' }],
      parameters: { priority: 0, timeout: 1000000 },
    },
  ],
  [
    'POST',
    '/v2/models/classifier/infer',
    {
      inputs: [{ name: 'INPUT', shape: [1, 8], datatype: 'FP32', data: [1, 2, 3, 4, 5, 6, 7, 8] }],
      outputs: [{ name: 'PROBS', parameters: { classification: 3 } }],
    },
  ],
  [
    'POST',
    '/v2/models/text_encoder/infer',
    {
      inputs: ['input_ids', 'attention_mask', 'token_type_ids'].map((name) => ({
        name,
        shape: [1, 4],
        datatype: 'INT32',
        data: [1, 1, 0, 1],
      })),
    },
  ],
  [
    'POST',
    '/v2/models/simple/infer',
    {
      inputs: [
        {
          name: 'INPUT0',
          shape: [1, 16],
          datatype: 'INT32',
          parameters: { shared_memory_region: 'fuzz_in', shared_memory_byte_size: 64 },
        },
        { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', data: range16 },
      ],
      outputs: [{ name: 'OUTPUT0', parameters: { shared_memory_region: 'fuzz_out', shared_memory_byte_size: 64 } }],
    },
  ],
  ['POST', '/v2/repository/index', { ready: true }],
  ['POST', '/v2/logging', { log_verbose_level: 0, log_info: true }],
  ['POST', '/v2/trace/setting', { trace_rate: '1000', trace_level: ['OFF'] }],
  ['POST', '/v2/models/simple/trace/setting', { trace_count: '-1' }],
  [
    'POST',
    '/v2/systemsharedmemory/region/fuzz_r/register',
    { key: `/nereid-fuzz-missing-${process.pid}`, byte_size: 64 },
  ],
  ['POST', '/v2/systemsharedmemory/region/fuzz_r/unregister', undefined],
  ['POST', '/v2/cudasharedmemory/region/c/register', { raw_handle: { b64: 'AAAA' }, device_id: 0, byte_size: 8 }],
  [
    'POST',
    '/v2/repository/models/fuzzmodel/load',
    {
      parameters: {
        config: JSON.stringify({ name: 'fuzzmodel', backend: 'onnxruntime' }),
        'file:1/model.onnx': 'AAAA',
      },
    },
  ],
  ['GET', '/v2/models/simple/config', undefined],
  ['GET', '/v2/models/simple/versions/1/stats', undefined],
  ['GET', '/v2/models/classifier', undefined],
  ['GET', '/v2', undefined],
];

const PATH_SEGMENTS = [
  '%2e%2e',
  '..',
  '%00',
  '%ZZ',
  'simple',
  'a'.repeat(300),
  '🙂',
  'versions',
  '1',
  '99999999999999999999',
  '',
];

/** One mutated HTTP request: body, headers, method or path damaged. */
export function httpCase(rng: Rng, templates: readonly HttpTemplate[] = HTTP_TEMPLATES): HttpCase {
  const [method0, path0, template] = rng.pick(templates);
  let method = method0;
  let path = path0;
  const headers: Record<string, string> = {};
  let value: unknown = template;
  for (let k = 1 + rng.int(3); k > 0 && value !== undefined; k--) value = mutateValue(rng, value);
  let body: Uint8Array | undefined = value === undefined ? undefined : Buffer.from(JSON.stringify(value) ?? 'null');
  const what: string[] = [];
  const roll = rng.int(10);
  if (roll === 0 && body) {
    body = mutateBytes(rng, body);
    what.push('bytes');
  } else if (roll === 1 && body) {
    // Binary tensor data with a header length that may lie.
    const blob = Buffer.from(Array.from({ length: rng.int(80) }, () => rng.int(256)));
    headers['Inference-Header-Content-Length'] = String(
      rng.pick([body.length, 0, -1, body.length + 1, 2 ** 31, 99999999999, 'x']),
    );
    body = Buffer.concat([body, blob]);
    what.push('binary');
  } else if (roll === 2 && body) {
    const coding = rng.pick(['gzip', 'deflate', 'br', 'x-gzip', 'identity']);
    headers['Content-Encoding'] = coding;
    if (coding === 'gzip' && rng.chance(0.5)) body = gzipSync(body);
    what.push(`encoding ${coding}`);
  } else if (roll === 3) {
    const segs = path.split('/');
    segs[1 + rng.int(segs.length - 1)] = rng.pick(PATH_SEGMENTS);
    path = segs.join('/');
    what.push('path');
  } else if (roll === 4) {
    method = rng.pick(['GET', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD', 'POST']);
    what.push('method');
  }
  if (rng.chance(0.1))
    headers['Content-Type'] = rng.pick(['text/plain', 'application/octet-stream', 'multipart/form-data']);
  return { method, path, headers, body, what: `${method} ${path} ${what.join(',')}` };
}

/** Raw HTTP/1.1 abuse the fetch API cannot send: broken request lines, lying lengths, bad chunking. */
export const RAW_CASES: string[] = [
  'GARBAGE\r\n\r\n',
  'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n',
  'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\nContent-Length: 20\r\n\r\n{}',
  'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n',
  'POST /v2/models/simple/infer HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n',
  `GET /v2/${'a'.repeat(20000)} HTTP/1.1\r\nHost: x\r\n\r\n`,
  `GET /v2 HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(40000)}\r\n\r\n`,
  'GET /v2 HTTP/9.9\r\nHost: x\r\n\r\n',
  'POST /v2/repository/index HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n[[',
];

export function rawExchange(port: number, text: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let data = '';
    const timer = setTimeout(() => {
      sock.destroy();
      reject(new Error('hang'));
    }, HANG_MS);
    sock.on('data', (d: Buffer) => {
      data += d.toString('latin1');
      if (/\r\n\r\n/.test(data)) sock.end();
    });
    sock.on('error', () => undefined);
    sock.on('close', () => {
      clearTimeout(timer);
      resolve(data);
    });
    sock.write(text);
  });
}
