/**
 * Human renderings of the reports the commands print (the JSON output is the report itself).
 */
import type { Explanation, ExplanationSummary } from '@ert/scheduler';
import type { DiscoveryReport, SyncReport } from '@ert/tracker';
import type { Output } from './output.js';
import type { SimulationReport } from './simulation.js';
import { capacityOf } from '@ert/plugin-api';
import { toCandidatesQuery } from '@ert/placement';

const percent = (fraction: number): string => `${(fraction * 100).toFixed(1)}%`;

/** Plugins (available or why not), then the merged provider tree with inventories and traits. */
export function renderDiscovery(out: Output, report: DiscoveryReport): string {
  const plugins = out.table(report.plugins, [
    { header: 'PLUGIN', value: (p) => p.plugin },
    { header: 'AVAILABLE', value: (p) => (p.available ? 'yes' : 'no') },
    { header: 'PROVIDERS', value: (p) => p.providers.length },
    { header: 'STATS', value: (p) => (p.stats ? `v${p.stats.schemaVersion}` : (p.statsProblem?.message ?? '')) },
    { header: 'MS', value: (p) => Math.round(p.timingMs * 10) / 10 },
    { header: 'REASON', value: (p) => p.reason ?? '' },
  ]);
  const inventories = report.providers.flatMap((p) =>
    Object.entries(p.inventories).map(([rc, inv]) => ({ provider: p.name, rc, inv })),
  );
  const tree = out.table(inventories, [
    { header: 'PROVIDER', value: (r) => r.provider },
    { header: 'CLASS', value: (r) => r.rc },
    { header: 'TOTAL', value: (r) => r.inv.total },
    { header: 'RESERVED', value: (r) => r.inv.reserved },
    { header: 'RATIO', value: (r) => r.inv.allocationRatio },
    { header: 'CAPACITY', value: (r) => capacityOf(r.inv) },
  ]);
  const traits = report.providers
    .filter((p) => p.traits.length > 0)
    .map((p) => `  ${p.name}: ${[...p.traits].sort().join(' ')}`)
    .join('\n');
  const problems = report.problems.map((p) => `  ${p.plugin ? `${p.plugin}: ` : ''}${p.message}`).join('\n');
  return (
    `host ${report.host} (${report.rootUuid})\n\n${plugins}\n${tree}` +
    (traits ? `\ntraits:\n${traits}\n` : '') +
    (problems ? `\nproblems:\n${problems}\n` : '')
  );
}

/** The discovery, then what the sync wrote. */
export function renderSync(out: Output, report: SyncReport): string {
  const changes = report.changes.length > 0 ? report.changes.map((c) => `  ${c}`).join('\n') : '  (nothing changed)';
  const stale = report.staleHosts.length > 0 ? `\nmarked stale: ${report.staleHosts.join(', ')}\n` : '';
  const extra = report.problems
    .filter((p) => !report.discovery.problems.includes(p))
    .map((p) => `  ${p.plugin ? `${p.plugin}: ` : ''}${p.message}`)
    .join('\n');
  return (
    renderDiscovery(out, report.discovery) +
    `\nwritten:\n${changes}\n` +
    stale +
    (extra ? `\nsync problems:\n${extra}\n` : '') +
    `instances re-added: ${report.instances}\n`
  );
}

/** Counts per filter with example reasons; with a full explanation, the candidates' weights. */
export function renderExplanation(out: Output, explanation: ExplanationSummary | Explanation): string {
  const lines = [`flavor ${explanation.flavor}: ${explanation.passed} of ${explanation.hosts} hosts passed`];
  if ('request' in explanation) lines.push(`request: ${toCandidatesQuery(explanation.request) || '(nothing to place)'}`);
  const filters = out.table(explanation.filters, [
    { header: 'FILTER', value: (f) => (f.stage === 'request-filter' ? `${f.filter} (request filter: ${f.query})` : f.filter) },
    { header: 'REMOVED', value: (f) => f.removed },
    { header: 'EXAMPLE', value: (f) => (f.examples[0] ? `${f.examples[0].host}: ${f.examples[0].reason}` : '') },
  ]);
  let weighed = '';
  if ('weighed' in explanation && explanation.weighed.length > 0) {
    const names = Object.keys(explanation.weighed[0]!.weights);
    weighed =
      '\ncandidates, best first:\n' +
      out.table(explanation.weighed, [
        { header: 'HOST', value: (w) => w.host },
        { header: 'WEIGHT', value: (w) => w.weight },
        ...names.map((n) => ({ header: n.toUpperCase(), value: (w: (typeof explanation.weighed)[number]) => w.weights[n]?.raw })),
      ]);
  }
  return `${lines.join('\n')}\n${filters}${weighed}`;
}

/** The simulation's outcome: counts, rejections by flavor, utilisation, fragmentation, speed. */
export function renderSimulation(out: Output, report: SimulationReport): string {
  const profiles = Object.entries(report.profiles)
    .map(([p, n]) => `${p} ${n}`)
    .join(', ');
  const byHost = new Map<string, number>();
  for (const p of report.placements) byHost.set(p.host, (byHost.get(p.host) ?? 0) + 1);
  const rejected = Object.entries(report.rejectedByFlavor).map(([flavor, count]) => ({
    flavor,
    count,
    example: report.rejections.find((r) => r.flavor === flavor)?.reason ?? '',
  }));
  const utilization = Object.entries(report.utilization).map(([rc, used]) => ({
    rc,
    used,
    stranded: report.fragmentation.strandedFreeShare[rc],
  }));
  return (
    `fleet: ${report.hosts} hosts (${profiles}), seed ${report.seed}\n` +
    `requests: ${report.requests}, placed ${report.placed}, rejected ${report.rejected}, departed ${report.departed}, live ${report.live}\n` +
    `placements on ${byHost.size} hosts; first: ${report.placements
      .slice(0, 5)
      .map((p) => `${p.flavor}->${p.host}`)
      .join(', ')}\n` +
    (rejected.length > 0
      ? `\nrejections by flavor:\n` +
        out.table(rejected, [
          { header: 'FLAVOR', value: (r) => r.flavor },
          { header: 'REJECTED', value: (r) => r.count },
          { header: 'REASON (first)', value: (r) => r.example },
        ])
      : '') +
    `\nutilisation at the end (stranded: share of free capacity on hosts that cannot fit ${report.fragmentation.flavor}; ${report.fragmentation.hostsThatFit} hosts can):\n` +
    out.table(utilization, [
      { header: 'CLASS', value: (u) => u.rc },
      { header: 'USED', value: (u) => percent(u.used), align: 'right' },
      { header: 'STRANDED FREE', value: (u) => (u.stranded === undefined ? '' : percent(u.stranded)), align: 'right' },
    ]) +
    `\ndecisions per second: ${Math.round(report.decisionsPerSecond)} (time in select only; whole run ${report.elapsedMs} ms)\n`
  );
}
