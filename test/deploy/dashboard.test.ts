import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseExposition } from '../api/exposition.js';
import { servedAt, stopAll } from '../api/served.js';
import { Project, REPO, startErt } from '../cli/helpers.js';
import type { ChildProcess } from 'node:child_process';

/**
 * deploy/grafana-dashboard.json and the alerting rules deploy/prometheus.yml loads
 * (deploy/ert-alerts.yml) name only series that ert really exports: a real `ert serve` and a
 * real `ert host run --metrics-port 0` are scraped, and every metric name in every PromQL
 * expression (panel targets, template variable queries, rule `expr`s) must be declared in one
 * of the two scrapes (`# TYPE`), a `_bucket` / `_sum` / `_count` name resolving to its
 * histogram, and a histogram never named bare.
 *
 * Mutations seen caught: `ert_tracker_claim_conflicts_total` renamed
 * `ert_tracker_claim_conflict_total` in the dashboard: red, naming the panel and the name;
 * `ert_store_transaction_duration_seconds_bucket` written without `_bucket` in an alert: red
 * (a histogram named bare).
 */

/** Series Prometheus itself writes for each target (not in any exposition). */
const PROMETHEUS_SERIES = new Set(['up', 'scrape_duration_seconds', 'scrape_samples_scraped', 'scrape_samples_post_metric_relabeling', 'scrape_series_added']);
const KEYWORDS = new Set(['and', 'or', 'unless', 'bool', 'offset', 'by', 'without', 'on', 'ignoring', 'group_left', 'group_right', 'inf', 'nan', 'atan2']);

/** The metric names a PromQL expression (or a Grafana `label_values(...)` query) reads. */
function metricNames(expr: string): string[] {
  let e = expr
    .replace(/"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`/g, ' ') // strings
    .replace(/\$\{[^}]*\}|\$\w+/g, ' '); // Grafana variables
  e = e.replace(/\blabel_values\s*\(([^,()]*(?:\{[^}]*\})?)\s*,\s*\w+\s*\)/g, ' $1 '); // label_values(selector, label)
  e = e
    .replace(/\{[^}]*\}/g, ' ') // label matchers
    .replace(/\[[^\]]*\]/g, ' ') // ranges and subqueries
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, ' '); // label lists
  const names = new Set<string>();
  for (const m of e.matchAll(/(?<![\w.:])([a-zA-Z_:][a-zA-Z0-9_:]*)(?![a-zA-Z0-9_:]|\s*\()/g)) {
    const name = m[1]!;
    if (KEYWORDS.has(name.toLowerCase())) continue;
    names.add(name);
  }
  return [...names];
}

interface Reference {
  where: string;
  expr: string;
}

/** Every PromQL expression of the dashboard: panel targets (rows' panels too) and template queries. */
function dashboardExpressions(dashboard: any): Reference[] {
  const out: Reference[] = [];
  const visit = (panels: any[]) => {
    for (const panel of panels ?? []) {
      for (const target of panel.targets ?? []) {
        expect(typeof target.expr, `panel "${panel.title}" target ${target.refId}`).toBe('string');
        out.push({ where: `panel "${panel.title}" (${target.refId})`, expr: target.expr });
      }
      visit(panel.panels ?? []);
    }
  };
  visit(dashboard.panels);
  for (const variable of dashboard.templating?.list ?? []) {
    if (variable.type !== 'query') continue;
    const query = typeof variable.query === 'string' ? variable.query : variable.query?.query;
    out.push({ where: `variable $${variable.name}`, expr: query });
  }
  return out;
}

/** The `expr` of every rule in the rule files deploy/prometheus.yml loads (paths relative to it). */
function ruleExpressions(): Reference[] {
  const prometheus = parseYaml(readFileSync(join(REPO, 'deploy/prometheus.yml'), 'utf8')) as { rule_files?: string[] };
  const out: Reference[] = [];
  for (const file of prometheus.rule_files ?? []) {
    const rules = parseYaml(readFileSync(join(REPO, 'deploy', file), 'utf8')) as { groups: Array<{ name: string; rules: Array<{ alert?: string; record?: string; expr: string }> }> };
    for (const group of rules.groups) for (const rule of group.rules) out.push({ where: `${file} ${rule.alert ?? rule.record}`, expr: String(rule.expr) });
  }
  return out;
}

