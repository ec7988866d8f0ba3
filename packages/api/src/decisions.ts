/**
 * The latest scheduling decisions of this process, for `GET /scheduler/v1/decisions` (the web
 * view's Decisions page, docs/ui.md): every `POST /scheduler/v1/select` whose request passed
 * validation (the policy, the body's schema and the checks after it, its instance uuids not
 * in use) is recorded when it ends, placed or not, with the request as sent, the caller, the
 * hosts chosen, the time it took, the hosts the scheduler considered and, for a failure, its
 * code and reason (for no valid host, the hosts each filter removed). A request refused as
 * such (400 `ERT_API_BAD_REQUEST`, 409 `ERT_SCHEDULER_INSTANCE_EXISTS`) is no decision. Kept in memory in a ring of the last `limit` decisions: the oldest goes
 * when a new one comes, and a restart forgets them all. Each process keeps its own: with
 * `ert serve --workers N` a worker answers with the decisions it made itself (`process` in the
 * answer says which one).
 */
import { messageOf } from '@ert/plugin-api';

/** The outcomes, as the `ert_scheduler_decisions_total` metric counts them. */
export const DECISION_OUTCOMES = ['placed', 'no_valid_host', 'error'] as const;
export type DecisionOutcome = (typeof DECISION_OUTCOMES)[number];

/** One decision as `GET /scheduler/v1/decisions` lists it. */
export interface Decision {
  /** 1 for the first decision this process recorded, then one more each. */
  id: number;
  /** When the request arrived (ISO 8601). */
  at: string;
  outcome: DecisionOutcome;
  /** The request body as sent: without the defaults the server filled in, and without `instance_uuids` (the instances are below). */
  request: Record<string, unknown>;
  /** Who asked. */
  user_id: string;
  project_id?: string;
  /** From the request's arrival at the handler to its answer, ms (with `wait`, the confirmations included). */
  duration_ms: number;
  /**
   * The hosts the scheduler considered: placed, every host it held when it decided; no valid
   * host, the hosts its explanation counted. Absent when the request failed before any host
   * was looked at (an unknown flavor, a bad extra spec).
   */
  hosts_considered?: number;
  /** No valid host: the hosts that passed every filter (0, or too few for the count). */
  hosts_passed?: number;
  /** Placed: each instance, the host chosen and how many alternates the scheduler had. */
  instances?: Array<{ uuid: string; host: string; alternates: number; state: string }>;
  /** Not placed: the error's code and message; for no valid host, the hosts removed per filter and the claims that failed. */
  error?: { code: string; message: string; filters?: Array<{ filter: string; removed: number }>; attempts?: Array<{ host: string; error: string }> };
}

/** What a select handler answers (the scheduler API's handler result). */
interface SelectAnswer {
  status: number;
  body?: unknown;
}

/** The explanation summary a NoValidHostError carries in its details (`@ert/scheduler`'s, structurally). */
interface SummaryDetails {
  summary?: { hosts?: number; passed?: number; filters?: Array<{ filter: string; removed: number }> };
  attempts?: Array<{ host: string; error: string }>;
}

/** The ring of the latest decisions. */
export class DecisionLog {
  private readonly ring: Decision[] = [];
  private next = 1;

  /** `limit`: how many decisions are kept (at least 1). */
  constructor(readonly limit = 200) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`DecisionLog: limit must be a whole number of at least 1, got ${limit}`);
  }

  /** Decisions recorded since this process started (kept or dropped). */
  get recorded(): number {
    return this.next - 1;
  }

  /** Keep one decision (its id given here); the oldest goes when the ring is full. */
  record(decision: Omit<Decision, 'id'>): Decision {
    const kept = { id: this.next++, ...decision };
    this.ring.push(kept);
    if (this.ring.length > this.limit) this.ring.shift();
    return kept;
  }

  /** The kept decisions, newest first: at most `limit`, only of one `outcome` when given. */
  list(options: { limit?: number; outcome?: DecisionOutcome } = {}): Decision[] {
    const out: Decision[] = [];
    for (let i = this.ring.length - 1; i >= 0 && out.length < (options.limit ?? this.limit); i--) {
      const d = this.ring[i]!;
      if (options.outcome === undefined || d.outcome === options.outcome) out.push(d);
    }
    return out;
  }

  /**
   * Run one select (`run`, the handler) and record its decision: the outcome, the time taken,
   * the hosts chosen (from its answer) or the error's reason (rethrown). `body` is the request
   * as sent; `hostsHeld` tells how many hosts the scheduler holds, read after a placement; an
   * error `notADecision` says is the request's own refusal (an instance uuid in use): rethrown
   * and not recorded.
   */
  async track(
    body: unknown,
    who: { userId: string; projectId: string | undefined },
    run: () => Promise<SelectAnswer>,
    hostsHeld: () => Promise<number | undefined>,
    notADecision: (err: unknown) => boolean = () => false,
  ): Promise<SelectAnswer> {
    const at = new Date().toISOString();
    const started = performance.now();
    const { instance_uuids: _uuids, ...request } = (body ?? {}) as Record<string, unknown>;
    const base = { at, request, user_id: who.userId, ...(who.projectId !== undefined ? { project_id: who.projectId } : {}) };
    const took = () => Math.round((performance.now() - started) * 10) / 10;
    let answer: SelectAnswer;
    try {
      answer = await run();
    } catch (err) {
      if (notADecision(err)) throw err;
      const duration = took();
      // An ErtError, or anything thrown (null included): its code and details when it has them.
      const { code = 'ERT_API_INTERNAL', details = {} } = (err ?? {}) as { code?: string; details?: SummaryDetails };
      const noValidHost = code === 'ERT_SCHEDULER_NO_VALID_HOST';
      const summary = noValidHost ? details.summary : undefined;
      this.record({
        ...base,
        outcome: noValidHost ? 'no_valid_host' : 'error',
        duration_ms: duration,
        ...(summary?.hosts !== undefined ? { hosts_considered: summary.hosts } : {}),
        ...(summary?.passed !== undefined ? { hosts_passed: summary.passed } : {}),
        error: {
          code,
          message: messageOf(err),
          ...(summary?.filters ? { filters: summary.filters.filter((f) => f.removed > 0).map((f) => ({ filter: f.filter, removed: f.removed })) } : {}),
          ...(noValidHost && details.attempts && details.attempts.length > 0 ? { attempts: details.attempts } : {}),
        },
      });
      throw err;
    }
    const duration = took();
    const placed = ((answer.body as { instances?: Array<{ uuid: string; host: string; alternates?: string[]; state?: string }> } | undefined)?.instances ?? []).map((i) => ({
      uuid: i.uuid,
      host: i.host,
      alternates: i.alternates?.length ?? 0,
      state: i.state ?? 'scheduled',
    }));
    const held = await hostsHeld().catch(() => undefined);
    this.record({ ...base, outcome: 'placed', duration_ms: duration, ...(held !== undefined ? { hosts_considered: held } : {}), instances: placed });
    return answer;
  }
}
