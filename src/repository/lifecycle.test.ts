import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setImmediate as turn } from 'node:timers/promises';
import type { Backend, Instance, ModelHandle } from '../backends/contract.js';
import { BackendRegistry } from '../backends/registry.js';
import { parseModelConfigOrThrow } from '../config/index.js';
import { ALL_DATATYPES } from '../core/datatypes.js';
import { CancelledError, InvalidArgError, NereidError } from '../core/errors.js';
import { noopLogger } from '../core/logger.js';
import { ModelLifecycle } from './lifecycle.js';
import { LoadSlots } from './load-slots.js';
import { emptyModel, type Model } from './model.js';

/**
 * ModelLifecycle on its own, table-driven: each row is a sequence of operations on one model, asked for in one
 * turn unless a step waits, and what each answered, what the model is afterwards, and which loads the backend
 * saw start and unload. The backend is a test double whose loads wait at a gate (a load in flight) until the
 * row settles, and whose load of a source tagged `fail...` fails. No clock: steps wait for events.
 */

const dir = mkdtempSync(join(tmpdir(), 'nereid-lifecycle-'));
mkdirSync(join(dir, '1'));
after(() => rmSync(dir, { recursive: true, force: true }));

/** A load source: the same config but for its tag, so equal tags are the same source. */
const source = (tag: string) => ({
  dir,
  config: parseModelConfigOrThrow(
    `name: "m" backend: "gated" max_batch_size: 0
     input [{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }]
     output [{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }]
     parameters { key: "tag" value { string_value: "${tag}" } }`,
    'm/config.pbtxt',
  ),
});

const instance = (name: string): Instance => ({
  name,
  execute: async () => ({ computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 }),
  destroy: async () => {},
  died: new Promise<Error>(() => {}),
});

/** Backend double: records the tag of each load begun and each handle unloaded; loads wait at `gates`. */
class GatedBackend implements Backend {
  readonly name = 'gated';
  readonly platforms = [];
  readonly defaultModelFilename = '';
  readonly datatypes = ALL_DATATYPES;
  readonly sections = [];
  readonly kinds = ['KIND_CPU' as const];
  readonly loads: string[] = [];
  readonly unloads: string[] = [];
  readonly gates: (() => void)[] = [];

  async autoComplete(config: Parameters<Backend['autoComplete']>[0]) {
    return config;
  }

  async load(ctx: Parameters<Backend['load']>[0], signal?: AbortSignal): Promise<ModelHandle> {
    const tag = ctx.config.parameters?.tag?.string_value ?? '';
    this.loads.push(tag);
    await new Promise<void>((resolve, reject) => {
      this.gates.push(resolve);
      signal?.addEventListener('abort', () => reject(new CancelledError(`load of ${tag} cancelled`)), { once: true });
    });
    if (tag.startsWith('fail')) throw new InvalidArgError(`gated: cannot load '${tag}'`);
    return {
      createInstance: async (spec) => instance(spec.name),
      unload: async () => {
        this.unloads.push(tag);
      },
    };
  }
}

/** `READY a`, `LOADING`, `UNAVAILABLE fail`: a model's state and the tag it was loaded from. */
function describeModel(m: Model): string {
  const tag = m.spec?.config.parameters?.tag?.string_value;
  return tag === undefined ? m.state : `${m.state} ${tag}`;
}

/**
 * Steps: `load T` (a caller without a signal), `load T cancelled` (a caller that cancels at once), `unload`,
 * `close`: operations, answered in `results` in this order (`ok` for unload and close, the error code for a
 * rejection). `started`: waits until a load is in flight in the backend. `settle`: lets every load in flight
 * finish and waits for the operations so far. `current X`: the model is X at that point.
 */
interface Row {
  title: string;
  steps: string[];
  results: string[];
  current: string;
  reason?: RegExp;
  /** Tags of the loads the backend began, and of the handles it unloaded, in order. */
  loads: string[];
  unloads: string[];
}

