import { useState } from "react";
import { ErrorBanner } from "../components/ErrorBanner";
import { formatDateTime } from "../components/format";
import type { PolishState, StepPolish, StepPolishFields } from "../api/polish";
import type { ReplayStep } from "../api/review";
import { useEpisodePolish, usePolishEdit, usePolishEpisode, usePolishStep } from "./polishQueries";

const MAX_THOUGHT_CHARS = 1000; // flywheel/polish.py MAX_THOUGHT_CHARS
const REQUEUE_AFTER_MS = 120_000; // flywheel/polish.py REQUEUE_AFTER_SECONDS: a request older than this may be sent again

/** Queued so recently that asking again would be the same request (an older one may have been lost: ask again). */
function queuedRecently(polish: StepPolish): boolean {
  return polish.polish_state === "queued" && polish.polished_at !== null && Date.now() - Date.parse(polish.polished_at) < REQUEUE_AFTER_MS;
}

const STATE_TEXT: Record<PolishState, string> = {
  "": "not polished yet",
  queued: "being written…",
  done: "written from the words",
  failed: "could not be written",
  edited: "edited by a person",
};

/** The step's polish as the polish endpoint reports it, else as the step payload carried it (read-only). */
function polishOf(step: ReplayStep & StepPolishFields, fromServer: StepPolish | undefined): StepPolish {
  return (
    fromServer ?? {
      index: step.index,
      words: step.human_thought,
      polished_thought: step.polished_thought ?? "",
      polish_state: step.polish_state ?? "",
      polish_error: step.polish_error ?? "",
      polished_at: null,
      stale: false,
      can_edit: false,
    }
  );
}

/**
 * What was said during a step and the thought written from it: "Spoken" (the raw words, never changed) and
 * "Polished thought" (what training rows use), which the step's annotator or a manager may edit or have written
 * again.
 */
export function PolishedThought({ step, spoken }: { step: ReplayStep; spoken: string }) {
  const fields = step as ReplayStep & StepPolishFields;
  const episodeId = fields.episode;
  const query = useEpisodePolish(episodeId);
  const polish = polishOf(fields, query.data?.steps.find((s) => s.index === step.index));
  const words = polish.words || step.human_thought;
  if (!words) {
    // words said during a step nobody acted on stay in the transcript: shown, not polished
    return spoken ? (
      <div className="replay-human-thought" data-testid="replay-human-thought">
        <h3>Said during this step</h3>
        <p className="thought">“{spoken}”</p>
      </div>
    ) : null;
  }
  return (
    <>
      <div className="replay-human-thought" data-testid="replay-human-thought">
        <h3>Spoken</h3>
        <p className="thought" data-testid="spoken-words">
          “{words}”
        </p>
      </div>
      {episodeId !== undefined ? (
        <PolishEditor
          key={`${episodeId}-${step.index}`}
          episodeId={episodeId}
          polish={polish}
          loadError={query.error}
          approvedModelStep={step.actor === "model"}
        />
      ) : (
        polish.polished_thought && (
          <div className="replay-human-thought polished-thought" data-testid="polished-thought" data-state={polish.polish_state}>
            <h3>Polished thought</h3>
            <p className="thought">{polish.polished_thought}</p>
          </div>
        )
      )}
    </>
  );
}

