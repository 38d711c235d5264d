import { useQuery } from "@tanstack/react-query";
import { type EnvServiceHost, envServiceHostsGet, envServiceKeys } from "../api/envservice";
import { ErrorBanner } from "../components/ErrorBanner";
import { Spinner } from "../components/Spinner";
import { Table } from "../components/Table";
import { useSession } from "../components/useSession";

/** "3 of 8 leased, 1 warm": one pool of a host, in words. */
export function poolSummary(pool: EnvServiceHost["pools"][number]): string {
  return `${pool.kind}: ${pool.leased} of ${pool.capacity} leased, ${pool.idle} warm` +
    (pool.crashes ? `, ${pool.crashes} crashed` : "");
}

/** The admin's status page: the environment service's hosts, their capacity and how busy they are. */
export function StatusPage() {
  const { user } = useSession();
  const hosts = useQuery({
    queryKey: envServiceKeys.hosts(),
    queryFn: ({ signal }) => envServiceHostsGet(signal),
    refetchInterval: 5_000,
    enabled: Boolean(user?.is_staff),
  });
  if (user && !user.is_staff) {
    return (
      <main className="page">
        <div className="empty-state card">
          <h1>Status</h1>
          <p>Only admins see the environment service's hosts.</p>
        </div>
      </main>
    );
  }
  return (
    <main className="page" data-testid="status-page">
      <h1>Status</h1>
      <section className="card">
        <h2>Environment service</h2>
        <p className="muted">
          Hosts serving Loupe's environments to RL jobs (<code>python manage.py envservice</code>); each reports every
          few seconds.
        </p>
        {hosts.error && <ErrorBanner error={hosts.error} onRetry={() => hosts.refetch()} />}
        {hosts.isPending && !hosts.error && <Spinner label="Reading the hosts' reports…" />}
        {hosts.data && (
          <>
            <ul data-testid="envservice-kinds">
              {hosts.data.kinds.map((kind) => (
                <li key={kind.kind}>
                  <strong>{kind.kind}</strong>: {kind.leased} of {kind.capacity} envs leased, {kind.idle} warm
                </li>
              ))}
            </ul>
            <Table
              testId="envservice-hosts"
              rows={hosts.data.hosts}
              rowKey={(host) => host.address}
              empty="No host reports: start one with python manage.py envservice."
              columns={[
                { header: "Host", cell: (host) => <span className="mono">{host.address}</span> },
                { header: "Pools", cell: (host) => host.pools.map(poolSummary).join("; ") },
                { header: "Leases", className: "num", cell: (host) => host.leases },
                {
                  header: "Steps a minute",
                  className: "num",
                  cell: (host) => (host.steps_per_minute == null ? "—" : host.steps_per_minute),
                },
                {
                  header: "Last report",
                  cell: (host) =>
                    host.silent ? (
                      <span className="badge danger">silent for {Math.round(host.age_s)} s</span>
                    ) : (
                      `${Math.round(host.age_s)} s ago`
                    ),
                },
              ]}
            />
          </>
        )}
      </section>
    </main>
  );
}
