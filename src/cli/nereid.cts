#!/usr/bin/env node
/**
 * The `nereid` command's entry: CommonJS on purpose, so that it runs before libuv's thread pool exists.
 *
 * onnxruntime runs (in-process engine, koffi `.async`) each hold a libuv pool thread for their whole duration, and
 * libuv sizes its pool once, at first use, from UV_THREADPOOL_SIZE. An ES module entry is too late to set it: Node
 * loads ES modules through the pool (measured on Node 20). So this file sets it, unless the operator did, and only
 * then imports the real CLI. The size: 4 threads for Node's own work (fs, dns, zlib) plus max(16, cores) for runs;
 * src/backends/onnxruntime/capi/threadpool.ts explains it and warns when a load needs more.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports -- a CommonJS entry (see above): require is the point
import os = require('node:os');

if (process.env.UV_THREADPOOL_SIZE === undefined || process.env.UV_THREADPOOL_SIZE === '') {
  process.env.UV_THREADPOOL_SIZE = String(Math.min(1024, 4 + Math.max(16, os.availableParallelism())));
}

void import('./main.js');
