import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFromObject } from '@ert/core';
import { createStore } from '@ert/store';
import { isLoopback, resolveAuth, serve, ServeError } from '@ert/api';

function refusal(fn: () => unknown): ServeError {
  try {
    fn();
  } catch (err) {
    return err as ServeError;
  }
  throw new Error('expected a refusal');
}

describe('the auth mode of ert serve', () => {
  it('defaults to noauth2 on loopback only, and takes an explicit mode anywhere', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost']) {
      expect(isLoopback(host), host).toBe(true);
      expect(resolveAuth(host, undefined)).toBe('noauth2');
    }
    for (const host of ['0.0.0.0', '::', '10.0.0.5', '192.168.1.1', 'example.org']) {
      expect(isLoopback(host), host).toBe(false);
      const err = refusal(() => resolveAuth(host, undefined));
      expect(err.code).toBe('ERT_API_AUTH_REQUIRED');
      expect(err.message).toContain(`refusing to serve on ${host} without an explicit auth mode`);
      expect(resolveAuth(host, 'noauth2')).toBe('noauth2');
    }
    expect(refusal(() => resolveAuth('127.0.0.1', 'keystone')).code).toBe('ERT_API_BAD_AUTH');
  });

  it('is a config key, api.auth, checked by the config schema', () => {
    expect(configFromObject({ api: { auth: 'noauth2' } }, { configDir: '/' }).api).toEqual({ auth: 'noauth2' });
    expect(configFromObject({}, { configDir: '/' }).api).toBeUndefined();
    expect(() => configFromObject({ api: { auth: 'keystone' } }, { configDir: '/' })).toThrow(/api\.auth/);
    expect(() => configFromObject({ api: { other: 1 } }, { configDir: '/' })).toThrow(/api/);
  });

  it('serve() listens on 127.0.0.1 and closes', async () => {
    const dir = mkdtempSync(path.join(tmpdir(), 'ert-api-serve-'));
    const store = await createStore({ client: 'sqlite3', connection: path.join(dir, 'ert.db') });
    await store.migrate();
    try {
      const server = await serve({ store, host: '127.0.0.1', port: 0 });
      expect(server.auth).toBe('noauth2');
      expect(server.prefix).toBe('/placement');
      const res = await fetch(`${server.url}/placement/`);
      expect(res.status).toBe(200);
      expect((await fetch(`${server.url}/resource_providers`)).status).toBe(404);
      await server.close();
      await expect(fetch(`${server.url}/placement/`)).rejects.toThrow();
    } finally {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