const ROWS: Row[] = [
  {
    title: 'a first load is LOADING, then READY',
    steps: ['load a', 'started', 'current LOADING', 'settle'],
    results: ['READY a'],
    current: 'READY a',
    loads: ['a'],
    unloads: [],
  },
  {
    title: 'ten concurrent loads of one source share one load',
    steps: [...Array<string>(10).fill('load a'), 'settle'],
    results: Array<string>(10).fill('READY a'),
    current: 'READY a',
    loads: ['a'],
    unloads: [],
  },
  {
    title: 'loads of two sources run one after the other, in the order asked; the first retires',
    steps: ['load a', 'load b', 'settle'],
    results: ['READY a', 'READY b'],
    current: 'READY b',
    loads: ['a', 'b'],
    unloads: ['a'],
  },
  {
    title: 'a load asked for after an unload is not shared with the one before it',
    steps: ['load a', 'unload', 'load a', 'settle'],
    results: ['CANCELLED', 'ok', 'READY a'],
    current: 'READY a',
    loads: ['a'],
    unloads: [],
  },
  {
    title: 'an unload cancels the load in flight; the model stays unloaded',
    steps: ['load a', 'started', 'unload', 'settle'],
    results: ['CANCELLED', 'ok'],
    current: 'UNAVAILABLE',
    reason: /^unloaded$/,
    loads: ['a'],
    unloads: [],
  },
  {
    title: 'an unload of a READY model retires it',
    steps: ['load a', 'settle', 'unload', 'settle'],
    results: ['READY a', 'ok'],
    current: 'UNAVAILABLE',
    reason: /^unloaded$/,
    loads: ['a'],
    unloads: ['a'],
  },
  {
    title: 'a reload is atomic: the serving load serves until the new one is READY',
    steps: ['load a', 'settle', 'load b', 'started', 'current READY a', 'settle'],
    results: ['READY a', 'READY b'],
    current: 'READY b',
    loads: ['a', 'b'],
    unloads: ['a'],
  },
  {
    title: 'a failed reload keeps the previous load serving, with the reason',
    steps: ['load a', 'settle', 'load fail', 'settle'],
    results: ['READY a', 'UNAVAILABLE fail'],
    current: 'READY a',
    reason: /^reload failed, still serving the previous load: .*gated: cannot load 'fail'/,
    loads: ['a', 'fail'],
    unloads: [],
  },
  {
    title: 'a failed first load leaves the model UNAVAILABLE with the reason',
    steps: ['load fail', 'settle'],
    results: ['UNAVAILABLE fail'],
    current: 'UNAVAILABLE fail',
    reason: /gated: cannot load 'fail'/,
    loads: ['fail'],
    unloads: [],
  },
  {
    title: 'a caller that cancels gets CANCELLED; the load it shared goes on for the others',
    steps: ['load a', 'load a cancelled', 'settle'],
    results: ['READY a', 'CANCELLED'],
    current: 'READY a',
    loads: ['a'],
    unloads: [],
  },
  {
    title: 'when every caller of a load cancelled, the load itself is cancelled',
    steps: ['load a cancelled', 'load a cancelled', 'settle'],
    results: ['CANCELLED', 'CANCELLED'],
    current: 'UNAVAILABLE',
    loads: [],
    unloads: [],
  },
  {
    title: 'close: loads pending and loads after it answer UNAVAILABLE (shutting down); what serves retires',
    steps: ['load a', 'settle', 'load b', 'close', 'load c', 'settle'],
    results: ['READY a', 'UNAVAILABLE', 'ok', 'UNAVAILABLE'],
    current: 'READY a',
    loads: ['a'],
    unloads: ['a'],
  },
];

async function play(row: Row) {
  const backend = new GatedBackend();
  let closed = false;
  const replaced: string[] = [];
  const lifecycle = new ModelLifecycle('m', emptyModel('m', dir, 'UNAVAILABLE', ''), {
    registry: new BackendRegistry([backend]),
    backendConfig: new Map(),
    loadSlots: new LoadSlots(),
    autoComplete: true,
    logger: noopLogger,
    responseCache: false,
    runStep: () => Promise.reject(new Error('no ensembles here')),
    dependency: async () => undefined,
    isClosed: () => closed,
    onReplaced: (m) => replaced.push(`${describeModel(m)} (unloaded: ${backend.unloads.join(',')})`),
  });
  const results: Promise<string>[] = [];
  const answer = (p: Promise<Model | void>) =>
    results.push(
      p.then(
        (m) => (m ? describeModel(m) : 'ok'),
        (e: unknown) => NereidError.from(e).code,
      ),
    );
  /** Waits for `done`, event-loop turn by turn (loads do file I/O); a row that never gets there fails. */
  const until = async (done: () => boolean, what: string) => {
    for (let i = 0; i < 10_000 && !done(); i++) await turn();
    assert.ok(done(), `${row.title}: never ${what}`);
  };
  for (const step of row.steps) {
    const [op, tag, how] = step.split(' ');
    if (op === 'load' && how === 'cancelled') {
      const ac = new AbortController();
      answer(lifecycle.load(source(tag), ac.signal));
      ac.abort();
    } else if (op === 'load') answer(lifecycle.load(source(tag)));
    else if (op === 'unload') answer(lifecycle.unload());
    else if (op === 'close') {
      closed = true;
      answer(lifecycle.close());
    } else if (op === 'started') await until(() => backend.gates.length > 0, 'started a load');
    else if (op === 'current') assert.equal(describeModel(lifecycle.current), step.slice('current '.length), step);
    else if (op === 'settle') {
      let settled = 0;
      for (const r of results) void r.then(() => settled++);
      await until(() => {
        for (const open of backend.gates.splice(0)) open();
        return settled === results.length;
      }, 'settled');
      // The replaced load retires in the background: a few more turns for it.
      for (let i = 0; i < 100; i++) await turn();
    } else throw new Error(`unknown step '${step}'`);
  }
  return { answers: await Promise.all(results), lifecycle, backend, replaced };
}

describe('ModelLifecycle', () => {
  for (const row of ROWS) {
    it(row.title, async () => {
      const { answers, lifecycle, backend } = await play(row);
      assert.deepEqual(answers, row.results, 'what each operation answered');
      assert.equal(describeModel(lifecycle.current), row.current, 'the model afterwards');
      if (row.reason) assert.match(lifecycle.current.reason, row.reason);
      assert.deepEqual(backend.loads, row.loads, 'the loads the backend began');
      assert.deepEqual(backend.unloads, row.unloads, 'the handles the backend unloaded');
    });
  }

  it('a replaced load is reported before it retires (its cache entries go before a request reaches the new one)', async () => {
    const { replaced } = await play({
      title: 'reload',
      steps: ['load a', 'settle', 'load b', 'settle'],
      results: [],
      current: '',
      loads: [],
      unloads: [],
    });
    // The initial (empty) model, then `a`, each reported while nothing of it was unloaded yet.
    assert.deepEqual(replaced, ['UNAVAILABLE (unloaded: )', 'READY a (unloaded: )']);
  });
});
