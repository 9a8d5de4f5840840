import { basename, join } from 'node:path';
import { Nvml, type NvmlUnavailable } from '../../native/nvml.js';
import { providerStatus } from './diagnose.js';
import { exists, onnxruntimeNode, providerDir } from './providers.js';
import { findPython } from './python.js';
import { report } from './report.js';

/** `nereid gpu check` options. */
export interface CheckOptions {
  /** The folder checked instead of onnxruntime-node's. */
  target?: string;
  /** The Python whose site-packages are searched for missing CUDA libraries. */
  python?: string;
  print: (line: string) => void;
  env?: NodeJS.ProcessEnv;
  /** How NVML is opened (tests pass a double). */
  openNvml?: () => Promise<Nvml | NvmlUnavailable>;
}

const GIB = 1024 ** 3;
const fixed = (n: number | undefined, digits: number, unit: string): string =>
  n === undefined ? 'n/a' : `${n.toFixed(digits)}${unit}`;

/**
 * Reports the driver and GPUs (NVML), onnxruntime-node, and the GPU provider libraries with what they miss.
 * Returns 0 when a GPU is visible and the CUDA provider is ready, else 1; the reasons are printed.
 */
export async function runCheck(opts: CheckOptions): Promise<number> {
  const { print } = opts;
  const env = opts.env ?? process.env;
  const problems: string[] = [];

  const nvml = await (opts.openNvml ?? (() => Nvml.open(undefined, env)))();
  if (!(nvml instanceof Nvml)) {
    print(nvml.reason);
    problems.push(nvml.reason);
  } else {
    try {
      const d = await nvml.driver();
      print(`driver: ${d.driverVersion}, CUDA ${d.cudaDriverVersion ?? 'unknown (libcuda.so.1 not found)'}`);
      const hidden = nvml.allDevices.length - nvml.devices.length;
      print(`GPUs: ${nvml.allDevices.length}${hidden > 0 ? ` (${hidden} hidden by CUDA_VISIBLE_DEVICES)` : ''}`);
      for (const dev of nvml.allDevices) {
        const r = await nvml.read(dev);
        const visible = nvml.devices.includes(dev) ? '' : ' [not visible to CUDA]';
        print(
          `  GPU ${dev.index}: ${dev.name} ${dev.uuid}${visible}\n` +
            `    memory ${fixed(r.memoryUsedBytes && r.memoryUsedBytes / GIB, 1, '')} / ${fixed(r.memoryTotalBytes && r.memoryTotalBytes / GIB, 1, ' GiB')}` +
            `, utilization ${fixed(r.utilization && r.utilization * 100, 0, ' %')}` +
            `, power ${fixed(r.powerWatts, 0, ' W')} / ${fixed(r.powerLimitWatts, 0, ' W')}`,
        );
      }
      if (nvml.devices.length === 0) problems.push('no GPU is visible to CUDA');
    } finally {
      await nvml.close();
    }
  }

  const ort = await onnxruntimeNode();
  const dir = await providerDir(opts.target, env);
  const core = join(dir, 'libonnxruntime.so.1');
  print(`onnxruntime-node ${ort.version}, libraries in ${dir}:`);
  const coreThere = await exists(core);
  if (!coreThere) problems.push(`${core} is missing: onnxruntime loads its providers from its own folder`);
  const statuses = await providerStatus(dir, { env, load: true });
  for (const [file, present] of [
    ['libonnxruntime.so.1', coreThere] as const,
    ...statuses.map((s) => [basename(s.path), s.present] as const),
  ]) {
    print(`  ${file.padEnd(38)} ${present ? 'present' : 'absent'}`);
  }
  const python = opts.python ?? (await findPython());
  if ((await report(statuses, python, env, print)) !== 0) {
    const cuda = statuses.find((s) => s.role === 'cuda');
    problems.push(
      cuda?.present
        ? `the CUDA provider's libraries do not all resolve (listed above)`
        : `the CUDA provider is not installed: run 'nereid gpu setup'`,
    );
  }
  if (problems.length === 0) {
    print('ready: the CUDA provider can run on this machine');
    return 0;
  }
  print('missing:');
  for (const p of problems) print(`  - ${p}`);
  return 1;
}
