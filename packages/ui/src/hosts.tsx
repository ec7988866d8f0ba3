import { useMemo, useState } from 'preact/hooks';
import { api, type InventoryView } from './api.js';
import { useLiveHosts } from './live.js';
import { Failure, Loading } from './load.js';
import { Link } from './router.js';

const PAGE = 100;

/** Placement's capacity: (total - reserved) * allocation_ratio, rounded down. */
export const capacityOf = (inv: InventoryView): number => Math.floor((inv.total - inv.reserved) * inv.allocation_ratio);

/** `/ui/hosts`: every host by name with its status and usage per class; filter, sort, pages of 100. */
export function HostsPage() {
  const data = useLiveHosts(() => api.hosts());
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

