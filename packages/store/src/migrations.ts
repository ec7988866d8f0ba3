import type { Knex } from 'knex';
import { STANDARD_RESOURCE_CLASSES } from '@ert/plugin-api';

/** Knex migrator table (and `<name>_lock`) for ert's schema. */
export const MIGRATIONS_TABLE = 'ert_migrations';

interface Migration {
  up(knex: Knex): Promise<void>;
  down(knex: Knex): Promise<void>;
}

/**
 * The schema of DESIGN.md. Integer surrogate keys inside, uuids and names outside.
 * JSON (stats data, flavors, assignments, aggregate metadata) is stored as text so the
 * same code reads it on SQLite and PostgreSQL. Epoch milliseconds are bigints.
 */
const initial: Migration = {
  async up(knex) {
    await knex.schema.createTable('resource_classes', (t) => {
      t.increments('id');
      t.string('name', 255).notNullable().unique();
    });
    await knex.schema.createTable('providers', (t) => {
      t.increments('id');
      t.string('uuid', 36).notNullable().unique();
      t.string('name', 200).notNullable().unique();
      t.integer('parent_id').nullable().references('id').inTable('providers');
      // Set to the row's own id for a root (written right after the insert).
      t.integer('root_id').nullable().references('id').inTable('providers');
      t.integer('generation').notNullable().defaultTo(0);
      t.index(['root_id']);
      t.index(['parent_id']);
    });
    await knex.schema.createTable('inventories', (t) => {
      t.integer('provider_id').notNullable().references('id').inTable('providers').onDelete('CASCADE');
      t.integer('resource_class_id').notNullable().references('id').inTable('resource_classes');
      t.integer('total').notNullable();
      t.integer('reserved').notNullable();
      t.integer('min_unit').notNullable();
      t.integer('max_unit').notNullable();
      t.integer('step_size').notNullable();
      t.double('allocation_ratio').notNullable();
      t.primary(['provider_id', 'resource_class_id']);
    });
    await knex.schema.createTable('consumers', (t) => {
      t.increments('id');
      t.string('uuid', 36).notNullable().unique();
      t.string('project_id', 255).notNullable();
      t.string('user_id', 255).notNullable();
      t.integer('generation').notNullable().defaultTo(0);
    });
    await knex.schema.createTable('allocations', (t) => {
      t.increments('id');
      t.integer('provider_id').notNullable().references('id').inTable('providers');
      t.integer('consumer_id').notNullable().references('id').inTable('consumers').onDelete('CASCADE');
      t.integer('resource_class_id').notNullable().references('id').inTable('resource_classes');
      t.integer('used').notNullable();
      t.unique(['consumer_id', 'provider_id', 'resource_class_id']);
      // Usage sums per provider and class (claims, loadHosts, inventory-in-use checks).
      t.index(['provider_id', 'resource_class_id', 'consumer_id']);
    });
    await knex.schema.createTable('traits', (t) => {
      t.increments('id');
      t.string('name', 255).notNullable().unique();
    });
    await knex.schema.createTable('provider_traits', (t) => {
      t.integer('provider_id').notNullable().references('id').inTable('providers').onDelete('CASCADE');
      t.integer('trait_id').notNullable().references('id').inTable('traits');
      t.primary(['provider_id', 'trait_id']);
      t.index(['trait_id']);
    });
    await knex.schema.createTable('aggregates', (t) => {
      t.increments('id');
      t.string('uuid', 36).notNullable().unique();
      t.string('name', 255).nullable();
      t.text('metadata').notNullable().defaultTo('{}');
    });
    await knex.schema.createTable('provider_aggregates', (t) => {
      t.integer('provider_id').notNullable().references('id').inTable('providers').onDelete('CASCADE');
      t.integer('aggregate_id').notNullable().references('id').inTable('aggregates');
      t.primary(['provider_id', 'aggregate_id']);
      t.index(['aggregate_id']);
    });
    await knex.schema.createTable('hosts', (t) => {
      t.increments('id');
      t.string('name', 255).notNullable().unique();
      t.integer('root_provider_id').notNullable().references('id').inTable('providers');
      t.string('status', 16).notNullable().defaultTo('up');
      t.bigInteger('last_update').notNullable().defaultTo(0);
      t.integer('generation').notNullable().defaultTo(0);
      t.index(['root_provider_id']);
      t.index(['status', 'last_update']);
    });
    await knex.schema.createTable('host_stats', (t) => {
      t.integer('host_id').notNullable().references('id').inTable('hosts').onDelete('CASCADE');
      t.string('plugin', 255).notNullable();
      t.integer('schema_version').notNullable();
      t.text('data').notNullable();
      t.bigInteger('updated_at').notNullable();
      t.primary(['host_id', 'plugin']);
    });
    await knex.schema.createTable('instances', (t) => {
      t.string('uuid', 36).primary();
      t.integer('host_id').notNullable().references('id').inTable('hosts');
      t.string('project_id', 255).notNullable();
      t.string('user_id', 255).notNullable();
      t.text('flavor').notNullable();
      t.text('previous_flavor').nullable();
      t.string('migration_uuid', 36).nullable();
      t.text('assignments').notNullable().defaultTo('{}');
      t.string('state', 16).notNullable();
      t.bigInteger('created_at').notNullable();
      t.bigInteger('updated_at').notNullable();
      t.index(['host_id']);
    });
    await knex('resource_classes').insert(STANDARD_RESOURCE_CLASSES.map((name) => ({ name })));
  },
  async down(knex) {
    for (const table of [
      'instances',
      'host_stats',
      'hosts',
      'provider_aggregates',
      'aggregates',
      'provider_traits',
      'traits',
      'allocations',
      'consumers',
      'inventories',
      'providers',
      'resource_classes',
    ]) {
      await knex.schema.dropTableIfExists(table);
    }
  },
};

