import { useState } from "react";
import { Link, useNavigate } from "react-router";
import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { ErrorBanner } from "../components/ErrorBanner";
import { branchKeys, type BranchMode, type BranchOf, createBranch, fetchBranches } from "../api/branch";

/**
 * Branching on the replay: "Branch here" starts a new episode that replays this episode up to the shown step
 * (checking each screen matches) and then continues there under a person (opened in the live view) or the model
 * (it appears in the lists). Steps are counted from 1 here, as the replay shows them (the API's ``step`` is the
 * 0-based index). Also says where this episode branched from, and lists its own branches, each with a link to
 * the side-by-side comparison with its parent (BranchCompare).
 */
export function BranchPanel({ projectId, episodeId, step, ended, branchOf }: {
  projectId: number;
  episodeId: number;
  step: number | undefined;
  ended: boolean;
  branchOf: BranchOf | null | undefined;
}) {
  const navigate = useNavigate();
  const client = useQueryClient();
  const [mode, setMode] = useState<BranchMode>("supervised");
  const [started, setStarted] = useState<number | null>(null);
  const branches = useQuery({ queryKey: branchKeys.list(episodeId), queryFn: () => fetchBranches(episodeId) });
  const branch = useMutation({
    mutationFn: () => createBranch(episodeId, step ?? 0, mode),
    onSuccess: (created) => {
      client.invalidateQueries({ queryKey: branchKeys.list(episodeId) });
      if (mode === "supervised") navigate(`/episodes/${created.id}`);
      else setStarted(created.id);
    },
  });
  const review = (id: number) => `/projects/${projectId}/review/${id}`;
  return (
    <section className="card" data-testid="branch-panel" aria-label="Branches">
      <h2>Branches</h2>
      {branchOf && (
        <p data-testid="branch-of">
          Branched from <Link to={review(branchOf.episode)}>episode {branchOf.episode}</Link> at step {branchOf.step + 1}.
          {branchOf.step > 0 && ` Its first ${branchOf.step === 1 ? "step repeats" : `${branchOf.step} steps repeat`} that episode's, replayed and checked.`}{" "}
          <Link to={`${review(episodeId)}/compare`} data-testid="compare-with-parent">
            Compare with parent
          </Link>
        </p>
      )}
      {step !== undefined && (
        <div className="button-row">
          <label>
            Continue as{" "}
            <select value={mode} onChange={(e) => setMode(e.target.value as BranchMode)} data-testid="branch-mode">
              <option value="supervised">a person (supervised)</option>
              <option value="autonomous">the model (autonomous)</option>
            </select>
          </label>
          <button
            type="button"
            className="button small"
            disabled={!ended || branch.isPending}
            title={ended ? `Try step ${step + 1} again from the same screen` : "An episode can be branched once it has ended"}
            onClick={() => branch.mutate()}
            data-testid="branch-here"
          >
            Branch here (step {step + 1})
          </button>
        </div>
      )}
      {branch.error && <ErrorBanner error={branch.error} title="Could not branch" />}
      {started !== null && (
        <p data-testid="branch-started">
          Started <Link to={review(started)}>episode {started}</Link>; it is in the episode list.
        </p>
      )}
      {(branches.data?.results.length ?? 0) > 0 && (
        <ul data-testid="branch-list">
          {branches.data!.results.map((b) => (
            <li key={b.id}>
              <Link to={review(b.id)}>Episode {b.id}</Link> from step {(b.branch_of?.step ?? 0) + 1} · {b.mode} · {b.status} ·{" "}
              <Link to={`${review(b.id)}/compare`} data-testid={`compare-branch-${b.id}`}>
                compare with this one
              </Link>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}
