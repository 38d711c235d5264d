import type { Proposal } from "./episodeState";

/** The open proposal: what the model thinks and wants to do, waiting for the controller. */
export function ProposalPanel({
  proposal,
  deciding,
  humanControl = false,
}: {
  proposal: Proposal;
  deciding: boolean;
  /** A person took over: the proposal stays for reference, but nobody decides it. */
  humanControl?: boolean;
}) {
  const question = proposal.action?.name === "call_user" ? String(proposal.action.args.question ?? "") : "";
  return (
    <section className="card proposal" aria-label="Proposed step" data-testid="proposal" data-index={proposal.index ?? ""}>
      <div className="section-header">
        <h2>{humanControl ? "The model would do" : "Proposed step"} {proposal.index ?? ""}</h2>
        <span className="badge status-paused">
          {humanControl ? "a person acts instead" : deciding ? "decision sent…" : "awaiting decision"}
        </span>
        {proposal.void_reason && <span className="badge void">void turn</span>}
      </div>
      {question && (
        <div className="call-user" role="alert" data-testid="call-user">
          <strong>The agent asks you:</strong>
          <p>{question}</p>
          <span className="muted small">Answer by editing the step, taking over, or finishing the episode.</span>
        </div>
      )}
      <h3>Thought</h3>
      <p className="thought">{proposal.thought || <span className="muted">No thought.</span>}</p>
      <h3>Action</h3>
      <pre className="action" data-testid="proposal-action">
        {proposal.action_text || "(none)"}
      </pre>
      {proposal.void_reason && (
        <>
          <p className="field-error" data-testid="proposal-void">
            The model's output did not parse: {proposal.void_reason}
          </p>
          {proposal.raw && (
            <details>
              <summary>What the model wrote</summary>
              <pre className="action">{proposal.raw}</pre>
            </details>
          )}
        </>
      )}
    </section>
  );
}
