import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { callUnary, inferenceClient, simpleRaw, startGrpcNereid, type GrpcNereid } from '../helpers/grpc.js';

/** Real certificates made here with the openssl CLI: a CA, a server cert for 127.0.0.1/localhost, a client cert. */
interface Pki {
  ca: Buffer;
  serverCert: Buffer;
  serverKey: Buffer;
  clientCert: Buffer;
  clientKey: Buffer;
  otherCa: Buffer;
}

function makePki(dir: string): Pki {
  const ssl = (...args: string[]): void => {
    execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' });
  };
  const ca = (name: string): void => {
    ssl(
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-days',
      '2',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.crt`,
    );
  };
  const leaf = (name: string, ext: string): void => {
    writeFileSync(join(dir, `${name}.ext`), ext);
    ssl(
      'req',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-subj',
      `/CN=${name}`,
      '-keyout',
      `${name}.key`,
      '-out',
      `${name}.csr`,
    );
    ssl(
      'x509',
      '-req',
      '-in',
      `${name}.csr`,
      '-CA',
      'ca.crt',
      '-CAkey',
      'ca.key',
      '-CAcreateserial',
      '-days',
      '2',
      '-extfile',
      `${name}.ext`,
      '-out',
      `${name}.crt`,
    );
  };
  ca('ca');
  ca('other');
  leaf('server', 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n');
  leaf('client', 'extendedKeyUsage=clientAuth\n');
  const read = (f: string): Buffer => readFileSync(join(dir, f));
  return {
    ca: read('ca.crt'),
    serverCert: read('server.crt'),
    serverKey: read('server.key'),
    clientCert: read('client.crt'),
    clientKey: read('client.key'),
    otherCa: read('other.crt'),
  };
}

const live = (client: grpc.Client): Promise<{ live: boolean }> =>
  callUnary(client, 'ServerLive', {}, { deadline: Date.now() + 5000 });

describe('gRPC over TLS', () => {
  let dir: string;
  let pki: Pki;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'nereid-tls-'));
    pki = makePki(dir);
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  describe('server TLS (--grpc-use-ssl)', () => {
    let n: GrpcNereid;
    before(async () => {
      n = await startGrpcNereid({ tls: { cert: pki.serverCert, key: pki.serverKey, mutual: false } });
    });
    after(async () => {
      await n.close();
    });

    it('serves a client that trusts the CA', async () => {
      const c = inferenceClient(n.address, grpc.credentials.createSsl(pki.ca));
      try {
        assert.deepEqual(await live(c), { live: true });
        const res = await callUnary<{ outputs: unknown[] }>(c, 'ModelInfer', simpleRaw());
        assert.equal(res.outputs.length, 2);
      } finally {
        c.close();
      }
    });

    it('BAD CALL - refuses a plaintext client and a client trusting another CA', async () => {
      const plain = inferenceClient(n.address);
      const stranger = inferenceClient(n.address, grpc.credentials.createSsl(pki.otherCa));
      try {
        await assert.rejects(live(plain), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
        await assert.rejects(live(stranger), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
      } finally {
        plain.close();
        stranger.close();
      }
    });
  });

  describe('mutual TLS (--grpc-use-ssl-mutual)', () => {
    let n: GrpcNereid;
    before(async () => {
      n = await startGrpcNereid({
        tls: { cert: pki.serverCert, key: pki.serverKey, rootCert: pki.ca, mutual: true },
      });
    });
    after(async () => {
      await n.close();
    });

    it('serves a client presenting a certificate signed by the root CA', async () => {
      const c = inferenceClient(n.address, grpc.credentials.createSsl(pki.ca, pki.clientKey, pki.clientCert));
      try {
        assert.deepEqual(await live(c), { live: true });
      } finally {
        c.close();
      }
    });

    it('BAD CALL - refuses a client without a certificate', async () => {
      const c = inferenceClient(n.address, grpc.credentials.createSsl(pki.ca));
      try {
        await assert.rejects(live(c), (e: grpc.ServiceError) => e.code === grpc.status.UNAVAILABLE);
      } finally {
        c.close();
      }
    });

    it('BAD CALL - mutual TLS without a root certificate does not start', async () => {
      await assert.rejects(
        startGrpcNereid({ tls: { cert: pki.serverCert, key: pki.serverKey, mutual: true } }),
        /root certificate/,
      );
    });
  });
});
