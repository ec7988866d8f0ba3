import { describeConnection, type CommandContext } from '../context.js';

/**
 * `ert db migrate`: apply pending migrations to the configured store (idempotent).
 * JSON: `{ client, connection, migrated: true }` (a PostgreSQL password is masked).
 */
export async function migrateCommand(ctx: CommandContext): Promise<void> {
  const config = await ctx.config();
  await ctx.store(config, { create: true });
  const connection = describeConnection(config.store);
  ctx.out.result({ client: config.store.client, connection, migrated: true }, () => `migrated ${config.store.client} store ${connection}\n`);
}
