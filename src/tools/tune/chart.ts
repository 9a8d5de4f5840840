/**
 * The report's chart, hand-written SVG: throughput against p99 latency, one dot per measured point, the Pareto front
 * (no other point has more throughput at no more latency) joined by a line and the written config ringed. Each dot
 * carries its config in a <title> so a browser shows it on hover; the number beside it indexes the report's table.
 */
import type { PointResult } from './measure.js';

export interface ChartPoint {
  /** Row number in the report's table. */
  index: number;
  label: string;
  point: PointResult;
  written: boolean;
}

/** Indexes of the Pareto-optimal points (maximize throughput, minimize p99). */
export function paretoFront(points: readonly PointResult[]): Set<number> {
  const front = new Set<number>();
  points.forEach((p, i) => {
    const dominated = points.some(
      (q, j) =>
        j !== i &&
        q.throughput >= p.throughput &&
        q.p99Ms <= p.p99Ms &&
        (q.throughput > p.throughput || q.p99Ms < p.p99Ms),
    );
    if (!dominated) front.add(i);
  });
  return front;
}

const esc = (s: string): string => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** A "nice" upper bound for an axis. */
function niceMax(v: number): number {
  if (!(v > 0)) return 1;
  const step = 10 ** Math.floor(Math.log10(v));
  return Math.ceil((v * 1.1) / step) * step;
}

// Long: one SVG document, its parts in drawing order.
export function chartSvg(title: string, points: readonly ChartPoint[]): string {
  const W = 720;
  const H = 440;
  const m = { l: 70, r: 20, t: 40, b: 50 };
  const xMax = niceMax(Math.max(...points.map((p) => p.point.p99Ms), 0));
  const yMax = niceMax(Math.max(...points.map((p) => p.point.throughput), 0));
  const x = (v: number): number => m.l + (v / xMax) * (W - m.l - m.r);
  const y = (v: number): number => H - m.b - (v / yMax) * (H - m.t - m.b);
  const front = paretoFront(points.map((p) => p.point));
  const out: string[] = [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="${W}" height="${H}" fill="white"/>`,
    `<text x="${W / 2}" y="22" text-anchor="middle" font-size="15">${esc(title)}</text>`,
  ];
  for (let i = 0; i <= 5; i++) {
    const xv = (xMax * i) / 5;
    const yv = (yMax * i) / 5;
    out.push(
      `<line x1="${x(xv)}" y1="${H - m.b}" x2="${x(xv)}" y2="${m.t}" stroke="#eee"/>`,
      `<text x="${x(xv)}" y="${H - m.b + 16}" text-anchor="middle">${+xv.toPrecision(3)}</text>`,
      `<line x1="${m.l}" y1="${y(yv)}" x2="${W - m.r}" y2="${y(yv)}" stroke="#eee"/>`,
      `<text x="${m.l - 6}" y="${y(yv) + 4}" text-anchor="end">${+yv.toPrecision(3)}</text>`,
    );
  }
  out.push(
    `<line x1="${m.l}" y1="${H - m.b}" x2="${W - m.r}" y2="${H - m.b}" stroke="black"/>`,
    `<line x1="${m.l}" y1="${H - m.b}" x2="${m.l}" y2="${m.t}" stroke="black"/>`,
    `<text x="${(W + m.l) / 2}" y="${H - 12}" text-anchor="middle">p99 latency (ms)</text>`,
    `<text x="18" y="${(H - m.b + m.t) / 2}" text-anchor="middle" transform="rotate(-90 18 ${(H - m.b + m.t) / 2})">throughput (infer/s)</text>`,
  );
  const onFront = points.filter((_, i) => front.has(i)).sort((a, b) => a.point.p99Ms - b.point.p99Ms);
  if (onFront.length > 1) {
    const path = onFront.map((p) => `${x(p.point.p99Ms).toFixed(1)},${y(p.point.throughput).toFixed(1)}`).join(' ');
    out.push(`<polyline points="${path}" fill="none" stroke="#d62728" stroke-dasharray="4 3"/>`);
  }
  points.forEach((p, i) => {
    const cx = x(p.point.p99Ms).toFixed(1);
    const cy = y(p.point.throughput).toFixed(1);
    const fill = front.has(i) ? '#d62728' : '#1f77b4';
    const tip = `#${p.index} ${p.label} @ c=${p.point.concurrency}: ${p.point.throughput.toFixed(1)}/s, p99 ${p.point.p99Ms.toFixed(2)} ms`;
    out.push(`<circle cx="${cx}" cy="${cy}" r="4" fill="${fill}"><title>${esc(tip)}</title></circle>`);
    if (p.written) out.push(`<circle cx="${cx}" cy="${cy}" r="8" fill="none" stroke="black" stroke-width="1.5"/>`);
    out.push(`<text x="${Number(cx) + 6}" y="${Number(cy) - 6}" font-size="10">${p.index}</text>`);
  });
  out.push(
    `<text x="${W - m.r}" y="${m.t - 6}" text-anchor="end" font-size="11" fill="#555">red: Pareto front · ringed: written config</text>`,
    '</svg>',
  );
  return `${out.join('\n')}\n`;
}
