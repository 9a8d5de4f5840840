import { performance } from 'node:perf_hooks';
import type { EngineRequest, EngineResponse } from '../../backends/contract.js';
import { CancelledError } from '../../core/errors.js';
import type { Member } from '../run-batch.js';
import type { SequenceSpec } from './spec.js';
import {
  controlTensors,
  copyData,
  initialStates,
  stateTensors,
  zerosLike,
  type CorrelationId,
  type StoredState,
} from './tensors.js';

/**
 * The rows the sequence batcher (batcher.ts) hands an engine: a sequence's request with its control and state
 * inputs added and its state outputs asked for — whose values, when the row answers, become the sequence's state —
 * and the padding rows of a direct batch.
 */

/** What a row needs of a queued request and its sequence. */
export interface RowItem extends Member {
  readonly seq: { readonly id: CorrelationId; states: Map<string, StoredState> | undefined; pendingStart: boolean };
  readonly start: boolean;
  readonly end: boolean;
}

/** A request as the engine sees it: its inputs, then the controls and states; its outputs, then the states. */
export function sequenceRow(spec: SequenceSpec, stateOutputs: readonly string[], item: RowItem): Member {
  const seq = item.seq;
  const start = item.start || seq.pendingStart;
  seq.pendingStart = false;
  if (spec.states.length > 0 && (start || seq.states === undefined)) seq.states = initialStates(spec);
  const flags = { start, end: item.end, ready: true, correlationId: seq.id };
  const request: EngineRequest = {
    ...item.request,
    flags: (start ? 1 : 0) | (item.end ? 2 : 0),
    inputs: [
      ...item.request.inputs,
      ...controlTensors(spec, flags),
      ...(seq.states ? stateTensors(spec, seq.states) : []),
    ],
    outputs: [...item.request.outputs, ...stateOutputs],
  };
  const own = item.request.outputs.length;
  const ownOnly = <T extends EngineResponse>(r: T): T =>
    own === r.outputs.length ? r : { ...r, outputs: r.outputs.slice(0, own) };
  const onResponse = item.onResponse;
  // No signal: a started run is never abandoned, so the sequence's state always follows its requests. A
  // client that went away meanwhile is answered CANCELLED below.
  return {
    request,
    enqueuedAt: item.enqueuedAt,
    // A decoupled model's responses stream to the client as they come (the state outputs are the batcher's).
    onResponse: onResponse && ((r) => onResponse(ownOnly(r))),
    resolve: (r) => {
      if (seq.states !== undefined && !item.end) {
        for (let k = 0; k < stateOutputs.length; k++) {
          const t = r.outputs[own + k];
          if (t === undefined) continue;
          seq.states.set(spec.states[k].inputName, {
            shape: spec.maxBatchSize > 0 ? t.shape.slice(1) : [...t.shape],
            data: copyData(t.data),
          });
        }
      }
      if (item.signal?.aborted) item.reject(new CancelledError('request was cancelled'));
      else item.resolve(ownOnly(r));
    },
    reject: (e) => item.reject(e),
  };
}

/** A padding row of a direct batch: zeros shaped like a real row, READY false, initial states. */
export function paddingRow(spec: SequenceSpec, stateOutputs: readonly string[], proto: RowItem): Member {
  const request: EngineRequest = {
    inputs: [
      ...proto.request.inputs.map(zerosLike),
      ...controlTensors(spec, { start: false, end: false, ready: false, correlationId: 0n }),
      ...stateTensors(spec, initialStates(spec)),
    ],
    outputs: [...proto.request.outputs, ...stateOutputs],
    batchSize: 1,
  };
  return { request, enqueuedAt: performance.now(), resolve: () => {}, reject: () => {} };
}
