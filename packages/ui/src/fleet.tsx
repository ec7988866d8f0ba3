import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { api, type HostFacets, type HostView, type Zone } from './api.js';
import { useLiveHosts } from './live.js';
import { Failure, Loading, useLoad } from './load.js';
import { navigate } from './router.js';

/** Host statuses as the scheduler API gives them. */
export const STATUSES = ['up', 'stale', 'disabled'] as const;

/** used / capacity of `cls` on a host, or undefined when it has none of that class. */
export function ratioOf(host: HostView, cls: string): number | undefined {
  const r = host.resources[cls];
  if (!r || r.capacity <= 0) return undefined;
  return r.used / r.capacity;
}

/** A tile's colour: green (free) through yellow to red (full); grey without that class. */
export function colourOf(ratio: number | undefined): string {
  if (ratio === undefined) return '#9aa0a6';
  const r = Math.min(Math.max(ratio, 0), 1);
  return `hsl(${Math.round(120 * (1 - r))}, 65%, 42%)`;
}

/** Totals per resource class over `hosts`: capacity, used, free. */
export function totalsOf(hosts: readonly HostView[]): Array<[string, { capacity: number; used: number; free: number }]> {
  const totals = new Map<string, { capacity: number; used: number; free: number }>();
  for (const h of hosts) {
    for (const [cls, r] of Object.entries(h.resources)) {
      const t = totals.get(cls) ?? { capacity: 0, used: 0, free: 0 };
      t.capacity += r.capacity;
      t.used += r.used;
      t.free += r.free;
      totals.set(cls, t);
    }
  }
  return [...totals.entries()].sort(([a], [b]) => a.localeCompare(b));
}

interface Layout {
  size: number;
  cols: number;
  width: number;
  height: number;
}

/** Tiles of `size` px in rows that fill `width`, about 480 px tall whatever the count (4 to 28 px a tile). */
function layoutOf(n: number, width: number): Layout {
  const size = Math.max(4, Math.min(28, Math.floor(Math.sqrt((width * 480) / Math.max(n, 1)))));
  const cols = Math.max(1, Math.floor(width / size));
  return { size, cols, width, height: Math.max(size, Math.ceil(n / cols) * size) };
}

/**
 * Every host as a tile on one canvas (10,000 hosts are 10,000 rectangles, not DOM nodes).
 * Hover shows the values; a click or Enter opens the host; arrow keys move between tiles.
 */
