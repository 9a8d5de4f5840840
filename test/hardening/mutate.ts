/**
 * Seeded mutation of well-formed requests into malformed ones, for the hardening fuzz run. Deterministic for a seed
 * (mulberry32), so a failure is replayed with NEREID_FUZZ_SEED.
 */

export class Rng {
  #s: number;
  constructor(seed: number) {
    this.#s = seed >>> 0;
  }
  next(): number {
    let t = (this.#s = (this.#s + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  pick<T>(xs: readonly T[]): T {
    return xs[this.int(xs.length)];
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
}

const deep = (n: number): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = [v];
  return v;
};

/** Values that break assumptions: types, signs, sizes, precision, nesting, encodings. */
export const WEIRD: readonly unknown[] = [
  null,
  true,
  false,
  0,
  -1,
  1.5,
  -0.5,
  2 ** 31,
  2 ** 32,
  2 ** 53,
  2 ** 64,
  -(2 ** 63),
  1e308,
  '',
  'x',
  '-1',
  '18446744073709551615',
  'INT32',
  'BYTES',
  'FP16',
  '\u0000',
  '🙂\uD800',
  '../../../etc/passwd',
  '/dev/shm/x',
  'triton_python_backend_shm_region_x',
  'a'.repeat(300),
  [],
  {},
  [[[]]],
  { a: { b: [] } },
  [1, 'a', null],
  deep(150),
];

/** Every path to a value inside `v` (object keys and array indices). */
function paths(
  v: unknown,
  prefix: (string | number)[] = [],
  out: (string | number)[][] = [],
  depth = 0,
): (string | number)[][] {
  out.push(prefix);
  if (depth > 8 || v === null || typeof v !== 'object' || ArrayBuffer.isView(v)) return out;
  const entries = Array.isArray(v) ? v.slice(0, 24).map((x, i) => [i, x] as const) : Object.entries(v);
  for (const [k, x] of entries) paths(x, [...prefix, k], out, depth + 1);
  return out;
}

function getAt(root: unknown, path: (string | number)[]): unknown {
  let v = root;
  for (const k of path) v = (v as Record<string | number, unknown>)[k];
  return v;
}

const RANDOM_KEYS = [
  'data',
  'shape',
  'datatype',
  'name',
  'parameters',
  'binary_data_size',
  'binary_data',
  'classification',
  'shared_memory_region',
  'shared_memory_offset',
  'shared_memory_byte_size',
  'triton_x',
  'sequence_id',
  'priority',
  'timeout',
  'ready',
  'config',
  'file:1/model.onnx',
  'file:../x',
  'key',
  'byte_size',
  'offset',
  'log_verbose_level',
  'trace_level',
  '__proto__',
];

/** One structural mutation of a JSON-able value (returns a new value; the input is not modified). */
export function mutateValue(rng: Rng, value: unknown): unknown {
  const root = structuredClone(value) as unknown;
  const all = paths(root);
  const path = rng.pick(all);
  const weird = (): unknown => structuredClone(rng.pick(WEIRD));
  if (path.length === 0) return rng.chance(0.5) ? weird() : [root];
  const parent = getAt(root, path.slice(0, -1)) as Record<string | number, unknown>;
  const key = path[path.length - 1];
  switch (rng.int(6)) {
    case 0:
      if (Array.isArray(parent)) parent.splice(key as number, 1);
      else delete parent[key];
      break;
    case 1:
      if (Array.isArray(parent)) parent.push(structuredClone(parent[key as number]));
      else parent[rng.pick(RANDOM_KEYS)] = weird();
      break;
    case 2: {
      const v = parent[key];
      parent[key] = typeof v === 'number' ? rng.pick([0, -v, v * 2 ** 20, v + 0.5, 2 ** 32 + v]) : weird();
      break;
    }
    case 3:
      parent[key] = [parent[key], weird()];
      break;
    default:
      parent[key] = weird();
  }
  return root;
}

/** Byte-level damage to a text or buffer: truncation, bit flips, inserted bytes. */
export function mutateBytes(rng: Rng, bytes: Uint8Array): Uint8Array {
  const b = Buffer.from(bytes);
  switch (rng.int(4)) {
    case 0:
      return b.subarray(0, rng.int(b.length + 1));
    case 1: {
      for (let i = 0; i < 1 + rng.int(4); i++) if (b.length > 0) b[rng.int(b.length)] ^= 1 << rng.int(8);
      return b;
    }
    case 2: {
      const at = rng.int(b.length + 1);
      const junk = Buffer.from(Array.from({ length: 1 + rng.int(8) }, () => rng.int(256)));
      return Buffer.concat([b.subarray(0, at), junk, b.subarray(at)]);
    }
    default:
      return Buffer.from(Array.from({ length: rng.int(64) }, () => rng.int(256)));
  }
}