/** Host CPUs an instance is pinned to (JSON list; null when it floats). */
const instanceCpus: Migration = {
  async up(knex) {
    await knex.schema.alterTable('instances', (t) => {
      t.text('cpus').nullable();
    });
  },
  async down(knex) {
    await knex.schema.alterTable('instances', (t) => {
      t.dropColumn('cpus');
    });
  },
};

/**
 * Amounts and totals as bigint. PostgreSQL's integer stops at 2^31-1 (a 3 TB MEMORY_MB
 * inventory overflowed); SQLite's INTEGER is already 64-bit, so there it changes nothing.
 * Every value written is still a safe JS integer (`inventoryProblem` bounds them), and the
 * connection reads int8 back as a number (connection.ts).
 */
const AMOUNT_COLUMNS: Record<string, string[]> = {
  inventories: ['total', 'reserved', 'min_unit', 'max_unit', 'step_size'],
  allocations: ['used'],
};
const bigintAmounts: Migration = {
  async up(knex) {
    if (knex.client.config.client !== 'pg') return;
    for (const [table, columns] of Object.entries(AMOUNT_COLUMNS)) {
      await knex.schema.alterTable(table, (t) => {
        for (const column of columns) t.bigInteger(column).notNullable().alter();
      });
    }
  },
  async down(knex) {
    if (knex.client.config.client !== 'pg') return;
    for (const [table, columns] of Object.entries(AMOUNT_COLUMNS)) {
      await knex.schema.alterTable(table, (t) => {
        for (const column of columns) t.integer(column).notNullable().alter();
      });
    }
  },
};

/** Why a reservation was refused or expired (issue 11: reservations); null otherwise. */
const instanceReason: Migration = {
  async up(knex) {
    await knex.schema.alterTable('instances', (t) => {
      t.text('reason').nullable();
      t.index(['state', 'updated_at']);
    });
  },
  async down(knex) {
    await knex.schema.alterTable('instances', (t) => {
      t.dropIndex(['state', 'updated_at']);
      t.dropColumn('reason');
    });
  },
};

/**
 * The machine a host was registered from (issue 11, point 11): its `/etc/machine-id`, or the
 * path of the directory standing for `/`. A tracker reading another machine refuses to write
 * the host's inventory. Null for hosts registered before, adopted by their next sync.
 */
const hostMachine: Migration = {
  async up(knex) {
    await knex.schema.alterTable('hosts', (t) => {
      t.string('machine', 1024).nullable();
    });
  },
  async down(knex) {
    await knex.schema.alterTable('hosts', (t) => {
      t.dropColumn('machine');
    });
  },
};

/**
 * Exclusive assignments (issue 11, point 4; see holds.ts): the instance's units and pools as
 * JSON, and `instance_holds`, one row per hold, with a partial unique index so that a unit
 * of a host has at most one holder. Pinned CPUs recorded before are backfilled; where two
 * instances already shared a CPU the older keeps it (the record still names it).
 */