function FleetCanvas({ hosts, cls }: { hosts: HostView[]; cls: string }) {
  const ref = useRef<HTMLCanvasElement>(null);
  const [width, setWidth] = useState(960);
  const [hover, setHover] = useState<{ i: number; x: number; y: number } | undefined>();
  const [focus, setFocus] = useState(0);
  const layout = useMemo(() => layoutOf(hosts.length, width), [hosts.length, width]);

  useEffect(() => {
    const canvas = ref.current!;
    const observer = new ResizeObserver(() => setWidth(Math.max(200, Math.floor(canvas.parentElement!.clientWidth))));
    observer.observe(canvas.parentElement!);
    return () => observer.disconnect();
  }, []);

  useEffect(() => {
    const canvas = ref.current!;
    const started = performance.now();
    const dpr = window.devicePixelRatio || 1;
    canvas.width = layout.width * dpr;
    canvas.height = layout.height * dpr;
    canvas.style.width = `${layout.width}px`;
    canvas.style.height = `${layout.height}px`;
    const g = canvas.getContext('2d')!;
    g.setTransform(dpr, 0, 0, dpr, 0, 0);
    g.clearRect(0, 0, layout.width, layout.height);
    const gap = layout.size >= 8 ? 2 : 1;
    const inner = layout.size - gap;
    hosts.forEach((h, i) => {
      const x = (i % layout.cols) * layout.size;
      const y = Math.floor(i / layout.cols) * layout.size;
      g.fillStyle = colourOf(ratioOf(h, cls));
      g.fillRect(x, y, inner, inner);
      if (h.status !== 'up' && inner >= 6) {
        // Not schedulable: a dark corner (disabled) or an amber one (stale), also said on hover and in the table.
        g.fillStyle = h.status === 'disabled' ? '#202124' : '#f9ab00';
        g.beginPath();
        g.moveTo(x, y);
        g.lineTo(x + inner / 2, y);
        g.lineTo(x, y + inner / 2);
        g.fill();
      }
    });
    if (document.activeElement === canvas && hosts[focus]) {
      g.strokeStyle = '#1a73e8';
      g.lineWidth = 2;
      g.strokeRect((focus % layout.cols) * layout.size - 1, Math.floor(focus / layout.cols) * layout.size - 1, layout.size + 1, layout.size + 1);
    }
    canvas.dataset.hosts = String(hosts.length);
    canvas.dataset.tile = String(layout.size);
    canvas.dataset.drawMs = (performance.now() - started).toFixed(1);
    // When it was drawn, ms after the page's navigation started (the first render, measured in the page).
    canvas.dataset.drawnAt = performance.now().toFixed(0);
  }, [hosts, cls, layout, focus]);

  const indexAt = (e: MouseEvent): number | undefined => {
    const rect = ref.current!.getBoundingClientRect();
    const col = Math.floor((e.clientX - rect.left) / layout.size);
    const row = Math.floor((e.clientY - rect.top) / layout.size);
    const i = row * layout.cols + col;
    return col >= 0 && col < layout.cols && i >= 0 && i < hosts.length ? i : undefined;
  };
  const shown = hover && hosts[hover.i];
  const r = shown?.resources[cls];
  return (
    <div class="fleet-canvas">
      <canvas
        ref={ref}
        data-testid="fleet-canvas"
        tabIndex={0}
        role="img"
        aria-label={`${hosts.length} hosts coloured by ${cls} used / capacity; arrow keys move, Enter opens a host; the Hosts page lists the same as a table`}
        onMouseMove={(e) => {
          const i = indexAt(e);
          setHover(i === undefined ? undefined : { i, x: e.offsetX, y: e.offsetY });
        }}
        onMouseLeave={() => setHover(undefined)}
        onClick={(e) => {
          const i = indexAt(e);
          if (i !== undefined) navigate(`/hosts/${encodeURIComponent(hosts[i]!.name)}`);
        }}
        onKeyDown={(e) => {
          const step = { ArrowRight: 1, ArrowLeft: -1, ArrowDown: layout.cols, ArrowUp: -layout.cols }[e.key];
          if (step !== undefined) {
            e.preventDefault();
            setFocus(Math.min(Math.max(focus + step, 0), hosts.length - 1));
          } else if (e.key === 'Enter' && hosts[focus]) navigate(`/hosts/${encodeURIComponent(hosts[focus].name)}`);
        }}
      />
      {shown && (
        <div class="tip" role="tooltip" style={{ left: `${hover.x + 14}px`, top: `${hover.y + 14}px` }}>
          <strong>{shown.name}</strong> ({shown.status})
          <br />
          {cls}: {r ? `${r.used} / ${r.capacity} used (${Math.round((100 * r.used) / Math.max(r.capacity, 1))}%)` : 'none'}
          <br />
          {shown.instances} instances
        </div>
      )}
    </div>
  );
}

/** The fleet's filters, as its address holds them (deep links: `/ui/?class=MEMORY_MB&status=up&zone=az1&trait=HW_CPU_X86_AVX2,!CUSTOM_X&aggregate=ssd`). */
export interface FleetFilters {
  /** The class tiles are coloured by (default VCPU). */
  cls?: string;
  /** Statuses shown (default all). */
  statuses: Set<string>;
  /** An availability zone, NO_ZONE, or '' for any. */
  zone: string;
  /** Traits every host shown has (any provider of its tree); `!NAME`: a trait it must not have. */
  traits: string[];
  /** An aggregate (name, or uuid) the host's root provider is in; '' for any. */
  aggregate: string;
}

const list = (v: string | null): string[] => (v ?? '').split(',').map((t) => t.trim()).filter((t) => t !== '');

/** The filters of a fleet address's query (`?trait=A,!B&aggregate=ssd&zone=z&status=up,stale&class=VCPU`). */
export function filtersOf(search: string): FleetFilters {
  const q = new URLSearchParams(search);
  const statuses = q.has('status') ? list(q.get('status')).filter((st) => (STATUSES as readonly string[]).includes(st)) : [...STATUSES];
  return { ...(q.get('class') ? { cls: q.get('class')! } : {}), statuses: new Set(statuses), zone: q.get('zone') ?? '', traits: list(q.get('trait')), aggregate: q.get('aggregate') ?? '' };
}

