import { mkdtemp, rm, stat, symlink } from 'node:fs/promises';
import { helpExitCode, STDIO, type CommandIo } from './command-io.js';
import { tmpdir } from 'node:os';
import { basename, join, resolve } from 'node:path';
import { defaultBackends } from '../backends/index.js';
import { printModelConfig } from '../config/index.js';
import { InvalidArgError } from '../core/errors.js';
import { modelFoldersIn } from '../repository/layout.js';
import { InferenceServer } from '../server/server.js';
import { parseBackendConfig } from './backend-config-flag.js';
import { cliLogging } from './log-output.js';

export const MODEL_HELP = `Usage:
  nereid model check DIR [--backend-config=<backend>,<key>=<value>]... [--disable-auto-complete-config]
      Loads the model folder DIR (config.pbtxt, numbered versions) exactly as \`nereid serve\` would, with its
      folder name as the model's name, then prints the completed config as config.pbtxt text on stdout (what
      auto-complete filled in included) and each version's state on stderr. Nothing is served.

Exit status: 0 the model loads, 1 it does not (every reason printed), 2 bad usage.
`;

interface CheckArgs {
  dir: string;
  backendConfig: string[];
  autoComplete: boolean;
}

function parseCheckArgs(argv: readonly string[]): CheckArgs {
  const out: CheckArgs = { dir: '', backendConfig: [], autoComplete: true };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--disable-auto-complete-config') out.autoComplete = false;
    else if (arg.startsWith('--backend-config=')) out.backendConfig.push(arg.slice('--backend-config='.length));
    else if (arg === '--backend-config' && argv[i + 1] !== undefined) out.backendConfig.push(argv[++i]);
    else if (arg.startsWith('--'))
      throw new InvalidArgError(`unknown option '${arg}' for 'model check' (see nereid model --help)`);
    else if (out.dir !== '') throw new InvalidArgError(`'model check' takes one folder, got '${out.dir}' and '${arg}'`);
    else out.dir = arg;
  }
  if (out.dir === '') throw new InvalidArgError("'model check' needs a model folder (see nereid model --help)");
  return out;
}

/**
 * `nereid model check DIR`: the folder is linked into a temporary repository and loaded through the real server in
 * explicit mode (parse, auto-complete, validation, every instance created), so what passes here loads in `serve`.
 */
async function check(args: CheckArgs, out: (s: string) => void, err: (s: string) => void): Promise<number> {
  const dir = resolve(args.dir);
  const isDir = await stat(dir).then(
    (s) => s.isDirectory(),
    () => false,
  );
  if (!isDir) throw new InvalidArgError(`'${args.dir}' is not a folder`);
  const models = await modelFoldersIn(dir);
  if (models.length > 0) {
    const shown = models.slice(0, 5).join(', ') + (models.length > 5 ? `, … (${models.length} in all)` : '');
    throw new InvalidArgError(
      `'${args.dir}' is a model repository (it holds the model folders ${shown}), not one model's folder: ` +
        `check one model, e.g. nereid model check ${join(args.dir, models[0] as string)}`,
    );
  }
  const name = basename(dir);
  const repo = await mkdtemp(join(tmpdir(), 'nereid-model-check-'));
  const backends = defaultBackends();
  const logging = cliLogging(
    { info: false, warning: true, error: false, verbose: 0, format: 'default', file: '' },
    'default',
  );
  let server: InferenceServer | undefined;
  try {
    await symlink(dir, join(repo, name), 'dir');
    server = await InferenceServer.create({
      repositories: [repo],
      backends,
      backendConfig: parseBackendConfig(args.backendConfig),
      autoComplete: args.autoComplete,
      modelControlMode: 'explicit',
      loadModels: [name],
      exitOnError: false,
      logger: logging.logger,
    });
    const rows = localRows(server, name, join(repo, name), dir);
    const ready = rows.filter((r) => r.state === 'READY');
    if (ready.length > 0) out(printModelConfig(server.modelConfig(name)));
    for (const r of rows) {
      err(`model '${name}'${r.version ? ` version ${r.version}` : ''}: ${r.state}${r.reason ? `: ${r.reason}` : ''}\n`);
    }
    return ready.length > 0 && ready.length === rows.length ? 0 : 1;
  } finally {
    await server?.close();
    await Promise.all(backends.map(async (b) => b.close?.()));
    await rm(repo, { recursive: true, force: true });
  }
}

/**
 * The model's states with their reasons as the server logged them, not as a client sees them: this runs on the
 * user's own machine, so paths stay whole (no '…/model.onnx'), and the temporary repository's link is written as
 * the folder the user gave.
 */
function localRows(
  server: InferenceServer,
  name: string,
  linked: string,
  dir: string,
): { version: string; state: string; reason: string }[] {
  const model = server.models().find((m) => m.name === name);
  if (model === undefined) return [];
  const local = (reason: string): string => reason.split(linked).join(dir);
  if (model.versions.size === 0) return [{ version: '', state: model.state, reason: local(model.reason) }];
  return [...model.versions.values()]
    .sort((a, b) => a.version - b.version)
    .map((v) => ({ version: String(v.version), state: v.state, reason: local(v.reason) }));
}

/** Runs `nereid model <argv>`; returns the exit code. */
export async function runModelCommand(argv: readonly string[], io: CommandIo = STDIO): Promise<number> {
  const [sub, ...rest] = argv;
  const help = helpExitCode(sub, rest);
  if (help !== undefined) {
    io.out(MODEL_HELP);
    return help;
  }
  if (sub !== 'check') throw new InvalidArgError(`unknown 'model' command '${sub}' (commands: check)`);
  return check(parseCheckArgs(rest), io.out, io.err);
}
