/** The timings of one successful request, the same numbers the server gives ModelStats.recordSuccess. */
export interface RequestTimings {
  /** End to end, as measured by the server facade. */
  totalNs: number;
  queueNs: number;
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
  /** Time to the first response; for a non-decoupled model the same as totalNs (the default). */
  firstResponseNs?: number;
}

/**
 * Per-request hook for the latency summaries and histogram, which need each request's value where ModelStats keeps
 * only totals. The server calls it once per successful request, right after `stats.recordSuccess`, on the main
 * thread; it must not throw and does O(1) work. Failed requests are not observed (Triton's summaries cover
 * successes only).
 */
export interface InferenceObserver {
  requestSucceeded(model: string, version: number, timings: RequestTimings): void;
}

/** The observer to use when metrics are off: does nothing. */
export const noopObserver: InferenceObserver = { requestSucceeded: () => {} };
