import { CustomMetrics, type CustomMetricKind, type MetricOp } from '../../core/custom-metrics.js';
import { InvalidArgError, NereidError } from '../../core/errors.js';
import type { ChildProcessHost } from '../runtime/process/child.js';
import type { FromChild } from '../runtime/process/protocol.js';

/**
 * The host side of `pb_utils.MetricFamily` / `Metric`: a stub's `metric` messages run against the server's custom
 * metrics store, owned by the stub's process, so everything a model's processes created is dropped when they end
 * (the model unloads, or an instance dies and is restarted with fresh objects, as Triton's stub is).
 */

type MetricMessage = Extract<FromChild, { op: 'metric' }>;

const KINDS: readonly CustomMetricKind[] = ['counter', 'gauge', 'histogram'];

export function metricsService(getStore: () => CustomMetrics): (msg: MetricMessage, host: ChildProcessHost) => void {
  const watched = new WeakSet<ChildProcessHost>();
  return (msg, host) => {
    const store = getStore();
    if (!watched.has(host)) {
      watched.add(host);
      void host.exited.then(() => store.release(host));
    }
    let answer: { id?: number; v?: number } = {};
    try {
      answer = run(store, host, msg);
    } catch (e) {
      const err = NereidError.from(e);
      if (msg.call !== undefined) host.send({ op: 'metric_resp', call: msg.call, e: { c: err.code, m: err.message } });
      return;
    }
    if (msg.call !== undefined) host.send({ op: 'metric_resp', call: msg.call, ...answer });
  };
}

function run(store: CustomMetrics, owner: ChildProcessHost, msg: MetricMessage): { id?: number; v?: number } {
  const id = Number(msg.id);
  switch (msg.do) {
    case 'family_new': {
      const kind = KINDS.includes(msg.kind as CustomMetricKind) ? (msg.kind as CustomMetricKind) : undefined;
      return { id: store.createFamily(owner, String(msg.name), String(msg.help ?? ''), kind as CustomMetricKind) };
    }
    case 'family_del':
      store.deleteFamily(owner, id);
      return {};
    case 'metric_new':
      return { id: store.createMetric(owner, id, msg.labels ?? {}, msg.buckets) };
    case 'metric_del':
      store.deleteMetric(owner, id);
      return {};
    case 'value':
      return { v: store.value(owner, id) };
    case 'increment':
    case 'set':
    case 'observe':
      store.apply(owner, id, msg.do satisfies MetricOp, Number(msg.v));
      return {};
    default:
      throw new InvalidArgError(`unknown metric operation '${String(msg.do)}'`);
  }
}
