import { useMemo, useState } from 'preact/hooks';
import { api, type InventoryView, type ProviderView } from './api.js';
import { Failure, Loading, useLoad } from './load.js';
import { Link } from './router.js';

const PAGE = 100;

/** Placement's capacity: (total - reserved) * allocation_ratio, rounded down. */
export const capacityOf = (inv: InventoryView): number => Math.floor((inv.total - inv.reserved) * inv.allocation_ratio);

/** `/ui/hosts`: every host by name with its status and usage per class; filter, sort, pages of 100. */
export function HostsPage() {
  const data = useLoad(() => api.hosts());
  const [filter, setFilter] = useState('');
  const [sort, setSort] = useState<{ key: string; desc: boolean }>({ key: 'name', desc: false });
  const [page, setPage] = useState(0);
  const hosts = data.value ?? [];
  const classes = useMemo(() => [...new Set(hosts.flatMap((h) => Object.keys(h.resources)))].sort(), [hosts]);
  const rows = useMemo(() => {
    const f = filter.trim().toLowerCase();
    const ratio = (h: (typeof hosts)[number], c: string) => {
      const r = h.resources[c];
      return r && r.capacity > 0 ? r.used / r.capacity : -1;
    };
    const out = hosts.filter((h) => f === '' || h.name.toLowerCase().includes(f) || h.status === f);
    out.sort((a, b) => {
      const d =
        sort.key === 'name' ? a.name.localeCompare(b.name) : sort.key === 'status' ? a.status.localeCompare(b.status) : sort.key === 'instances' ? a.instances - b.instances : ratio(a, sort.key) - ratio(b, sort.key);
      return sort.desc ? -d : d;
    });
    return out;
  }, [hosts, filter, sort]);
  if (data.error) return <Failure error={data.error} />;
  if (!data.value) return <Loading what="hosts" />;
  const pages = Math.max(1, Math.ceil(rows.length / PAGE));
  const at = Math.min(page, pages - 1);
  const header = (key: string, label: string, num = false) => (
    <th scope="col" class={num ? 'num' : ''} aria-sort={sort.key === key ? (sort.desc ? 'descending' : 'ascending') : 'none'}>
      <button type="button" class="sort" onClick={() => setSort({ key, desc: sort.key === key ? !sort.desc : key !== 'name' })}>
        {label}
        {sort.key === key ? (sort.desc ? ' ▼' : ' ▲') : ''}
      </button>
    </th>
  );
  return (
    <main>
      <h1>Hosts</h1>
      <form class="controls" onSubmit={(e) => e.preventDefault()}>
        <label>
          Filter{' '}
          <input
            name="filter"
            type="search"
            placeholder="name or status"
            value={filter}
            onInput={(e) => {
              setFilter((e.target as HTMLInputElement).value);
              setPage(0);
            }}
          />
        </label>
        <span data-testid="hosts-count">
          {rows.length} of {hosts.length} hosts
        </span>
      </form>
      <table data-testid="hosts-table">
        <thead>
          <tr>
            {header('name', 'host')}
            {header('status', 'status')}
            {header('instances', 'instances', true)}
            {classes.map((c) => header(c, `${c} used / capacity`, true))}
          </tr>
        </thead>
        <tbody>
          {rows.slice(at * PAGE, (at + 1) * PAGE).map((h) => (
            <tr data-host={h.name}>
              <th scope="row">
                <Link href={`/hosts/${encodeURIComponent(h.name)}`}>{h.name}</Link>
              </th>
              <td title={h.status_reason}>{h.status}</td>
              <td class="num">{h.instances}</td>
              {classes.map((c) => {
                const r = h.resources[c];
                return <td class="num">{r ? `${r.used} / ${r.capacity}` : '–'}</td>;
              })}
            </tr>
          ))}
        </tbody>
      </table>
      <nav class="pager" aria-label="pages">
        <button type="button" disabled={at === 0} onClick={() => setPage(at - 1)}>
          previous
        </button>
        <span>
          page {at + 1} of {pages}
        </span>
        <button type="button" disabled={at >= pages - 1} onClick={() => setPage(at + 1)}>
          next
        </button>
      </nav>
    </main>
  );
}

