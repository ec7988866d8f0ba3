import { useState } from 'preact/hooks';
import { api, ApiFailure } from './api.js';
import { listOf } from './host.js';
import { useHostChanged } from './live.js';
import { Failure, Loading, useLoad } from './load.js';
import { Link } from './router.js';

/** The record and its host's providers (for their names), read together. */
async function loadInstance(uuid: string) {
  const instance = await api.instance(uuid);
  const host = await api.host(instance.host).catch((err: unknown) => {
    // The host went (an ended record may outlive it): the providers stay unnamed.
    if (err instanceof ApiFailure && err.status === 404) return undefined;
    throw err;
  });
  const names = new Map([...(host?.providers ?? []), ...(host?.sharing_providers ?? [])].map((p) => [p.uuid, p.name]));
  return { instance, names };
}

/**
 * `/ui/instances/UUID`: one instance record (state, flavor, owner, times), its allocations
 * per provider and what its host's plugins assigned it (cache ways, pinned CPUs, units,
 * pools). Read again when the live feed says its host changed.
 */
export function InstancePage({ uuid }: { uuid: string }) {
  const [version, setVersion] = useState(0);
  const data = useLoad(() => loadInstance(uuid), [uuid, version]);
  useHostChanged(data.value ? [data.value.instance.host] : [], () => setVersion((v) => v + 1));
  if (data.error) {
    if (data.error instanceof ApiFailure && data.error.code === 'ERT_API_UNKNOWN_INSTANCE') {
      return (
        <main>
          <h1>Instance {uuid}</h1>
          <p class="problem" role="alert" data-testid="failure">
            no instance {uuid} in the store (released, or never placed). <Link href="/hosts">Every host</Link>.
          </p>
        </main>
      );
    }
    return <Failure error={data.error} />;
  }
  if (!data.value) return <Loading what={`instance ${uuid}`} />;
  const { instance: i, names } = data.value;
  const rows: Array<[string, preact.ComponentChildren]> = [
    ['host', <Link href={`/hosts/${encodeURIComponent(i.host)}`}>{i.host}</Link>],
    ['state', <span data-field="state">{i.state}</span>],
    ...(i.reason ? ([['reason', i.reason]] as Array<[string, string]>) : []),
    ['flavor', i.flavor],
    ['project', i.project_id],
    ['user', i.user_id],
    ['created', i.created_at],
    ['updated', i.updated_at],
  ];
  const allocations = Object.entries(i.allocations).flatMap(([provider, a]) => Object.entries(a.resources).map(([cls, amount]) => ({ provider, cls, amount })));
  const assignments = Object.entries(i.assignments);
  return (
    <main>
      <h1>
        Instance <code data-testid="instance-uuid">{i.uuid}</code>
      </h1>
      <table data-testid="instance-record">
        <tbody>
          {rows.map(([k, v]) => (
            <tr data-key={k}>
              <th scope="row">{k}</th>
              <td>{v}</td>
            </tr>
          ))}
        </tbody>
      </table>
      <h2>Allocations</h2>
      {allocations.length === 0 ? (
        <p class="muted">none (an ended reservation holds nothing)</p>
      ) : (
        <table data-testid="allocations">
          <thead>
            <tr>
              <th scope="col">provider</th>
              <th scope="col">class</th>
              <th scope="col" class="num">amount</th>
            </tr>
          </thead>
          <tbody>
            {allocations.map((a) => (
              <tr data-provider={a.provider} data-class={a.cls}>
                <td title={a.provider}>{names.get(a.provider) ?? a.provider}</td>
                <td>{a.cls}</td>
                <td class="num" data-field="amount">
                  {a.amount}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <h2>Assignments</h2>
      {assignments.length === 0 && !i.cpus && !i.units && !i.pools ? (
        <p class="muted">none</p>
      ) : (
        <table data-testid="assignments">
          <tbody>
            {assignments.map(([plugin, value]) => (
              <tr data-plugin={plugin}>
                <th scope="row">{plugin}</th>
                <td>
                  <code data-field="assignment">{JSON.stringify(value)}</code>
                </td>
              </tr>
            ))}
            {i.cpus && (
              <tr data-plugin="cpus">
                <th scope="row">pinned CPUs</th>
                <td data-field="cpus">{listOf(i.cpus)}</td>
              </tr>
            )}
            {i.units && (
              <tr>
                <th scope="row">units held alone</th>
                <td>{i.units.join(', ')}</td>
              </tr>
            )}
            {i.pools && (
              <tr>
                <th scope="row">pools</th>
                <td>
                  {Object.entries(i.pools)
                    .map(([pool, p]) => `${pool}: ${p.amount} of ${p.capacity}`)
                    .join('; ')}
                </td>
              </tr>
            )}
          </tbody>
        </table>
      )}
    </main>
  );
}
