/**
 * Where `nereid tune` loads its candidates: a scratch server it starts on loopback (explicit model control, code in
 * load requests allowed: it is ours), or a running server given by `--url`. Either way a candidate is loaded under a
 * temporary name through the repository API, its files sent as `file:` contents, and unloaded after; `close()`
 * unloads whatever is still loaded, so an interrupted tune leaves nothing behind. The model's own folder is only read.
 */
import { mkdtemp, readdir, readFile, rm, stat, symlink } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError, NereidError, UnavailableError } from '../../core/errors.js';
import { NereidHttpClient } from '../../client/index.js';

/** A server of our own on loopback, serving `repository` with explicit model control (the CLI wires serve()). */
export type ScratchStarter = (repository: string) => Promise<ScratchServer>;
export interface ScratchServer {
  url: string;
  close(): Promise<void>;
}

export interface TuneTarget {
  url: string;
  client: NereidHttpClient;
  /** True for the scratch server (nothing else runs on it). */
  scratch: boolean;
  /** Loads `config` under `name` with the model's files; throws the server's refusal. */
  load(name: string, config: ModelConfig, signal?: AbortSignal): Promise<void>;
  unload(name: string): Promise<void>;
  /** Unloads every model this tune loaded and stops the scratch server. Idempotent. */
  close(): Promise<void>;
}

/** Every file of the model folder except its config, as `file:` paths (`1/model.onnx`). */
export async function modelFiles(dir: string): Promise<Record<string, Uint8Array>> {
  const out: Record<string, Uint8Array> = {};
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  for (const e of entries) {
    // A linked model file (a big ONNX kept elsewhere) is sent as the file it names.
    const file = e.isFile() || (e.isSymbolicLink() && (await stat(join(e.parentPath, e.name))).isFile());
    if (!file) continue;
    const path = relative(dir, join(e.parentPath, e.name)).split('\\').join('/');
    if (path === 'config.pbtxt' || path.startsWith('.') || path.includes('/__pycache__/')) continue;
    out[path] = await readFile(join(dir, path));
  }
  return out;
}

/**
 * How a candidate's files reach the server: for `--url`, as `file:` contents (the server may be elsewhere); for the
 * scratch server, a link named after the candidate in its repository to the model's folder (nothing copied, no size
 * limit: a 400 MB model loads as fast as from its own repository).
 */
type Stage = (name: string) => Promise<Record<string, Uint8Array> | undefined>;

async function connect(
  url: string,
  stage: Stage,
  scratch: ScratchServer | undefined,
  cleanup: () => Promise<void>,
): Promise<TuneTarget> {
  const client = new NereidHttpClient({ url });
  const loaded = new Set<string>();
  let closing: Promise<void> | undefined;
  return {
    url: /^[a-z][a-z0-9+.-]*:\/\//i.test(url) ? url.replace(/\/+$/, '') : `http://${url}`,
    client,
    scratch: scratch !== undefined,
    async load(name, config, signal) {
      loaded.add(name);
      // The config as read, not modelConfigToJson's: that one fills every default in, and an empty
      // default_model_filename then names the version folder instead of the backend's default file.
      const json = JSON.stringify({ ...config, name });
      try {
        await client.loadModel(name, { config: json, files: await stage(name), signal });
      } catch (err) {
        const e = NereidError.from(err);
        if (scratch !== undefined) throw e;
        throw new UnavailableError(
          `the server at ${url} refused to load a candidate through its repository API: ${e.message.replace(/\.$/, '')}. ` +
            `nereid tune --url needs a server started with --model-control-mode=explicit, the repository API allowed ` +
            `(--http-restricted-api), room for the model's files in a request (--http-max-input-size) and, for a model ` +
            `that runs code (python), --allow-code-in-load-requests; or tune without --url in a scratch server`,
          { cause: err },
        );
      }
    },
    async unload(name) {
      loaded.delete(name);
      await client.unloadModel(name).catch(() => undefined);
    },
    close() {
      closing ??= (async () => {
        await Promise.all([...loaded].map(async (n) => client.unloadModel(n).catch(() => undefined)));
        loaded.clear();
        await scratch?.close();
        await cleanup();
      })();
      return closing;
    },
  };
}

/** A target for the model in `dir`: the server at `url`, or a scratch server of our own. */
export async function openTarget(dir: string, url: string | undefined, start: ScratchStarter): Promise<TuneTarget> {
  if (url !== undefined) {
    const files = await modelFiles(dir);
    const client = new NereidHttpClient({ url });
    const live = await client.isServerLive().catch((err: unknown) => {
      throw new InvalidArgError(`--url ${url}: no server answers there (${NereidError.from(err).message})`, {
        cause: err,
      });
    });
    if (!live) throw new UnavailableError(`--url ${url}: the server is not live`);
    return connect(
      url,
      async () => files,
      undefined,
      async () => undefined,
    );
  }
  // A repository of links to the model's folder, one per candidate name. rm removes the links, not what they name.
  const repo = await mkdtemp(join(tmpdir(), 'nereid-tune-'));
  const stage: Stage = async (name) => {
    await symlink(resolve(dir), join(repo, name), 'dir').catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    return undefined;
  };
  try {
    const running = await start(repo);
    return await connect(running.url, stage, running, () => rm(repo, { recursive: true, force: true }));
  } catch (err) {
    await rm(repo, { recursive: true, force: true });
    throw err;
  }
}
