import type { ReactNode } from "react";
import { BarChart } from "../components/BarChart";
import { ErrorBanner } from "../components/ErrorBanner";
import { LineChart, type Series } from "../components/LineChart";
import { Spinner } from "../components/Spinner";
import { useDashboard } from "./queries";
import {
  agreementBars,
  dayTicks,
  formatDay,
  growthSeries,
  interventionSeries,
  percent,
  successSeries,
  throughputBars,
  voidSeries,
} from "./series";
import "./dashboard.css";

const WIDTH = 500;
const HEIGHT = 220;

function Panel({ title, note, children, testId }: { title: string; note?: ReactNode; children: ReactNode; testId: string }) {
  return (
    <section className="card dash-panel" data-testid={testId} aria-label={title}>
      <h2>{title}</h2>
      {note && <p className="muted small">{note}</p>}
      {children}
    </section>
  );
}

function TimeChart({ series, yLabel, rate, empty }: { series: Series[]; yLabel: string; rate?: boolean; empty: string }) {
  const days = series.flatMap((s) => s.points.map((p) => p.x));
  if (days.length === 0) return <div className="chart-empty muted">{empty}</div>;
  return (
    <LineChart
      series={series}
      width={WIDTH}
      height={HEIGHT}
      yLabel={yLabel}
      yFromZero
      yMax={rate ? 1 : undefined}
      showPoints
      xTickValues={dayTicks(days)}
      formatX={formatDay}
      formatY={rate ? percent : undefined}
    />
  );
}

/**
 * The flywheel at a glance, for managers: is the policy getting better (success by checkpoint),
 * how much do people still step in (interventions, void turns), who does the work, how far
 * reviewers agree, and how the datasets grow.
 */
export function Dashboard({ projectId }: { projectId: number }) {
  const dashboard = useDashboard(projectId);
  if (dashboard.isPending) return <Spinner label="Loading the dashboard…" />;
  if (dashboard.isError) {
    return <ErrorBanner error={dashboard.error} title="Could not load the dashboard" onRetry={() => dashboard.refetch()} />;
  }
  const data = dashboard.data;
  const { agreement } = data;
  return (
    <div className="dash-grid" data-testid="dashboard">
      <Panel title="Success rate by checkpoint" note="Finished episodes a day that succeeded, one line a checkpoint." testId="dash-success">
        <TimeChart series={successSeries(data)} yLabel="success" rate empty="No finished episodes yet." />
      </Panel>
      <Panel title="Interventions per episode" note="How often people step in (edits, rejections, takeovers)." testId="dash-interventions">
        <TimeChart series={interventionSeries(data)} yLabel="per episode" empty="No finished episodes yet." />
      </Panel>
      <Panel title="Void-turn rate" note="Share of steps whose output did not parse as an action." testId="dash-void">
        <TimeChart series={voidSeries(data)} yLabel="void steps" rate empty="No steps yet." />
      </Panel>
      <Panel title="Annotator throughput" note="Supervised episodes each person finished." testId="dash-throughput">
        <BarChart bars={throughputBars(data)} width={WIDTH} height={HEIGHT} yLabel="episodes" integer />
      </Panel>
      <Panel
        title="Corrections learned"
        note="Per person: the share of their corrections that the promoted checkpoints learned (asked the same step again, they gave the person's action)."
        testId="dash-learned"
      >
        <BarChart
          bars={(data.corrections_learned ?? []).map((row) => ({
            label: row.username,
            value: row.share,
            title: `${row.username}: ${row.learned} of ${row.corrections} corrections learned`,
          }))}
          width={WIDTH}
          height={HEIGHT}
          yLabel="learned"
          yMin={0}
          yMax={1}
          formatY={(v) => `${Math.round(v * 100)} %`}
        />
      </Panel>
      <Panel
        title="Reviewer agreement"
        testId="dash-agreement"
        note={
          agreement.episodes_with_multiple_reviews
            ? `Over ${agreement.episodes_with_multiple_reviews} episode${agreement.episodes_with_multiple_reviews === 1 ? "" : "s"} reviewed by two or more people.`
            : "Needs episodes reviewed by two or more people."
        }
      >
        <div className="dash-agreement">
          <BarChart bars={agreementBars(data)} width={220} height={HEIGHT} yMin={agreement.kappa !== null && agreement.kappa < 0 ? -1 : 0} yMax={1} />
          <BarChart
            bars={agreement.reviewers.map((r) => ({
              label: r.username,
              value: r.reviews,
              title: `${r.username}: ${r.reviews} reviews, ${r.accepts} accepted`,
            }))}
            width={WIDTH - 230}
            height={HEIGHT}
            yLabel="reviews"
            integer
          />
        </div>
      </Panel>
      <Panel title="Dataset growth" note="Rows in each ready snapshot, one line a kind." testId="dash-growth">
        <TimeChart series={growthSeries(data)} yLabel="rows" empty="No snapshots yet." />
      </Panel>
    </div>
  );
}
