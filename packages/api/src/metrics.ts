/**
 * ert's Prometheus metrics (docs/operations.md lists them). One `ErtMetrics` per process, on
 * a registry of its own (not prom-client's global one). The packages that produce the
 * numbers depend on no metrics library: they take observer callbacks, which this module
 * provides: the dispatcher's `onCall` (every plugin hook), the store's `onTransaction`, the
 * tracker's `onClaim` / `onConfirm`, and `observeDecision` for a scheduler running in the
 * process. Hosts by status are read from the store at scrape time.
 *
 * Under `ert serve --workers N` each worker keeps its own registry and a scrape of any worker
 * answers the sum over all workers: the worker asks the primary (`ErtMetrics.aggregateCluster`),
 * which gathers every worker's registry with prom-client's `AggregatorRegistry`
 * (`ErtMetrics.shareWithCluster` in the workers).
 */
import cluster, { type Worker } from 'node:cluster';
import { messageOf } from '@ert/plugin-api';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { Store } from '@ert/store';
import type { DecisionOutcome } from './decisions.js';

/** Seconds buckets for HTTP requests, hook calls, claims and decisions (1 ms .. 10 s). */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Store transactions are mostly sub-millisecond on SQLite. */
const STORE_BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 5];

/** The route label of a request no route matched (404s): one series, whatever was asked. */
export const UNMATCHED_ROUTE = '(unmatched)';

/** What the dispatcher tells (`HookCallObservation` of @ert/core, structurally). */
export interface HookCallEvent {
  plugin: string;
  hook: string;
  seconds: number;
  outcome: 'ok' | 'failed' | 'timeout' | 'invalid';
}

/** What the store tells (`TransactionObservation` of @ert/store, structurally). */
export interface TransactionEvent {
  kind: 'read' | 'write';
  operation: string;
  seconds: number;
  ok: boolean;
}

/** What the tracker tells (`ClaimObservation` of @ert/tracker, structurally). */
export interface ClaimEvent {
  outcome: 'claimed' | 'refused' | 'conflict' | 'error';
  seconds: number;
  retries: number;
}

/** A reservation pass of the tracker (`ConfirmReport` of @ert/tracker, structurally). */
export interface ConfirmEvent {
  confirmed: readonly unknown[];
  refused: readonly unknown[];
  expired: readonly unknown[];
  /** Confirmations that failed with an error (the reservations stay `scheduled`). */
  failed: readonly unknown[];
}

/**
 * One scheduling decision, for a scheduler running in this process (`POST /select`, not
 * built yet, calls `observeDecision` once per request): `placed`, `no_valid_host`, or `error`.
 */
export interface DecisionEvent {
  outcome: DecisionOutcome;
  seconds: number;
  /** Instances asked for (the request's count). */
  instances?: number;
}

/** One plugin hook's counters in a scheduler (`@ert/core`'s HookTiming, structurally). */
export interface SchedulerHookCount {
  plugin: string;
  hook: string;
  calls: number;
  failures: number;
}

export interface MetricsOptions {
  /** Where `ert_hosts` is read at scrape time (`listHosts`). Without it the gauge is absent. */
  store?: Store;
  /** Collect prom-client's default process metrics (`process_*`, `nodejs_*`). Default true. */
  defaultMetrics?: boolean;
}

export class ErtMetrics {
  readonly registry = new Registry();

  readonly httpRequests: Counter<'route' | 'method' | 'status'>;
  readonly httpDuration: Histogram<'route' | 'method' | 'status'>;
  readonly hookCalls: Counter<'plugin' | 'hook'>;
  readonly hookFailures: Counter<'plugin' | 'hook' | 'reason'>;
  readonly hookDuration: Histogram<'plugin' | 'hook'>;
  readonly claims: Counter<'outcome'>;
  readonly claimConflicts: Counter;
  readonly claimRetries: Counter;
  readonly claimDuration: Histogram<'outcome'>;
  readonly reservations: Counter<'outcome'>;
  readonly decisions: Counter<'outcome'>;
  readonly decisionDuration: Histogram<'outcome'>;
  readonly storeDuration: Histogram<'kind' | 'operation' | 'outcome'>;

  private store: Store | undefined;
  /** The scheduler's hook counters (`useSchedulerHooks`), read at scrape time. */
  private schedulerHooks: (() => readonly SchedulerHookCount[]) | undefined;
  /** Set in a cluster worker (`shareWithCluster`): the exposition comes from the primary. */
  private fromPrimary: (() => Promise<string>) | undefined;

