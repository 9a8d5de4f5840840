import type { ErrorCode } from '../../../core/errors.js';

/**
 * Messages of the control channel (JSON, framed by frame.ts). The Python side is python/nereid_python (stub.py,
 * runner.py); a child written in another language follows the same shapes. Short keys on the hot path.
 *
 * Shared memory places: a block is `[segment, offset, size]` (host blocks) or `[segment, offset]` (child blocks:
 * the host computes the size it reads from the descriptors). A tensor descriptor is
 * `[name, datatype, shape, offset in the block, byte size]`. Any message may carry `free`: `[segment, offset]`
 * blocks of the receiver's segments the sender no longer reads.
 */

export type TensorDesc = [name: string, datatype: string, shape: number[], rel: number, bytes: number];
export type FreeList = [seg: number, off: number][];

export interface WireError {
  c: ErrorCode;
  m: string;
}

/** One request of an `exec`. `c`: numeric correlation id (decimal text), `cs`: string correlation id. */
export interface WireRequest {
  i: TensorDesc[];
  o: string[];
  id?: string;
  c?: string;
  cs?: string;
  p?: Record<string, string | number | boolean>;
  f?: number;
}

/** A response in a `done` (non-decoupled batch) or `resp` (one at a time) message. */
export interface WireResponse {
  o?: TensorDesc[];
  e?: WireError;
  p?: Record<string, string | number | boolean>;
}

export type ToChild =
  | { op: 'init'; inst: number; payload: unknown; free?: FreeList }
  | { op: 'exec'; inst: number; b: number; blk: [number, number, number] | null; r: WireRequest[]; free?: FreeList }
  | { op: 'cancel'; inst: number; b: number; free?: FreeList }
  | { op: 'fini'; inst: number; free?: FreeList }
  | { op: 'free'; free: FreeList }
  | { op: 'autocomplete'; model_path: string; config: unknown; free?: FreeList }
  | ({
      op: 'bls_resp';
      call: number;
      fin: boolean;
      has?: boolean;
      blk?: [number, number, number] | null;
    } & WireResponse);

/** Every message from the child may hand host blocks back. */
export type FromChild = FromChildBody & { free?: FreeList };

type FromChildBody =
  | { op: 'ready'; pid: number; python?: string; numpy?: string; exe?: string }
  | { op: 'inited'; inst: number }
  | { op: 'init_error'; inst: number; e: WireError; tb?: string }
  | ({
      op: 'resp';
      inst: number;
      b: number;
      i: number;
      fin: boolean;
      none?: boolean;
      blk?: [number, number] | null;
    } & WireResponse)
  | {
      op: 'done';
      inst: number;
      b: number;
      t: [number, number, number];
      err?: WireError;
      blk?: [number, number] | null;
      r?: (WireResponse | null)[];
    }
  | { op: 'finied'; inst: number; tb?: string }
  | { op: 'log'; lvl: 'info' | 'warn' | 'error' | 'verbose'; msg: string; at?: string; inst?: string | null }
  | { op: 'autocompleted'; config: unknown; defined: boolean }
  | { op: 'error'; e: WireError; tb?: string }
  | {
      op: 'bls';
      call: number;
      model: string;
      version: string;
      blk: [number, number] | null;
      i: TensorDesc[];
      o: string[];
      id: string;
      c?: string;
      cs?: string;
      flags: number;
      timeout: number;
      p: Record<string, string | number | boolean>;
      decoupled: boolean;
    };