const instanceHolds: Migration = {
  async up(knex) {
    await knex.schema.alterTable('instances', (t) => {
      t.text('units').nullable();
      t.text('pools').nullable();
    });
    await knex.schema.createTable('instance_holds', (t) => {
      t.integer('host_id').notNullable().references('id').inTable('hosts').onDelete('CASCADE');
      t.string('instance_uuid', 36).notNullable().references('uuid').inTable('instances').onDelete('CASCADE');
      t.string('hold', 255).notNullable();
      t.bigInteger('amount').nullable();
      t.bigInteger('capacity').nullable();
      t.primary(['instance_uuid', 'hold']);
      t.index(['host_id', 'hold']);
    });
    await knex.raw('CREATE UNIQUE INDEX instance_holds_unit ON instance_holds (host_id, hold) WHERE amount IS NULL');
    const pinned: Array<{ uuid: string; host_id: number; cpus: string }> = await knex('instances').select('uuid', 'host_id', 'cpus').whereNotNull('cpus').orderBy('created_at');
    const rows = pinned.flatMap((i) => (JSON.parse(i.cpus) as number[]).map((cpu) => ({ host_id: i.host_id, instance_uuid: i.uuid, hold: `cpu/${cpu}` })));
    for (let i = 0; i < rows.length; i += 500) await knex('instance_holds').insert(rows.slice(i, i + 500)).onConflict().ignore();
  },
  async down(knex) {
    await knex.schema.dropTableIfExists('instance_holds');
    await knex.schema.alterTable('instances', (t) => {
      t.dropColumn('units');
      t.dropColumn('pools');
    });
  },
};

/** 0007: a consumer's type (Placement 1.38's `consumer_type`); null for consumers written without one. */
const consumerType: Migration = {
  async up(knex) {
    await knex.schema.alterTable('consumers', (t) => {
      t.string('consumer_type', 255).nullable();
    });
  },
  async down(knex) {
    await knex.schema.alterTable('consumers', (t) => {
      t.dropColumn('consumer_type');
    });
  },
};

/** Why an operator disabled a host (`ert host disable --reason`); null otherwise. */
const hostStatusReason: Migration = {
  async up(knex) {
    await knex.schema.alterTable('hosts', (t) => {
      t.string('status_reason', 1024).nullable();
    });
  },
  async down(knex) {
    await knex.schema.alterTable('hosts', (t) => {
      t.dropColumn('status_reason');
    });
  },
};

/**
 * 0009: who wrote each provider, trait association and inventory (issue 20, ownership).
 * `owner` is `tracker` for what a host's tracker writes (its plugins' and provider config
 * files' providers, traits and inventories) and null for everything else (the Placement API,
 * the CLI, scripts): a tracker's sync adds, updates and removes only rows it owns.
 *
 * Rows written before this migration carry no owner; they are attributed by the tracker's
 * naming: in every host's tree, the root (named after the host) and the providers named
 * `<host>_<key>` (the only names a tracker gives) become the tracker's, with their traits and
 * inventories (before this migration every sync rewrote those whole, so they are what the
 * tracker last wrote). Everything else (other providers of the tree, providers in no host's
 * tree) stays null.
 */
const ownership: Migration = {
  async up(knex) {
    for (const table of ['providers', 'provider_traits', 'inventories']) {
      await knex.schema.alterTable(table, (t) => {
        t.string('owner', 64).nullable();
      });
    }
    const hosts: Array<{ name: string; root_provider_id: number }> = await knex('hosts').select('name', 'root_provider_id');
    for (const host of hosts) {
      const tree: Array<{ id: number; name: string }> = await knex('providers').where('root_id', host.root_provider_id).select('id', 'name');
      const ids = tree.filter((p) => p.id === host.root_provider_id || p.name === host.name || p.name.startsWith(`${host.name}_`)).map((p) => p.id);
      for (let i = 0; i < ids.length; i += 500) {
        const part = ids.slice(i, i + 500);
        await knex('providers').whereIn('id', part).update({ owner: 'tracker' });
        await knex('provider_traits').whereIn('provider_id', part).update({ owner: 'tracker' });
        await knex('inventories').whereIn('provider_id', part).update({ owner: 'tracker' });
      }
    }
  },
  async down(knex) {
    for (const table of ['providers', 'provider_traits', 'inventories']) {
      await knex.schema.alterTable(table, (t) => {
        t.dropColumn('owner');
      });
    }
  },
};

