import type { FastifyInstance } from 'fastify';

/**
 * Runs `work` once `app` listens, in the background (every route answers meanwhile): reads that
 * would otherwise make a process's first request slow (`ert serve`'s host snapshots and
 * candidates index). Logs the outcome (`work`'s result at info with `report.done`, an error at
 * warn with `report.failed`) and tells `report.tell`; closing `app` waits for it, so the store
 * is not closed under it.
 */
export function warmOnListen<T extends Record<string, unknown>>(app: FastifyInstance, work: () => Promise<T>, report: { done: string; failed: string; tell?: (outcome: T | { error: unknown }) => void }): void {
  let warming: Promise<unknown> | undefined;
  app.addHook('onListen', async () => {
    warming = work().then(
      (outcome) => {
        const fields: Record<string, unknown> = outcome;
        app.log.info(fields, report.done);
        report.tell?.(outcome);
      },
      (err: unknown) => {
        app.log.warn({ err }, report.failed);
        report.tell?.({ error: err });
      },
    );
  });
  app.addHook('onClose', async () => void (await warming));
}
