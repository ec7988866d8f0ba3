import { ErtError } from '@ert/plugin-api';
import type { Credentials } from './auth.js';

/**
 * Placement 8.0.0's policy (placement/policies/*.py) as oslo.policy enforces it: rules by
 * name, each a check string in oslo.policy's language, with two sets of defaults
 * (PLACEMENT-API.md §1.7):
 *
 * - `legacy` (8.0.0's own: `enforce_new_defaults=False, enforce_scope=False`): a base rule
 *   with a deprecated alternative passes when its new default or the alternative (`role:admin`)
 *   passes, unless the policy file overrides that base rule; scopes are not enforced.
 * - `secure` (`enforce_new_defaults=True, enforce_scope=True`): the new defaults alone, and a
 *   token whose scope (system when `OpenStack-System-Scope` is set, else project) is not among
 *   the enforced rule's `scope_types` is refused.
 *
 * A policy file overrides rules by name (oslo.policy's `policy.yaml`); the supported check
 * syntax is the subset Placement's defaults use: `role:R`, `rule:NAME`, `KEY:VALUE` against
 * the credentials with `%(target_key)s` substitution (`project_id:%(project_id)s`,
 * `system_scope:all`, `user_id:%(user_id)s`), `@` (always), `!` (never), `and`, `or`, `not`,
 * parentheses; an empty string is `@`.
 */

export const PolicyErrorCodes = {
  BAD_POLICY: 'ERT_API_BAD_POLICY',
} as const;

/** A policy file (or override) that cannot be applied: unknown rule, syntax error, a loop. */
export class PolicyError extends ErtError<(typeof PolicyErrorCodes)[keyof typeof PolicyErrorCodes]> {}

export const POLICY_DEFAULTS = ['legacy', 'secure'] as const;
export type PolicyDefaults = (typeof POLICY_DEFAULTS)[number];

type Scope = 'system' | 'project';

interface RuleDefault {
  check: string;
  /** The deprecated alternative OR'ed in by the legacy defaults (base.py's DEPRECATED_ADMIN_POLICY). */
  deprecated?: string;
  /** oslo.policy's `scope_types`, checked for the rule enforced (not for rules it references). */
  scopes?: readonly Scope[];
}

const SYSTEM_ADMIN = 'rule:system_admin_api';
const SYSTEM_READER = 'rule:system_reader_api';
const SYSTEM_OR_PROJECT_READER = 'rule:system_or_project_reader';
const system = (check: string): RuleDefault => ({ check, scopes: ['system'] });

/** Every rule of Placement 8.0.0 with its default: base rules first (policies/base.py), then one per action. */
export const RULE_DEFAULTS: Readonly<Record<string, RuleDefault>> = {
  admin_api: { check: 'role:admin', scopes: ['system'] },
  system_admin_api: { check: 'role:admin and system_scope:all', deprecated: 'role:admin' },
  system_reader_api: { check: 'role:reader and system_scope:all', deprecated: 'role:admin' },
  project_reader_api: { check: 'role:reader and project_id:%(project_id)s', deprecated: 'role:admin' },
  system_or_project_reader: { check: 'rule:system_reader_api or rule:project_reader_api', deprecated: 'role:admin' },
  'placement:resource_providers:list': system(SYSTEM_READER),
  'placement:resource_providers:show': system(SYSTEM_READER),
  'placement:resource_providers:create': system(SYSTEM_ADMIN),
  'placement:resource_providers:update': system(SYSTEM_ADMIN),
  'placement:resource_providers:delete': system(SYSTEM_ADMIN),
  'placement:resource_providers:inventories:list': system(SYSTEM_READER),
  'placement:resource_providers:inventories:show': system(SYSTEM_READER),
  'placement:resource_providers:inventories:create': system(SYSTEM_ADMIN),
  'placement:resource_providers:inventories:update': system(SYSTEM_ADMIN),
  'placement:resource_providers:inventories:delete': system(SYSTEM_ADMIN),
  'placement:resource_providers:aggregates:list': system(SYSTEM_READER),
  'placement:resource_providers:aggregates:update': system(SYSTEM_ADMIN),
  'placement:resource_providers:traits:list': system(SYSTEM_READER),
  'placement:resource_providers:traits:update': system(SYSTEM_ADMIN),
  'placement:resource_providers:traits:delete': system(SYSTEM_ADMIN),
  'placement:resource_providers:usages': system(SYSTEM_READER),
  'placement:resource_providers:allocations:list': system(SYSTEM_READER),
  'placement:resource_classes:list': system(SYSTEM_READER),
  'placement:resource_classes:show': system(SYSTEM_READER),
  'placement:resource_classes:create': system(SYSTEM_ADMIN),
  'placement:resource_classes:update': system(SYSTEM_ADMIN),
  'placement:resource_classes:delete': system(SYSTEM_ADMIN),
  'placement:traits:list': system(SYSTEM_READER),
  'placement:traits:show': system(SYSTEM_READER),
  'placement:traits:update': system(SYSTEM_ADMIN),
  'placement:traits:delete': system(SYSTEM_ADMIN),
  'placement:allocations:list': system(SYSTEM_READER),
  'placement:allocations:manage': system(SYSTEM_ADMIN),
  'placement:allocations:update': system(SYSTEM_ADMIN),
  'placement:allocations:delete': system(SYSTEM_ADMIN),
  'placement:allocation_candidates:list': system(SYSTEM_READER),
  'placement:reshaper:reshape': system(SYSTEM_ADMIN),
  'placement:usages': { check: SYSTEM_OR_PROJECT_READER, scopes: ['system', 'project'] },
};