/**
 * 0010 (SQLite only): `model_version`, one row whose `version` triggers bump at every insert,
 * update or delete of a provider (generations included, so every inventory, trait, aggregate
 * and allocation write) and every change of a resource class. `loadProviders` reads it first
 * and returns its kept model when it has not moved, whoever wrote (another process, a script):
 * one row instead of one per provider. SQLite has one writer at a time, so the row costs no
 * concurrency; on PostgreSQL one row written by every claim would serialise them, so there is
 * no such table and `loadProviders` compares its per-provider rows (provider-model.ts).
 */
const modelVersion: Migration = {
  async up(knex) {
    if (knex.client.config.client !== 'sqlite3') return;
    await knex.schema.createTable('model_version', (t) => {
      t.integer('id').primary();
      t.bigInteger('version').notNullable();
    });
    await knex('model_version').insert({ id: 1, version: 0 });
    for (const [table, event] of [['providers', 'INSERT'], ['providers', 'UPDATE'], ['providers', 'DELETE'], ['resource_classes', 'UPDATE'], ['resource_classes', 'DELETE']] as const) {
      await knex.raw(`CREATE TRIGGER model_version_${table}_${event.toLowerCase()} AFTER ${event} ON ${table} BEGIN UPDATE model_version SET version = version + 1 WHERE id = 1; END`);
    }
  },
  async down(knex) {
    if (knex.client.config.client !== 'sqlite3') return;
    for (const table of ['providers', 'resource_classes']) for (const event of ['insert', 'update', 'delete']) await knex.raw(`DROP TRIGGER IF EXISTS model_version_${table}_${event}`);
    await knex.schema.dropTableIfExists('model_version');
  },
};

/**
 * 0011 (PostgreSQL only): `providers.change_xid`, the id of the transaction that last wrote
 * the row (a trigger sets `pg_current_xact_id()` at every insert and update, generations
 * included). Every transaction a snapshot did not see has an id at least that snapshot's
 * xmin, so `loadProviders` asks for the rows with `change_xid >= xmin of its previous read`
 * (and counts the rows, for deletes) instead of reading one row per provider
 * (provider-model.ts). No index: the column changes at every claim, and a scan of the table
 * on the server is cheaper than sending it. xid8 needs PostgreSQL 13 or later.
 */
const providerChangeXid: Migration = {
  async up(knex) {
    if (knex.client.config.client !== 'pg') return;
    await knex.raw('ALTER TABLE providers ADD COLUMN change_xid xid8');
    await knex.raw('UPDATE providers SET change_xid = pg_current_xact_id()');
    await knex.raw(`CREATE FUNCTION ert_provider_change_xid() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.change_xid := pg_current_xact_id(); RETURN NEW; END $$`);
    await knex.raw('CREATE TRIGGER providers_change_xid BEFORE INSERT OR UPDATE ON providers FOR EACH ROW EXECUTE FUNCTION ert_provider_change_xid()');
  },
  async down(knex) {
    if (knex.client.config.client !== 'pg') return;
    await knex.raw('DROP TRIGGER IF EXISTS providers_change_xid ON providers');
    await knex.raw('DROP FUNCTION IF EXISTS ert_provider_change_xid()');
    await knex.raw('ALTER TABLE providers DROP COLUMN change_xid');
  },
};

/**
 * 0012: `provider_aggregates.owner`, the writer that owns a membership (as 0009 did for
 * providers, traits and inventories): the tracker replaces only its own (provider config
 * files' `aggregates`), so one a file stops naming leaves and an operator's stays. Existing
 * memberships have none; the tracker adopts the ones its files name at its next sync.
 */
const aggregateOwner: Migration = {
  async up(knex) {
    await knex.schema.alterTable('provider_aggregates', (t) => {
      t.string('owner', 64).nullable();
    });
  },
  async down(knex) {
    await knex.schema.alterTable('provider_aggregates', (t) => {
      t.dropColumn('owner');
    });
  },
};

/**
 * 0013: what changed in the hosts since a point (`hostChanges`, issue 15), so a scheduler's
 * refresh reads the hosts whose generation moved instead of every host's. SQLite:
 * `hosts.change_seq`, set from the one-row counter `host_change_counter` by triggers at every
 * insert of a host and every update of its generation (one writer at a time, so the counter
 * only grows in commit order), indexed. PostgreSQL: `hosts.change_xid`, the writing
 * transaction's id (`pg_current_xact_id()`), as 0011 does for providers: a sequence would not
 * do, its values are taken before commit and become visible out of order. No index there (the
 * column changes at every claim; a scan on the server is cheaper than sending every row).
 */
