/**
 * Environment for child processes a test starts that could reach for the network (pip, curl): no test may use a
 * package index or the network. pip is told to use no index, and every HTTP(S) proxy variable points at the
 * discard port on loopback, where nothing listens, so an attempt fails at once with "connection refused" instead
 * of downloading (or waiting minutes for a timeout). Loopback itself stays direct: the tests' own servers.
 */
export const OFFLINE_ENV: Readonly<Record<string, string>> = Object.freeze({
  PIP_NO_INDEX: '1',
  PIP_DISABLE_PIP_VERSION_CHECK: '1',
  http_proxy: 'http://127.0.0.1:9',
  https_proxy: 'http://127.0.0.1:9',
  HTTP_PROXY: 'http://127.0.0.1:9',
  HTTPS_PROXY: 'http://127.0.0.1:9',
  ALL_PROXY: 'http://127.0.0.1:9',
  all_proxy: 'http://127.0.0.1:9',
  no_proxy: '127.0.0.1,localhost,::1',
  NO_PROXY: '127.0.0.1,localhost,::1',
});