// ---- the check language --------------------------------------------------------------------

export type Check =
  | { op: 'true' }
  | { op: 'false' }
  | { op: 'and' | 'or'; checks: Check[] }
  | { op: 'not'; check: Check }
  | { op: 'rule'; name: string }
  | { op: 'role'; match: string }
  | { op: 'generic'; kind: string; match: string };

/** oslo.policy's tokenizer: whitespace-separated, parentheses peeled off each token's ends, keywords case-insensitive. */
function tokenize(text: string): string[] {
  const tokens: string[] = [];
  for (const raw of text.split(/\s+/)) {
    if (raw === '') continue;
    let tok = raw;
    while (tok.startsWith('(')) {
      tokens.push('(');
      tok = tok.slice(1);
    }
    let trailing = 0;
    while (tok.endsWith(')')) {
      // `%(project_id)s` ends in `s`: a `)` at the very end is a parenthesis.
      trailing++;
      tok = tok.slice(0, -1);
    }
    if (tok !== '') tokens.push(['and', 'or', 'not'].includes(tok.toLowerCase()) ? tok.toLowerCase() : tok);
    for (let i = 0; i < trailing; i++) tokens.push(')');
  }
  return tokens;
}

/** Parses a check string; throws an Error whose message says what is wrong. */
export function parseCheck(text: string): Check {
  const tokens = tokenize(text);
  if (tokens.length === 0) return { op: 'true' };
  let pos = 0;
  const peek = (): string | undefined => tokens[pos];
  const orExpr = (): Check => {
    const checks = [andExpr()];
    while (peek() === 'or') {
      pos++;
      checks.push(andExpr());
    }
    return checks.length === 1 ? checks[0]! : { op: 'or', checks };
  };
  const andExpr = (): Check => {
    const checks = [notExpr()];
    while (peek() === 'and') {
      pos++;
      checks.push(notExpr());
    }
    return checks.length === 1 ? checks[0]! : { op: 'and', checks };
  };
  const notExpr = (): Check => {
    if (peek() === 'not') {
      pos++;
      return { op: 'not', check: notExpr() };
    }
    return primary();
  };
  const primary = (): Check => {
    const tok = tokens[pos++];
    if (tok === undefined) throw new Error('unexpected end of the check string');
    if (tok === '(') {
      const inner = orExpr();
      if (tokens[pos++] !== ')') throw new Error('missing ")"');
      return inner;
    }
    if (tok === ')' || tok === 'and' || tok === 'or') throw new Error(`unexpected "${tok}"`);
    return atom(tok);
  };
  const check = orExpr();
  if (pos < tokens.length) throw new Error(`unexpected "${tokens[pos]}"`);
  return check;
}

