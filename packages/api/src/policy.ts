import type { Credentials } from './auth.js';

/**
 * Placement 8.0.0's policy rules by name, with its defaults in legacy mode
 * (`enforce_new_defaults=False, enforce_scope=False`, 8.0.0's defaults): a rule passes when
 * its new default passes or the caller has `role:admin` (PLACEMENT-API.md §1.7). The rules
 * of the read endpoints are here; writes come with the write endpoints.
 */

export type Rule = (c: Credentials, target: { projectId?: string }) => boolean;

const hasRole = (c: Credentials, role: string): boolean => c.roles.includes(role);
const admin: Rule = (c) => hasRole(c, 'admin');
/** `system_reader_api`: role:reader and system_scope:all. */
const systemReader: Rule = (c) => hasRole(c, 'reader') && c.systemScope === 'all';
/** `project_reader_api`: role:reader and project_id:%(project_id)s. */
const projectReader: Rule = (c, t) => hasRole(c, 'reader') && c.projectId !== undefined && c.projectId === t.projectId;
const legacy =
  (rule: Rule): Rule =>
  (c, t) =>
    rule(c, t) || admin(c, t);

const SYSTEM_READER = legacy(systemReader);
const SYSTEM_OR_PROJECT_READER = legacy((c, t) => systemReader(c, t) || projectReader(c, t));
/** `system_admin_api`: role:admin and system_scope:all (legacy: or role:admin). */
const SYSTEM_ADMIN = legacy((c) => hasRole(c, 'admin') && c.systemScope === 'all');

/** `system_admin_api` for the allocation writes and the reshaper (legacy: or role:admin). */
const ALLOCATION_WRITER = legacy((c) => hasRole(c, 'admin') && c.systemScope === 'all');

/** Rule name -> check. */
export const POLICIES: Readonly<Record<string, Rule>> = {
  'placement:resource_providers:list': SYSTEM_READER,
  'placement:resource_providers:show': SYSTEM_READER,
  'placement:resource_providers:inventories:list': SYSTEM_READER,
  'placement:resource_providers:inventories:show': SYSTEM_READER,
  'placement:resource_providers:aggregates:list': SYSTEM_READER,
  'placement:resource_providers:traits:list': SYSTEM_READER,
  'placement:resource_providers:usages': SYSTEM_READER,
  'placement:resource_providers:allocations:list': SYSTEM_READER,
  'placement:resource_classes:list': SYSTEM_READER,
  'placement:resource_classes:show': SYSTEM_READER,
  'placement:traits:list': SYSTEM_READER,
  'placement:traits:show': SYSTEM_READER,
  'placement:allocations:list': SYSTEM_READER,
  'placement:allocation_candidates:list': SYSTEM_READER,
  'placement:usages': SYSTEM_OR_PROJECT_READER,
  // Allocation writes (placement/policies/allocation.py, reshaper.py): manage = POST /allocations.
  'placement:allocations:manage': ALLOCATION_WRITER,
  'placement:allocations:update': ALLOCATION_WRITER,
  'placement:allocations:delete': ALLOCATION_WRITER,
  'placement:reshaper:reshape': ALLOCATION_WRITER,
  // Provider writes (placement/policies/{resource_provider,inventory,aggregate,trait,resource_class}.py).
  'placement:resource_providers:create': SYSTEM_ADMIN,
  'placement:resource_providers:update': SYSTEM_ADMIN,
  'placement:resource_providers:delete': SYSTEM_ADMIN,
  'placement:resource_providers:inventories:create': SYSTEM_ADMIN,
  'placement:resource_providers:inventories:update': SYSTEM_ADMIN,
  'placement:resource_providers:inventories:delete': SYSTEM_ADMIN,
  'placement:resource_providers:aggregates:update': SYSTEM_ADMIN,
  'placement:resource_providers:traits:update': SYSTEM_ADMIN,
  'placement:resource_providers:traits:delete': SYSTEM_ADMIN,
  'placement:traits:update': SYSTEM_ADMIN,
  'placement:traits:delete': SYSTEM_ADMIN,
  'placement:resource_classes:create': SYSTEM_ADMIN,
  'placement:resource_classes:update': SYSTEM_ADMIN,
  'placement:resource_classes:delete': SYSTEM_ADMIN,
};

export type PolicyName = keyof typeof POLICIES;

export function allowed(rule: string, credentials: Credentials, target: { projectId?: string } = {}): boolean {
  const check = POLICIES[rule];
  if (!check) throw new Error(`unknown policy rule ${rule}`);
  return check(credentials, target);
}