function PolishEditor({
  episodeId,
  polish,
  loadError,
  approvedModelStep,
}: {
  episodeId: number;
  polish: StepPolish;
  loadError: Error | null;
  approvedModelStep: boolean;
}) {
  const [draft, setDraft] = useState<string | null>(null);
  const edit = usePolishEdit(episodeId, polish.index);
  const again = usePolishStep(episodeId, polish.index);
  const state = polish.polish_state;
  const tooLong = draft !== null && draft.length > MAX_THOUGHT_CHARS;

  function save() {
    if (draft === null || tooLong) return;
    edit.mutate(draft, { onSuccess: () => setDraft(null) });
  }

  return (
    <div className="replay-human-thought polished-thought" data-testid="polished-thought" data-state={state || "none"}>
      <h3>
        Polished thought{" "}
        <span className={`badge polish-state polish-${state || "none"}`} data-testid="polish-state">
          {STATE_TEXT[state]}
        </span>
      </h3>
      {loadError && <ErrorBanner error={loadError} title="Could not load the polished thoughts" />}
      {draft === null ? (
        <>
          {state === "queued" && (
            <p className="muted" data-testid="polish-waiting">
              The words are being rewritten as a thought; this updates by itself.
            </p>
          )}
          {state === "failed" && (
            <p className="replay-void-note" role="note" data-testid="polish-error">
              No thought could be written: {polish.polish_error || "the polisher gave no reason"}.{" "}
              {polish.can_edit ? "Polish again, or write it yourself with Edit." : ""}
            </p>
          )}
          {(state === "done" || state === "edited") && (
            <p className="thought" data-testid="polished-text">
              {polish.polished_thought || <span className="muted">(left empty: training rows use the step's own thought)</span>}
            </p>
          )}
          {state === "" && <p className="muted">Not polished yet.</p>}
          {(state === "done" || state === "edited") && polish.polished_thought && (
            <p className="muted small" data-testid="polish-used">
              {state === "done" && approvedModelStep
                ? "The model took this step and a person approved it: training rows keep the model's thought. Edit this one to train on it instead."
                : "Training rows use this thought for the step."}
            </p>
          )}
          {polish.stale && (
            <p className="muted small" data-testid="polish-stale">
              More words were said after this thought was written. Polish again to write it from all of them.
            </p>
          )}
          {polish.polished_at && <p className="muted small">Last changed {formatDateTime(polish.polished_at)}.</p>}
          {polish.can_edit && (
            <div className="button-row">
              <button
                type="button"
                className="button small"
                data-testid="polish-edit"
                onClick={() => setDraft(polish.polished_thought)}
              >
                Edit
              </button>
              <button
                type="button"
                className="button small subtle"
                data-testid="polish-again"
                disabled={again.isPending || queuedRecently(polish)}
                onClick={() => again.mutate()}
                title="Write the thought from the spoken words again (replaces an edit)"
              >
                {again.isPending ? "Asking…" : "Polish again"}
              </button>
            </div>
          )}
        </>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            save();
          }}
        >
          <label className="field">
            <span className="muted small">The thought as the model should have written it (first person, short).</span>
            <textarea
              value={draft}
              rows={3}
              data-testid="polish-textarea"
              onChange={(e) => setDraft(e.target.value)}
              onKeyDown={(e) => {
                e.stopPropagation(); // arrow keys move the caret here, not the replay
                if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) save();
              }}
            />
          </label>
          {tooLong && (
            <p className="field-error" data-testid="polish-too-long">
              At most {MAX_THOUGHT_CHARS} characters; this is {draft.length}.
            </p>
          )}
          <div className="button-row">
            <button type="submit" className="button small primary" data-testid="polish-save" disabled={edit.isPending || tooLong}>
              {edit.isPending ? "Saving…" : "Save"}
            </button>
            <button type="button" className="button small subtle" onClick={() => setDraft(null)} disabled={edit.isPending}>
              Cancel
            </button>
          </div>
        </form>
      )}
      {edit.isError && <ErrorBanner error={edit.error} title="The thought was not saved" />}
      {again.isError && <ErrorBanner error={again.error} title="Could not polish again" />}
    </div>
  );
}

/** The episode's polish in one line (for the think-aloud card): done, edited, waiting, failed; managers polish all again. */
export function PolishProgressLine({ episodeId }: { episodeId: number | undefined }) {
  const query = useEpisodePolish(episodeId);
  const progress = query.data?.progress;
  if (!progress || progress.steps_with_words === 0) return null;
  const parts = [
    `${progress.done + progress.edited} of ${progress.steps_with_words} written`,
    progress.edited ? `${progress.edited} edited` : "",
    progress.queued ? `${progress.queued} being written` : "",
    progress.failed ? `${progress.failed} failed` : "",
    progress.not_polished ? `${progress.not_polished} not polished` : "",
  ].filter(Boolean);
  return (
    <p className="muted small polish-progress" data-testid="polish-progress" data-queued={progress.queued} data-failed={progress.failed}>
      Polished thoughts: {parts.join(" · ")}.
      {query.data?.can_request && episodeId !== undefined && <PolishAllButton episodeId={episodeId} />}
    </p>
  );
}

function PolishAllButton({ episodeId }: { episodeId: number }) {
  const [asked, setAsked] = useState(false);
  const client = usePolishEpisode(episodeId);
  return (
    <>
      {" "}
      <button
        type="button"
        className="button small subtle"
        data-testid="polish-all"
        disabled={client.isPending}
        onClick={() => client.mutate(undefined, { onSuccess: () => setAsked(true) })}
        title="Write every step's thought from its words again, except those a person edited"
      >
        Polish all again
      </button>
      {asked && !client.isPending && <span> Asked.</span>}
      {client.isError && <ErrorBanner error={client.error} title="Could not polish the episode again" />}
    </>
  );
}