function atom(tok: string): Check {
  if (tok === '@') return { op: 'true' };
  if (tok === '!') return { op: 'false' };
  const sep = tok.indexOf(':');
  if (sep <= 0) throw new Error(`"${tok}" is not a check (kind:match, @ or !)`);
  const kind = tok.slice(0, sep);
  const match = tok.slice(sep + 1);
  if (kind === 'rule') {
    if (match === '') throw new Error('"rule:" names no rule');
    return { op: 'rule', name: match };
  }
  if (kind === 'role') return { op: 'role', match };
  if (kind === 'http' || kind === 'https') throw new Error(`"${kind}:" checks are not supported`);
  if (/%(?!\([A-Za-z0-9_.]+\)s|%)/.test(match)) throw new Error(`"${match}": only %(name)s substitutions are supported`);
  return { op: 'generic', kind, match };
}

/** The rules a check references (`rule:x`). */
function references(check: Check): string[] {
  switch (check.op) {
    case 'rule':
      return [check.name];
    case 'and':
    case 'or':
      return check.checks.flatMap(references);
    case 'not':
      return references(check.check);
    default:
      return [];
  }
}

/** What the check language sees of the caller (oslo.context's `to_policy_values`). */
type Creds = Record<string, string | string[] | null>;
/** The target: values may be None (`GET /usages` without `project_id`). */
export type PolicyTarget = Record<string, string | null>;

/** Python's `match % target` for `%(key)s`; undefined when a key is missing (the check fails). */
function interpolate(match: string, target: PolicyTarget): string | undefined {
  let missing = false;
  const out = match.replace(/%\(([^)]+)\)s|%%/g, (whole, key: string | undefined) => {
    if (key === undefined) return '%';
    if (!(key in target)) {
      missing = true;
      return '';
    }
    return target[key] ?? 'None';
  });
  return missing ? undefined : out;
}

/** A Python literal kind (`'Member':%(role.name)s`, `True:%(enabled)s`) as `str()` writes it. */
function literal(kind: string): string | undefined {
  if (/^'[^']*'$|^"[^"]*"$/.test(kind)) return kind.slice(1, -1);
  if (kind === 'True' || kind === 'False' || kind === 'None') return kind;
  if (/^-?\d+$/.test(kind)) return String(Number(kind));
  return undefined;
}

// ---- the enforcer --------------------------------------------------------------------------

export interface PolicyOptions {
  defaults?: PolicyDefaults;
  /** Rule name -> check string (a policy file's content). */
  overrides?: Readonly<Record<string, string>>;
  /** Where the overrides come from, for messages (the policy file's path). */
  source?: string;
}

export class Policy {
  readonly defaults: PolicyDefaults;
  private readonly rules = new Map<string, Check>();

  constructor(options: PolicyOptions = {}) {
    this.defaults = options.defaults ?? 'legacy';
    if (!(POLICY_DEFAULTS as readonly string[]).includes(this.defaults)) {
      throw new PolicyError(PolicyErrorCodes.BAD_POLICY, `unknown policy defaults "${this.defaults}"; known: ${POLICY_DEFAULTS.join(', ')}`, { defaults: this.defaults });
    }
    const source = options.source ?? 'the policy overrides';
    const overrides = options.overrides ?? {};
    for (const [name, text] of Object.entries(overrides)) {
      if (!(name in RULE_DEFAULTS)) {
        throw new PolicyError(PolicyErrorCodes.BAD_POLICY, `${source}: unknown policy rule "${name}" (Placement 8.0.0's rules: ${Object.keys(RULE_DEFAULTS).join(', ')})`, { source, rule: name });
      }
      if (typeof text !== 'string') {
        throw new PolicyError(PolicyErrorCodes.BAD_POLICY, `${source}: rule "${name}" must be a check string, got ${JSON.stringify(text)}`, { source, rule: name });
      }
      try {
        this.rules.set(name, parseCheck(text));
      } catch (err) {
        throw new PolicyError(PolicyErrorCodes.BAD_POLICY, `${source}: rule "${name}": ${(err as Error).message} in "${text}"`, { source, rule: name, check: text });
      }
    }
    for (const [name, rule] of Object.entries(RULE_DEFAULTS)) {
      if (this.rules.has(name)) continue;
      const check = parseCheck(rule.check);
      // oslo.policy: the deprecated alternative is OR'ed in unless enforce_new_defaults or the rule is overridden.
      this.rules.set(name, this.defaults === 'legacy' && rule.deprecated !== undefined ? { op: 'or', checks: [check, parseCheck(rule.deprecated)] } : check);
    }
    // Every `rule:x` names a rule, and no rule reaches itself (oslo.policy would fail closed, or recurse forever).
    const state = new Map<string, 'visiting' | 'done'>();
    const visit = (name: string, path: string[]): void => {
      if (state.get(name) === 'done') return;
      if (state.get(name) === 'visiting') {
        throw new PolicyError(PolicyErrorCodes.BAD_POLICY, `${source}: rules reference each other in a loop: ${[...path, name].join(' -> ')}`, { source, rule: path[0] });
      }
      state.set(name, 'visiting');
      for (const ref of references(this.rules.get(name)!)) {
        if (!this.rules.has(ref)) {
          throw new PolicyError(PolicyErrorCodes.BAD_POLICY, `${source}: rule "${name}" references the unknown rule "${ref}"`, { source, rule: name, reference: ref });
        }
        visit(ref, [...path, name]);
      }
      state.set(name, 'done');
    };
    for (const name of this.rules.keys()) visit(name, []);
  }

