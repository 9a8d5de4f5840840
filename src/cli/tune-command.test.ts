import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseTuneArgs, runTuneCommand } from './tune-command.js';

describe('nereid tune flags', () => {
  it('reads the model folder, the search, objective, constraints and outputs', () => {
    const o = parseTuneArgs([
      '--model-repository',
      '/r',
      '--model',
      'm',
      '--mode',
      'exhaustive',
      '--objective',
      'latency',
      '--concurrency',
      '1,8,64',
      '--latency-budget-ms',
      '5',
      '--min-throughput',
      '100',
      '--time-budget',
      '30',
      '--shape',
      'ids:128',
      '--kind',
      'cpu,gpu',
      '--gpus',
      '0,1',
      '--output',
      'out',
    ]);
    assert.equal(o.modelDir, '/r/m');
    assert.equal(o.mode, 'exhaustive');
    assert.equal(o.objective, 'latency');
    assert.deepEqual(o.concurrency, [1, 8, 64]);
    assert.deepEqual(o.constraints, { latencyBudgetMs: 5, minThroughput: 100, maxGpuMemoryMb: undefined });
    assert.equal(o.timeBudgetS, 30);
    assert.deepEqual([...o.shapes], [['ids', [128]]]);
    assert.deepEqual(o.kinds, ['KIND_CPU', 'KIND_GPU']);
    assert.deepEqual(o.gpus, [0, 1]);
    assert.equal(o.write, false);
    assert.deepEqual(parseTuneArgs(['dir']).concurrency, [], 'no --concurrency: the sweep');
  });

  it('refuses bad usage as INVALID_ARG with what to do', async () => {
    const bad: [string[], RegExp][] = [
      [[], /'tune' needs MODEL_DIR or --model-repository R --model NAME/],
      [['d', '--objective', 'speed'], /--objective 'speed': expected one of throughput, latency/],
      [['d', '--concurrency', '0,2'], /--concurrency '0,2': expected a comma-separated list of integers/],
      [['d', '--time-budget=-1'], /--time-budget '-1': expected a positive number/],
      [['d', '--frobnicate'], /tune: Unknown option '--frobnicate'.*nereid tune --help/],
      [['a', 'b'], /'tune' takes one model folder/],
    ];
    for (const [args, message] of bad) {
      assert.throws(
        () => parseTuneArgs(args),
        (err: Error & { code?: string }) => {
          assert.equal(err.code, 'INVALID_ARG', args.join(' '));
          assert.match(err.message, message);
          return true;
        },
      );
    }
    await assert.rejects(runTuneCommand(['d', '--url', 'http://x', '--write']), /--write .* cannot be used with --url/);
  });
});
