import type { Cycle } from "../api/cycles";
import { LineChart } from "../components/LineChart";
import { formatRate, successSeries } from "./cycleView";

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
      <div className="table-wrap">
        <table className="table" data-testid="success-table">
          <thead>
            <tr>
              <th className="num">Iteration</th>
              <th>Candidate</th>
              <th className="num">Success</th>
              <th>Deployed then</th>
              <th className="num">Success</th>
              <th>Outcome</th>
            </tr>
          </thead>
          <tbody>
            {measured.map((cycle) => {
              const candidate = cycle.evaluations.find((e) => e.role !== "deployed");
              const deployed = cycle.evaluations.find((e) => e.role === "deployed");
              return (
                <tr key={cycle.id} data-testid="success-row">
                  <td className="num">{cycle.iteration}</td>
                  <td>{candidate?.checkpoint.name ?? "—"}</td>
                  <td className="num">{formatRate(candidate?.success_rate)}</td>
                  <td>{deployed?.checkpoint.name ?? cycle.baseline?.name ?? "—"}</td>
                  <td className="num">{formatRate(deployed?.success_rate)}</td>
                  <td>
                    <span className={`badge cycle-${cycle.state}`}>{cycle.awaiting_approval ? "awaiting approval" : cycle.state}</span>
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      </div>
    </section>
  );
}