  /**
   * Whether the caller may perform `rule` on `target`. Without a target, Placement's default:
   * the caller's own project and user (`context.can` with no target).
   */
  allowed(rule: string, credentials: Credentials, target?: { projectId?: string | undefined }): boolean {
    const check = this.rules.get(rule);
    const def = RULE_DEFAULTS[rule];
    if (!check || !def) throw new Error(`unknown policy rule ${rule}`);
    if (this.defaults === 'secure' && def.scopes !== undefined) {
      const tokenScope: Scope = credentials.systemScope ? 'system' : 'project';
      if (!def.scopes.includes(tokenScope)) return false;
    }
    const creds: Creds = {
      user_id: credentials.userId,
      project_id: credentials.projectId ?? null,
      system_scope: credentials.systemScope ?? null,
      roles: credentials.roles,
    };
    const t: PolicyTarget = target === undefined ? { project_id: credentials.projectId ?? null, user_id: credentials.userId } : { project_id: target.projectId ?? null };
    return this.evaluate(check, creds, t);
  }

  private evaluate(check: Check, creds: Creds, target: PolicyTarget): boolean {
    switch (check.op) {
      case 'true':
        return true;
      case 'false':
        return false;
      case 'and':
        return check.checks.every((c) => this.evaluate(c, creds, target));
      case 'or':
        return check.checks.some((c) => this.evaluate(c, creds, target));
      case 'not':
        return !this.evaluate(check.check, creds, target);
      case 'rule':
        return this.evaluate(this.rules.get(check.name)!, creds, target);
      case 'role': {
        const match = interpolate(check.match, target);
        return match !== undefined && (creds.roles as string[]).some((r) => r.toLowerCase() === match.toLowerCase());
      }
      case 'generic': {
        const match = interpolate(check.match, target);
        if (match === undefined) return false;
        const lit = literal(check.kind);
        if (lit !== undefined) return match === lit;
        if (!(check.kind in creds)) return false;
        const value = creds[check.kind];
        if (Array.isArray(value)) return value.includes(match);
        return (value ?? 'None') === match;
      }
    }
  }
}

/**
 * A policy file's parsed content (YAML or JSON: a mapping of rule name to check string) as
 * overrides, checked: `source` (the file's path) names it in every refusal.
 */
export function policyFromFile(content: unknown, source: string, defaults: PolicyDefaults = 'legacy'): Policy {
  if (content === null || content === undefined) return new Policy({ defaults, source });
  if (typeof content !== 'object' || Array.isArray(content)) {
    throw new PolicyError(PolicyErrorCodes.BAD_POLICY, `${source}: a policy file is a mapping of rule names to check strings`, { source });
  }
  return new Policy({ defaults, overrides: content as Record<string, string>, source });
}

/** Placement 8.0.0's defaults, as 8.0.0 enforces them (legacy). */
export const LEGACY_POLICY = new Policy();

/** Rule name -> default check string. */
export const POLICIES: Readonly<Record<string, string>> = Object.fromEntries(Object.entries(RULE_DEFAULTS).map(([name, rule]) => [name, rule.check]));

export type PolicyName = keyof typeof POLICIES;

/** `rule` under the legacy defaults (Placement 8.0.0's own enforcement). */
export function allowed(rule: string, credentials: Credentials, target?: { projectId?: string | undefined }): boolean {
  return LEGACY_POLICY.allowed(rule, credentials, target);
}