describe('deploy/grafana-dashboard.json and deploy/ert-alerts.yml name only metrics ert exports', () => {
  let project: Project;
  const children: ChildProcess[] = [];
  const types = new Map<string, string>();

  beforeAll(async () => {
    project = await Project.create();
    const synced = await project.run(['host', 'sync', '--json']);
    expect(synced.code, synced.stderr).toBe(0);
    const serve = startErt(['--config', project.configFile, '--log-level', 'warn', 'serve', '--port', '0'], { cwd: project.dir });
    children.push(serve);
    const host = startErt(['--config', project.configFile, '--log-level', 'warn', 'host', 'run', '--metrics-port', '0'], { cwd: project.dir });
    children.push(host);
    const hostMetrics = await new Promise<string>((resolve, reject) => {
      let stderr = '';
      host.stderr!.on('data', (d) => {
        stderr += d;
        const m = /metrics on (http:\/\/127\.0\.0\.1:\d+)\/metrics/.exec(stderr);
        if (m) resolve(m[1]!);
      });
      host.on('exit', (code) => reject(new Error(`ert host run exited ${code}:\n${stderr}`)));
    });
    const { origin } = await servedAt(serve);
    for (const base of [origin, hostMetrics]) {
      const res = await fetch(`${base}/metrics`);
      expect(res.status).toBe(200);
      for (const [name, type] of parseExposition(await res.text()).types) types.set(name, type);
    }
  }, 90_000);
  afterAll(async () => {
    await stopAll(children);
    await project?.remove();
  });

  it('reads PromQL as intended (the extractor itself)', () => {
    expect(metricNames('histogram_quantile(0.99, sum by (le, route) (rate(ert_http_request_duration_seconds_bucket{job=~"$job", route!="/x"}[$__rate_interval])))')).toEqual([
      'ert_http_request_duration_seconds_bucket',
    ]);
    expect(metricNames('sum(rate(a_total{status=~"5.."}[5m])) / sum(rate(b_total[5m])) > 0.01')).toEqual(['a_total', 'b_total']);
    expect(metricNames('label_values(ert_http_requests_total{job=~"$job"}, instance)')).toEqual(['ert_http_requests_total']);
    expect(metricNames('max by (status) (ert_hosts) unless on (status) up == 0')).toEqual(['ert_hosts', 'up']);
  });

  it('every metric name in the dashboard and the rules is in a real scrape', () => {
    const dashboard = JSON.parse(readFileSync(join(REPO, 'deploy/grafana-dashboard.json'), 'utf8'));
    const references = [...dashboardExpressions(dashboard), ...ruleExpressions()];
    expect(references.filter((r) => r.where.startsWith('panel')).length).toBeGreaterThanOrEqual(20);
    expect(references.filter((r) => r.where.startsWith('ert-alerts.yml')).length).toBeGreaterThanOrEqual(5);
    const problems: string[] = [];
    const used = new Set<string>();
    for (const { where, expr } of references) {
      const names = metricNames(expr);
      if (names.length === 0) problems.push(`${where}: no metric in ${expr}`);
      for (const name of names) {
        if (PROMETHEUS_SERIES.has(name)) continue;
        const type = types.get(name);
        const suffix = /^(.*)_(bucket|sum|count)$/.exec(name);
        const base = suffix ? types.get(suffix[1]!) : undefined;
        if (type !== undefined) {
          if (type === 'histogram' || type === 'summary') problems.push(`${where}: ${name} is a ${type}: name its _bucket, _sum or _count`);
          used.add(name);
        } else if (suffix && (base === 'histogram' || (base === 'summary' && suffix[2] !== 'bucket'))) {
          used.add(suffix[1]!);
        } else {
          problems.push(`${where}: ${name} is in no scrape of ert serve or ert host run`);
        }
      }
    }
    expect(problems).toEqual([]);
    // What the dashboard is for (issue 14): each of these families is on it.
    for (const family of [
      'ert_scheduler_decisions_total',
      'ert_scheduler_decision_duration_seconds',
      'ert_tracker_claims_total',
      'ert_tracker_claim_conflicts_total',
      'ert_plugin_hook_duration_seconds',
      'ert_plugin_hook_failures_total',
      'ert_hosts',
      'ert_http_request_duration_seconds',
      'ert_http_requests_total',
      'ert_store_transaction_duration_seconds',
    ]) {
      expect(used, family).toContain(family);
    }
  });
});