  constructor(options: MetricsOptions = {}) {
    const registers = [this.registry];
    this.store = options.store;
    if (options.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry });

    this.httpRequests = new Counter({ name: 'ert_http_requests_total', help: 'HTTP requests answered, by route pattern, method and status code.', labelNames: ['route', 'method', 'status'], registers });
    this.httpDuration = new Histogram({
      name: 'ert_http_request_duration_seconds',
      help: 'Time from receiving an HTTP request to sending its response, by route pattern, method and status code.',
      labelNames: ['route', 'method', 'status'],
      buckets: LATENCY_BUCKETS,
      registers,
    });
    this.hookCalls = new Counter({ name: 'ert_plugin_hook_calls_total', help: 'Plugin hook calls through the dispatcher (failed ones included).', labelNames: ['plugin', 'hook'], registers });
    this.hookFailures = new Counter({
      name: 'ert_plugin_hook_failures_total',
      help: 'Plugin hook calls that failed: threw or rejected (failed), timed out (timeout), returned a result refused by its validator (invalid).',
      labelNames: ['plugin', 'hook', 'reason'],
      registers,
    });
    this.hookDuration = new Histogram({ name: 'ert_plugin_hook_duration_seconds', help: 'Duration of plugin hook calls through the dispatcher.', labelNames: ['plugin', 'hook'], buckets: LATENCY_BUCKETS, registers });
    this.claims = new Counter({
      name: 'ert_tracker_claims_total',
      help: "Claims through the tracker's claim path (ert claim, reservations being confirmed), by outcome: claimed, refused (plugins or placement), conflict (the store refused the write), error.",
      labelNames: ['outcome'],
      registers,
    });
    this.claimConflicts = new Counter({ name: 'ert_tracker_claim_conflicts_total', help: 'Claims the store refused (a lost race or generation conflict: what the API answers with 409).', registers });
    this.claimRetries = new Counter({ name: 'ert_tracker_claim_retries_total', help: 'Claim writes tried again after the store refused a unit another process had taken.', registers });
    this.claimDuration = new Histogram({ name: 'ert_tracker_claim_duration_seconds', help: 'Duration of claims, plugins and store write included, by outcome.', labelNames: ['outcome'], buckets: LATENCY_BUCKETS, registers });
    this.reservations = new Counter({
      name: 'ert_tracker_reservations_total',
      help: "Schedulers' reservations this tracker ended, by outcome: confirmed (active), refused, expired; and failed: a confirmation that failed with an error (the reservation stays scheduled and is tried again at the next pass, so one reservation counts once per failed attempt).",
      labelNames: ['outcome'],
      registers,
    });
    this.decisions = new Counter({
      name: 'ert_scheduler_decisions_total',
      help: 'Scheduling decisions made in this process, by outcome: placed, no_valid_host, error.',
      labelNames: ['outcome'],
      registers,
    });
    this.decisionDuration = new Histogram({ name: 'ert_scheduler_decision_duration_seconds', help: 'Duration of scheduling decisions made in this process.', labelNames: ['outcome'], buckets: LATENCY_BUCKETS, registers });
    this.storeDuration = new Histogram({
      name: 'ert_store_transaction_duration_seconds',
      help: 'Duration of store transactions (waiting for the lock included), by kind (read, write), operation and outcome (ok, error).',
      labelNames: ['kind', 'operation', 'outcome'],
      buckets: STORE_BUCKETS,
      registers,
    });
    const hooksOf = () => this.schedulerHooks?.() ?? [];
    new Counter({
      name: 'ert_scheduler_hook_calls_total',
      help: "Calls of the scheduler's plugin hooks (consumers, filters, weighers, built-ins), by plugin and hook; read from the scheduler's counters at scrape time.",
      labelNames: ['plugin', 'hook'],
      registers,
      collect() {
        this.reset();
        for (const t of hooksOf()) this.inc({ plugin: t.plugin, hook: t.hook }, t.calls);
      },
    });
    new Counter({
      name: 'ert_scheduler_hook_failures_total',
      help: "Calls of the scheduler's plugin hooks that threw or returned an invalid result (the host is then left out, naming the plugin), by plugin and hook.",
      labelNames: ['plugin', 'hook'],
      registers,
      collect() {
        this.reset();
        for (const t of hooksOf()) if (t.failures > 0) this.inc({ plugin: t.plugin, hook: t.hook }, t.failures);
      },
    });
    const storeOf = () => this.store;
    new Gauge({
      name: 'ert_hosts',
      help: 'Hosts in the store by status (up, stale, disabled), read at scrape time.',
      labelNames: ['status'],
      // Every worker of `ert serve --workers N` reads the same store: summing would count each host N times.
      aggregator: 'max',
      registers,
      async collect() {
        this.reset();
        const store = storeOf();
        if (store === undefined) return;
        let hosts: Awaited<ReturnType<Store['listHosts']>>;
        try {
          hosts = await store.listHosts();
        } catch {
          return; // the store unreachable: /readyz says so; the scrape still answers
        }
        const counts = new Map<string, number>([['up', 0], ['stale', 0], ['disabled', 0]]);
        for (const host of hosts) counts.set(host.status, (counts.get(host.status) ?? 0) + 1);
        for (const [status, n] of counts) this.set({ status }, n);
      },
    });
  }

  /**
   * Where `ert_scheduler_hook_calls_total` and `ert_scheduler_hook_failures_total` are read at
   * scrape time: the process's scheduler's hook counters (`Scheduler.timings()`). The
   * scheduler calls its filters, weighers and consumers on the dispatcher's cheap path (no
   * clock, no observer per call: a decision may make tens of thousands), so these are counts
   * read when scraped, not timed per call; `ert_scheduler_decision_duration_seconds` times the
   * decisions.
   */
  useSchedulerHooks(source: (() => readonly SchedulerHookCount[]) | undefined): void {
    this.schedulerHooks = source;
  }

  /** Set (or replace) the store `ert_hosts` is read from. */
  useStore(store: Store | undefined): void {
    this.store = store;
  }

  /** The dispatcher's observer (`DispatcherOptions.onCall`). */
  readonly onHookCall = (call: HookCallEvent): void => {
    const labels = { plugin: call.plugin, hook: call.hook };
    this.hookCalls.inc(labels);
    this.hookDuration.observe(labels, call.seconds);
    if (call.outcome !== 'ok') this.hookFailures.inc({ ...labels, reason: call.outcome });
  };

  /** The store's observer (`StoreOptions.onTransaction`). */
  readonly onTransaction = (tx: TransactionEvent): void => {
    this.storeDuration.observe({ kind: tx.kind, operation: tx.operation, outcome: tx.ok ? 'ok' : 'error' }, tx.seconds);
  };

  /** The tracker's claim observer (`TrackerObserver.onClaim`). */
  readonly onClaim = (claim: ClaimEvent): void => {
    this.claims.inc({ outcome: claim.outcome });
    this.claimDuration.observe({ outcome: claim.outcome }, claim.seconds);
    if (claim.outcome === 'conflict') this.claimConflicts.inc();
    if (claim.retries > 0) this.claimRetries.inc(claim.retries);
  };

  /** The tracker's reservation observer (`TrackerObserver.onConfirm`). */
  readonly onConfirm = (report: ConfirmEvent): void => {
    if (report.confirmed.length > 0) this.reservations.inc({ outcome: 'confirmed' }, report.confirmed.length);
    if (report.refused.length > 0) this.reservations.inc({ outcome: 'refused' }, report.refused.length);
    if (report.expired.length > 0) this.reservations.inc({ outcome: 'expired' }, report.expired.length);
    if (report.failed.length > 0) this.reservations.inc({ outcome: 'failed' }, report.failed.length);
  };

  /** One scheduling decision (the hook `POST /select` will call; see docs/operations.md). */
  readonly observeDecision = (decision: DecisionEvent): void => {
    this.decisions.inc({ outcome: decision.outcome });
    this.decisionDuration.observe({ outcome: decision.outcome }, decision.seconds);
  };

  /** One HTTP response. `route` is the route's pattern (`/placement/resource_providers/:uuid`), never the URL. */
  observeRequest(route: string, method: string, status: number, seconds: number): void {
    const labels = { route, method, status: String(status) };
    this.httpRequests.inc(labels);
    this.httpDuration.observe(labels, seconds);
  }

  /**
   * In the primary of `ert serve --workers N`: answer each worker's scrape request with the
   * exposition of all workers, their series summed by prom-client's `AggregatorRegistry`
   * (counters and histograms summed per label set; `ert_hosts` the max, since all read the same
   * store; the default process metrics as prom-client aggregates them). The primary's own
   * process is not among them. Workers call `shareWithCluster`. Returns the function that
   * stops answering.
   */
  static aggregateCluster(): () => void {
    return aggregateClusterMetrics();
  }

  /**
   * In a worker of `ert serve --workers N` (node:cluster): let the primary read this registry
   * (prom-client's worker side of `AggregatorRegistry`), and make `expose()` answer the sum
   * over all workers, asked of the primary (`ErtMetrics.aggregateCluster` must run there). Outside
   * a cluster worker, nothing changes.
   */
  shareWithCluster(options: { timeoutMs?: number } = {}): void {
    if (!cluster.isWorker) return;
    AggregatorRegistry.setRegistries([this.registry]);
    // Constructing one is what installs the worker's listener for the primary's requests.
    new AggregatorRegistry();
    const timeoutMs = options.timeoutMs ?? CLUSTER_SCRAPE_TIMEOUT_MS;
    this.fromPrimary = () => askPrimary(timeoutMs);
  }

  /**
   * The exposition (text format 0.0.4) and its content type: this registry's, or in a worker
   * that `shareWithCluster` was called in, all workers' summed (rejects when the primary does
   * not answer in time: a scrape never passes one worker's numbers off as the service's).
   */
  async expose(): Promise<{ contentType: string; body: string }> {
    const body = this.fromPrimary ? await this.fromPrimary() : await this.registry.metrics();
    return { contentType: this.registry.contentType, body };
  }
}

