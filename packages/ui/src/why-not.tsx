import { useState } from 'preact/hooks';
import { api, ApiFailure, AuthRequired, type Explanation, type FlavorRequest, type FlavorView } from './api.js';
import { Failure, Loading, useLoad } from './load.js';
import { Link, navigate } from './router.js';

const CUSTOM = '(custom)';
const SIZE_FIELDS = ['vcpus', 'memory_mb', 'disk_gb'] as const;
type Field = 'flavor' | (typeof SIZE_FIELDS)[number] | 'az';

/** What the form asks, as the URL says it (`?flavor=NAME` or `?vcpus=..&memory_mb=..&disk_gb=..`, `&az=ZONE`). */
interface Query {
  flavor: string;
  vcpus: string;
  memory_mb: string;
  disk_gb: string;
  az: string;
}

function queryOf(search: string): Query {
  const q = new URLSearchParams(search);
  const custom = SIZE_FIELDS.some((f) => q.has(f));
  return { flavor: q.get('flavor') ?? (custom ? CUSTOM : ''), vcpus: q.get('vcpus') ?? '', memory_mb: q.get('memory_mb') ?? '', disk_gb: q.get('disk_gb') ?? '', az: q.get('az') ?? '' };
}

function searchOf(q: Query): string {
  const p = new URLSearchParams();
  if (q.flavor === CUSTOM) for (const f of SIZE_FIELDS) p.set(f, q[f]);
  else p.set('flavor', q.flavor);
  if (q.az.trim() !== '') p.set('az', q.az.trim());
  return `?${p.toString()}`;
}

/** The request of a query, or the field that is wrong and why (checked before anything is sent). */
export function requestOf(q: Query): { flavor: FlavorRequest; az?: string } | { field: Field; message: string } {
  if (q.flavor.trim() === '') return { field: 'flavor', message: 'choose a flavor, or "(custom)" and its size' };
  const az = q.az.trim() === '' ? {} : { az: q.az.trim() };
  if (q.flavor !== CUSTOM) return { flavor: q.flavor, ...az };
  const size: Record<string, number> = {};
  for (const f of SIZE_FIELDS) {
    const raw = q[f].trim() === '' && f === 'disk_gb' ? '0' : q[f].trim();
    // The API's (and Nova's) flavor rules: vcpus and memory_mb from 1, disk_gb from 0.
    const least = f === 'disk_gb' ? 0 : 1;
    if (!/^\d+$/.test(raw) || Number(raw) < least) return { field: f, message: `must be a whole number, ${least} or more; got "${q[f]}"` };
    size[f] = Number(raw);
  }
  return { flavor: { name: 'custom', vcpus: size.vcpus!, memory_mb: size.memory_mb!, disk_gb: size.disk_gb! }, ...az };
}

/** The form field an API refusal is about. */
function fieldOf(err: ApiFailure): Field {
  const m = /\/flavor\/(vcpus|memory_mb|disk_gb)/.exec(err.message);
  if (m) return m[1] as Field;
  if (/availability.zone/i.test(err.message) || 'availability_zone' in err.details) return 'az';
  return 'flavor';
}

