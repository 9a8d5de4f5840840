import { unlink, writeFile } from 'node:fs/promises';
import { count, grpcClient, newTally, pool, sendGrpc, sendHttp, type Tally } from './fuzz-harness.js';
import { httpCase, type HttpTemplate } from './fuzz-http-cases.js';
import type { Rng } from './mutate.js';
import type { ServerProcess } from './server-process.js';

/**
 * System shared memory under mutation (the server runs with --allow-client-shm): register / status / unregister
 * with mutated names, keys, offsets and byte sizes, and infers on `simple` with mutated shared_memory_region
 * parameters, over HTTP and gRPC, against real /dev/shm objects made here. A well-formed client with a region of
 * its own (a key no template names) infers all along: a 200 must carry INPUT0+INPUT1 and INPUT0-INPUT1 of its own
 * region; a refusal (its region unregistered by a mutated unregister-all) registers it again.
 */

const range16 = Array.from({ length: 16 }, (_, i) => i);
const int32s = (xs: number[]): Buffer => Buffer.from(Int32Array.from(xs).buffer);

export interface ShmFiles {
  keyA: string;
  keyO: string;
  keyKeep: string;
  remove(): Promise<void>;
}

/** The /dev/shm objects: A holds INPUT0 = 0..15 at 0 and INPUT1 = 1s at 64; O takes outputs; Keep is the checker's. */
export async function makeShmFiles(): Promise<ShmFiles> {
  const tag = `nereid-fuzz-${process.pid}`;
  const inputs = Buffer.concat([int32s(range16), int32s(Array(16).fill(1)), Buffer.alloc(128)]);
  await writeFile(`/dev/shm/${tag}-a`, inputs);
  await writeFile(`/dev/shm/${tag}-o`, Buffer.alloc(128));
  await writeFile(`/dev/shm/${tag}-keep`, inputs);
  return {
    keyA: `/${tag}-a`,
    keyO: `/${tag}-o`,
    keyKeep: `/${tag}-keep`,
    remove: async () => {
      for (const f of ['a', 'o', 'keep']) await unlink(`/dev/shm/${tag}-${f}`).catch(() => undefined);
    },
  };
}

const shm = (region: string, offset: number, size = 64): object => ({
  parameters: { shared_memory_region: region, shared_memory_offset: offset, shared_memory_byte_size: size },
});

function simpleShm(in0: string, in1: string, out: string | undefined): object {
  return {
    inputs: [
      { name: 'INPUT0', shape: [1, 16], datatype: 'INT32', ...shm(in0, 0) },
      { name: 'INPUT1', shape: [1, 16], datatype: 'INT32', ...shm(in1, in1 === 'fz_b' ? 0 : 64) },
    ],
    outputs: out === undefined ? [{ name: 'OUTPUT0' }, { name: 'OUTPUT1' }] : [{ name: 'OUTPUT0', ...shm(out, 0) }],
  };
}

const R = '/v2/systemsharedmemory';
const httpTemplates = (f: ShmFiles): HttpTemplate[] => [
  ['POST', `${R}/region/fz_a/register`, { key: f.keyA, offset: 0, byte_size: 256 }],
  ['POST', `${R}/region/fz_b/register`, { key: f.keyA, offset: 64, byte_size: 64 }],
  ['POST', `${R}/region/fz_o/register`, { key: f.keyO, offset: 0, byte_size: 128 }],
  ['GET', `${R}/region/fz_a/status`, undefined],
  ['GET', `${R}/status`, undefined],
  ['POST', `${R}/region/fz_a/unregister`, undefined],
  ['POST', `${R}/region/fz_o/unregister`, undefined],
  ['POST', `/v2/models/simple/infer`, simpleShm('fz_a', 'fz_a', 'fz_o')],
  ['POST', `/v2/models/simple/infer`, simpleShm('fz_a', 'fz_b', undefined)],
  ['POST', `/v2/models/simple/infer`, simpleShm('fz_a', 'fz_a', undefined)],
];

const grpcShm = (region: string, offset: number): object => ({
  parameters: {
    shared_memory_region: { string_param: region },
    shared_memory_offset: { int64_param: String(offset) },
    shared_memory_byte_size: { int64_param: '64' },
  },
});

