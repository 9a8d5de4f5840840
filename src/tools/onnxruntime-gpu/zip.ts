import { createReadStream, createWriteStream } from 'node:fs';
import { open, type FileHandle } from 'node:fs/promises';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as zlib from 'node:zlib';
import { UnavailableError } from '../../core/errors.js';

/**
 * A minimal reader of zip archives (a Python wheel is one), enough to list the members and stream a few of them out.
 *
 * Why our own: Node has inflate (zlib) but no zip reader; `unzip` is not installed everywhere and `python -m zipfile`
 * extracts every member (about 1 GB for onnxruntime-gpu) where three are needed, and setting up from a wheel must
 * work without Python. The format parts used are small and fixed (PKWARE APPNOTE 4.3: end of central directory,
 * central directory headers, local headers; methods stored and deflate). Zip64, encryption and multi-disk archives
 * are refused by name: wheels below 4 GiB never need them.
 */

/** One member of the archive, from its central directory header. */
export interface ZipEntry {
  name: string;
  /** 0 stored, 8 deflate. */
  method: number;
  crc32: number;
  compressedSize: number;
  size: number;
  /** Offset of the member's local header. */
  localOffset: number;
}

const EOCD_SIGNATURE = 0x06054b50;
const CENTRAL_SIGNATURE = 0x02014b50;
const LOCAL_SIGNATURE = 0x04034b50;
const EOCD_MIN = 22;
const MAX_COMMENT = 0xffff;

function bad(path: string, why: string): UnavailableError {
  return new UnavailableError(`'${path}' is not a readable wheel (zip): ${why}`);
}

async function readAt(fh: FileHandle, offset: number, length: number): Promise<Buffer> {
  const buf = Buffer.alloc(length);
  const { bytesRead } = await fh.read(buf, 0, length, offset);
  return buf.subarray(0, bytesRead);
}

/** Lists the archive's members from its central directory. Throws UnavailableError for anything not a plain zip. */
export async function listZip(path: string): Promise<ZipEntry[]> {
  const fh = await open(path, 'r');
  try {
    const { size } = await fh.stat();
    if (size < EOCD_MIN) throw bad(path, `${size} bytes is too short`);
    const tailLength = Math.min(size, EOCD_MIN + MAX_COMMENT);
    const tail = await readAt(fh, size - tailLength, tailLength);
    let at = -1;
    for (let i = tail.length - EOCD_MIN; i >= 0; i--) {
      if (tail.readUInt32LE(i) === EOCD_SIGNATURE) {
        at = i;
        break;
      }
    }
    if (at < 0) throw bad(path, 'no end-of-central-directory record');
    const disk = tail.readUInt16LE(at + 4);
    const count = tail.readUInt16LE(at + 10);
    const cdSize = tail.readUInt32LE(at + 12);
    const cdOffset = tail.readUInt32LE(at + 16);
    if (disk !== 0) throw bad(path, 'multi-disk archives are not supported');
    if (count === 0xffff || cdSize === 0xffffffff || cdOffset === 0xffffffff) {
      throw bad(path, 'zip64 archives are not supported');
    }
    if (cdOffset + cdSize > size) throw bad(path, 'the central directory lies past the end of the file (truncated?)');
    const cd = await readAt(fh, cdOffset, cdSize);
    const entries: ZipEntry[] = [];
    let p = 0;
    for (let i = 0; i < count; i++) {
      if (p + 46 > cd.length || cd.readUInt32LE(p) !== CENTRAL_SIGNATURE) {
        throw bad(path, `central directory entry ${i} is damaged`);
      }
      const flags = cd.readUInt16LE(p + 8);
      const nameLength = cd.readUInt16LE(p + 28);
      const name = cd.toString('utf8', p + 46, p + 46 + nameLength);
      if (flags & 1) throw bad(path, `member '${name}' is encrypted`);
      entries.push({
        name,
        method: cd.readUInt16LE(p + 10),
        crc32: cd.readUInt32LE(p + 16),
        compressedSize: cd.readUInt32LE(p + 20),
        size: cd.readUInt32LE(p + 24),
        localOffset: cd.readUInt32LE(p + 42),
      });
      p += 46 + nameLength + cd.readUInt16LE(p + 30) + cd.readUInt16LE(p + 32);
    }
    return entries;
  } finally {
    await fh.close();
  }
}

/** CRC-32 (IEEE): zlib's where Node has it (20.15+), else a table. */
const crc32: (data: Buffer, prev: number) => number =
  typeof (zlib as { crc32?: unknown }).crc32 === 'function'
    ? (zlib as unknown as { crc32: (d: Buffer, p: number) => number }).crc32
    : tableCrc32();

function tableCrc32(): (data: Buffer, prev: number) => number {
  const table = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0xedb88320 ^ (c >>> 1) : c >>> 1;
    table[n] = c >>> 0;
  }
  return (data, prev) => {
    let c = ~prev >>> 0;
    for (let i = 0; i < data.length; i++) c = table[(c ^ data[i]) & 0xff] ^ (c >>> 8);
    return ~c >>> 0;
  };
}

/**
 * Streams one member into `dest` (created or truncated), checking its size and CRC-32 against the central
 * directory, so a truncated or corrupted download never becomes a library file.
 */
export async function extractZipEntry(path: string, entry: ZipEntry, dest: string): Promise<void> {
  if (entry.method !== 0 && entry.method !== 8) {
    throw bad(path, `member '${entry.name}' uses compression method ${entry.method} (only stored and deflate)`);
  }
  const fh = await open(path, 'r');
  let dataStart: number;
  try {
    const local = await readAt(fh, entry.localOffset, 30);
    if (local.length < 30 || local.readUInt32LE(0) !== LOCAL_SIGNATURE) {
      throw bad(path, `the local header of '${entry.name}' is damaged`);
    }
    dataStart = entry.localOffset + 30 + local.readUInt16LE(26) + local.readUInt16LE(28);
  } finally {
    await fh.close();
  }
  let crc = 0;
  let written = 0;
  const check = new Transform({
    transform(chunk: Buffer, _enc, done) {
      crc = crc32(chunk, crc);
      written += chunk.length;
      done(null, chunk);
    },
  });
  const out = createWriteStream(dest);
  try {
    if (entry.compressedSize === 0) {
      // A stored empty member: there is no byte range to read (a zero-length range would read one byte).
      await pipeline(Readable.from([]), check, out);
    } else {
      const source = createReadStream(path, { start: dataStart, end: dataStart + entry.compressedSize - 1 });
      if (entry.method === 8) await pipeline(source, zlib.createInflateRaw(), check, out);
      else await pipeline(source, check, out);
    }
  } catch (err) {
    throw bad(path, `member '${entry.name}' cannot be read: ${(err as Error).message}`);
  }
  if (written !== entry.size || crc >>> 0 !== entry.crc32) {
    throw bad(path, `member '${entry.name}' is corrupt (size ${written} of ${entry.size}, CRC mismatch or truncated)`);
  }
}