/** How long a worker waits for the primary's aggregated exposition (prom-client's own per-gather timeout is 5 s). */
const CLUSTER_SCRAPE_TIMEOUT_MS = 8_000;
const SCRAPE_REQUEST = 'ert-metrics-scrape';
const SCRAPE_RESULT = 'ert-metrics-scrape-result';

interface ScrapeRequest {
  type: typeof SCRAPE_REQUEST;
  id: number;
}

interface ScrapeResult {
  type: typeof SCRAPE_RESULT;
  id: number;
  body?: string;
  error?: string;
}

let nextScrape = 0;
const pendingScrapes = new Map<number, { resolve(body: string): void; reject(err: Error): void; timer: NodeJS.Timeout }>();
let resultListener = false;

/** A worker's request for the aggregated exposition, answered over the IPC channel. */
function askPrimary(timeoutMs: number): Promise<string> {
  if (!resultListener) {
    resultListener = true;
    process.on('message', (message: Partial<ScrapeResult> | null) => {
      if (message?.type !== SCRAPE_RESULT || message.id === undefined) return;
      const pending = pendingScrapes.get(message.id);
      if (!pending) return;
      pendingScrapes.delete(message.id);
      clearTimeout(pending.timer);
      if (message.error !== undefined || message.body === undefined) pending.reject(new Error(`the primary could not gather the workers' metrics: ${message.error ?? 'no body'}`));
      else pending.resolve(message.body);
    });
  }
  return new Promise((resolve, reject) => {
    if (!process.send || !process.connected) {
      reject(new Error('not connected to the primary of ert serve --workers'));
      return;
    }
    const id = nextScrape++;
    const timer = setTimeout(() => {
      pendingScrapes.delete(id);
      reject(new Error(`the primary did not answer with the workers' metrics within ${timeoutMs} ms`));
    }, timeoutMs);
    timer.unref();
    pendingScrapes.set(id, { resolve, reject, timer });
    const request: ScrapeRequest = { type: SCRAPE_REQUEST, id };
    process.send(request);
  });
}

/** The primary's side of `ErtMetrics.aggregateCluster`. */
function aggregateClusterMetrics(): () => void {
  const aggregator = new AggregatorRegistry();
  const onMessage = (worker: Worker, message: Partial<ScrapeRequest> | null): void => {
    if (message?.type !== SCRAPE_REQUEST || message.id === undefined) return;
    const id = message.id;
    const answer = (result: ScrapeResult): void => {
      if (worker.isConnected()) worker.send(result);
    };
    aggregator.clusterMetrics().then(
      (body) => answer({ type: SCRAPE_RESULT, id, body }),
      (err: unknown) => answer({ type: SCRAPE_RESULT, id, error: messageOf(err) }),
    );
  };
  cluster.on('message', onMessage);
  return () => {
    cluster.off('message', onMessage);
  };
}

/** A registry with ert's metrics (and, unless asked otherwise, the default process metrics). */
export function createMetrics(options: MetricsOptions = {}): ErtMetrics {
  return new ErtMetrics(options);
}
