import { callUnary } from '../helpers/grpc.js';
import { count, grpcClient, newTally, pool, sendGrpc, sendHttp, type Tally } from './fuzz-harness.js';
import { httpCase } from './fuzz-http-cases.js';
import type { Rng } from './mutate.js';
import type { ServerProcess } from './server-process.js';

/**
 * Sequences under mutation: requests to `acc` (an accumulator with implicit state, fuzz-repo.ts) whose
 * sequence_id / sequence_start / sequence_end parameters and inputs are mutated, over HTTP and gRPC, from a small
 * pool of ids so that starts, middles and ends of the same sequences meet (and some are abandoned for the idle
 * timeout to reap). Well-formed sequences with ids of their own run at the same time: every answer they get is the
 * running sum of their own inputs. A step refused because the sequence was reaped under load starts it again; a
 * 200 with another sequence's sum is a failure.
 */

const FUZZ_IDS = 8;
const fuzzId = (rng: Rng): number => 7_000_001 + rng.int(FUZZ_IDS);
const FLAGS: [boolean, boolean][] = [
  [true, false],
  [false, false],
  [false, true],
  [true, true],
];

function httpTemplate(rng: Rng): [string, string, unknown] {
  const [start, end] = rng.pick(FLAGS);
  const id = rng.chance(0.2) ? `fz-${rng.int(FUZZ_IDS)}` : fuzzId(rng);
  return [
    'POST',
    '/v2/models/acc/infer',
    {
      inputs: [{ name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [1 + rng.int(9)] }],
      parameters: { sequence_id: id, sequence_start: start, sequence_end: end },
    },
  ];
}

function grpcTemplate(id: string | number, start: boolean, end: boolean, value: number): object {
  return {
    model_name: 'acc',
    inputs: [{ name: 'INPUT', datatype: 'INT32', shape: ['1', '1'], contents: { int_contents: [value] } }],
    parameters: {
      sequence_id: typeof id === 'string' ? { string_param: id } : { int64_param: String(id) },
      sequence_start: { bool_param: start },
      sequence_end: { bool_param: end },
    },
  };
}

/** One well-formed sequence of `steps` steps, over HTTP or gRPC; every answer must be its own running sum. */
async function validSequence(
  server: ServerProcess,
  grpcc: ReturnType<typeof grpcClient>,
  tally: Tally,
  id: number,
  steps: number,
  overGrpc: boolean,
): Promise<void> {
  let sum = 0;
  let started = false;
  for (let step = 0; step < steps; step++) {
    const value = 1 + ((id * 7 + step * 13) % 50);
    const start = !started;
    const end = step === steps - 1;
    let status: number | string;
    let out: number | undefined;
    tally.sent++;
    if (overGrpc) {
      try {
        const r = await callUnary<{ raw_output_contents: Buffer[] }>(
          grpcc.client,
          'ModelInfer',
          grpcTemplate(id, start, end, value),
          { deadline: Date.now() + 20_000 },
        );
        status = 200;
        out = r.raw_output_contents[0].readInt32LE(0);
      } catch (err) {
        status = (err as { code: number }).code === 3 ? 400 : `gRPC ${(err as Error).message}`;
      }
    } else {
      const body = {
        inputs: [{ name: 'INPUT', shape: [1, 1], datatype: 'INT32', data: [value] }],
        parameters: { sequence_id: id, sequence_start: start, sequence_end: end },
      };
      const res = await sendHttp(
        server.httpUrl,
        {
          method: 'POST',
          path: '/v2/models/acc/infer',
          headers: {},
          body: Buffer.from(JSON.stringify(body)),
          what: 'valid',
        },
        tally,
      );
      status = res?.status ?? 'no answer';
      if (status === 200)
        out = (JSON.parse(res!.body.toString()) as { outputs: { data: number[] }[] }).outputs[0].data[0];
    }
    if (status === 200) {
      sum = start ? value : sum + value;
      started = true;
      count(tally, 'checked');
      if (out !== sum) tally.failures.push(`sequence ${id} step ${step}: expected ${sum}, got ${out}`);
    } else if (status === 400 && !start) {
      // Reaped while the machine was slow (idle past max_sequence_idle_microseconds): start again.
      started = false;
    } else {
      tally.failures.push(`sequence ${id} step ${step}: ${status}`);
    }
  }
}

export async function fuzzSequences(server: ServerProcess, rng: Rng, n: number): Promise<Tally> {
  const tally = newTally();
  const grpcc = grpcClient(server);
  const validIds = Array.from({ length: 6 }, (_, i) => 9_100_001 + i);
  const valid = Promise.all(validIds.map((id, i) => validSequence(server, grpcc, tally, id, 5, i % 2 === 1)));
  await pool(
    n,
    async () => {
      // A third are sent as they are: sequences that start, continue, end and are abandoned, around the mutated.
      const plain = rng.chance(0.33);
      if (rng.chance(0.5)) {
        const [method, path, body] = httpTemplate(rng);
        const c = plain
          ? {
              method,
              path,
              headers: {},
              body: Buffer.from(JSON.stringify(body)),
              what: `plain ${JSON.stringify(body)}`,
            }
          : httpCase(rng, [[method, path, body]]);
        await sendHttp(server.httpUrl, c, tally);
        return;
      }
      const [start, end] = rng.pick(FLAGS);
      const id = rng.chance(0.2) ? `fz-${rng.int(FUZZ_IDS)}` : fuzzId(rng);
      await sendGrpc(grpcc, rng, 'ModelInfer', grpcTemplate(id, start, end, 1 + rng.int(9)), tally, {
        rawChance: plain ? 0 : 0.1,
        mutations: plain ? 0 : undefined,
      });
    },
    8,
  );
  await valid;
  grpcc.client.close();
  return tally;
}