/** The query of `f` (only what differs from the defaults). */
export function searchOf(f: FleetFilters): string {
  const q = new URLSearchParams();
  if (f.cls) q.set('class', f.cls);
  if (f.statuses.size !== STATUSES.length) q.set('status', STATUSES.filter((st) => f.statuses.has(st)).join(','));
  if (f.zone) q.set('zone', f.zone);
  if (f.traits.length > 0) q.set('trait', f.traits.join(','));
  if (f.aggregate) q.set('aggregate', f.aggregate);
  const text = q.toString().replaceAll('%2C', ',').replaceAll('%21', '!');
  return text ? `?${text}` : '';
}

/**
 * The hosts that pass the trait and aggregate filters (from GET /host-facets), or undefined
 * when neither is set. A trait no host has, required, leaves none.
 */
export function facetHosts(facets: HostFacets, traits: string[], aggregate: string): Set<string> | undefined {
  if (traits.length === 0 && aggregate === '') return undefined;
  const required = traits.filter((t) => !t.startsWith('!'));
  const forbidden = traits.filter((t) => t.startsWith('!')).map((t) => t.slice(1));
  const aggregateIndex = aggregate === '' ? -1 : facets.aggregates.findIndex((a) => a.uuid === aggregate || a.name === aggregate);
  const out = new Set<string>();
  if (aggregate !== '' && aggregateIndex < 0) return out;
  for (const g of facets.groups) {
    const has = new Set(g.traits.map((i) => facets.traits[i]!));
    if (!required.every((t) => has.has(t)) || forbidden.some((t) => has.has(t))) continue;
    if (aggregateIndex >= 0 && !g.aggregates.includes(aggregateIndex)) continue;
    for (const h of g.hosts) out.add(h);
  }
  return out;
}

export function FleetPage({ search }: { search: string }) {
  // The hosts stay live (claims, releases, stats: live.ts); the zones, traits and aggregates are read once.
  const hosts = useLiveHosts(() => api.hosts());
  // Zones, traits and aggregates change rarely: read when the page opens, and again when the
  // live hosts include one they do not know (added since), at most once a second.
  const [metaEpoch, setMetaEpoch] = useState(0);
  const meta = useLoad(() => Promise.all([api.zones(), api.facets()]), [metaEpoch]);
  const known = useMemo(() => new Set(meta.value?.[1].groups.flatMap((g) => g.hosts)), [meta.value]);
  const unknown = !!meta.value && !!hosts.value && hosts.value.some((h) => !known.has(h.name));
  useEffect(() => {
    if (!unknown) return;
    const timer = setTimeout(() => setMetaEpoch((e) => e + 1), 1000);
    return () => clearTimeout(timer);
  }, [unknown, meta.value]);
  const filters = useMemo(() => filtersOf(search), [search]);
  const error = hosts.error ?? meta.error;
  if (error) return <Failure error={error} />;
  if (!hosts.value || !meta.value) return <Loading what="hosts" />;
  const [zones, facets] = meta.value;
  return <Fleet all={hosts.value} zones={zones.zones} unzoned={zones.hosts_without_zone} facets={facets} filters={filters} set={(next) => navigate(`/${searchOf(next)}`, true)} />;
}

const NO_ZONE = '(no zone)';

