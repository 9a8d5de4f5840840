import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, describe, it } from 'node:test';

/**
 * `npm run setup-torch` (scripts/setup-python.sh --torch) in its --dry-run mode, on venvs of a temporary folder:
 * nothing is installed or downloaded, the script only says what it would run.
 */
const SCRIPT = fileURLToPath(new URL('../../scripts/setup-python.sh', import.meta.url));

function dryRun(venv: string): { status: number | null; out: string } {
  const r = spawnSync('bash', [SCRIPT, '--torch', '--dry-run'], {
    env: { ...process.env, NEREID_VENV: venv },
    encoding: 'utf8',
  });
  return { status: r.status, out: r.stdout + r.stderr };
}

describe('setup-python.sh --torch', () => {
  const dir = mkdtempSync(join(tmpdir(), 'nereid-setup-'));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it('says how large the download is, installs onnxscript with torch and lets pip show its progress', () => {
    const venv = join(dir, 'none');
    const r = dryRun(venv);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /installing PyTorch \S+ and onnxscript .*~2\.8 GB of wheels/);
    const torchLine = r.out.split('\n').find((l) => /would run: .*pip install .*torch==/.test(l));
    assert.ok(torchLine, r.out);
    assert.match(torchLine, /\bonnxscript\b/);
    assert.doesNotMatch(torchLine, / -q\b/);
    assert.match(torchLine, /--progress-bar on/);
    assert.equal(existsSync(venv), false, '--dry-run made the venv');
  });

  it('adds only onnxscript to a venv that has torch already', () => {
    const venv = join(dir, 'with-torch');
    mkdirSync(join(venv, 'bin'), { recursive: true });
    // A stand-in python: `import torch` works, anything naming onnxscript does not.
    writeFileSync(join(venv, 'bin', 'python'), '#!/bin/sh\ncase "$2" in *onnxscript*) exit 1;; esac\nexit 0\n');
    chmodSync(join(venv, 'bin', 'python'), 0o755);
    const r = dryRun(venv);
    assert.equal(r.status, 0, r.out);
    assert.match(r.out, /would run: \S+\/pip install --disable-pip-version-check onnxscript\n/);
    assert.doesNotMatch(r.out, /torch==/);
  });
});
