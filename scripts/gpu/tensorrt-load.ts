/**
 * Loads `<repo>/<model>` (plan, optional config.pbtxt) straight through Nereid's tensorrt backend, as the
 * repository would, and prints what happened: the auto-completed config and an instance created, or the error.
 * Used by tensorrt-on-device.sh; works on a checkout whose server is not wired to the backend yet.
 *
 *   node --import tsx scripts/gpu/tensorrt-load.ts <repo>/<model> [key=value backend-config...]
 */
import { existsSync, readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseModelConfigOrThrow, printModelConfig } from '../../src/config/index.js';
import { createLogger } from '../../src/core/logger.js';
import { tensorrtBackend } from '../../src/backends/tensorrt/index.js';
import { finalizeConfig } from '../../src/config/model-config.js';

const [dir, ...kv] = process.argv.slice(2);
if (dir === undefined) {
  process.stderr.write('usage: tensorrt-load.ts <repo>/<model> [key=value...]\n');
  process.exit(2);
}
const backendConfig = Object.fromEntries(kv.map((s) => s.split(/=(.*)/s).slice(0, 2) as [string, string]));
const name = basename(dir);
const cfgFile = join(dir, 'config.pbtxt');
const config = existsSync(cfgFile)
  ? parseModelConfigOrThrow(readFileSync(cfgFile, 'utf8'), cfgFile)
  : { name, platform: 'tensorrt_plan', backend: 'tensorrt' };
const modelPath = join(dir, '1', 'model.plan');
const logger = createLogger({
  switches: { info: true, warning: true, error: true, verbose: 0, format: 'default', file: '' },
});
const backend = tensorrtBackend();
try {
  const acx = { modelName: name, modelPath, backendConfig, autoComplete: true, logger };
  const completed = await backend.autoComplete({ ...config, name }, acx);
  process.stdout.write(`auto-completed config of '${name}':\n${printModelConfig(completed)}\n`);
  const handle = await backend.load({
    name,
    version: 1,
    config: finalizeConfig(completed, name),
    modelDir: dir,
    modelPath,
    backendConfig,
    logLevel: 'info',
    logger,
  });
  const inst = await handle.createInstance({ name: `${name}_0`, index: 0, kind: 'KIND_GPU', device: 0, profiles: [] });
  process.stdout.write(`LOADED: instance ${inst.name} created\n`);
  await inst.destroy();
  await handle.unload();
} catch (e) {
  process.stdout.write(`REFUSED (${(e as { code?: string }).code ?? 'error'}): ${(e as Error).message}\n`);
  process.exitCode = 1;
}