const hostChanges: Migration = {
  async up(knex) {
    if (knex.client.config.client === 'sqlite3') {
      await knex.raw('ALTER TABLE hosts ADD COLUMN change_seq integer NOT NULL DEFAULT 0');
      await knex.raw('CREATE INDEX hosts_change_seq_index ON hosts (change_seq)');
      await knex.schema.createTable('host_change_counter', (t) => {
        t.integer('id').primary();
        t.bigInteger('seq').notNullable();
      });
      await knex('host_change_counter').insert({ id: 1, seq: 0 });
      const stamp = 'UPDATE host_change_counter SET seq = seq + 1 WHERE id = 1; UPDATE hosts SET change_seq = (SELECT seq FROM host_change_counter WHERE id = 1) WHERE id = NEW.id;';
      await knex.raw(`CREATE TRIGGER hosts_change_insert AFTER INSERT ON hosts BEGIN ${stamp} END`);
      await knex.raw(`CREATE TRIGGER hosts_change_generation AFTER UPDATE OF generation ON hosts BEGIN ${stamp} END`);
      return;
    }
    await knex.raw('ALTER TABLE hosts ADD COLUMN change_xid xid8');
    await knex.raw('UPDATE hosts SET change_xid = pg_current_xact_id()');
    await knex.raw(`CREATE FUNCTION ert_host_change_xid() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.change_xid := pg_current_xact_id(); RETURN NEW; END $$`);
    await knex.raw('CREATE TRIGGER hosts_change_xid BEFORE INSERT OR UPDATE OF generation ON hosts FOR EACH ROW EXECUTE FUNCTION ert_host_change_xid()');
  },
  async down(knex) {
    if (knex.client.config.client === 'sqlite3') {
      await knex.raw('DROP TRIGGER IF EXISTS hosts_change_insert');
      await knex.raw('DROP TRIGGER IF EXISTS hosts_change_generation');
      await knex.schema.dropTableIfExists('host_change_counter');
      await knex.raw('DROP INDEX IF EXISTS hosts_change_seq_index');
      await knex.raw('ALTER TABLE hosts DROP COLUMN change_seq');
      return;
    }
    await knex.raw('DROP TRIGGER IF EXISTS hosts_change_xid ON hosts');
    await knex.raw('DROP FUNCTION IF EXISTS ert_host_change_xid()');
    await knex.raw('ALTER TABLE hosts DROP COLUMN change_xid');
  },
};

/**
 * The claim's statements as 0014 made them (0014 describes them), run by the trigger on
 * `claim_inbox` with the claim in `NEW.payload`: the same in 0014's table trigger and 0015's
 * view trigger (and 0016's down). Frozen, as every trigger body here: stores already migrated
 * keep the trigger these made, so a change comes with a new migration and a new body (as
 * 0016's `claimTriggerBody0016`), never an edit of this text.
 */
function claimTriggerBody0014(): string {
  const providers = `SELECT value->>0 FROM json_each(NEW.payload, '$.a')`;
  return `SELECT RAISE(ABORT, 'ert claim: a provider is missing or shares') WHERE
    (SELECT count(*) FROM providers WHERE uuid IN (${providers})) != (SELECT count(DISTINCT value->>0) FROM json_each(NEW.payload, '$.a'))
    OR EXISTS (SELECT 1 FROM provider_traits WHERE trait_id = (SELECT id FROM traits WHERE name = 'MISC_SHARES_VIA_AGGREGATE')
      AND provider_id IN (SELECT id FROM providers WHERE uuid IN (${providers})));
  INSERT INTO consumers (uuid, project_id, user_id, generation, consumer_type)
    VALUES (NEW.payload->>'$.c[0]', NEW.payload->>'$.c[1]', NEW.payload->>'$.c[2]', 1, NEW.payload->>'$.c[3]');
  INSERT INTO allocations (provider_id, consumer_id, resource_class_id, used)
    SELECT p.id, (SELECT id FROM consumers WHERE uuid = NEW.payload->>'$.c[0]'), j.value->>1, j.value->>2
    FROM json_each(NEW.payload, '$.a') j JOIN providers p ON p.uuid = j.value->>0;
  SELECT RAISE(ABORT, 'ert claim: an amount does not fit')
    FROM json_each(NEW.payload, '$.a') j JOIN providers p ON p.uuid = j.value->>0
    LEFT JOIN inventories i ON i.provider_id = p.id AND i.resource_class_id = j.value->>1
    WHERE i.provider_id IS NULL OR i.step_size < 1 OR j.value->>2 < i.min_unit OR j.value->>2 > i.max_unit OR j.value->>2 % i.step_size != 0
      -- an integer sum is above floor(x) exactly when it is above x
      OR (SELECT sum(a.used) FROM allocations a WHERE a.provider_id = i.provider_id AND a.resource_class_id = i.resource_class_id)
         > (i.total - i.reserved) * i.allocation_ratio;
  UPDATE providers SET generation = generation + 1 WHERE uuid IN (${providers});
  ${claimRecordStatements0014()}
  UPDATE hosts SET generation = generation + 1
    WHERE root_provider_id IN (SELECT root_id FROM providers WHERE uuid IN (${providers}))
       OR name IN (SELECT value->>0 FROM json_each(NEW.payload, '$.i'));`;
}

