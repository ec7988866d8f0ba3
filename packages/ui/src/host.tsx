import { useState } from 'preact/hooks';
import { api, type HostDetail, type InstanceDetail, type ProviderDetail } from './api.js';
import { useHostChanged } from './live.js';
import { Failure, Loading, useLoad } from './load.js';
import { Link } from './router.js';

/** Bits of a hex mask (`7ff`) as way numbers, lowest first. */
export function waysOf(hex: string): number[] {
  const value = BigInt(`0x${hex || '0'}`);
  const out: number[] = [];
  for (let i = 0; value >> BigInt(i) > 0n; i++) if ((value >> BigInt(i)) & 1n) out.push(i);
  return out;
}

/** Numbers as a kernel CPU list: `0-3,8,10-11`. */
export function listOf(numbers: readonly number[]): string {
  const sorted = [...new Set(numbers)].sort((a, b) => a - b);
  const runs: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    runs.push(i === j ? `${sorted[i]}` : `${sorted[i]}-${sorted[j]}`);
    i = j + 1;
  }
  return runs.join(',');
}

/** How long ago, for people: `12 s`, `4 min`, `3 h`, `2 d`. */
export function ageOf(ms: number): string {
  const s = Math.max(0, Math.round(ms / 1000));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

/** A colour per instance of a way map, told apart by hue. */
const hueOf = (i: number): string => `hsl(${(i * 137) % 360}, 55%, 50%)`;

const statsOf = <T,>(detail: HostDetail, plugin: string): T | undefined => detail.stats.find((s) => s.plugin === plugin)?.data as T | undefined;

interface LlcStats {
  domains?: Array<{ id: number; cbmMask: string; reservedMask: string; ways: number }>;
}
interface LlcAssignment {
  domain: number;
  mask: string;
  closid?: number;
}

/** What an instance's llc assignment says, or undefined. */
const llcOf = (i: InstanceDetail): LlcAssignment | undefined => {
  const a = i.assignments.llc as Partial<LlcAssignment> | undefined;
  return a && typeof a.domain === 'number' && typeof a.mask === 'string' ? (a as LlcAssignment) : undefined;
};

/**
 * One LLC domain's way map: a cell per cache way (of the domain's capacity bitmask), held by
 * an instance (its colour and number), reserved for the host, or free; then the holders with
 * their masks and the free runs. The holders are the instance records' llc assignments
 * (what the store holds); the geometry and the reserved ways are the llc plugin's stats.
 */
function WayMap({ domain, cbm, reserved, holders }: { domain: number; cbm: string; reserved: string; holders: Array<{ instance: InstanceDetail; llc: LlcAssignment; index: number }> }) {
  const ways = waysOf(cbm);
  const reservedWays = new Set(waysOf(reserved));
  const owner = new Map<number, (typeof holders)[number]>();
  for (const h of holders) for (const w of waysOf(h.llc.mask)) owner.set(w, h);
  const free = ways.filter((w) => !reservedWays.has(w) && !owner.has(w));
  const runs: Array<[number, number]> = [];
  for (const w of free) {
    const last = runs[runs.length - 1];
    if (last && last[1] === w - 1) last[1] = w;
    else runs.push([w, w]);
  }
  return (
    <div class="way-map" data-domain={domain}>
      <h3>
        LLC domain {domain} <span class="muted">(mask {cbm}, {ways.length} ways)</span>
      </h3>
      <table class="ways" aria-label={`cache ways of domain ${domain}`}>
        <thead>
          <tr>
            <th scope="row">way</th>
            {ways.map((w) => (
              <th scope="col" class="num">
                {w}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          <tr>
            <th scope="row">held by</th>
            {ways.map((w) => {
              const h = owner.get(w);
              const holder = h ? h.instance.uuid : reservedWays.has(w) ? 'reserved' : 'free';
              const title = h ? `way ${w}: instance ${h.instance.uuid} (mask ${h.llc.mask}${h.llc.closid !== undefined ? `, closid ${h.llc.closid}` : ''})` : `way ${w}: ${holder}`;
              return (
                <td data-way={w} data-holder={holder} title={title} class={`way ${h ? 'held' : holder}`} style={h ? { background: hueOf(h.index) } : {}}>
                  {h ? h.index + 1 : holder === 'reserved' ? 'R' : '·'}
                </td>
              );
            })}
          </tr>
        </tbody>
      </table>
      <ul class="holders">
        {holders.map((h) => (
          <li data-instance={h.instance.uuid} data-mask={h.llc.mask}>
            <span class="swatch" style={{ background: hueOf(h.index) }} /> {h.index + 1}: <Link href={`/instances/${h.instance.uuid}`}>{h.instance.uuid}</Link> mask <code>{h.llc.mask}</code>, ways{' '}
            {listOf(waysOf(h.llc.mask))}
            {h.llc.closid !== undefined ? `, closid ${h.llc.closid}` : ''}
          </li>
        ))}
      </ul>
      <p data-testid={`free-runs-${domain}`} data-free={free.length}>
        Free: {free.length} ways{runs.length > 0 ? `, in runs ${runs.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`) + ` (${b - a + 1})`).join(', ')}` : ''}
        {reservedWays.size > 0 ? `; reserved for the host: ${listOf([...reservedWays])}` : ''}
      </p>
    </div>
  );
}

/** The way maps of every LLC domain: from the llc stats, or from the domains' providers when there are none. */
function WayMaps({ detail }: { detail: HostDetail }) {
  const stats = statsOf<LlcStats>(detail, 'llc');
  const held = detail.instances.map((instance) => ({ instance, llc: llcOf(instance) })).filter((h): h is { instance: InstanceDetail; llc: LlcAssignment } => h.llc !== undefined);
  const domains = new Map<number, { cbm: string; reserved: string }>();
  for (const d of stats?.domains ?? []) domains.set(d.id, { cbm: d.cbmMask, reserved: d.reservedMask });
  for (const p of detail.providers) {
    const m = /(?:^|_)llc_(\d+)$/.exec(p.name);
    const ways = p.inventories.CUSTOM_LLC_WAYS?.total;
    if (m && ways !== undefined && !domains.has(Number(m[1]))) domains.set(Number(m[1]), { cbm: ((1n << BigInt(ways)) - 1n).toString(16), reserved: '0' });
  }
  if (domains.size === 0) return null;
  return (
    <section aria-labelledby="ways-h" data-testid="way-map">
      <h2 id="ways-h">Cache ways (LLC)</h2>
      {[...domains.entries()]
        .sort(([a], [b]) => a - b)
        .map(([id, d]) => (
          <WayMap domain={id} cbm={d.cbm} reserved={d.reserved} holders={held.filter((h) => h.llc.domain === id).map((h, index) => ({ ...h, index }))} />
        ))}
    </section>
  );
}

interface Pool {
  sizeKb: number;
  total: number;
  free: number;
  surplus: number;
  claimed: number;
  /** Absent in stats of older trackers. */
  reserved?: number;
  usedOutside?: number;
}

const sizeOf = (kb: number): string => (kb >= 1048576 ? `${kb / 1048576} GB` : kb >= 1024 ? `${kb / 1024} MB` : `${kb} kB`);

/** Huge pages per NUMA node and page size (the memory plugin's stats). */
function HugePages({ detail }: { detail: HostDetail }) {
  const stats = statsOf<{ numaNodes?: Array<{ id: number; totalMb: number; freeMb: number; hugePages: Pool[] }> }>(detail, 'memory');
  if (!stats?.numaNodes) return null;
  return (
    <section aria-labelledby="pages-h">
      <h2 id="pages-h">Memory and huge pages per NUMA node</h2>
      <table data-testid="huge-pages">
        <thead>
          <tr>
            <th scope="col">node</th>
            <th scope="col" class="num">memory MB</th>
            <th scope="col" class="num">free MB</th>
            <th scope="col">page size</th>
            <th scope="col" class="num">pages</th>
            <th scope="col" class="num">free</th>
            <th scope="col" class="num">held by instances</th>
            <th scope="col" class="num" title="kept from instances: reservedHugePages or pages seen used outside ert, whichever is larger">
              kept
            </th>
            <th scope="col" class="num">surplus</th>
          </tr>
        </thead>
        <tbody>
          {stats.numaNodes.flatMap((n) =>
            (n.hugePages.length > 0 ? n.hugePages : [undefined]).map((p, i) => (
              <tr data-node={n.id} data-size={p?.sizeKb}>
                <th scope="row">{i === 0 ? n.id : ''}</th>
                <td class="num">{i === 0 ? n.totalMb : ''}</td>
                <td class="num">{i === 0 ? n.freeMb : ''}</td>
                <td>{p ? sizeOf(p.sizeKb) : 'no huge pages'}</td>
                <td class="num" data-field="total">
                  {p?.total ?? ''}
                </td>
                <td class="num" data-field="free">
                  {p?.free ?? ''}
                </td>
                <td class="num" data-field="claimed">
                  {p?.claimed ?? ''}
                </td>
                <td class="num" data-field="kept" title={p ? `reserved ${p.reserved ?? 0}, used outside ert ${p.usedOutside ?? 0}` : undefined}>
                  {p ? Math.max(p.reserved ?? 0, p.usedOutside ?? 0) : ''}
                </td>
                <td class="num">{p?.surplus ?? ''}</td>
              </tr>
            )),
          )}
        </tbody>
      </table>
    </section>
  );
}

/** Pinned CPUs per instance (the records' cpus) and the host's dedicated CPUs (the vcpu plugin's stats). */
function PinnedCpus({ detail }: { detail: HostDetail }) {
  const vcpu = statsOf<{ dedicatedCpus?: string; freeDedicatedCpus?: string; sharedCpus?: string; numaNodes?: Array<{ id: number; cpus: string }> }>(detail, 'vcpu');
  const pinned = detail.instances.filter((i) => i.cpus && i.cpus.length > 0);
  if (!vcpu && pinned.length === 0) return null;
  return (
    <section aria-labelledby="cpus-h">
      <h2 id="cpus-h">CPUs</h2>
      {vcpu && (
        <p>
          Shared (VCPU): <code>{vcpu.sharedCpus || '–'}</code> · dedicated (PCPU): <code>{vcpu.dedicatedCpus || '–'}</code> · dedicated and free: <code data-testid="free-dedicated">{vcpu.freeDedicatedCpus || '–'}</code>
          {vcpu.numaNodes && vcpu.numaNodes.length > 0 && <> · NUMA: {vcpu.numaNodes.map((n) => `node ${n.id} ${n.cpus}`).join('; ')}</>}
        </p>
      )}
      {pinned.length === 0 ? (
        <p class="muted">No instance is pinned.</p>
      ) : (
        <table data-testid="pinned">
          <thead>
            <tr>
              <th scope="col">instance</th>
              <th scope="col">pinned CPUs</th>
            </tr>
          </thead>
          <tbody>
            {pinned.map((i) => (
              <tr data-instance={i.uuid}>
                <td>
                  <Link href={`/instances/${i.uuid}`}>{i.uuid}</Link>
                </td>
                <td data-field="cpus">{listOf(i.cpus!)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

interface PstateStats {
  available: boolean;
  reason?: string;
  driver: string | null;
  intelPstate: null | { status: string; noTurbo: boolean | null };
  governors: string[];
  minFreqMhz: number | null;
  maxFreqMhz: number | null;
  baseFreqMhz: number | null;
  epp: null | { available: string[]; current: string[] };
  turbo: boolean | null;
  policies: Array<{ cpus: string; governor: string; scalingMinMhz?: number; scalingMaxMhz?: number; epp?: string | null }>;
}

/** P-state: the pstate plugin's stats (driver, governors, frequencies, EPP, per policy). */
function Pstate({ detail }: { detail: HostDetail }) {
  const p = statsOf<PstateStats>(detail, 'pstate');
  if (!p) return null;
  return (
    <section aria-labelledby="pstate-h" data-testid="pstate">
      <h2 id="pstate-h">P-state</h2>
      {!p.available ? (
        <p class="muted">Not available{p.reason ? `: ${p.reason}` : ''}.</p>
      ) : (
        <>
          <p>
            Driver <strong data-field="driver">{p.driver ?? '–'}</strong>
            {p.intelPstate ? ` (intel_pstate ${p.intelPstate.status})` : ''} · {p.minFreqMhz ?? '?'}–{p.maxFreqMhz ?? '?'} MHz, base {p.baseFreqMhz ?? '?'} MHz · turbo{' '}
            {p.turbo === null ? 'unknown' : p.turbo ? 'on' : 'off'} · governors {p.governors.join(', ') || '–'}
            {p.epp ? ` · EPP ${p.epp.current.join(', ')} (of ${p.epp.available.join(', ')})` : ''}
          </p>
          <table>
            <thead>
              <tr>
                <th scope="col">CPUs</th>
                <th scope="col">governor</th>
                <th scope="col" class="num">scaling MHz</th>
                <th scope="col">EPP</th>
              </tr>
            </thead>
            <tbody>
              {p.policies.map((pol) => (
                <tr>
                  <td>{pol.cpus}</td>
                  <td data-field="governor">{pol.governor}</td>
                  <td class="num">
                    {pol.scalingMinMhz ?? '?'}–{pol.scalingMaxMhz ?? '?'}
                  </td>
                  <td>{pol.epp ?? '–'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </>
      )}
    </section>
  );
}

/** Every plugin's latest stats: when written, how old, stale or not, and the data. */
function Stats({ detail }: { detail: HostDetail }) {
  return (
    <section aria-labelledby="stats-h">
      <h2 id="stats-h">Plugin stats</h2>
      {detail.stats.length === 0 ? (
        <p class="muted">none</p>
      ) : (
        <table data-testid="stats">
          <thead>
            <tr>
              <th scope="col">plugin</th>
              <th scope="col" class="num">schema</th>
              <th scope="col">written</th>
              <th scope="col" class="num">age</th>
              <th scope="col">data</th>
            </tr>
          </thead>
          <tbody>
            {detail.stats.map((s) => (
              <tr data-plugin={s.plugin}>
                <th scope="row">{s.plugin}</th>
                <td class="num">{s.schema_version}</td>
                <td>{s.updated_at}</td>
                <td class="num" data-field="age" title={`${s.age_ms} ms`}>
                  {ageOf(s.age_ms)}
                  {s.stale ? ' (stale)' : ''}
                </td>
                <td>
                  <details>
                    <summary>show</summary>
                    <pre>{JSON.stringify(s.data, null, 2)}</pre>
                  </details>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}

/** An instance's allocations as `CLASS amount (provider)` per provider, provider names from the tree. */
export function allocationsText(i: InstanceDetail, names: Map<string, string>): string {
  return Object.entries(i.allocations)
    .map(([uuid, a]) => `${names.get(uuid) ?? uuid}: ${Object.entries(a.resources).map(([c, n]) => `${c} ${n}`).join(', ')}`)
    .join('; ');
}

function ProviderNode({ detail, children }: { detail: ProviderDetail; children: Map<string, ProviderDetail[]> }) {
  const kids = children.get(detail.uuid) ?? [];
  const inventories = Object.entries(detail.inventories);
  return (
    <li data-provider={detail.name}>
      <details open>
        <summary>
          <strong>{detail.name}</strong> <code class="uuid">{detail.uuid}</code> generation {detail.generation}
          {detail.traits.length > 0 && <span class="muted"> · {detail.traits.length} traits</span>}
        </summary>
        {inventories.length > 0 ? (
          <table class="inventory">
            <thead>
              <tr>
                <th scope="col">class</th>
                <th scope="col" class="num">total</th>
                <th scope="col" class="num">reserved</th>
                <th scope="col" class="num">ratio</th>
                <th scope="col" class="num">capacity</th>
                <th scope="col" class="num">used</th>
                <th scope="col" class="num">free</th>
              </tr>
            </thead>
            <tbody>
              {inventories.map(([cls, inv]) => (
                <tr data-class={cls}>
                  <th scope="row">{cls}</th>
                  <td class="num">{inv.total}</td>
                  <td class="num">{inv.reserved}</td>
                  <td class="num">{inv.allocation_ratio}</td>
                  <td class="num">{inv.capacity}</td>
                  <td class="num" data-field="used">
                    {inv.used}
                  </td>
                  <td class="num">{Math.max(inv.capacity - inv.used, 0)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        ) : (
          <p class="muted">no inventory</p>
        )}
        {detail.traits.length > 0 && (
          <details class="traits">
            <summary>traits</summary>
            <p>{detail.traits.join(' ')}</p>
          </details>
        )}
        {kids.length > 0 && (
          <ul class="tree">
            {kids.map((k) => (
              <ProviderNode detail={k} children={children} />
            ))}
          </ul>
        )}
      </details>
    </li>
  );
}

/**
 * `/ui/hosts/NAME`: the host's summary, provider tree, way maps, huge pages, pinned CPUs,
 * P-state, plugin stats and instances, from one read (GET /scheduler/v1/hosts/NAME), read
 * again when the live feed says the host changed.
 */
export function HostPage({ name }: { name: string }) {
  const [version, setVersion] = useState(0);
  const data = useLoad(() => api.host(name), [name, version]);
  useHostChanged([name], () => setVersion((v) => v + 1));
  if (data.error) {
    const unknown = (data.error as { code?: string }).code === 'ERT_API_UNKNOWN_HOST';
    return unknown ? (
      <main>
        <h1>Host {name}</h1>
        <p class="problem" role="alert" data-testid="failure">
          no host named "{name}" in the store. <Link href="/hosts">Every host</Link>.
        </p>
      </main>
    ) : (
      <Failure error={data.error} />
    );
  }
  if (!data.value) return <Loading what={`host ${name}`} />;
  const detail = data.value;
  const { host, providers, instances } = detail;
  const children = new Map<string, ProviderDetail[]>();
  for (const p of providers) if (p.parent_provider_uuid) children.set(p.parent_provider_uuid, [...(children.get(p.parent_provider_uuid) ?? []), p]);
  for (const list of children.values()) list.sort((a, b) => a.name.localeCompare(b.name));
  const root = providers.find((p) => p.parent_provider_uuid === null);
  const names = new Map([...providers, ...detail.sharing_providers].map((p) => [p.uuid, p.name]));
  return (
    <main data-generation={host.generation}>
      <h1>
        Host <span data-testid="host-name">{name}</span>
      </h1>
      <p data-testid="host-summary">
        Status <strong title={host.status_reason}>{host.status}</strong>
        {host.status_reason ? ` (${host.status_reason})` : ''} · last update {host.last_update} · generation {host.generation}
        {host.machine ? ` · machine ${host.machine}` : ''}
      </p>
      {root && (
        <section aria-labelledby="tree-h">
          <h2 id="tree-h">
            Provider tree (<span data-testid="provider-count">{providers.length}</span> providers)
          </h2>
          <ul class="tree" data-testid="provider-tree">
            <ProviderNode detail={root} children={children} />
          </ul>
          {detail.sharing_providers.length > 0 && <p>Shared providers: {detail.sharing_providers.map((p) => p.name).join(', ')}</p>}
        </section>
      )}
      <WayMaps detail={detail} />
      <HugePages detail={detail} />
      <PinnedCpus detail={detail} />
      <Pstate detail={detail} />
      <Stats detail={detail} />
      <section aria-labelledby="inst-h">
        <h2 id="inst-h">
          Instances (<span data-testid="instance-count">{instances.length}</span>)
        </h2>
        {instances.length === 0 ? (
          <p class="muted">none</p>
        ) : (
          <table data-testid="instances">
            <thead>
              <tr>
                <th scope="col">uuid</th>
                <th scope="col">flavor</th>
                <th scope="col">state</th>
                <th scope="col">allocations</th>
                <th scope="col">holds</th>
                <th scope="col">project</th>
                <th scope="col">created</th>
              </tr>
            </thead>
            <tbody>
              {instances.map((i) => {
                const llc = llcOf(i);
                return (
                  <tr data-instance={i.uuid}>
                    <td>
                      <Link href={`/instances/${i.uuid}`}>
                        <code>{i.uuid}</code>
                      </Link>
                    </td>
                    <td>{i.flavor}</td>
                    <td title={i.reason}>{i.state}</td>
                    <td>{allocationsText(i, names) || '–'}</td>
                    <td>
                      {[llc ? `LLC ${llc.domain}: ${llc.mask}` : '', i.cpus?.length ? `CPUs ${listOf(i.cpus)}` : '', ...(i.units ?? [])].filter(Boolean).join('; ') || '–'}
                    </td>
                    <td>{i.project_id}</td>
                    <td>{i.created_at}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        )}
      </section>
    </main>
  );
}
