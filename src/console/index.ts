/** The web console Nereid serves under `/console` on its HTTP port, and what feeds it. */
export {
  consoleRoutes,
  type ConsoleAccess,
  type ConsoleCategory,
  type ConsoleLatencySource,
  type ConsoleLogSource,
  type ConsoleOptions,
  type ConsoleSources,
} from './routes.js';
export { crossSiteRefusal } from './cross-site.js';
export { LatencyWindow, fanOutObserver, type LatencySummary } from './latency-window.js';
export { LogRing } from './log-ring.js';
