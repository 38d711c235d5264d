import type { Cycle } from "../api/cycles";
import { LineChart } from "../components/LineChart";
import { Table } from "../components/Table";
import { formatRate, successSeries } from "./cycleView";

const candidateOf = (cycle: Cycle) => cycle.evaluations.find((e) => e.role !== "deployed");
const deployedOf = (cycle: Cycle) => cycle.evaluations.find((e) => e.role === "deployed");

/** Success rate on the held-out eval seeds per checkpoint across iterations, and the table behind it. */
export function SuccessChart({ cycles }: { cycles: Cycle[] }) {
  const measured = cycles.filter((c) => c.evaluations.length > 0).sort((a, b) => a.iteration - b.iteration);
  if (measured.length === 0) {
    return <p className="empty-state small">No cycle has evaluated a candidate yet; the chart fills in as cycles run.</p>;
  }
  return (
    <section className="card success-card" aria-label="Success rate across iterations">
      <LineChart
        series={successSeries(measured)}
        width={640}
        height={240}
        xLabel="iteration"
        yLabel="success %"
        yFromZero
        yMax={100}
        showPoints
        xTickValues={measured.map((c) => c.iteration)}
        formatX={(x) => String(x)}
        formatY={(y) => `${Math.round(y)}%`}
        title="Eval success rate per checkpoint"
      />
      <Table
        testId="success-table"
        rows={measured}
        rowKey={(cycle) => cycle.id}
        rowProps={() => ({ "data-testid": "success-row" })}
        columns={[
          { header: "Iteration", className: "num", cell: (cycle) => cycle.iteration },
          { header: "Candidate", cell: (cycle) => candidateOf(cycle)?.checkpoint.name ?? "—" },
          { header: "Success", className: "num", cell: (cycle) => formatRate(candidateOf(cycle)?.success_rate) },
          {
            header: "Deployed then",
            cell: (cycle) => deployedOf(cycle)?.checkpoint.name ?? cycle.baseline?.name ?? "—",
          },
          { header: "Success", className: "num", cell: (cycle) => formatRate(deployedOf(cycle)?.success_rate) },
          {
            header: "Outcome",
            cell: (cycle) => (
              <span className={`badge cycle-${cycle.state}`}>{cycle.awaiting_approval ? "awaiting approval" : cycle.state}</span>
            ),
          },
        ]}
      />
    </section>
  );
}
