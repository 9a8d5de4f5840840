import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { cpuUtilization, parseMeminfo, parseProcStat, readCpuTimes, readMemoryUsage } from './proc.js';

const STAT = `cpu  100 20 30 800 50 5 5 10 7 3
cpu0 50 10 15 400 25 2 3 5 3 1
intr 12345
ctxt 678
`;

const MEMINFO = `MemTotal:       16384000 kB
MemFree:         1000000 kB
MemAvailable:    4096000 kB
Buffers:          200000 kB
`;

describe('parseProcStat', () => {
  it('sums the aggregate cpu line, idle counting iowait, guest time left out', () => {
    assert.deepEqual(parseProcStat(STAT), { idle: 850, total: 1020 });
  });

  it('accepts the four-field line of old kernels', () => {
    assert.deepEqual(parseProcStat('cpu 1 2 3 4\n'), { idle: 4, total: 10 });
  });

  it('BAD INPUT - returns undefined without an aggregate line or with non-numbers', () => {
    assert.equal(parseProcStat('cpu0 1 2 3 4\n'), undefined);
    assert.equal(parseProcStat('cpu 1 2 x 4\n'), undefined);
    assert.equal(parseProcStat('cpu 1 2\n'), undefined);
    assert.equal(parseProcStat(''), undefined);
  });
});

describe('cpuUtilization', () => {
  it('is the busy share of the time between two samples', () => {
    assert.equal(cpuUtilization({ idle: 100, total: 200 }, { idle: 150, total: 400 }), 0.75);
  });

  it('is 0 when no time passed, and stays within [0, 1] on odd counters', () => {
    assert.equal(cpuUtilization({ idle: 1, total: 2 }, { idle: 1, total: 2 }), 0);
    assert.equal(cpuUtilization({ idle: 0, total: 0 }, { idle: 20, total: 10 }), 0);
    assert.equal(cpuUtilization({ idle: 10, total: 10 }, { idle: 5, total: 20 }), 1);
  });
});

describe('parseMeminfo', () => {
  it('reports bytes, used = total - available', () => {
    assert.deepEqual(parseMeminfo(MEMINFO), { totalBytes: 16384000 * 1024, usedBytes: (16384000 - 4096000) * 1024 });
  });

  it('BAD INPUT - returns undefined without MemAvailable (kernels before 3.14) or MemTotal', () => {
    assert.equal(parseMeminfo('MemTotal: 10 kB\nMemFree: 5 kB\n'), undefined);
    assert.equal(parseMeminfo('MemAvailable: 10 kB\n'), undefined);
  });
});

describe('/proc readers', () => {
  it('return undefined where the file does not exist', async () => {
    assert.equal(await readCpuTimes('/nonexistent/stat'), undefined);
    assert.equal(await readMemoryUsage('/nonexistent/meminfo'), undefined);
  });

  it('read this host (Linux)', { skip: process.platform !== 'linux' }, async () => {
    const cpu = await readCpuTimes();
    const mem = await readMemoryUsage();
    assert.ok(cpu && cpu.total > 0 && cpu.idle <= cpu.total);
    assert.ok(mem && mem.totalBytes > 0 && mem.usedBytes > 0 && mem.usedBytes <= mem.totalBytes);
  });
});
