import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parseFlags } from './flags.js';
import { parseBackendConfig, withTensorRTPlanCache } from './backend-config-flag.js';
import { parseCacheConfig } from './flag-settings.js';

describe('nereid serve flags', () => {
  it("takes Triton's flag names in both --flag=value and --flag value forms, with Triton's defaults", () => {
    const { values } = parseFlags([
      '--model-repository=/a',
      '--model-store',
      '/b',
      '--http-port',
      '9000',
      '--exit-on-error=false',
      '--strict-model-config=true',
      '--disable-auto-complete-config',
    ]);
    assert.deepEqual(values['model-repository'], ['/a', '/b']);
    assert.equal(values['http-port'], 9000);
    assert.equal(values['exit-on-error'], false);
    assert.equal(values['strict-model-config'], true);
    assert.equal(values['disable-auto-complete-config'], true);
    assert.equal(values['strict-readiness'], true);
    assert.equal(values['http-max-input-size'], 64 * 1024 * 1024);
    assert.equal(values['model-control-mode'], 'none');
  });

  it('BAD CALL - rejects an unknown flag and suggests the nearest one', () => {
    assert.throws(() => parseFlags(['--http-prot=1']), /unknown option '--http-prot'; did you mean '--http-port'\?/);
  });

  it('BAD CALL - rejects a non-integer port, a bad boolean, a bad choice and a missing value', () => {
    assert.throws(() => parseFlags(['--http-port=abc']), /--http-port expects an integer, got 'abc'/);
    assert.throws(() => parseFlags(['--exit-on-error=maybe']), /expects true or false/);
    assert.throws(() => parseFlags(['--model-control-mode=sometimes']), /must be one of none, poll, explicit/);
    assert.throws(() => parseFlags(['--http-port']), /needs a value/);
  });

  it("--tensorrt-plan-cache=DIR is the tensorrt backend's plan-cache-directory; two different folders are refused", () => {
    const { values } = parseFlags(['--model-repository=/a', '--tensorrt-plan-cache=/var/cache/a,b']);
    const m = withTensorRTPlanCache(parseBackendConfig(['tensorrt,plugins=/p.so']), values['tensorrt-plan-cache']);
    assert.deepEqual(m.get('tensorrt'), { plugins: '/p.so', 'plan-cache-directory': '/var/cache/a,b' });
    const same = parseBackendConfig(['tensorrt,plan-cache-directory=/c']);
    assert.deepEqual(withTensorRTPlanCache(same, '/c').get('tensorrt'), { 'plan-cache-directory': '/c' });
    assert.throws(
      () => withTensorRTPlanCache(parseBackendConfig(['tensorrt,plan-cache-directory=/c']), '/d'),
      /--tensorrt-plan-cache=\/d and --backend-config=tensorrt,plan-cache-directory=\/c name different folders/,
    );
  });

  it('parses --backend-config=<backend>,<key>=<value> and rejects other shapes', () => {
    const m = parseBackendConfig(['onnxruntime,default-max-batch-size=8', 'onnxruntime,enable-global-threadpool=1']);
    assert.deepEqual(m.get('onnxruntime'), { 'default-max-batch-size': '8', 'enable-global-threadpool': '1' });
    assert.throws(() => parseBackendConfig(['onnxruntime']), /<backend>,<key>=<value>/);
    assert.throws(() => parseBackendConfig([',a=1']), /<backend>,<key>=<value>/);
  });

  it("parses seed 000's several settings in one flag, verbatim, with or without the shell's quote removal", () => {
    const want = { 'coalesce-request-input': 'true', plugins: '/a.so;/b.so', 'version-compatible': 'true' };
    // As a shell passes it (quotes removed) and as written (a manifest's argv keeps them).
    for (const e of [
      'tensorrt,coalesce-request-input=true,plugins=/a.so;/b.so,version-compatible=true',
      'tensorrt,coalesce-request-input=true,plugins="/a.so;/b.so",version-compatible=true',
      // The seed's own line closes its quote after the next setting.
      'tensorrt,coalesce-request-input=true,plugins="/a.so;/b.so,version-compatible=true"',
    ]) {
      assert.deepEqual(parseBackendConfig([e]).get('tensorrt'), want, e);
    }
  });

  it("parses Triton's global form with no backend name (every backend gets it)", () => {
    assert.deepEqual(parseBackendConfig(['default-max-batch-size=8']).get(''), { 'default-max-batch-size': '8' });
  });

  it("parses Triton's --cache-config=local,size=<bytes> and the deprecated --response-cache-byte-size", () => {
    assert.equal(parseCacheConfig(parseFlags(['--cache-config=local,size=1048576']).values), 1048576);
    assert.equal(parseCacheConfig(parseFlags(['--response-cache-byte-size=4096']).values), 4096);
    assert.equal(parseCacheConfig(parseFlags([]).values), undefined);
  });

  it('BAD CALL - refuses the redis cache, an unknown cache or key, and a size that is not a byte count', () => {
    const parse = (arg: string) => parseCacheConfig(parseFlags([arg]).values);
    assert.throws(() => parse('--cache-config=redis,host=localhost'), /the redis cache is not implemented in Nereid/);
    assert.throws(() => parse('--cache-config=disk,size=1'), /unknown cache 'disk'/);
    assert.throws(() => parse('--cache-config=local,capacity=1'), /unknown key 'capacity'/);
    assert.throws(() => parse('--cache-config=local,size=1MB'), /must be a number of bytes, got '1MB'/);
    assert.throws(() => parse('--cache-config=local'), /must look like <cache>,<key>=<value>/);
  });
});