interface ProviderDetail {
  provider: ProviderView;
  inventories: Record<string, InventoryView>;
  usages: Record<string, number>;
}

async function loadHost(name: string) {
  const named = await api.providersNamed(name);
  const root = named.find((p) => p.uuid === p.root_provider_uuid) ?? named[0];
  if (!root) return { root: undefined, providers: [], instances: await api.instances(name) };
  const tree = await api.tree(root.root_provider_uuid);
  const [providers, instances] = await Promise.all([
    Promise.all(tree.map(async (provider): Promise<ProviderDetail> => ({ provider, inventories: await api.inventories(provider.uuid), usages: await api.usages(provider.uuid) }))),
    api.instances(name),
  ]);
  return { root: root.uuid, providers, instances };
}

function ProviderNode({ detail, children }: { detail: ProviderDetail; children: Map<string, ProviderDetail[]> }) {
  const { provider, inventories, usages } = detail;
  const kids = children.get(provider.uuid) ?? [];
  return (
    <li data-provider={provider.name}>
      <details open>
        <summary>
          <strong>{provider.name}</strong> <code class="uuid">{provider.uuid}</code> generation {provider.generation}
        </summary>
        {Object.keys(inventories).length > 0 ? (
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
              {Object.entries(inventories)
                .sort(([a], [b]) => a.localeCompare(b))
                .map(([cls, inv]) => {
                  const cap = capacityOf(inv);
                  const used = usages[cls] ?? 0;
                  return (
                    <tr data-class={cls}>
                      <th scope="row">{cls}</th>
                      <td class="num">{inv.total}</td>
                      <td class="num">{inv.reserved}</td>
                      <td class="num">{inv.allocation_ratio}</td>
                      <td class="num">{cap}</td>
                      <td class="num" data-field="used">
                        {used}
                      </td>
                      <td class="num">{Math.max(cap - used, 0)}</td>
                    </tr>
                  );
                })}
            </tbody>
          </table>
        ) : (
          <p class="muted">no inventory</p>
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

/** `/ui/hosts/NAME`: the host's provider tree with inventories and usage, and its instances. */
export function HostPage({ name }: { name: string }) {
  const data = useLoad(() => loadHost(name), [name]);
  if (data.error) return <Failure error={data.error} />;
  if (!data.value) return <Loading what={`host ${name}`} />;
  const { root, providers, instances } = data.value;
  const children = new Map<string, ProviderDetail[]>();
  for (const d of providers) {
    const parent = d.provider.parent_provider_uuid;
    if (parent) children.set(parent, [...(children.get(parent) ?? []), d]);
  }
  for (const list of children.values()) list.sort((a, b) => a.provider.name.localeCompare(b.provider.name));
  const top = providers.find((d) => d.provider.uuid === root);
  return (
    <main>
      <h1>
        Host <span data-testid="host-name">{name}</span>
      </h1>
      {top ? (
        <section aria-labelledby="tree-h">
          <h2 id="tree-h">
            Provider tree (<span data-testid="provider-count">{providers.length}</span> providers)
          </h2>
          <ul class="tree" data-testid="provider-tree">
            <ProviderNode detail={top} children={children} />
          </ul>
        </section>
      ) : (
        <p class="problem" role="alert" data-testid="failure">
          no resource provider named "{name}": no such host. <Link href="/hosts">Every host</Link>.
        </p>
      )}
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
                <th scope="col">project</th>
                <th scope="col">created</th>
              </tr>
            </thead>
            <tbody>
              {instances.map((i) => (
                <tr data-instance={i.uuid}>
                  <td>
                    <code>{i.uuid}</code>
                  </td>
                  <td>{i.flavor}</td>
                  <td title={i.reason}>{i.state}</td>
                  <td>{i.project_id}</td>
                  <td>{i.created_at}</td>
                </tr>
              ))}
            </tbody>
          </table>
        )}
      </section>
    </main>
  );
}