/**
 * The instance record, its holds and the pools' test, as 0014 wrote them (the record's host
 * found by name): the same in 0014's and 0016's bodies. Frozen (see `claimTriggerBody0014`).
 */
function claimRecordStatements0014(): string {
  const hostId = (name: string) => `(SELECT id FROM hosts WHERE name = ${name})`;
  return `INSERT INTO instances (uuid, host_id, project_id, user_id, flavor, previous_flavor, migration_uuid, assignments, cpus, units, pools, reason, state, created_at, updated_at)
    SELECT value->>1, ${hostId('value->>0')}, value->>2, value->>3, value->>4, value->>5, value->>6, value->>7, value->>8, value->>9, value->>10,
      value->>11, value->>12, value->>13, value->>14
    FROM json_each(NEW.payload, '$.i');
  INSERT INTO instance_holds (host_id, instance_uuid, hold, amount, capacity)
    SELECT ${hostId('value->>0')}, value->>1, value->>2, value->>3, value->>4 FROM json_each(NEW.payload, '$.h');
  SELECT RAISE(ABORT, 'ert claim: a pool is full') FROM json_each(NEW.payload, '$.h') j
    WHERE j.value->>3 IS NOT NULL
      AND (SELECT sum(x.amount) FROM instance_holds x WHERE x.host_id = ${hostId('j.value->>0')} AND x.hold = j.value->>2) > j.value->>4;`;
}

/** 0014's form: a table whose AFTER INSERT trigger claims and deletes the row. */
async function createClaimInboxTable(knex: Knex): Promise<void> {
  await knex.raw('CREATE TABLE claim_inbox (id integer PRIMARY KEY, payload text NOT NULL, seen text)');
  await knex.raw(`CREATE TRIGGER claim_inbox_claim AFTER INSERT ON claim_inbox BEGIN
  ${claimTriggerBody0014()}
  DELETE FROM claim_inbox WHERE id = NEW.id;
END`);
}

/**
 * 0014: a lone claim on SQLite in one statement (`sqlite-claim.ts`, issue 15). Inserting a
 * row into `claim_inbox` runs the claim in its trigger, in that statement's transaction (in
 * autocommit a write statement takes the write lock before it reads, so every check below
 * sees what the last commit left and nobody writes until it ends). The row's `payload` is the
 * claim as JSON: `c` the consumer [uuid, project, user, type], `a` the allocations [[provider
 * uuid, class id, amount], ...], `i` the instance records [[host name, ...the instance columns
 * after host_id]] (zero or one), `h` the holds [[host name, instance uuid, hold, amount,
 * capacity], ...]. The trigger writes the consumer, the allocations, the providers' and hosts'
 * generation bumps, the record and its holds, and deletes the row. It stops the statement
 * (RAISE, or a unique, not-null or foreign key constraint), so that nothing is written and
 * the store checks the claim in full instead, when: a provider is missing or shares, an amount
 * breaks its inventory's min_unit, max_unit or step_size, a class has no inventory, usage
 * would pass capacity, a pool would pass its capacity, the consumer or the instance exists, a
 * unit is held, the record's host is missing. Each test is that of `checkFits` and
 * `HoldLedger.set`, or stricter. PostgreSQL: nothing (its claims take two round trips).
 * Needs SQLite 3.38 or later (`->>`; node-sqlite3 bundles a newer one). A later migration that
 * rebuilds or renames one of the tables the trigger names (knex's `alterTable` on SQLite copies
 * the table) must drop the trigger first and create it again after.
 */