export function WhyNotPage({ search }: { search: string }) {
  const flavors = useLoad(() => api.flavors());
  const query = queryOf(search);
  const asked = search !== '' ? requestOf(query) : undefined;
  const result = useLoad<Explanation | undefined>(() => (asked && 'flavor' in asked ? api.explain(asked.flavor, asked.az) : Promise.resolve(undefined)), [search]);
  if (flavors.error) return <Failure error={flavors.error} />;
  if (!flavors.value) return <Loading what="flavors" />;
  let problem: { field: Field; message: string } | undefined = asked && 'field' in asked ? asked : undefined;
  if (!problem && result.error instanceof ApiFailure) problem = { field: fieldOf(result.error), message: result.error.message };
  return (
    <main>
      <h1>Why not here?</h1>
      <p>Which filter refuses a flavor on each host, and the order of the hosts that fit (the scheduler's explain: nothing is claimed).</p>
      <WhyNotForm flavors={flavors.value} initial={query} problem={problem} />
      {result.error && !(result.error instanceof ApiFailure) && !(result.error instanceof AuthRequired) && <Failure error={result.error} />}
      {asked && 'flavor' in asked && !result.value && !result.error && <Loading what="the explanation" />}
      {result.value && <ExplanationView explanation={result.value} />}
    </main>
  );
}

function WhyNotForm({ flavors, initial, problem }: { flavors: FlavorView[]; initial: Query; problem: { field: Field; message: string } | undefined }) {
  const [q, setQ] = useState(initial);
  const set = (k: keyof Query) => (e: Event) => setQ({ ...q, [k]: (e.target as HTMLInputElement).value });
  const invalid = (f: Field) => (problem?.field === f ? { 'aria-invalid': true, 'aria-describedby': 'why-problem' } : {});
  return (
    <form
      class="controls why"
      data-testid="why-form"
      onSubmit={(e) => {
        e.preventDefault();
        navigate(`/why-not${searchOf(q)}`);
      }}
    >
      <label>
        Flavor{' '}
        <select name="flavor" value={q.flavor} onChange={set('flavor')} {...invalid('flavor')}>
          <option value="">choose…</option>
          {flavors.map((f) => (
            <option value={f.name}>
              {f.name} ({f.vcpus} vCPU, {f.memory_mb} MB, {f.disk_gb} GB{Object.keys(f.extra_specs).length > 0 ? ', extra specs' : ''})
            </option>
          ))}
          {q.flavor !== '' && q.flavor !== CUSTOM && !flavors.some((f) => f.name === q.flavor) && <option value={q.flavor}>{q.flavor}</option>}
          <option value={CUSTOM}>{CUSTOM}</option>
        </select>
      </label>
      {q.flavor === CUSTOM &&
        SIZE_FIELDS.map((f) => (
          <label>
            {f}{' '}
            <input name={f} inputMode="numeric" size={8} value={q[f]} onInput={set(f)} {...invalid(f)} />
          </label>
        ))}
      <label>
        Availability zone <input name="az" size={12} value={q.az} onInput={set('az')} placeholder="any" {...invalid('az')} />
      </label>
      <button type="submit">Explain</button>
      {problem && (
        <p id="why-problem" class="problem" role="alert" data-testid="why-problem" data-field={problem.field}>
          <strong>{problem.field}</strong>: {problem.message}
        </p>
      )}
    </form>
  );
}

const SHOWN = 500;

function ExplanationView({ explanation: x }: { explanation: Explanation }) {
  const [all, setAll] = useState(false);
  const rejected = all ? x.rejected : x.rejected.slice(0, SHOWN);
  return (
    <>
      <p data-testid="why-summary">
        Flavor <strong>{x.flavor}</strong>: <strong data-testid="why-passed">{x.passed}</strong> of <span data-testid="why-hosts">{x.hosts}</span> hosts fit,{' '}
        <span data-testid="why-rejected-count">{x.rejected.length}</span> refused.
      </p>
      <h2>Hosts removed per filter</h2>
      <table data-testid="why-filters">
        <thead>
          <tr>
            <th scope="col">filter</th>
            <th scope="col" class="num">removed</th>
          </tr>
        </thead>
        <tbody>
          {x.filters.map((f) => (
            <tr data-filter={f.filter}>
              <th scope="row">
                {f.filter}
                {f.stage ? ` (${f.stage}${f.query ? `: ${f.query}` : ''})` : ''}
              </th>
              <td class="num">{f.removed}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {x.weighed.length > 0 && (
        <>
          <h2>Hosts that fit, best first</h2>
          <ol class="weighed" data-testid="why-weighed">
            {x.weighed.slice(0, 20).map((w) => (
              <li>
                <Link href={`/hosts/${encodeURIComponent(w.host)}`}>{w.host}</Link> weight {w.weight.toFixed(3)}
              </li>
            ))}
            {x.weighed.length > 20 && <li class="muted">and {x.weighed.length - 20} more</li>}
          </ol>
        </>
      )}
      {x.rejected.length > 0 && (
        <>
          <h2>Refused, per host</h2>
          <table data-testid="why-rejected">
            <thead>
              <tr>
                <th scope="col">host</th>
                <th scope="col">filter</th>
                <th scope="col">why</th>
              </tr>
            </thead>
            <tbody>
              {rejected.map((r) => (
                <tr data-host={r.host}>
                  <th scope="row">
                    <Link href={`/hosts/${encodeURIComponent(r.host)}`}>{r.host}</Link>
                  </th>
                  <td data-field="filter">{r.filter}</td>
                  <td>{r.reason}</td>
                </tr>
              ))}
            </tbody>
          </table>
          {!all && x.rejected.length > SHOWN && (
            <button type="button" onClick={() => setAll(true)}>
              Show all {x.rejected.length}
            </button>
          )}
        </>
      )}
    </>
  );
}
