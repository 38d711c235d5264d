/**
 * The dashboard's API rows as chart series. Days ("2026-01-05") become whole day numbers (days
 * since 1970-01-01, UTC) so the LineChart's x axis is linear in time; `dayTicks` labels them.
 */
import type { Bar } from "../components/BarChart";
import type { Series } from "../components/LineChart";
import type { DashboardData } from "../api/dashboard";

const DAY_MS = 86_400_000;

export function dayNumber(day: string): number {
  return Math.floor(Date.parse(`${day.slice(0, 10)}T00:00:00Z`) / DAY_MS);
}

/** Time (ISO) as a fractional day number, for events within a day (snapshots). */
export function dayOf(iso: string): number {
  return Date.parse(iso) / DAY_MS;
}

const short = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", timeZone: "UTC" });

export function formatDay(day: number): string {
  return short.format(new Date(Math.round(day) * DAY_MS));
}

/** Whole days to label: every day when there are few, else about `count` evenly spaced ones. */
export function dayTicks(days: number[], count = 6): number[] {
  if (days.length === 0) return [];
  const first = Math.floor(Math.min(...days));
  const last = Math.ceil(Math.max(...days));
  const step = Math.max(1, Math.ceil((last - first) / count));
  const ticks: number[] = [];
  for (let d = first; d <= last; d += step) ticks.push(d);
  return ticks;
}

function groupBy<T>(rows: T[], key: (row: T) => string, point: (row: T) => { x: number; y: number }): Series[] {
  const by = new Map<string, Series>();
  for (const row of rows) {
    const name = key(row);
    if (!by.has(name)) by.set(name, { name, points: [] });
    by.get(name)!.points.push(point(row));
  }
  return [...by.values()];
}

export function successSeries(data: DashboardData): Series[] {
  return groupBy(data.success_by_checkpoint, (r) => r.checkpoint, (r) => ({ x: dayNumber(r.day), y: r.success_rate }));
}

export function interventionSeries(data: DashboardData): Series[] {
  return [{ name: "interventions per episode", points: data.interventions.map((r) => ({ x: dayNumber(r.day), y: r.per_episode })) }];
}

export function voidSeries(data: DashboardData): Series[] {
  return [{ name: "void-turn rate", points: data.void_rate.map((r) => ({ x: dayNumber(r.day), y: r.rate })) }];
}

/** Each annotator's total, largest first. */
export function throughputBars(data: DashboardData): Bar[] {
  const totals = new Map<string, { episodes: number; steps: number }>();
  for (const r of data.annotator_throughput) {
    const t = totals.get(r.username) ?? { episodes: 0, steps: 0 };
    totals.set(r.username, { episodes: t.episodes + r.episodes, steps: t.steps + r.steps });
  }
  return [...totals.entries()]
    .sort((a, b) => b[1].episodes - a[1].episodes)
    .map(([username, t]) => ({ label: username, value: t.episodes, title: `${username}: ${t.episodes} episodes, ${t.steps} steps` }));
}

/** Rows of each ready snapshot, one line a kind, over the time it was frozen. */
export function growthSeries(data: DashboardData): Series[] {
  return groupBy(data.dataset_growth, (r) => r.kind, (r) => ({ x: dayOf(r.created_at), y: r.rows }));
}

export function agreementBars(data: DashboardData): Bar[] {
  return [
    { label: "agreement", value: data.agreement.agreement, color: "#0d9488", title: "Share of multiply-reviewed episodes whose verdicts all agree" },
    { label: "Cohen's κ", value: data.agreement.kappa, color: "#4f46e5", title: "Agreement beyond chance: 1 perfect, 0 chance, below 0 worse" },
  ];
}

export const percent = (v: number) => `${Math.round(v * 100)}%`;
