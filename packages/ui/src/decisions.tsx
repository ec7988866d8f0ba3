import { useEffect, useState } from 'preact/hooks';
import { api, type Decision } from './api.js';
import { onHostChanges } from './live.js';
import { Failure, Loading } from './load.js';
import { Link } from './router.js';

/** Read again every this many ms while the page is open. */
const EVERY_MS = 2000;

/** A request as one line: the flavor (by name, or its size), how many, where. */
export function requestLine(r: Decision['request']): string {
  const f = r.flavor;
  const what =
    typeof f === 'string' ? f : f !== undefined ? `${f.name} (${f.vcpus} vCPU, ${f.memory_mb} MB${f.disk_gb ? `, ${f.disk_gb} GB` : ''})` : typeof r.placement === 'string' ? `placement ${r.placement}` : 'placement request';
  const parts = [what];
  if (r.count !== undefined && r.count > 1) parts.push(`× ${r.count}`);
  if (r.availability_zone) parts.push(`in ${r.availability_zone}`);
  for (const key of ['hints', 'forbidden_aggregates', 'image', 'image_properties']) if (r[key] !== undefined) parts.push(`+ ${key}`);
  if (r.wait) parts.push('(wait)');
  return parts.join(' ');
}

const OUTCOME: Record<Decision['outcome'], string> = { placed: 'placed', no_valid_host: 'no valid host', error: 'error' };

/**
 * `/ui/decisions`: the latest scheduling decisions of the server (GET /scheduler/v1/decisions),
 * newest first, read again every 2 s and whenever a host changes (live.ts: a placement): the request, where it went, the time taken, the hosts
 * considered; a failure with its reason and the hosts each filter removed.
 */
export function DecisionsPage() {
  const [state, setState] = useState<{ value?: Awaited<ReturnType<typeof api.decisions>>; error?: unknown }>({});
  const [outcome, setOutcome] = useState<'' | Decision['outcome']>('');
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let reading = false;
    const read = () => {
      clearTimeout(timer);
      if (reading) return;
      reading = true;
      api.decisions().then(
        (value) => {
          reading = false;
          if (!live) return;
          setState({ value });
          timer = setTimeout(read, EVERY_MS);
        },
        (error: unknown) => {
          reading = false;
          if (live) setState({ error });
        },
      );
    };
    read();
    // A placement changes its host: read again at once (failures change no host: the 2 s read finds them).
    const sub = onHostChanges(() => read());
    return () => {
      live = false;
      sub.stop();
      clearTimeout(timer);
    };
  }, []);
  if (state.error) return <Failure error={state.error} />;
  if (!state.value) return <Loading what="decisions" />;
  const { decisions, kept, recorded, process } = state.value;
  const shown = decisions.filter((d) => outcome === '' || d.outcome === outcome);
  return (
    <main>
      <h1>Decisions</h1>
      <p class="muted">
        The latest scheduling decisions (<code>POST /scheduler/v1/select</code>) of this server process (pid {process}), newest first: {recorded} since it started, the
        last {kept} kept in memory. With <code>ert serve --workers N</code> each worker keeps its own.
      </p>
      <form class="controls" onSubmit={(e) => e.preventDefault()}>
        <label>
          Outcome{' '}
          <select name="outcome" value={outcome} onChange={(e) => setOutcome((e.target as HTMLSelectElement).value as typeof outcome)}>
            <option value="">all ({decisions.length})</option>
            {(Object.keys(OUTCOME) as Array<Decision['outcome']>).map((o) => (
              <option value={o}>
                {OUTCOME[o]} ({decisions.filter((d) => d.outcome === o).length})
              </option>
            ))}
          </select>
        </label>
      </form>
      {shown.length === 0 ? (
        <p data-testid="no-decisions">No decisions yet{outcome ? ` with this outcome` : ''}: they appear here as clients ask the scheduler API to place instances.</p>
      ) : (
        <table data-testid="decisions">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">at</th>
              <th scope="col">request</th>
              <th scope="col">outcome</th>
              <th scope="col">chosen host</th>
              <th scope="col" class="num">time ms</th>
              <th scope="col" class="num">hosts considered</th>
              <th scope="col">reason</th>
            </tr>
          </thead>
          <tbody>
            {shown.map((d) => (
              <tr data-decision={d.id} data-outcome={d.outcome}>
                <td class="num">{d.id}</td>
                <td title={d.at}>{new Date(d.at).toLocaleTimeString()}</td>
                <td data-field="request" title={JSON.stringify(d.request)}>
                  {requestLine(d.request)}
                  <div class="muted">
                    {d.user_id}
                    {d.project_id && d.project_id !== d.user_id ? ` / ${d.project_id}` : ''}
                  </div>
                </td>
                <td data-field="outcome" class={d.outcome === 'placed' ? '' : 'problem'}>
                  {OUTCOME[d.outcome]}
                </td>
                <td data-field="host">
                  {(d.instances ?? []).map((i) => (
                    <div data-instance={i.uuid} data-host={i.host}>
                      <Link href={`/hosts/${encodeURIComponent(i.host)}`}>{i.host}</Link>{' '}
                      <Link href={`/instances/${encodeURIComponent(i.uuid)}`} class="uuid">
                        {i.uuid.slice(0, 8)}
                      </Link>
                      {i.alternates > 0 ? <span class="muted"> +{i.alternates} alternates</span> : null}
                    </div>
                  ))}
                </td>
                <td class="num" data-field="duration">
                  {d.duration_ms.toFixed(1)}
                </td>
                <td class="num" data-field="considered">
                  {d.hosts_considered ?? '–'}
                  {d.hosts_passed !== undefined ? <div class="muted">{d.hosts_passed} passed</div> : null}
                </td>
                <td data-field="reason">
                  {d.error && (
                    <>
                      <code data-field="code">{d.error.code}</code>: {d.error.message}
                      {d.error.filters && d.error.filters.length > 0 && (
                        <ul class="holders" data-field="filters">
                          {d.error.filters.map((f) => (
                            <li data-filter={f.filter}>
                              {f.filter}: removed {f.removed}
                            </li>
                          ))}
                        </ul>
                      )}
                    </>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </main>
  );
}
