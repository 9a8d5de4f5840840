/**
 * A load-generator thread of `nereid tune` (measure.ts starts one per point): runs the point's closed loop
 * (loop.ts) on an event loop and a core of its own, so that the client's work never shares the scratch server's
 * thread. Measured on the H200 with BERT-base (196 KB answers): with the loop on the server's thread, every
 * candidate topped out at a third of what the GPU benchmark reaches on the same model.
 *
 * Messages: in, `'stop'` (the caller aborted); out, `{ measuring: true }` when the warm-up ends, then
 * `{ result }` or `{ error }`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { runLoop, type LoopOptions, type Prepared } from './loop.js';

const { prepared, options } = workerData as { prepared: Prepared[]; options: LoopOptions };
let stopped = false;
parentPort!.on('message', (m) => {
  if (m === 'stop') stopped = true;
});
runLoop(prepared, options, {
  measuring: () => parentPort!.postMessage({ measuring: true }),
  stopped: () => stopped,
}).then(
  (result) => parentPort!.postMessage({ result }),
  (err: unknown) => parentPort!.postMessage({ error: err instanceof Error ? err.message : String(err) }),
);
