import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { crc32, deflateRawSync } from 'node:zlib';

/**
 * Test doubles of onnxruntime-gpu's wheel, for this machine has neither the 250 MB wheel nor a GPU: a zip with the
 * wheel's member names, and provider libraries built here with the C compiler that need stand-in CUDA libraries,
 * so the loader's real answer (found / not found) is what the tests see.
 */

export interface ZipMember {
  name: string;
  data: Buffer;
  /** 8 deflate (default) or 0 stored. */
  method?: 0 | 8;
}

/** Writes a plain zip archive (PKWARE APPNOTE: local headers, central directory, end record). */
export function writeZip(path: string, members: readonly ZipMember[], corrupt?: string): void {
  const parts: Buffer[] = [];
  const central: Buffer[] = [];
  let offset = 0;
  for (const m of members) {
    const method = m.method ?? 8;
    const body = method === 8 ? deflateRawSync(m.data) : m.data;
    const name = Buffer.from(m.name, 'utf8');
    // `corrupt` names a member whose recorded CRC is wrong, as a damaged download would read.
    const crc = (crc32(m.data) ^ (m.name === corrupt ? 1 : 0)) >>> 0;
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(method, 8);
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(body.length, 18);
    local.writeUInt32LE(m.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    const cd = Buffer.alloc(46);
    cd.writeUInt32LE(0x02014b50, 0);
    cd.writeUInt16LE(20, 4);
    cd.writeUInt16LE(20, 6);
    cd.writeUInt16LE(method, 10);
    cd.writeUInt32LE(crc, 16);
    cd.writeUInt32LE(body.length, 20);
    cd.writeUInt32LE(m.data.length, 24);
    cd.writeUInt16LE(name.length, 28);
    cd.writeUInt32LE(offset, 42);
    parts.push(local, name, body);
    central.push(cd, name);
    offset += local.length + name.length + body.length;
  }
  const cdBytes = Buffer.concat(central);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(members.length, 8);
  end.writeUInt16LE(members.length, 10);
  end.writeUInt32LE(cdBytes.length, 12);
  end.writeUInt32LE(offset, 16);
  writeFileSync(path, Buffer.concat([...parts, cdBytes, end]));
}

/** The members of a wheel double: dist-info plus the given files under onnxruntime/capi/. */
export function wheelMembers(version: string, libraries: Record<string, Buffer>): ZipMember[] {
  const dist = `onnxruntime_gpu-${version}.dist-info`;
  return [
    { name: 'onnxruntime/__init__.py', data: Buffer.from('# test double\n') },
    ...Object.entries(libraries).map(([file, data]) => ({ name: `onnxruntime/capi/${file}`, data })),
    {
      name: `${dist}/METADATA`,
      data: Buffer.from(`Metadata-Version: 2.1\nName: onnxruntime-gpu\nVersion: ${version}\n`),
    },
    { name: `${dist}/WHEEL`, data: Buffer.from('Wheel-Version: 1.0\nTag: cp312-cp312-manylinux_2_28_x86_64\n') },
  ];
}

function cc(args: string[]): boolean {
  const r = spawnSync('cc', args, { encoding: 'utf8' });
  return !r.error && r.status === 0;
}

/** Provider library doubles, and the folder of stand-in CUDA libraries they need. */
export interface ProviderDoubles {
  shared: string;
  cuda: string;
  tensorrt: string;
  /** Holds libcudnn.so.9 and libcublas.so.13 stand-ins (not on the loader's path unless a test puts it there). */
  cudaLibDir: string;
}

/**
 * Builds, in `dir`, a bridge library, a CUDA provider needing `libcudnn.so.9` and `libcublas.so.13`, and a
 * TensorRT provider needing `libnvinfer.so.10` (never built, so always missing). Undefined without a C compiler.
 */
export function buildProviderDoubles(dir: string): ProviderDoubles | undefined {
  const src = join(dir, 'src');
  const out = join(dir, 'built');
  const cudaLibDir = join(dir, 'site-packages', 'nvidia', 'cu13', 'lib');
  for (const d of [src, out, cudaLibDir]) mkdirSync(d, { recursive: true });
  const c = (name: string, code: string): string => {
    const p = join(src, name);
    writeFileSync(p, code);
    return p;
  };
  const lib = (file: string, source: string, extra: string[] = []): string => {
    const p = join(file.startsWith('libonnx') ? out : cudaLibDir, file);
    if (!cc(['-shared', '-fPIC', '-o', p, `-Wl,-soname,${file}`, source, ...extra])) throw new Error(`cc ${file}`);
    return p;
  };
  if (!cc(['--version'])) return undefined;
  lib('libcudnn.so.9', c('cudnn.c', 'int cudnnGetVersion(void) { return 91000; }\n'));
  lib('libcublas.so.13', c('cublas.c', 'int cublasVersion(void) { return 13; }\n'));
  // A TensorRT stand-in is linked against, then left where no loader looks.
  const trtDir = join(dir, 'trt');
  mkdirSync(trtDir, { recursive: true });
  if (
    !cc([
      '-shared',
      '-fPIC',
      '-o',
      join(trtDir, 'libnvinfer.so.10'),
      '-Wl,-soname,libnvinfer.so.10',
      c('nvinfer.c', 'int nvinfer(void) { return 10; }\n'),
    ])
  ) {
    throw new Error('cc libnvinfer');
  }
  const shared = lib(
    'libonnxruntime_providers_shared.so',
    c('shared.c', 'void *Provider_GetHost(void) { return 0; }\n'),
  );
  const cuda = lib(
    'libonnxruntime_providers_cuda.so',
    c(
      'cuda.c',
      'int cudnnGetVersion(void); int cublasVersion(void); void *Provider_GetHost(void);\nint GetProvider(void) { return cudnnGetVersion() + cublasVersion() + (Provider_GetHost() != 0); }\n',
    ),
    [
      `-L${cudaLibDir}`,
      '-l:libcudnn.so.9',
      '-l:libcublas.so.13',
      `-L${out}`,
      '-l:libonnxruntime_providers_shared.so',
      '-Wl,-rpath,$ORIGIN',
    ],
  );
  const tensorrt = lib(
    'libonnxruntime_providers_tensorrt.so',
    c('trt.c', 'int nvinfer(void);\nint GetProvider(void) { return nvinfer(); }\n'),
    [`-L${trtDir}`, '-l:libnvinfer.so.10', '-Wl,-rpath,$ORIGIN'],
  );
  return { shared, cuda, tensorrt, cudaLibDir };
}
