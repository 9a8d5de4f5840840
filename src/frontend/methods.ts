import { InvalidArgError } from '../core/errors.js';
import { FACADE_METHODS, type CallOptions, type FacadeMethod, type InferenceServerApi } from '../server/api.js';

/**
 * The facade's sync and async methods across the thread boundary, derived from server/api.ts's FACADE_METHODS:
 * the proxy's forwarding methods (forwardingApi) and the host's dispatch (answerFacadeCall) both read that table,
 * so neither lists the methods again. `infer` keeps its own packed path (wire.ts): only calls go through here.
 */

/** The asynchronous facade methods (CALL → REPLY messages). */
export type AsyncMethod = FacadeMethod<'async'>;

/** Calls the main thread answers for a thread's console routes (host.ts): not facade methods. */
export type ConsoleMethod = 'consoleLogs' | 'consoleLatency' | 'consoleAccess';

/** The synchronous calls a front-end thread asks the main thread for (sync-call.ts). */
export type SyncMethod = FacadeMethod<'sync'> | ConsoleMethod;

/** The methods a ForwardingApi forwards. */
type Forwarded = FacadeMethod<'sync'> | AsyncMethod;

/** True when `method` (as it came from the other thread) is a facade method of `kind`. */
export function isFacadeMethod<Kind extends 'sync' | 'async'>(
  method: unknown,
  kind: Kind,
): method is FacadeMethod<Kind> {
  return (
    typeof method === 'string' && Object.hasOwn(FACADE_METHODS, method) && FACADE_METHODS[method as Forwarded] === kind
  );
}

/**
 * Calls facade method `method` of `api` with the arguments as they crossed. Their types were checked by the
 * caller's compiler against the same interface (the proxy's method has that signature), so the cast is the
 * boundary's, once.
 */
export function answerFacadeCall<M extends Forwarded>(
  api: InferenceServerApi,
  method: M,
  args: unknown[],
): ReturnType<InferenceServerApi[M]> {
  const fn = api[method] as (...a: unknown[]) => ReturnType<InferenceServerApi[M]>;
  return fn.apply(api, args);
}

/**
 * An async call's last argument is its options: the signal is taken out (it crosses as an id, host.ts makes a
 * signal of its own) and the rest crosses as data. Returns the arguments to send and the signal.
 */
export function splitSignal(args: unknown[]): { args: unknown[]; signal: AbortSignal | undefined } {
  const last = args.at(-1);
  if (typeof last !== 'object' || last === null || !('signal' in last)) return { args, signal: undefined };
  const { signal, ...rest } = last as CallOptions;
  return { args: [...args.slice(0, -1), rest], signal };
}

/** The host's side of splitSignal: its own signal put back into the options (a new object; `args` is not kept). */
export function joinSignal(args: unknown[], signal: AbortSignal | undefined): unknown[] {
  if (signal === undefined) return args;
  if (args.length === 0) throw new InvalidArgError('a call with a signal but no options');
  return [...args.slice(0, -1), { ...(args.at(-1) as object), signal }];
}

/**
 * The base of a front-end thread's proxy: one method per sync or async row of FACADE_METHODS, installed on the
 * prototype from the table, each forwarding its arguments unchanged. A subclass implements the two ways across and
 * may override any row with a method of its own (a cache, say): its method then wins, as any override does.
 */
export abstract class ForwardingBase {
  /** Runs a synchronous facade call on the main thread and returns its answer. */
  protected abstract forwardSync(method: FacadeMethod<'sync'>, args: unknown[]): unknown;
  /** Runs an asynchronous facade call on the main thread; `args` still carry the options' signal. */
  protected abstract forwardAsync(method: AsyncMethod, args: unknown[]): Promise<unknown>;

  static {
    for (const method of Object.keys(FACADE_METHODS)) {
      let value: ((this: ForwardingBase, ...args: unknown[]) => unknown) | undefined;
      if (isFacadeMethod(method, 'sync'))
        value = function (...args) {
          return this.forwardSync(method, args);
        };
      else if (isFacadeMethod(method, 'async'))
        value = function (...args) {
          return this.forwardAsync(method, args);
        };
      if (value === undefined) continue; // infer and local rows: the subclass's own
      Object.defineProperty(value, 'name', { value: method });
      Object.defineProperty(ForwardingBase.prototype, method, { value, writable: true, configurable: true });
    }
  }
}

/**
 * ForwardingBase as what it is once the table has filled its prototype: a forwarder of every sync and async method
 * but the `Own` ones, which the subclass implements itself (a mapped type's members are properties, which a
 * subclass's methods may not override).
 */
export function forwardingApi<Own extends Forwarded = never>(): abstract new () => ForwardingBase &
  Pick<InferenceServerApi, Exclude<Forwarded, Own>> {
  return ForwardingBase as abstract new () => ForwardingBase & Pick<InferenceServerApi, Exclude<Forwarded, Own>>;
}
