import { servedAt, stopAll } from '../api/served.js';
import { execFileSync, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { copyFile, cp, mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { capacityOf, normalizeInventory } from '@ert/plugin-api';
import { createStore, type HostSnapshot, type InstanceRecord, type StatsRecord } from '@ert/store';
import { buildPackage } from '../build.js';
import { REPO, runErt, scratchDir, startErt } from '../cli/helpers.js';
import { SHUTDOWN_GRACE_MS } from '../../packages/cli/src/ops.js';

/**
 * The web view (docs/ui.md) in a real browser: Debian's chromium driven by playwright-core,
 * on a real `ert serve` (packages/cli/dist/bin.js) over a fleet `ert simulate` built: 1,000
 * hosts with instances placed, half of them in an availability zone. Every figure the view
 * shows is compared with what the store holds, read here on its own:
 *
 * - Fleet (/ui/): the canvas has 1,000 tiles, and the totals per class are the store's
 *   (capacity = (total - reserved) * ratio, used, free); the zone filter leaves the zone's
 *   500 hosts with their totals. (Mutation-checked: with `t.used += r.used` dropped from
 *   totalsOf in packages/ui/src/fleet.tsx the used and free columns differ and this fails.)
 * - Hosts (/ui/hosts): 1,000 rows, 100 a page.
 * - Host (/ui/hosts/NAME): the busiest host's providers by name, the usage of each
 *   provider's classes and its instances, as the store has them. A host of the xeon-2s-cat
 *   profile gets cache ways and pinned CPUs through its tracker's claim path (`ert claim
 *   --host ... --root config/hosts/xeon-2s-cat`): its way map shows, per LLC domain, the
 *   masks the store's instance records hold (each way's holder, the free ways), and its huge
 *   pages, pinned CPUs, P-state driver and plugin stats are the store's. (Mutation-checked:
 *   with the holders of WayMap in packages/ui/src/host.tsx taken from every domain, not the
 *   one shown, this fails.)
 * - Instance (/ui/instances/UUID), opened from the way map: its allocations per provider and
 *   its llc assignment, as the store has them.
 * - Live: with the fleet and a host page open, a claim made through the API (POST
 *   /scheduler/v1/select) shows in the fleet's totals and on the host's page without a reload
 *   (server-sent events, GET /scheduler/v1/events). (Mutation-checked: with the `hosts`
 *   events ignored in packages/ui/src/live.ts this fails.)
 * - Why not (/ui/why-not?flavor=huge): every one of the 1,000 hosts is listed with the
 *   filter that refuses it; bad input names the field (vcpus, flavor).
 * - Auth: a server with a token file asks for a token; a wrong one, or a stored one that
 *   expired, gets the login prompt with a message (never a blank page); the right one opens.
 * - Filters (/ui/?trait=T&aggregate=ssd): as many tiles as the store has hosts with the trait
 *   (any provider of the tree) whose root is in the aggregate, and their totals; the controls
 *   write the address; a host added while the page is open shows in the filtered fleet.
 *   (Mutation-checked: with the aggregate test in facetHosts of packages/ui/src/fleet.tsx never
 *   excluding a group, this fails; without FleetPage reading the facets again for a host they
 *   do not know, the added host never shows and this fails.)
 * - Decisions (/ui/decisions): a select made through the API, with the host the API chose; a
 *   no-valid-host one with its code, reason and the hosts each filter removed. (Mutation-checked:
 *   with the chosen host's data-host taken from the decision's user in
 *   packages/ui/src/decisions.tsx, this fails.)
 * - Trusted headers: behind a proxy (its headers on every request) the view opens with no
 *   token asked; without them it says the proxy's identity is missing. (Mutation-checked: with
 *   packages/api/src/ui.ts not writing `identity` into the page, the view asks for a token and
 *   this fails.)
 * - Under load: 1,000 claims at 100/s with the fleet open; the figures are logged
 *   (docs/benchmarks.md), only the outcome is asserted: every claim placed, the page's totals
 *   equal to the store's at the end.
 *
 * Screenshots of each page go to docs/ui/ with ERT_UI_SCREENSHOTS=1 (the committed ones;
 * otherwise to the scratch directory, so that a test run does not rewrite docs/). No
 * chromium: skipped with a message locally, a failure under CI (CI set).
 */

/**
 * 1,000 hosts; `ERT_UI_HOSTS=10000 npx vitest run test/ui -t Fleet` measures the first render
 * of a larger fleet (docs/benchmarks.md, "Web view"; logged, never asserted on time).
 */
const HOSTS = Number(process.env.ERT_UI_HOSTS ?? 1000);
const CHROMIUM = [process.env.ERT_CHROMIUM, '/usr/bin/chromium', '/usr/bin/chromium-browser'].find((p): p is string => !!p && existsSync(p));
if (!CHROMIUM && process.env.CI) throw new Error('test/ui: no chromium (apt-get install chromium, or set ERT_CHROMIUM); .ci/run installs it');
const TOKEN = 'ui-test-token-0123456789';

/** Build the web view when any of its sources is newer than its dist/index.html (Vite: about 2 s). */
function buildUi(): void {
  const ui = join(REPO, 'packages/ui');
  const built = join(ui, 'dist/index.html');
  const newest = (dir: string): number => Math.max(...readdirSync(dir, { withFileTypes: true, recursive: true }).filter((e) => e.isFile()).map((e) => statSync(join(e.parentPath, e.name)).mtimeMs));
  const sources = Math.max(newest(join(ui, 'src')), statSync(join(ui, 'index.html')).mtimeMs, statSync(join(ui, 'vite.config.ts')).mtimeMs);
  if (existsSync(built) && statSync(built).mtimeMs >= sources) return;
  execFileSync('npm', ['run', 'build', '-w', '@ert/ui'], { cwd: REPO, stdio: 'pipe' });
}

type Totals = Record<string, { capacity: number; used: number; free: number }>;

/** Totals per class over some hosts, from the store's own snapshots. */
function totalsOf(snapshots: readonly HostSnapshot[]): Totals {
  const totals: Totals = {};
  for (const s of snapshots) {
    for (const p of s.providers) {
      for (const [cls, inv] of Object.entries(p.inventories)) {
        const cap = capacityOf(inv);
        const used = p.usages[cls] ?? 0;
        const t = (totals[cls] ??= { capacity: 0, used: 0, free: 0 });
        t.capacity += cap;
        t.used += used;
      }
    }
  }
  // Free per host and class is never negative: summed per host as the API does.
  for (const s of snapshots) {
    const perClass: Record<string, { capacity: number; used: number }> = {};
    for (const p of s.providers) {
      for (const [cls, inv] of Object.entries(p.inventories)) {
        const e = (perClass[cls] ??= { capacity: 0, used: 0 });
        e.capacity += capacityOf(inv);
        e.used += p.usages[cls] ?? 0;
      }
    }
    for (const [cls, e] of Object.entries(perClass)) totals[cls]!.free += Math.max(e.capacity - e.used, 0);
  }
  return totals;
}

/** Way numbers of a hex mask, lowest first (computed here, not with the view's code). */
function bitsOf(hex: string): number[] {
  const n = parseInt(hex, 16);
  return Array.from({ length: 32 }, (_, i) => i).filter((i) => (n >>> i) & 1);
}

/** A kernel CPU list (`36-39`) of numbers. */
function cpuList(cpus: number[]): string {
  const s = [...cpus].sort((a, b) => a - b);
  const out: string[] = [];
  let start = s[0]!;
  for (let i = 1; i <= s.length; i++) {
    if (i === s.length || s[i] !== s[i - 1]! + 1) {
      out.push(start === s[i - 1] ? `${start}` : `${start}-${s[i - 1]}`);
      start = s[i]!;
    }
  }
  return out.join(',');
}

/** The totals table of the fleet page, as shown. */
async function shownTotals(page: Page): Promise<Totals> {
  const rows = page.locator('[data-testid=totals] tbody tr');
  const out: Totals = {};
  for (let i = 0; i < (await rows.count()); i++) {
    const row = rows.nth(i);
    const num = async (f: string) => Number(await row.locator(`[data-field=${f}]`).textContent());
    out[(await row.getAttribute('data-class'))!] = { capacity: await num('capacity'), used: await num('used'), free: await num('free') };
  }
  return out;
}

describe.skipIf(!CHROMIUM)('the web view at /ui on ert serve over 1,000 simulated hosts', () => {
  const children: ChildProcess[] = [];
  let dir: string;
  let shots: string;
  let browser: Browser;
  let origin: string;
  let tokenOrigin: string;
  let snapshots: HostSnapshot[];
  let zoneHosts: Set<string>;
  let busiest: string;
  let instancesOfBusiest: number;
  /** The xeon-2s-cat host given cache ways and pinned CPUs by `ert claim`. */
  let catHost: string;
  let catStats: Record<string, StatsRecord>;
  let catInstances: InstanceRecord[];

  beforeAll(async () => {
    buildPackage(join(REPO, 'packages/cli'));
    buildUi();
    dir = await scratchDir('ert-ui-');
    shots = process.env.ERT_UI_SCREENSHOTS ? join(REPO, 'docs/ui') : join(dir, 'shots');
    await mkdir(shots, { recursive: true });
    // The repository's config and flavors, and a flavor no host can take.
    // Plus a reservation timeout longer than the file: the simulated fleet's instances are
    // reservations no tracker confirms (none runs), so at the default 2 minutes ert serve
    // released them while the file ran on a loaded machine, and the load test's totals (the
    // store's, which the page showed) fell 400 VCPU below what it read before it began.
    const config = parse(await readFile(join(REPO, 'config/ert.config.yaml'), 'utf8')) as Record<string, any>;
    await writeFile(join(dir, 'ert.config.yaml'), stringify({ ...config, reservations: { ...config.reservations, timeout: '1h' } }));
    await copyFile(join(REPO, 'config/flavors.yaml'), join(dir, 'flavors.yaml'));
    await cp(join(REPO, 'config/providers.d'), join(dir, 'providers.d'), { recursive: true });
    const db = join(dir, 'fleet.db');
    const sim = await runErt(['--config', join(dir, 'ert.config.yaml'), 'simulate', '--hosts', String(HOSTS), '--requests', '400', '--lifetime', '1000000', '--seed', '7', '--db', db, '--profiles', join(REPO, 'config/hosts'), '--json'], { cwd: dir });
    expect(sim.code, sim.stderr).toBe(0);
    // Cache ways and pinned CPUs come from a host's tracker (its plugins' claim), not from the
    // scheduler's reservations: claim on a simulated xeon-2s-cat host through its tracker,
    // reading the profile as its root (no enforcement: the fixture is not written).
    const names = await createStore({ client: 'sqlite3', connection: db });
    catHost = (await names.listHosts()).map((h) => h.name).find((n) => n.startsWith('sim-xeon-2s-cat-'))!;
    await names.close();
    expect(catHost, 'a simulated xeon-2s-cat host').toBeDefined();
    for (const flavor of ['llc.gold', 'llc.gold', 'llc.explicit', 'c1.dedicated']) {
      const claim = await runErt(['--config', join(dir, 'ert.config.yaml'), 'claim', '--flavor', flavor, '--host', catHost, '--root', join(REPO, 'config/hosts/xeon-2s-cat'), '--json'], { cwd: dir, env: { ERT_STORE_CONNECTION: db } });
      expect(claim.code, claim.stderr).toBe(0);
    }
    const flavors = await readFile(join(dir, 'flavors.yaml'), 'utf8');
    await writeFile(join(dir, 'flavors.yaml'), `${flavors}\n${stringify([{ name: 'huge', vcpus: 100000, memory_mb: 1024, disk_gb: 0, extra_specs: {} }])}`);

    const store = await createStore({ client: 'sqlite3', connection: db });
    try {
      // The simulated `ssd` aggregate (every even-numbered host) becomes availability zone az-ssd.
      const ssd = (await store.listAggregates()).find((a) => a.name === 'ssd')!;
      await store.upsertAggregate({ uuid: ssd.uuid, name: ssd.name!, metadata: { ...ssd.metadata, availability_zone: 'az-ssd' } });
      snapshots = await store.loadHosts();
      const roots = new Set(ssd.providers);
      zoneHosts = new Set(snapshots.filter((s) => roots.has(s.providers[0]!.uuid)).map((s) => s.host.name));
      const counts = new Map<string, number>();
      for (const r of await store.listInstances()) counts.set(r.host, (counts.get(r.host) ?? 0) + 1);
      catStats = await store.readStats(catHost);
      catInstances = await store.listInstances({ host: catHost });
      [busiest, instancesOfBusiest] = [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]!;
    } finally {
      await store.close();
    }
    expect(snapshots).toHaveLength(HOSTS);
    expect(zoneHosts.size).toBe(HOSTS / 2);
    expect(instancesOfBusiest).toBeGreaterThan(0);

    const env = { ERT_STORE_CONNECTION: db };
    const open = startErt(['--config', join(dir, 'ert.config.yaml'), 'serve', '--port', '0'], { cwd: dir, env });
    children.push(open);
    await writeFile(join(dir, 'tokens.yaml'), stringify({ [TOKEN]: { user: 'admin', project: 'admin', roles: ['admin'] } }));
    const guarded = startErt(['--config', join(dir, 'ert.config.yaml'), 'serve', '--port', '0', '--auth', 'token-file', '--token-file', join(dir, 'tokens.yaml')], { cwd: dir, env });
    children.push(guarded);
    [origin, tokenOrigin] = await Promise.all([servedAt(open).then((s) => s.origin), servedAt(guarded).then((s) => s.origin)]);
    browser = await chromium.launch({ executablePath: CHROMIUM!, args: ['--no-sandbox', '--disable-dev-shm-usage', '--disable-gpu'] });
  }, HOSTS > 1000 ? 900_000 : 120_000);

  afterAll(async () => {
    await browser?.close();
    // ert serve's stop waits for what is in flight up to its grace period, then cuts the
    // connections left (docs/operations.md); a connection of the closing browser has held one
    // past 20 s in CI a few times. The stop is held to its contract (exited within the grace
    // and a margin), and a slow one is printed with the connections it named.
    await stopAll(children, { withinMs: SHUTDOWN_GRACE_MS + 15_000 });
    if (dir) await rm(dir, { recursive: true, force: true });
  }, 2 * (SHUTDOWN_GRACE_MS + 15_000) + 10_000);

  const newPage = async (): Promise<Page> => browser.newPage({ viewport: { width: 1280, height: 900 } });

  it('Fleet: 1,000 tiles on a canvas, the store\'s totals per class, and the zone filter', async () => {
    const page = await newPage();
    const canvas = page.locator(`[data-testid=fleet-canvas][data-hosts="${HOSTS}"]`);
    // Ready (GET /readyz, as a load balancer would wait) once ert serve has read every host's
    // snapshot: the fleet then answers from memory.
    let ready: { status?: string; checks?: Record<string, unknown> } = {};
    await expect
      .poll(async () => (ready = (await (await fetch(`${origin}/readyz`)).json()) as typeof ready).status, { timeout: 120_000, interval: 100 })
      .toBe('ready');
    const read = ready.checks!['host-snapshots'] as { hosts: number; ms: number };
    expect(read.hosts).toBe(HOSTS);
    console.log(`test/ui: ert serve read ${HOSTS} hosts' snapshots in ${read.ms} ms after listening (/readyz 503 until then)`);
    // First render: from navigation to the canvas drawn with every host (page load, the event
    // stream live, GET /hosts, /availability-zones and /host-facets, the draw). Logged, three times.
    for (let run = 0; run < 3; run++) {
      const started = performance.now();
      await page.goto(`${origin}/ui/`);
      await canvas.waitFor();
      const firstRender = performance.now() - started;
      const reads = await page.evaluate<string>(
        `performance.getEntriesByType('resource').filter((e) => e.name.includes('/scheduler/v1/')).map((e) => new URL(e.name).pathname.slice(14) + ' ' + Math.round(e.startTime) + '+' + Math.round(e.duration) + ' ms').join(', ')`,
      );
      console.log(
        `test/ui: first render of ${HOSTS} hosts ${firstRender.toFixed(0)} ms (in the page: drawn ${await canvas.getAttribute('data-drawn-at')} ms after navigation started; ` +
          `canvas drawn in ${await canvas.getAttribute('data-draw-ms')} ms; reads: ${reads})`,
      );
    }
    // One canvas, not a node per host.
    expect(await page.locator('canvas').count()).toBe(1);
    expect(await page.getByTestId('fleet-count').textContent()).toBe(`${HOSTS} of ${HOSTS} hosts shown`);
    const expected = totalsOf(snapshots);
    expect(Object.values(expected).some((t) => t.used > 0)).toBe(true);
    expect(await shownTotals(page)).toEqual(expected);
    await page.screenshot({ path: join(shots, 'fleet.png') });

    await page.locator('select[name=zone]').selectOption('az-ssd');
    await page.locator(`[data-testid=fleet-canvas][data-hosts="${HOSTS / 2}"]`).waitFor();
    expect(await shownTotals(page)).toEqual(totalsOf(snapshots.filter((s) => zoneHosts.has(s.host.name))));
    // Hovering a tile names its host and its values.
    await page.locator('select[name=zone]').selectOption('');
    await canvas.hover({ position: { x: 3, y: 3 } });
    await expect.poll(() => page.locator('.tip').textContent()).toContain(snapshots.map((s) => s.host.name).sort()[0]);
    await page.close();
  });

  it('Hosts: every host in a table, by pages', async () => {
    const page = await newPage();
    await page.goto(`${origin}/ui/hosts`);
    await page.getByTestId('hosts-table').waitFor();
    expect(await page.getByTestId('hosts-count').textContent()).toBe(`${HOSTS} of ${HOSTS} hosts`);
    expect(await page.locator('[data-testid=hosts-table] tbody tr').count()).toBe(100);
    await page.locator('input[name=filter]').fill(busiest);
    await expect.poll(() => page.locator(`tr[data-host="${busiest}"]`).count()).toBe(1);
    await page.locator('input[name=filter]').fill('');
    await page.screenshot({ path: join(shots, 'hosts.png') });
    await page.close();
  });

  it('Host: the provider tree with the store\'s inventories and usage, and the instances', async () => {
    const page = await newPage();
    await page.goto(`${origin}/ui/hosts/${encodeURIComponent(busiest)}`);
    await page.getByTestId('provider-tree').waitFor();
    const snapshot = snapshots.find((s) => s.host.name === busiest)!;
    const names = await page.evaluate<string[]>(`[...document.querySelectorAll('[data-provider]')].map((e) => e.getAttribute('data-provider'))`);
    expect(names.sort()).toEqual(snapshot.providers.map((p) => p.name).sort());
    for (const p of snapshot.providers) {
      for (const [cls, used] of Object.entries(p.usages)) {
        expect(await page.locator(`[data-provider="${p.name}"] > details > table tr[data-class="${cls}"] [data-field=used]`).textContent(), `${p.name} ${cls}`).toBe(String(used));
      }
    }
    expect(await page.getByTestId('instance-count').textContent()).toBe(String(instancesOfBusiest));
    expect(await page.locator('[data-testid=instances] tbody tr').count()).toBe(instancesOfBusiest);
    await page.screenshot({ path: join(shots, 'host.png') });
    await page.close();
  });

  it('Host: the way map per LLC domain holds the store\'s masks; huge pages, pinned CPUs, P-state and stats are the store\'s', async () => {
    const page = await newPage();
    await page.goto(`${origin}/ui/hosts/${encodeURIComponent(catHost)}`);
    await page.getByTestId('way-map').waitFor();
    const held = catInstances.filter((r) => (r.assignments.llc as { mask?: string } | undefined)?.mask !== undefined);
    // Three claims with cache ways (llc.gold twice, llc.explicit) went to this host, besides
    // any the simulation placed there (its tracker confirmed them and assigned their ways).
    expect(held.length).toBeGreaterThanOrEqual(3);
    const llc = catStats.llc!.data as { domains: Array<{ id: number; cbmMask: string; reservedMask: string }> };
    expect(llc.domains.length).toBe(2);
    for (const d of llc.domains) {
      const holders = held.filter((r) => (r.assignments.llc as { domain: number }).domain === d.id);
      const listed = await page.evaluate<Array<[string, string]>>(`[...document.querySelectorAll('[data-testid=way-map] [data-domain="${d.id}"] li[data-instance]')].map((e) => [e.getAttribute('data-instance'), e.getAttribute('data-mask')])`);
      expect(listed.sort(), `domain ${d.id}`).toEqual(holders.map((r) => [r.uuid, (r.assignments.llc as { mask: string }).mask]).sort());
      const cells = await page.evaluate<Array<[number, string]>>(`[...document.querySelectorAll('[data-testid=way-map] [data-domain="${d.id}"] td[data-way]')].map((e) => [Number(e.getAttribute('data-way')), e.getAttribute('data-holder')])`);
      const expected = new Map(bitsOf(d.cbmMask).map((w) => [w, bitsOf(d.reservedMask).includes(w) ? 'reserved' : 'free']));
      for (const r of holders) for (const w of bitsOf((r.assignments.llc as { mask: string }).mask)) expected.set(w, r.uuid);
      expect(new Map(cells), `ways of domain ${d.id}`).toEqual(expected);
      const free = [...expected.values()].filter((v) => v === 'free').length;
      expect(await page.getByTestId(`free-runs-${d.id}`).getAttribute('data-free')).toBe(String(free));
    }
    // Pinned CPUs per instance, as the records hold them.
    const pinned = catInstances.filter((r) => r.cpus && r.cpus.length > 0);
    expect(pinned.length).toBeGreaterThan(0);
    for (const r of pinned) expect(await page.locator(`[data-testid=pinned] tr[data-instance="${r.uuid}"] [data-field=cpus]`).textContent()).toBe(cpuList(r.cpus!));
    // Huge pages per NUMA node and size, from the memory plugin's stats.
    const memory = catStats.memory!.data as { numaNodes: Array<{ id: number; hugePages: Array<{ sizeKb: number; total: number; free: number; reserved: number; usedOutside: number }> }> };
    const rows = await page.evaluate<string[]>(`[...document.querySelectorAll('[data-testid=huge-pages] tbody tr')].map((e) => e.getAttribute('data-node') + '/' + e.getAttribute('data-size') + '/' + e.querySelector('[data-field=total]').textContent + '/' + e.querySelector('[data-field=free]').textContent + '/' + e.querySelector('[data-field=kept]').textContent)`);
    expect(rows).toEqual(memory.numaNodes.flatMap((n) => n.hugePages.map((p) => `${n.id}/${p.sizeKb}/${p.total}/${p.free}/${Math.max(p.reserved, p.usedOutside)}`)));
    expect(await page.locator('[data-testid=pstate] [data-field=driver]').textContent()).toBe((catStats.pstate!.data as { driver: string }).driver);
    const plugins = await page.evaluate<string[]>(`[...document.querySelectorAll('[data-testid=stats] tbody tr')].map((e) => e.getAttribute('data-plugin'))`);
    expect(plugins).toEqual(Object.keys(catStats).sort());
    expect(await page.locator('[data-testid=instances] tbody tr').count()).toBe(catInstances.length);
    await page.screenshot({ path: join(shots, 'host-ways.png'), fullPage: true });

    // Instance: opened from the way map; its allocations and assignment as the store holds them.
    const one = held[0]!;
    await page.locator(`[data-testid=way-map] li[data-instance="${one.uuid}"] a`).click();
    await page.getByTestId('instance-record').waitFor();
    expect(page.url()).toBe(`${origin}/ui/instances/${one.uuid}`);
    const store = await createStore({ client: 'sqlite3', connection: join(dir, 'fleet.db') });
    const { allocations } = await store.getAllocations(one.uuid).finally(() => store.close());
    const shown = await page.evaluate<string[]>(`[...document.querySelectorAll('[data-testid=allocations] tbody tr')].map((e) => e.getAttribute('data-provider') + ' ' + e.getAttribute('data-class') + ' ' + e.querySelector('[data-field=amount]').textContent)`);
    expect(shown.sort()).toEqual(allocations.map((a) => `${a.providerUuid} ${a.resourceClass} ${a.amount}`).sort());
    expect(JSON.parse((await page.locator('[data-testid=assignments] tr[data-plugin=llc] [data-field=assignment]').textContent())!)).toEqual(one.assignments.llc);
    expect(await page.locator('[data-testid=instance-record] [data-field=state]').textContent()).toBe(one.state);
    await page.screenshot({ path: join(shots, 'instance.png') });
    await page.goto(`${origin}/ui/instances/00000000-0000-4000-8000-00000000dead`);
    expect(await page.getByTestId('failure').textContent()).toContain('no instance');
    await page.close();
  });

  it('Why not: every host with the filter that refuses an oversized flavor; bad input names the field', async () => {
    const page = await newPage();
    await page.goto(`${origin}/ui/why-not?flavor=huge`);
    await page.getByTestId('why-summary').waitFor();
    expect(await page.getByTestId('why-passed').textContent()).toBe('0');
    expect(await page.getByTestId('why-rejected-count').textContent()).toBe(String(HOSTS));
    await page.screenshot({ path: join(shots, 'why-not.png') });
    await page.getByRole('button', { name: `Show all ${HOSTS}` }).click();
    const rows = page.locator('[data-testid=why-rejected] tbody tr');
    await expect.poll(() => rows.count()).toBe(HOSTS);
    const listed = await page.evaluate<Array<[string, string]>>(
      `[...document.querySelectorAll('[data-testid=why-rejected] tbody tr')].map((e) => [e.getAttribute('data-host'), e.querySelector('[data-field=filter]')?.textContent ?? ''])`,
    );
    expect(new Set(listed.map(([h]) => h))).toEqual(new Set(snapshots.map((s) => s.host.name)));
    // A 100,000-vCPU flavor: the resources filter (placement's fit) refuses it everywhere, saying why.
    expect(new Set(listed.map(([, f]) => f))).toEqual(new Set(['resources']));
    expect(await page.locator('[data-testid=why-filters] tr[data-filter=resources] td').textContent()).toBe(String(HOSTS));

    await page.goto(`${origin}/ui/why-not?vcpus=-1&memory_mb=512`);
    await expect.poll(() => page.getByTestId('why-problem').getAttribute('data-field')).toBe('vcpus');
    expect(await page.locator('input[name=vcpus]').getAttribute('aria-invalid')).toBe('true');
    await page.goto(`${origin}/ui/why-not?flavor=no-such-flavor`);
    await expect.poll(() => page.getByTestId('why-problem').getAttribute('data-field')).toBe('flavor');
    expect(await page.getByTestId('why-problem').textContent()).toContain('unknown flavor "no-such-flavor"');
    await page.close();
  });

  it('Auth: a token is asked for; a wrong or expired one gets the login prompt, the right one opens', async () => {
    const page = await newPage();
    await page.goto(`${tokenOrigin}/ui/`);
    await page.getByTestId('login').waitFor();
    await page.locator('input[name=token]').fill('wrong-token');
    await page.getByRole('button', { name: 'Sign in' }).click();
    await expect.poll(() => page.getByTestId('login-problem').textContent()).toContain('refused');
    await page.screenshot({ path: join(shots, 'login.png') });
    await page.locator('input[name=token]').fill(TOKEN);
    await page.getByRole('button', { name: 'Sign in' }).click();
    await page.locator(`[data-testid=fleet-canvas][data-hosts="${HOSTS}"]`).waitFor();
    // The token expires (here: the stored one is no longer valid): the next page load asks again.
    await page.evaluate(`sessionStorage.setItem('ert-token', 'expired-token')`);
    await page.goto(`${tokenOrigin}/ui/hosts/${encodeURIComponent(busiest)}`);
    await page.getByTestId('login').waitFor();
    expect(await page.getByTestId('login-problem').textContent()).toContain('refused');
    await page.close();
  });

  it('Live: a claim made through the API shows on the fleet and on its host\'s page without a reload', async () => {
    const fleet = await newPage();
    await fleet.goto(`${origin}/ui/`);
    await fleet.locator(`[data-testid=fleet-canvas][data-hosts="${HOSTS}"]`).waitFor();
    await fleet.locator('[data-testid=live][data-state=live]').waitFor();
    const before = await shownTotals(fleet);
    // A marker that a reload would lose.
    await fleet.evaluate('window.notReloaded = true');
    const hostPage = await newPage();
    await hostPage.goto(`${origin}/ui/hosts/${encodeURIComponent(busiest)}`);
    await hostPage.getByTestId('instance-count').waitFor();
    await hostPage.locator('[data-testid=live][data-state=live]').waitFor();
    await hostPage.evaluate('window.notReloaded = true');
    const shownBefore = Number(await hostPage.getByTestId('instance-count').textContent());

    const claim = await fetch(`${origin}/scheduler/v1/select`, {
      method: 'POST',
      headers: { 'x-auth-token': 'admin', 'content-type': 'application/json' },
      body: JSON.stringify({ flavor: { name: 'live-probe', vcpus: 3, memory_mb: 1000, disk_gb: 0 }, availability_zone: 'az-ssd' }),
    });
    expect(claim.status, await claim.clone().text()).toBe(200);
    const { instances } = (await claim.json()) as { instances: Array<{ uuid: string; host: string }> };
    await expect.poll(async () => (await shownTotals(fleet)).VCPU?.used, { timeout: 10_000 }).toBe(before.VCPU!.used + 3);
    expect((await shownTotals(fleet)).MEMORY_MB?.used).toBe(before.MEMORY_MB!.used + 1000);
    expect(await fleet.evaluate('window.notReloaded')).toBe(true);

    // The busiest host's page follows a claim on that host (a second one, pinned there with same_host).
    const there = await fetch(`${origin}/scheduler/v1/select`, {
      method: 'POST',
      headers: { 'x-auth-token': 'admin', 'content-type': 'application/json' },
      // vcpus from 1 (Nova's rule), the VCPU dropped as Nova drops it: it fits on the busiest host.
      body: JSON.stringify({ flavor: { name: 'live-probe', vcpus: 1, memory_mb: 1, disk_gb: 0, extra_specs: { 'resources:VCPU': '0' } }, hints: { same_host: [(await firstInstanceOf(busiest))!] } }),
    });
    expect(there.status, await there.clone().text()).toBe(200);
    expect(((await there.json()) as { instances: Array<{ host: string }> }).instances[0]!.host).toBe(busiest);
    await expect.poll(async () => Number(await hostPage.getByTestId('instance-count').textContent()), { timeout: 10_000 }).toBe(shownBefore + 1);
    expect(await hostPage.evaluate('window.notReloaded')).toBe(true);
    expect(instances).toHaveLength(1);
    await fleet.close();
    await hostPage.close();
  });

  it('Filters: a trait and an aggregate (deep links, and the controls) leave the hosts the store says, with their totals', async () => {
    // The store now (earlier tests claimed): each host's traits over its tree, its root's aggregates.
    const store = await createStore({ client: 'sqlite3', connection: join(dir, 'fleet.db') });
    const [now, ssd] = await Promise.all([store.loadHosts(), store.listAggregates().then((all) => all.find((a) => a.name === 'ssd')!)]).finally(() => store.close());
    const traitsOf = (s: HostSnapshot) => new Set(s.providers.flatMap((p) => p.traits));
    const counts = new Map<string, number>();
    for (const s of now) for (const t of traitsOf(s)) counts.set(t, (counts.get(t) ?? 0) + 1);
    // A trait some hosts have and others not, the closest to half of them.
    const [trait, withTrait] = [...counts].filter(([, n]) => n < HOSTS).sort((a, b) => Math.abs(a[1] - HOSTS / 2) - Math.abs(b[1] - HOSTS / 2) || a[0].localeCompare(b[0]))[0]!;
    const inSsd = (s: HostSnapshot) => s.providers[0]!.aggregates.includes(ssd.uuid);
    const both = now.filter((s) => traitsOf(s).has(trait) && inSsd(s));
    expect(both.length).toBeGreaterThan(0);
    expect(both.length).toBeLessThan(withTrait);

    const page = await newPage();
    await page.goto(`${origin}/ui/?trait=${trait}&aggregate=ssd`);
    await page.locator(`[data-testid=fleet-canvas][data-hosts="${both.length}"]`).waitFor();
    expect(await page.getByTestId('fleet-count').textContent()).toBe(`${both.length} of ${HOSTS} hosts shown`);
    expect(await shownTotals(page)).toEqual(totalsOf(both));
    expect(await page.locator('input[name=trait]').inputValue()).toBe(trait);
    expect(await page.locator('select[name=aggregate]').inputValue()).toBe('ssd');
    await page.screenshot({ path: join(shots, 'fleet-filtered.png') });

    // The controls write the address: hosts without the trait, then only those in ssd.
    await page.goto(`${origin}/ui/`);
    await page.locator(`[data-testid=fleet-canvas][data-hosts="${HOSTS}"]`).waitFor();
    await page.locator('input[name=trait]').fill(`!${trait}`);
    await page.locator('input[name=trait]').press('Enter');
    await page.locator(`[data-testid=fleet-canvas][data-hosts="${HOSTS - withTrait}"]`).waitFor();
    expect(new URL(page.url()).search).toBe(`?trait=!${trait}`);
    await page.locator('select[name=aggregate]').selectOption('ssd');
    const ssdWithout = now.filter((s) => !traitsOf(s).has(trait) && inSsd(s));
    await page.locator(`[data-testid=fleet-canvas][data-hosts="${ssdWithout.length}"]`).waitFor();
    expect(new URL(page.url()).search).toBe(`?trait=!${trait}&aggregate=ssd`);
    expect(await shownTotals(page)).toEqual(totalsOf(ssdWithout));
    // A host added while the filtered fleet is open, with the trait and in ssd: shown without a
    // reload (its traits and aggregates read again); removed, gone again.
    await page.goto(`${origin}/ui/?trait=${trait}&aggregate=ssd`);
    await page.locator(`[data-testid=fleet-canvas][data-hosts="${both.length}"]`).waitFor();
    const writer = await createStore({ client: 'sqlite3', connection: join(dir, 'fleet.db') });
    try {
      await writer.importHosts([
        {
          host: { name: 'ui-added-host', status: 'up', lastUpdate: Date.now() },
          providers: [{ uuid: '0f000000-0000-4000-8000-0000000000ad', name: 'ui-added-host', inventories: { VCPU: normalizeInventory({ total: 4 }) }, traits: [trait], aggregates: [ssd.uuid] }],
        },
      ]);
      await page.locator(`[data-testid=fleet-canvas][data-hosts="${both.length + 1}"]`).waitFor({ timeout: 20_000 });
      await writer.deleteHost('ui-added-host');
    } finally {
      await writer.close();
    }
    await page.locator(`[data-testid=fleet-canvas][data-hosts="${both.length}"]`).waitFor({ timeout: 20_000 });
    // A trait no host has: none shown, and said.
    await page.goto(`${origin}/ui/?trait=CUSTOM_NO_HOST_HAS_THIS`);
    await page.locator('[data-testid=fleet-canvas][data-hosts="0"]').waitFor();
    expect(await page.getByTestId('unknown-traits').textContent()).toContain('CUSTOM_NO_HOST_HAS_THIS');
    await page.close();
  });

  it('Decisions: a select made through the API is listed with its chosen host; a failure with its reason', async () => {
    const select = (body: unknown) => fetch(`${origin}/scheduler/v1/select`, { method: 'POST', headers: { 'x-auth-token': 'admin', 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const placed = await select({ flavor: { name: 'decision-probe', vcpus: 1, memory_mb: 128, disk_gb: 0 } });
    expect(placed.status, await placed.clone().text()).toBe(200);
    const [chosen] = ((await placed.json()) as { instances: Array<{ uuid: string; host: string }> }).instances;
    const refused = await select({ flavor: 'huge' });
    expect(refused.status).toBe(409);

    const page = await newPage();
    await page.goto(`${origin}/ui/decisions`);
    const row = page.locator(`[data-testid=decisions] tr[data-outcome=placed]:has([data-instance="${chosen!.uuid}"])`);
    await row.waitFor();
    expect(await row.locator(`[data-field=host] [data-instance="${chosen!.uuid}"]`).getAttribute('data-host')).toBe(chosen!.host);
    expect(await row.locator('[data-field=host] a').first().textContent()).toBe(chosen!.host);
    expect(await row.locator('[data-field=request]').textContent()).toContain('decision-probe (1 vCPU, 128 MB)');
    // The scheduler held every host when it chose.
    expect(await row.locator('[data-field=considered]').textContent()).toBe(String(HOSTS));
    const failure = page.locator('[data-testid=decisions] tr[data-outcome=no_valid_host]').first();
    expect(await failure.locator('[data-field=request]').textContent()).toContain('huge');
    expect(await failure.locator('[data-field=code]').textContent()).toBe('ERT_SCHEDULER_NO_VALID_HOST');
    expect(await failure.locator('[data-field=reason]').textContent()).toContain('no valid host');
    expect(await failure.locator('[data-field=filters] li[data-filter=resources]').textContent()).toBe(`resources: removed ${HOSTS}`);
    await page.screenshot({ path: join(shots, 'decisions.png') });
    // The one placed just before the failure links to its host.
    await row.locator('[data-field=host] a').first().click();
    await page.getByTestId('provider-tree').waitFor();
    expect(page.url()).toBe(`${origin}/ui/hosts/${encodeURIComponent(chosen!.host)}`);
    await page.close();
  });

  it('Auth: behind a proxy (trusted headers) the view opens with the proxy\'s identity, asks for no token, and says when the identity is missing', async () => {
    const proxied = startErt(['--config', join(dir, 'ert.config.yaml'), 'serve', '--port', '0', '--auth', 'trusted-headers'], { cwd: dir, env: { ERT_STORE_CONNECTION: join(dir, 'fleet.db') } });
    children.push(proxied);
    const proxyOrigin = (await servedAt(proxied)).origin;
    // The proxy's headers on every request of the page, as an auth proxy in front would set them.
    const signedIn = await browser.newContext({ viewport: { width: 1280, height: 900 }, extraHTTPHeaders: { 'x-user-id': 'operator', 'x-roles': 'admin', 'openstack-system-scope': 'all' } });
    const page = await signedIn.newPage();
    await page.goto(`${proxyOrigin}/ui/`);
    await page.locator(`[data-testid=fleet-canvas][data-hosts="${HOSTS}"]`).waitFor();
    await page.locator('[data-testid=live][data-state=live]').waitFor();
    expect(await page.getByTestId('login').count()).toBe(0);
    await signedIn.close();
    // Reached without the proxy: no token prompt, a message naming the missing identity.
    const bare = await newPage();
    await bare.goto(`${proxyOrigin}/ui/hosts`);
    await bare.getByTestId('proxy-refused').waitFor();
    expect(await bare.getByTestId('login-problem').textContent()).toContain('trusted headers');
    expect(await bare.locator('input[name=token]').count()).toBe(0);
    await bare.close();
  });

  it('Fleet under load: stays responsive while 100 claims/s stream in (measured, logged), and ends with the store\'s totals', async () => {
    // Last of the file: its 1,000 claims stay (the other tests compare pages with the store as read before).
    const page = await newPage();
    await page.goto(`${origin}/ui/`);
    const canvas = page.locator(`[data-testid=fleet-canvas][data-hosts="${HOSTS}"]`);
    await canvas.waitFor();
    await page.locator('[data-testid=live][data-state=live]').waitFor();
    const before = await shownTotals(page);
    // The server's scheduler made (it reads every host at its first request): explain changes nothing.
    const warm = await fetch(`${origin}/scheduler/v1/explain`, {
      method: 'POST',
      headers: { 'x-auth-token': 'admin', 'content-type': 'application/json' },
      body: JSON.stringify({ flavor: { name: 'load-probe', vcpus: 1, memory_mb: 256, disk_gb: 0 } }),
    });
    expect(warm.status).toBe(200);
    // In the page: the gaps between animation frames, long tasks (> 50 ms of main thread), and the canvas redraws.
    await page.evaluate(`(() => {
      const m = (window.loadProbe = { gaps: [], longTasks: [], draws: 0, on: true });
      let last = performance.now();
      const frame = (t) => { m.gaps.push(t - last); last = t; if (m.on) requestAnimationFrame(frame); };
      requestAnimationFrame(frame);
      new PerformanceObserver((list) => { for (const e of list.getEntries()) m.longTasks.push(e.duration); }).observe({ type: 'longtask' });
      new MutationObserver(() => m.draws++).observe(document.querySelector('[data-testid=fleet-canvas]'), { attributes: true, attributeFilter: ['data-draw-ms'] });
    })()`);
    const tile = Number(await canvas.getAttribute('data-tile'));
    const names = snapshots.map((s) => s.host.name).sort();
    const rate = 100;
    const seconds = 10;
    const latencies: number[] = [];
    const statuses = new Map<number, number>();
    let placed = 0;
    const started = performance.now();
    const claims = Array.from({ length: rate * seconds }, (_, i) =>
      new Promise<void>((resolve) => setTimeout(resolve, Math.max(0, started + (i * 1000) / rate - performance.now()))).then(async () => {
        const sent = performance.now();
        const res = await fetch(`${origin}/scheduler/v1/select`, {
          method: 'POST',
          headers: { 'x-auth-token': 'admin', 'content-type': 'application/json' },
          body: JSON.stringify({ flavor: { name: 'load-probe', vcpus: 1, memory_mb: 256, disk_gb: 0 } }),
        });
        await res.arrayBuffer();
        latencies.push(performance.now() - sent);
        statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
        if (res.status === 200) placed++;
      }),
    );
    // Meanwhile, the page as a user sees it: hover from tile to tile (until the tooltip names the
    // host under the pointer), and how long a script waits for the main thread.
    const hovers: number[] = [];
    const turns: number[] = [];
    let all = false;
    const done = Promise.all(claims).then(() => (all = true));
    for (let i = 0; !all; i++) {
      const t0 = performance.now();
      await page.evaluate('1');
      turns.push(performance.now() - t0);
      const h = i % 2;
      const t1 = performance.now();
      await canvas.hover({ position: { x: h * tile + tile / 2, y: tile / 2 } });
      await page.locator('.tip strong', { hasText: new RegExp(`^${names[h]}$`) }).waitFor();
      hovers.push(performance.now() - t1);
      await new Promise((r) => setTimeout(r, 200));
    }
    await done;
    const streamed = performance.now() - started;
    // Live lag: from the last answer to the page's totals counting every claim.
    const lagStarted = performance.now();
    await expect.poll(async () => (await shownTotals(page)).VCPU?.used, { timeout: 30_000, interval: 50 }).toBe(before.VCPU!.used + placed);
    const lag = performance.now() - lagStarted;
    const probe = await page.evaluate<{ gaps: number[]; longTasks: number[]; draws: number }>('(window.loadProbe.on = false, window.loadProbe)');
    const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!.toFixed(0);
    console.log(
      `test/ui: ${HOSTS} hosts, ${rate * seconds} claims at ${rate}/s sent over ${(streamed / 1000).toFixed(1)} s (${placed} placed; statuses ${JSON.stringify(Object.fromEntries(statuses))}; ` +
        `select p50 ${q(latencies, 0.5)} ms, p99 ${q(latencies, 0.99)} ms); page: ${probe.draws} redraws, frame gap p50 ${q(probe.gaps, 0.5)} ms, p99 ${q(probe.gaps, 0.99)} ms, max ${q(probe.gaps, 1)} ms; ` +
        `long tasks ${probe.longTasks.length} (${probe.longTasks.reduce((a, b) => a + b, 0).toFixed(0)} ms); hover to tooltip p50 ${q(hovers, 0.5)} ms, max ${q(hovers, 1)} ms (${hovers.length}); ` +
        `main-thread turn p50 ${q(turns, 0.5)} ms, max ${q(turns, 1)} ms; totals caught up ${lag.toFixed(0)} ms after the last answer`,
    );
    expect(statuses.get(200)).toBe(rate * seconds);
    // Whatever the timing, the page ends with the store's totals.
    const store = await createStore({ client: 'sqlite3', connection: join(dir, 'fleet.db') });
    const now = await store.loadHosts().finally(() => store.close());
    expect(await shownTotals(page)).toEqual(totalsOf(now));
    await page.close();
  }, 120_000);

  /** The uuid of an instance recorded on `host` (read from the store). */
  async function firstInstanceOf(host: string): Promise<string | undefined> {
    const store = await createStore({ client: 'sqlite3', connection: join(dir, 'fleet.db') });
    try {
      return (await store.listInstances({ host }))[0]?.uuid;
    } finally {
      await store.close();
    }
  }
});