const claimInbox: Migration = {
  async up(knex) {
    if (knex.client.config.client !== 'sqlite3') return;
    await createClaimInboxTable(knex);
  },
  async down(knex) {
    if (knex.client.config.client !== 'sqlite3') return;
    await knex.raw('DROP TRIGGER IF EXISTS claim_inbox_claim');
    await knex.raw('DROP TABLE IF EXISTS claim_inbox');
  },
};

/**
 * 0015: `claim_inbox` becomes a view whose INSTEAD OF INSERT trigger runs the same claim
 * (`claimTriggerBody0014`), so a claim writes no inbox row: the table's insert and delete cost a
 * page of the WAL at every commit, one of the 13-17 a claim writes (docs/benchmarks.md). The insert
 * statement, its RETURNING and the trigger's tests are unchanged; the statement still takes
 * the write lock before it reads (the trigger's writes are the statement's). SQLite only.
 */
const claimInboxView: Migration = {
  async up(knex) {
    if (knex.client.config.client !== 'sqlite3') return;
    await knex.raw('DROP TRIGGER claim_inbox_claim');
    await knex.raw('DROP TABLE claim_inbox');
    await knex.raw('CREATE VIEW claim_inbox AS SELECT NULL AS payload, NULL AS seen WHERE 0');
    await createClaimViewTrigger(knex, claimTriggerBody0014());
  },
  async down(knex) {
    if (knex.client.config.client !== 'sqlite3') return;
    await knex.raw('DROP TRIGGER IF EXISTS claim_inbox_claim');
    await knex.raw('DROP VIEW IF EXISTS claim_inbox');
    await createClaimInboxTable(knex);
  },
};

/** The view's INSTEAD OF INSERT trigger (0015 on), running `body`. Frozen too: it is what 0015 and 0016 create. */
async function createClaimViewTrigger(knex: Knex, body: string): Promise<void> {
  await knex.raw(`CREATE TRIGGER claim_inbox_claim INSTEAD OF INSERT ON claim_inbox BEGIN
  ${body}
END`);
}

/**
 * The claim's statements as 0016 makes them: the same claim, the same tests, each stopping it
 * where 0014's did (a RAISE or a constraint, so nothing is written), but judged on the
 * allocation rows just inserted instead of on the payload's list again. Frozen (see
 * `claimTriggerBody0014`). A provider that is missing leaves its allocation's provider_id NULL
 * (a LEFT JOIN), which NOT NULL stops; the sharing test joins each allocation's provider to
 * its traits by key; the providers and the roots to bump are the allocations' own.
 */
function claimTriggerBody0016(): string {
  const consumerId = `(SELECT id FROM consumers WHERE uuid = NEW.payload->>'$.c[0]')`;
  return `INSERT INTO consumers (uuid, project_id, user_id, generation, consumer_type)
    VALUES (NEW.payload->>'$.c[0]', NEW.payload->>'$.c[1]', NEW.payload->>'$.c[2]', 1, NEW.payload->>'$.c[3]');
  INSERT INTO allocations (provider_id, consumer_id, resource_class_id, used)
    SELECT p.id, ${consumerId}, j.value->>1, j.value->>2
    FROM json_each(NEW.payload, '$.a') j LEFT JOIN providers p ON p.uuid = j.value->>0;
  SELECT RAISE(ABORT, 'ert claim: a provider shares, or an amount does not fit')
    FROM allocations a LEFT JOIN inventories i ON i.provider_id = a.provider_id AND i.resource_class_id = a.resource_class_id
    WHERE a.consumer_id = ${consumerId}
      AND (i.provider_id IS NULL OR i.step_size < 1 OR a.used < i.min_unit OR a.used > i.max_unit OR a.used % i.step_size != 0
        -- an integer sum is above floor(x) exactly when it is above x
        OR (SELECT sum(x.used) FROM allocations x WHERE x.provider_id = a.provider_id AND x.resource_class_id = a.resource_class_id)
           > (i.total - i.reserved) * i.allocation_ratio
        OR EXISTS (SELECT 1 FROM provider_traits pt WHERE pt.provider_id = a.provider_id
          AND pt.trait_id = (SELECT id FROM traits WHERE name = 'MISC_SHARES_VIA_AGGREGATE')));
  UPDATE providers SET generation = generation + 1 WHERE id IN (SELECT provider_id FROM allocations WHERE consumer_id = ${consumerId});
  ${claimRecordStatements0014()}
  UPDATE hosts SET generation = generation + 1
    WHERE root_provider_id IN (SELECT p.root_id FROM allocations a JOIN providers p ON p.id = a.provider_id WHERE a.consumer_id = ${consumerId})
       OR name IN (SELECT value->>0 FROM json_each(NEW.payload, '$.i'));`;
}

