import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loadServices } from './grpc/proto.js';
import { RPC_CATEGORIES } from './grpc/restrict.js';
import { API_CATEGORIES, GRPC_RESTRICTED_HEADER_PREFIX, parseRestrictions, refusedBy } from './restricted.js';

const http = (entries: string[]) => parseRestrictions(entries, { flag: 'http-restricted-api', kind: 'api' });

describe('parseRestrictions', () => {
  it('maps each listed API to its header and value', () => {
    const r = http(['model-repository,logging:Admin-Key=s3cret', 'inference:infer-key=a=b']);
    assert.deepEqual(r.get('model-repository'), { header: 'Admin-Key', key: 'admin-key', value: 's3cret' });
    assert.equal(r.get('logging')?.header, 'Admin-Key');
    assert.equal(r.get('inference')?.value, 'a=b', 'the value is everything after the first =');
    assert.equal(r.get('health'), undefined);
  });

  it('prefixes gRPC keys with triton-grpc-protocol-', () => {
    const r = parseRestrictions(['health:k=v'], {
      flag: 'grpc-restricted-protocol',
      kind: 'protocol',
      prefix: GRPC_RESTRICTED_HEADER_PREFIX,
    });
    assert.equal(r.get('health')?.key, 'triton-grpc-protocol-k');
  });

  it('BAD FLAG - an unknown API, an API in two groups and a malformed entry fail with Triton wording', () => {
    assert.throws(() => http(['model-reposit:k=v']), /unknown restricted api 'model-reposit'/);
    assert.throws(
      () => http(['health:k=v', 'health,metadata:x=y']),
      /restricted api 'health' can not be specified in multiple config groups/,
    );
    for (const bad of ['health', 'health:k', 'health:=v', ':k=v', 'health:k=']) {
      assert.throws(() => http([bad]), /--http-restricted-api option format is '<api list>:<key>=<value>'/, bad);
    }
    assert.throws(() => http(['health:bad key=v']), /not a valid header name/);
    assert.throws(
      () => parseRestrictions(['nope:k=v'], { flag: 'grpc-restricted-protocol', kind: 'protocol' }),
      /unknown restricted protocol 'nope'/,
    );
  });

  it('refusedBy: open categories pass; restricted ones need the exact value, in every copy', () => {
    const r = http(['inference:k=v']);
    const headers = (h: Record<string, string | string[]>) => (k: string) => h[k];
    assert.equal(refusedBy(r, 'health', headers({})), undefined);
    assert.equal(refusedBy(r, 'inference', headers({ k: 'v' })), undefined);
    assert.ok(refusedBy(r, 'inference', headers({})));
    assert.ok(refusedBy(r, 'inference', headers({ k: 'V' })));
    assert.ok(refusedBy(r, 'inference', headers({ k: ['v', 'w'] })));
  });

  it('every gRPC rpc of the served services has a category (a new rpc cannot go unchecked)', () => {
    const { Inference, Health } = loadServices();
    for (const rpc of [...Object.keys(Inference.service), ...Object.keys(Health.service)]) {
      assert.ok(API_CATEGORIES.includes(RPC_CATEGORIES[rpc]), rpc);
    }
  });
});
