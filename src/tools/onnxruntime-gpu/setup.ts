import { stat } from 'node:fs/promises';
import { InvalidArgError, UnavailableError } from '../../core/errors.js';
import { providerStatus } from './diagnose.js';
import { downloadWheel } from './download.js';
import { installLibraries, readWheel } from './install.js';
import { ORT_LIB_DIR_ENV, onnxruntimeNode, providerDir, wheelPlatforms } from './providers.js';
import { DEFAULT_PYTHONS, findPython } from './python.js';
import { report } from './report.js';

/** `nereid gpu setup` options. */
export interface SetupOptions {
  /** An onnxruntime-gpu wheel already downloaded; without it pip downloads one. */
  wheel?: string;
  /** The Python whose pip downloads the wheel and whose site-packages are searched for CUDA libraries. */
  python?: string;
  /** Install into this folder instead of onnxruntime-node's. */
  target?: string;
  print: (line: string) => void;
  env?: NodeJS.ProcessEnv;
}

/**
 * Installs onnxruntime-gpu's provider libraries beside onnxruntime-node's `libonnxruntime.so.1` and checks that the
 * CUDA provider's libraries resolve. Returns 0 when the CUDA provider is ready, 1 when something is missing (listed,
 * with how to get it). Throws InvalidArgError for a bad call and UnavailableError for a wheel that cannot be used.
 */
export async function runSetup(opts: SetupOptions): Promise<number> {
  const { print } = opts;
  const env = opts.env ?? process.env;
  const platforms = wheelPlatforms();
  const ort = await onnxruntimeNode();
  const target = await providerDir(opts.target, env);
  if (
    opts.wheel !== undefined &&
    !(await stat(opts.wheel).then(
      (s) => s.isFile(),
      () => false,
    ))
  ) {
    throw new InvalidArgError(`--wheel '${opts.wheel}': no such file`);
  }
  if (
    !(await stat(target).then(
      (s) => s.isDirectory(),
      () => false,
    ))
  ) {
    throw new (opts.target || env[ORT_LIB_DIR_ENV] ? InvalidArgError : UnavailableError)(
      `target folder '${target}' does not exist${opts.target || env[ORT_LIB_DIR_ENV] ? '' : ` (is onnxruntime-node ${ort.version} installed for ${process.platform}/${process.arch}?)`}`,
    );
  }
  print(
    `onnxruntime-node ${ort.version}: installing onnxruntime-gpu ${ort.version}'s provider libraries into ${target}`,
  );

  const python = opts.python ?? (await findPython());
  let wheel = opts.wheel;
  let cleanup: (() => Promise<void>) | undefined;
  if (wheel === undefined) {
    if (!python) {
      throw new UnavailableError(
        `no Python found (tried ${DEFAULT_PYTHONS.join(', ')}) to download onnxruntime-gpu==${ort.version} with pip: pass --python <python>, or download the wheel yourself and pass --wheel <path>`,
      );
    }
    print(`downloading onnxruntime-gpu==${ort.version} (about 250 MB) with ${python}'s pip`);
    const d = await downloadWheel({ python, requirement: `onnxruntime-gpu==${ort.version}`, platforms, print });
    wheel = d.path;
    cleanup = d.cleanup;
  }
  try {
    const contents = await readWheel(wheel);
    if (contents.version !== ort.version) {
      throw new UnavailableError(
        `'${wheel}' is onnxruntime-gpu ${contents.version} but onnxruntime-node is ${ort.version}: provider libraries must come from the same onnxruntime release (onnxruntime-gpu==${ort.version})`,
      );
    }
    await installLibraries(wheel, contents, target, print);
  } finally {
    await cleanup?.();
  }

  print('checking the libraries the providers need …');
  const statuses = await providerStatus(target, { env, load: true });
  return report(statuses, python, env, print);
}