/**
 * 0016: the one-statement claim's trigger judges the claim on its allocation rows
 * (`claimTriggerBody0016`) instead of walking the payload's list in every test: a lone claim's
 * statement on SQLite took about 0.27 ms at the median in a replay of a run's claims, 0.25 ms
 * after (docs/benchmarks.md). What it accepts and refuses is 0014's. SQLite only.
 */
const claimChecksByRows: Migration = {
  async up(knex) {
    if (knex.client.config.client !== 'sqlite3') return;
    await knex.raw('DROP TRIGGER claim_inbox_claim');
    await createClaimViewTrigger(knex, claimTriggerBody0016());
  },
  async down(knex) {
    if (knex.client.config.client !== 'sqlite3') return;
    await knex.raw('DROP TRIGGER claim_inbox_claim');
    await createClaimViewTrigger(knex, claimTriggerBody0014());
  },
};

const migrations: Record<string, Migration> = {
  '0001_initial': initial,
  '0002_instance_cpus': instanceCpus,
  '0003_bigint_amounts': bigintAmounts,
  '0004_instance_reason': instanceReason,
  '0005_host_machine': hostMachine,
  '0006_instance_holds': instanceHolds,
  '0007_consumer_type': consumerType,
  '0008_host_status_reason': hostStatusReason,
  '0009_ownership': ownership,
  '0010_model_version': modelVersion,
  '0011_provider_change_xid': providerChangeXid,
  '0012_aggregate_owner': aggregateOwner,
  '0013_host_changes': hostChanges,
  '0014_claim_inbox': claimInbox,
  '0015_claim_inbox_view': claimInboxView,
  '0016_claim_checks_by_rows': claimChecksByRows,
};

/** This program's migrations, in application order. */
export const MIGRATION_NAMES: readonly string[] = Object.keys(migrations).sort();

/**
 * Knex migration source defined in code, so migrations ship inside dist and work from
 * any working directory. Names sort in application order.
 */
export const migrationSource: Knex.MigrationSource<string> = {
  async getMigrations() {
    return Object.keys(migrations).sort();
  },
  getMigrationName(name) {
    return name;
  },
  async getMigration(name) {
    const migration = migrations[name];
    if (!migration) throw new Error(`unknown store migration ${name}`);
    return migration;
  },
};

/** PostgreSQL advisory lock key serialising the creation of the migration tables ("ert"). */
const BOOTSTRAP_LOCK_KEY = 0x657274;

/**
 * Creates knex's migration and lock tables (same shapes as knex's) and the single lock row,
 * serialised across processes: knex's own check-then-create races, and two racing processes
 * can leave two lock rows, after which knex's lock can never be taken again. PostgreSQL
 * serialises with an advisory transaction lock; SQLite with its write lock (a racing
 * process gets SQLITE_BUSY and retries).
 */
export async function ensureMigrationTables(knex: Knex, client: 'sqlite3' | 'pg', schema: string | undefined): Promise<void> {
  const lockTable = `${MIGRATIONS_TABLE}_lock`;
  await knex.transaction(async (trx) => {
    if (client === 'pg') await trx.raw('select pg_advisory_xact_lock(?)', [BOOTSTRAP_LOCK_KEY]);
    const schemaBuilder = () => (schema ? trx.schema.withSchema(schema) : trx.schema);
    if (!(await schemaBuilder().hasTable(MIGRATIONS_TABLE))) {
      await schemaBuilder().createTable(MIGRATIONS_TABLE, (t) => {
        t.increments();
        t.string('name');
        t.integer('batch');
        t.timestamp('migration_time');
      });
    }
    if (!(await schemaBuilder().hasTable(lockTable))) {
      await schemaBuilder().createTable(lockTable, (t) => {
        t.increments('index').primary();
        t.integer('is_locked');
      });
    }
    const table = () => (schema ? trx.from(lockTable).withSchema(schema) : trx.from(lockTable));
    if ((await table().select('*')).length === 0) await table().insert({ is_locked: 0 });
  });
}
