import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { writeZip } from '../../../test/helpers/gpu-wheel.js';
import { extractZipEntry, listZip } from './zip.js';

const dir = mkdtempSync(join(tmpdir(), 'nereid-zip-'));
after(() => rmSync(dir, { recursive: true, force: true }));

describe('zip reader', () => {
  const big = Buffer.alloc(3 * 1024 * 1024);
  for (let i = 0; i < big.length; i++) big[i] = (i * 7919) % 251;

  it('lists members and extracts deflated, stored and empty ones byte for byte', async () => {
    const z = join(dir, 'a.zip');
    writeZip(z, [
      { name: 'dir/big.so', data: big },
      { name: 'stored.txt', data: Buffer.from('plain'), method: 0 },
      { name: 'empty', data: Buffer.alloc(0), method: 0 },
    ]);
    const entries = await listZip(z);
    assert.deepEqual(
      entries.map((e) => [e.name, e.method, e.size]),
      [
        ['dir/big.so', 8, big.length],
        ['stored.txt', 0, 5],
        ['empty', 0, 0],
      ],
    );
    for (const [e, want] of [
      [entries[0], big],
      [entries[1], Buffer.from('plain')],
      [entries[2], Buffer.alloc(0)],
    ] as const) {
      const out = join(dir, `out-${e.name.replace('/', '_')}`);
      await extractZipEntry(z, e, out);
      assert.deepEqual(readFileSync(out), want);
    }
  });

  it('BAD CALL - refuses a member whose CRC does not match', async () => {
    const z = join(dir, 'crc.zip');
    writeZip(z, [{ name: 'x', data: Buffer.from('hello') }], 'x');
    const [e] = await listZip(z);
    await assert.rejects(extractZipEntry(z, e, join(dir, 'x')), /member 'x' is corrupt/);
  });

  it('BAD CALL - refuses a truncated archive and a file that is not a zip', async () => {
    const z = join(dir, 'cut.zip');
    writeZip(z, [{ name: 'big', data: big }]);
    const whole = readFileSync(z);
    // Keep the end record but lose the middle: the central directory now points past the end.
    writeFileSync(z, Buffer.concat([whole.subarray(0, 1000), whole.subarray(whole.length - 22)]));
    await assert.rejects(listZip(z), /central directory lies past the end of the file/);
    const t = join(dir, 'tiny');
    writeFileSync(t, 'PK');
    await assert.rejects(listZip(t), /too short/);
    const y = join(dir, 'junk');
    writeFileSync(y, Buffer.alloc(100, 1));
    await assert.rejects(listZip(y), /no end-of-central-directory record/);
  });

  it('BAD CALL - refuses zip64 archives by name', async () => {
    const z = join(dir, 'z64.zip');
    writeZip(z, [{ name: 'a', data: Buffer.from('a') }]);
    const b = readFileSync(z);
    b.writeUInt32LE(0xffffffff, b.length - 22 + 16);
    writeFileSync(z, b);
    await assert.rejects(listZip(z), /zip64 archives are not supported/);
  });

  it('BAD CALL - a member cut short inside the data fails to inflate', async () => {
    const z = join(dir, 'short.zip');
    writeZip(z, [{ name: 'big', data: big }]);
    const [e] = await listZip(z);
    truncateSync(z, e.localOffset + 30 + 3 + 100);
    await assert.rejects(extractZipEntry(z, e, join(dir, 'short-out')), /member 'big' (cannot be read|is corrupt)/);
  });
});
