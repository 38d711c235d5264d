import type { Episode } from "../api/episodes";

/** How a person reaches the apps of a desktop task: its desktop starts empty. */
export const DESKTOP_HINT =
  "The desktop starts empty: right-click it for the apps menu (a terminal, the file manager, the editor and the task's other apps).";

/** What an episode's task asks, as its environment gave it for this seed; kept in view above the screen. */
export function instructionText(episode: Pick<Episode, "instruction" | "status">): string {
  const text = (episode.instruction ?? "").trim();
  if (text) return text;
  if (episode.status === "queued") return "The instruction appears when the episode starts.";
  return "This task gave no instruction of its own.";
}

export function InstructionCard({ episode }: { episode: Pick<Episode, "instruction" | "status" | "task"> }) {
  const given = Boolean((episode.instruction ?? "").trim());
  return (
    <section className="card instruction-card" aria-label="What the task asks" data-testid="instruction">
      <span className="instruction-label">Task</span>
      <p className={given ? "instruction-text" : "instruction-text muted"} data-testid="instruction-text">
        {instructionText(episode)}
      </p>
      {episode.task.env_kind === "desktop" && (
        <p className="muted small instruction-hint" data-testid="desktop-hint">
          {DESKTOP_HINT}
        </p>
      )}
    </section>
  );
}