function Fleet(p: { all: HostView[]; zones: Zone[]; unzoned: string[]; facets: HostFacets; filters: FleetFilters; set: (f: FleetFilters) => void }) {
  const f = p.filters;
  const classes = useMemo(() => [...new Set(p.all.flatMap((h) => Object.keys(h.resources)))].sort(), [p.all]);
  const cls = f.cls ?? (classes.includes('VCPU') ? 'VCPU' : (classes[0] ?? 'VCPU'));
  const byFacets = useMemo(() => facetHosts(p.facets, f.traits, f.aggregate), [p.facets, f.traits.join(','), f.aggregate]);
  const shown = useMemo(() => {
    const inZone = f.zone === '' ? undefined : new Set(f.zone === NO_ZONE ? p.unzoned : (p.zones.find((z) => z.name === f.zone)?.hosts ?? []));
    return p.all.filter((h) => f.statuses.has(h.status) && (!inZone || inZone.has(h.name)) && (!byFacets || byFacets.has(h.name)));
  }, [p.all, f.statuses, f.zone, p.zones, p.unzoned, byFacets]);
  const unknownTraits = f.traits.map((t) => t.replace(/^!/, '')).filter((t) => !p.facets.traits.includes(t));
  const [traitText, setTraitText] = useState(f.traits.join(', '));
  useEffect(() => setTraitText(f.traits.join(', ')), [f.traits.join(',')]);
  const applyTraits = () => p.set({ ...f, traits: list(traitText.replaceAll(' ', '')) });
  const totals = useMemo(() => totalsOf(shown), [shown]);
  return (
    <main>
      <h1>Fleet</h1>
      <form
        class="controls"
        onSubmit={(e) => {
          e.preventDefault();
          applyTraits();
        }}
      >
        <label>
          Colour by{' '}
          <select name="class" value={cls} onChange={(e) => p.set({ ...f, cls: (e.target as HTMLSelectElement).value })}>
            {classes.map((c) => (
              <option value={c}>{c}</option>
            ))}
          </select>
        </label>
        <fieldset>
          <legend>Status</legend>
          {STATUSES.map((s) => (
            <label>
              <input
                type="checkbox"
                name={`status-${s}`}
                checked={f.statuses.has(s)}
                onChange={(e) => {
                  const next = new Set(f.statuses);
                  if ((e.target as HTMLInputElement).checked) next.add(s);
                  else next.delete(s);
                  p.set({ ...f, statuses: next });
                }}
              />{' '}
              {s} ({p.all.filter((h) => h.status === s).length})
            </label>
          ))}
        </fieldset>
        <label>
          Availability zone{' '}
          <select name="zone" value={f.zone} onChange={(e) => p.set({ ...f, zone: (e.target as HTMLSelectElement).value })}>
            <option value="">all</option>
            {p.zones.map((z) => (
              <option value={z.name}>
                {z.name} ({z.hosts.length} hosts, {z.aggregates.length} aggregates)
              </option>
            ))}
            <option value={NO_ZONE}>
              {NO_ZONE} ({p.unzoned.length} hosts)
            </option>
          </select>
        </label>
        <label>
          Aggregate{' '}
          <select name="aggregate" value={f.aggregate} onChange={(e) => p.set({ ...f, aggregate: (e.target as HTMLSelectElement).value })}>
            <option value="">all</option>
            {p.facets.aggregates.map((a) => (
              <option value={a.name ?? a.uuid}>
                {a.name ?? a.uuid} ({a.hosts} hosts)
              </option>
            ))}
            {f.aggregate !== '' && !p.facets.aggregates.some((a) => a.name === f.aggregate || a.uuid === f.aggregate) && <option value={f.aggregate}>{f.aggregate} (no host)</option>}
          </select>
        </label>
        <label>
          Traits{' '}
          <input
            name="trait"
            list="fleet-traits"
            size={34}
            placeholder="HW_CPU_X86_AVX2, !CUSTOM_X (Enter)"
            title="Traits every host shown has on some provider of its tree, comma-separated; !NAME: must not have it. Enter applies."
            value={traitText}
            onInput={(e) => setTraitText((e.target as HTMLInputElement).value)}
            onChange={applyTraits}
          />
          <datalist id="fleet-traits">
            {p.facets.traits.map((t) => (
              <option value={t} />
            ))}
          </datalist>
        </label>
      </form>
      {unknownTraits.length > 0 && (
        <p class="problem" role="status" data-testid="unknown-traits">
          No host has {unknownTraits.join(', ')}.
        </p>
      )}
      <p data-testid="fleet-count">
        <strong>{shown.length}</strong> of {p.all.length} hosts shown
      </p>
      <FleetCanvas hosts={shown} cls={cls} />
      <p class="legend" aria-hidden="true">
        <span style={{ background: colourOf(0) }} /> free <span style={{ background: colourOf(0.5) }} /> half <span style={{ background: colourOf(1) }} /> full{' '}
        <span style={{ background: colourOf(undefined) }} /> no {cls} · dark corner: disabled · amber corner: stale
      </p>
      <h2>Totals of the hosts shown</h2>
      <table data-testid="totals">
        <thead>
          <tr>
            <th scope="col">class</th>
            <th scope="col" class="num">capacity</th>
            <th scope="col" class="num">used</th>
            <th scope="col" class="num">free</th>
            <th scope="col" class="num">used %</th>
          </tr>
        </thead>
        <tbody>
          {totals.map(([c, t]) => (
            <tr data-class={c}>
              <th scope="row">{c}</th>
              <td class="num" data-field="capacity">{t.capacity}</td>
              <td class="num" data-field="used">{t.used}</td>
              <td class="num" data-field="free">{t.free}</td>
              <td class="num">{t.capacity > 0 ? ((100 * t.used) / t.capacity).toFixed(1) : '–'}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </main>
  );
}
