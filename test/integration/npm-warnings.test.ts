import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';

/**
 * npm prints no warnings of ours on the quick start's `npm ci`: no unknown project config, no engine warning for
 * Nereid on the system Node that runs npm (the CLI itself moves to Node 24), no unreviewed install scripts. Checked
 * with `npm ci --dry-run --offline` on a copy of the project's npm files: nothing is fetched or installed.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const NPM_CLI = (() => {
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const bin = join(dir, 'npm');
    if (!existsSync(bin)) continue;
    const cli = join(realpathSync(bin), '..', 'npm-cli.js');
    if (existsSync(cli)) return cli;
  }
  return undefined;
})();
// The Node a system's npm runs on (20 on the dev machines); without one, this Node.
const NPM_NODE =
  ['/usr/bin/node', '/usr/local/bin/node'].find(
    (p) => existsSync(p) && Number(spawnSync(p, ['-p', 'process.versions.node.split(".")[0]']).stdout.toString()) < 24,
  ) ?? process.execPath;

describe('npm ci on the project', { skip: NPM_CLI === undefined ? 'no npm on PATH' : false }, () => {
  const dir = mkdtempSync(join(tmpdir(), 'nereid-npm-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('prints no warning about Nereid, its config or its dependencies’ install scripts', () => {
    for (const f of ['package.json', 'package-lock.json', '.npmrc']) {
      if (existsSync(join(ROOT, f))) copyFileSync(join(ROOT, f), join(dir, f));
    }
    const env: NodeJS.ProcessEnv = { ...process.env };
    // Only the project's own settings count: none that an outer `npm run` passes down.
    for (const k of Object.keys(env)) if (k.toLowerCase().startsWith('npm_')) delete env[k];
    const r = spawnSync(
      NPM_NODE,
      [NPM_CLI ?? '', 'ci', '--dry-run', '--offline', '--no-audit', '--no-fund', '--loglevel=warn'],
      { cwd: dir, env, encoding: 'utf8', timeout: 120_000 },
    );
    assert.equal(r.status, 0, r.stderr);
    const out = r.stdout + r.stderr;
    // A user config (~/.npmrc) is the user's own business; the project's and the environment's are ours.
    assert.doesNotMatch(out, /Unknown (project|env) config/);
    assert.doesNotMatch(out, /EBADENGINE[^\n]*\n[^\n]*package: 'nereid@/);
    assert.doesNotMatch(out, /install scripts not yet covered/);
  });
});
