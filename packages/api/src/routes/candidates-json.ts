import type { PlacementRequest } from '@ert/plugin-api';
import { candidateRoots, providerSummary, type CandidateAllocationRequest, type FitProvider, type WorldIndex } from '@ert/placement';
import { jsonNumber, jsonString, JsonWriter } from '../json-writer.js';
import { atLeast, v, type Version } from '../microversion.js';

/**
 * The body of `GET /allocation_candidates` at `version` (PLACEMENT-API.md §3.9), written
 * straight into bytes: an answer of 1,000 candidates is about 0.6 MB, and building it as
 * objects, serialising them and encoding the text took most of the request. Each provider's
 * summary is kept serialised between requests (providers are immutable snapshots: a changed
 * provider is a new object), so it is written once per change, not once per answer. The bytes
 * are what `JSON.stringify` writes for the same body as objects, key for key (tested against it).
 */
export function candidatesJson(found: readonly CandidateAllocationRequest[], world: WorldIndex, request: PlacementRequest, version: Version): Buffer {
  // The version's switches, once (not per candidate and provider).
  const listForm = !atLeast(version, v('1.12'));
  const withMappings = atLeast(version, v('1.34'));
  const allResources = atLeast(version, v('1.27'));
  const withTraits = atLeast(version, v('1.17'));
  const treeSummaries = atLeast(version, v('1.29'));

  const w = new JsonWriter();
  w.raw('{"allocation_requests":[');
  found.forEach((candidate, i) => {
    const uuids = Object.keys(candidate.allocations).sort();
    const allocations = listForm
      ? `[${uuids.map((uuid) => `{"resource_provider":{"uuid":${jsonString(uuid)}},"resources":${amountsJson(candidate.allocations[uuid]!)}}`).join(',')}]`
      : `{${uuids.map((uuid) => `${jsonString(uuid)}:{"resources":${amountsJson(candidate.allocations[uuid]!)}}`).join(',')}}`;
    // One write per candidate: text for it is built as a string, then written at once.
    w.raw(`${i > 0 ? ',' : ''}{"allocations":${allocations}${withMappings ? `,"mappings":${mappingsJson(candidate.mappings)}` : ''}}`);
  });

  // Before 1.29 Placement summarises only the providers the requests use (from 1.29, every
  // provider of their trees); before 1.27 a summary lists only the classes the request asked for.
  const used = treeSummaries ? undefined : new Set(found.flatMap((c) => Object.keys(c.allocations)));
  const requested = allResources ? undefined : new Set(request.groups.flatMap((g) => Object.keys(g.resources)));
  w.raw('],"provider_summaries":{');
  let first = true;
  for (const root of candidateRoots(found, world)) {
    for (const p of world.trees.get(root)!) {
      if (used !== undefined && !used.has(p.uuid)) continue;
      if (!first) w.raw(',');
      if (requested === undefined) w.bytes(keptSummary(p, root, treeSummaries));
      else w.raw(`${jsonString(p.uuid)}:${summaryJson(p, root, { requested, withTraits, treeSummaries })}`);
      first = false;
    }
  }
  w.raw('}}');
  return w.done();
}

/** `{"CLASS":amount,...}`, classes sorted. */
function amountsJson(amounts: Record<string, number>): string {
  const classes = Object.keys(amounts).sort();
  return `{${classes.map((c) => `${jsonString(c)}:${jsonNumber(amounts[c]!)}`).join(',')}}`;
}

/** `{"suffix":["uuid",...],...}`: keys in JSON.stringify's order (for-in's: integer-like suffixes first). */
function mappingsJson(mappings: Record<string, string[]>): string {
  const entries: string[] = [];
  for (const suffix in mappings) entries.push(`${jsonString(suffix)}:[${mappings[suffix]!.map(jsonString).join(',')}]`);
  return `{${entries.join(',')}}`;
}

interface SummaryShape {
  /** Only these classes (before 1.27); every class when undefined. */
  requested?: ReadonlySet<string>;
  withTraits: boolean;
  treeSummaries: boolean;
}

function summaryJson(p: FitProvider, root: string, shape: SummaryShape): string {
  const s = providerSummary(p, root);
  const classes = Object.keys(s.resources)
    .filter((c) => shape.requested === undefined || shape.requested.has(c))
    .sort();
  let text = `{"resources":{${classes.map((c) => `${jsonString(c)}:{"capacity":${jsonNumber(s.resources[c]!.capacity)},"used":${jsonNumber(s.resources[c]!.used)}}`).join(',')}}`;
  if (shape.withTraits) text += `,"traits":[${s.traits.map(jsonString).join(',')}]`;
  if (shape.treeSummaries) text += `,"parent_provider_uuid":${s.parentProviderUuid === null ? 'null' : jsonString(s.parentProviderUuid)},"root_provider_uuid":${jsonString(s.rootProviderUuid)}`;
  return `${text}}`;
}

/** `"uuid":{summary}` from 1.27 (every class, with traits), kept per provider snapshot, tree shape and root. */
const kept = new WeakMap<FitProvider, { root: string; treeSummaries: boolean; bytes: Buffer }>();
function keptSummary(p: FitProvider, root: string, treeSummaries: boolean): Buffer {
  const hit = kept.get(p);
  if (hit !== undefined && hit.root === root && hit.treeSummaries === treeSummaries) return hit.bytes;
  const bytes = Buffer.from(`${jsonString(p.uuid)}:${summaryJson(p, root, { withTraits: true, treeSummaries })}`);
  kept.set(p, { root, treeSummaries, bytes });
  return bytes;
}