const grpcTemplates = (f: ShmFiles): [string, object][] => [
  ['SystemSharedMemoryRegister', { name: 'fz_g', key: f.keyA, offset: '0', byte_size: '256' }],
  ['SystemSharedMemoryRegister', { name: 'fz_go', key: f.keyO, offset: '0', byte_size: '128' }],
  ['SystemSharedMemoryStatus', { name: 'fz_g' }],
  ['SystemSharedMemoryStatus', {}],
  ['SystemSharedMemoryUnregister', { name: 'fz_g' }],
  [
    'ModelInfer',
    {
      model_name: 'simple',
      inputs: [
        { name: 'INPUT0', datatype: 'INT32', shape: ['1', '16'], ...grpcShm('fz_g', 0) },
        { name: 'INPUT1', datatype: 'INT32', shape: ['1', '16'], ...grpcShm('fz_g', 64) },
      ],
      outputs: [{ name: 'OUTPUT0', ...grpcShm('fz_go', 0) }, { name: 'OUTPUT1' }],
    },
  ],
];

/** The well-formed client: `rounds` infers from its own region, each answer checked. */
async function checker(server: ServerProcess, f: ShmFiles, tally: Tally, rounds: number): Promise<void> {
  const post = (path: string, body: unknown) =>
    sendHttp(
      server.httpUrl,
      { method: 'POST', path, headers: {}, body: Buffer.from(JSON.stringify(body)), what: `valid ${path}` },
      tally,
    );
  const sum = JSON.stringify(range16.map((x) => x + 1));
  const diff = JSON.stringify(range16.map((x) => x - 1));
  await post(`${R}/region/fz_keep/register`, { key: f.keyKeep, offset: 0, byte_size: 256 });
  for (let i = 0; i < rounds; i++) {
    const res = await post('/v2/models/simple/infer', simpleShm('fz_keep', 'fz_keep', undefined));
    if (res?.status === 200) {
      const outs = (JSON.parse(res.body.toString()) as { outputs: { name: string; data: number[] }[] }).outputs;
      const got = JSON.stringify(outs.map((o) => o.data));
      count(tally, 'checked');
      if (got !== `[${sum},${diff}]`) tally.failures.push(`shm checker: got ${got}`);
    } else if (res?.status === 400 || res?.status === 404) {
      await post(`${R}/region/fz_keep/register`, { key: f.keyKeep, offset: 0, byte_size: 256 });
    } else {
      tally.failures.push(`shm checker: ${res?.status ?? 'no answer'} ${res?.body.toString().slice(0, 200)}`);
    }
  }
}

export async function fuzzShm(server: ServerProcess, rng: Rng, n: number, files: ShmFiles): Promise<Tally> {
  const tally = newTally();
  const grpcc = grpcClient(server);
  const checking = checker(server, files, tally, Math.ceil(n / 10));
  const http = httpTemplates(files);
  const grpcs = grpcTemplates(files);
  await pool(n, async () => {
    if (rng.chance(0.55)) {
      await sendHttp(server.httpUrl, httpCase(rng, http), tally);
      return;
    }
    const [rpc, template] = rng.pick(grpcs);
    await sendGrpc(grpcc, rng, rpc, template, tally, { rawChance: 0.1 });
  });
  // A mutated unregister-all comes rarely: do it for sure, in both protocols, while the checker may still run.
  await sendHttp(
    server.httpUrl,
    { method: 'POST', path: `${R}/unregister`, headers: {}, what: 'unregister all' },
    tally,
  );
  await checking;
  await sendGrpc(grpcc, rng, 'SystemSharedMemoryUnregister', {}, tally, { mutations: 0, rawChance: 0 });
  await sendHttp(
    server.httpUrl,
    { method: 'POST', path: `${R}/unregister`, headers: {}, what: 'unregister all' },
    tally,
  );
  const status = await fetch(`${server.httpUrl}${R}/status`);
  const left = (await status.json()) as unknown[];
  if (left.length !== 0) tally.failures.push(`regions left after unregister-all: ${JSON.stringify(left)}`);
  grpcc.client.close();
  return tally;
}
