import { createHash } from 'node:crypto';

/**
 * The namespace of ert's name-based provider uuids. Fixed forever: changing it would
 * give every existing provider a new uuid.
 */
export const ERT_PROVIDER_NAMESPACE = '6f1c3b1e-8f5a-4d4e-9a63-2f6b1d0c7e41';

/**
 * RFC 4122 version-5 uuid (SHA-1 of namespace + name). The same name always gives the
 * same uuid, so a host's providers keep their uuids across restarts and re-installs.
 */
export function uuidV5(name: string, namespace: string = ERT_PROVIDER_NAMESPACE): string {
  const ns = Buffer.from(namespace.replace(/-/g, ''), 'hex');
  const hash = createHash('sha1').update(ns).update(name, 'utf8').digest();
  const bytes = hash.subarray(0, 16);
  bytes[6] = (bytes[6]! & 0x0f) | 0x50;
  bytes[8] = (bytes[8]! & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

/** Uuid of the provider with this name (a host's root is named after the host). */
export function providerUuid(providerName: string): string {
  return uuidV5(`provider:${providerName}`);
}

/** Name of a nested provider: `<host>_<key>`. */
export function childProviderName(hostName: string, key: string): string {
  return `${hostName}_${key}`;
}

/** The consumer that holds an instance's old allocations during a resize. */
export function migrationUuid(instanceUuid: string): string {
  return uuidV5(`migration:${instanceUuid}`);
}
