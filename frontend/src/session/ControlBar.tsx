import type { Controls, ControlKey } from "./controls";
import { type SessionAction, shortcutLabel } from "../components/shortcuts";

export type FormName = "edit" | "reject" | "finish";

interface ControlBarProps {
  controls: Controls;
  owner: string | null;
  me: string | null;
  paused: boolean;
  humanControl: boolean;
  openForm: FormName | null;
  onCommand: (type: "approve" | "pause" | "resume" | "takeover" | "handback" | "claim" | "release") => void;
  onOpen: (form: FormName) => void;
}

function CommandButton({
  control,
  testId,
  label,
  shortcut,
  onClick,
  tone = "",
  pressed,
}: {
  control: Controls[ControlKey];
  testId: string;
  label: string;
  shortcut?: SessionAction;
  onClick: () => void;
  tone?: string;
  pressed?: boolean;
}) {
  const key = shortcut ? shortcutLabel(shortcut) : "";
  const title = control.enabled ? (key ? `${label} (${key})` : label) : control.why;
  return (
    <button
      type="button"
      className={`button ${tone}`}
      data-testid={testId}
      disabled={!control.enabled}
      title={title}
      aria-keyshortcuts={key || undefined}
      aria-pressed={pressed}
      onClick={onClick}
    >
      {label}
      {key && <kbd aria-hidden="true">{key}</kbd>}
    </button>
  );
}

/** Who steers the episode, and every command they can give; others see why they cannot. */
export function ControlBar({ controls, owner, me, paused, humanControl, openForm, onCommand, onOpen }: ControlBarProps) {
  const mine = owner !== null && owner === me;
  return (
    <section className="control-bar" aria-label="Episode controls" data-testid="control-bar">
      <div className="control-owner" data-mine={mine}>
        <span data-testid="control-owner" data-owner={owner ?? ""}>
          {mine ? (
            <strong>You control this episode.</strong>
          ) : owner ? (
            <>
              Watching — <strong>{owner}</strong> controls this episode
            </>
          ) : (
            "Nobody controls this episode; claim it, or your first command makes you the controller."
          )}
        </span>
        {mine ? (
          <CommandButton control={controls.release} testId="cmd-release" label="Release" tone="small subtle" onClick={() => onCommand("release")} />
        ) : (
          <CommandButton control={controls.claim} testId="cmd-claim" label="Claim" shortcut="claim" tone="small" onClick={() => onCommand("claim")} />
        )}
      </div>
      <div className="control-buttons" role="toolbar" aria-label="Commands">
        <div className="button-group" aria-label="Decide the proposal">
          <CommandButton control={controls.approve} testId="cmd-approve" label="Approve" shortcut="approve" tone="primary" onClick={() => onCommand("approve")} />
          <CommandButton control={controls.edit} testId="cmd-edit" label="Edit" shortcut="edit" pressed={openForm === "edit"} onClick={() => onOpen("edit")} />
          <CommandButton control={controls.reject} testId="cmd-reject" label="Reject" shortcut="reject" pressed={openForm === "reject"} onClick={() => onOpen("reject")} />
        </div>
        <div className="button-group" aria-label="Run the episode">
          {paused ? (
            <CommandButton control={controls.resume} testId="cmd-resume" label="Resume" shortcut="pause-resume" onClick={() => onCommand("resume")} />
          ) : (
            <CommandButton control={controls.pause} testId="cmd-pause" label="Pause" shortcut="pause-resume" onClick={() => onCommand("pause")} />
          )}
          {humanControl ? (
            <CommandButton control={controls.handback} testId="cmd-handback" label="Hand back" shortcut="handback" onClick={() => onCommand("handback")} />
          ) : (
            <CommandButton control={controls.takeover} testId="cmd-takeover" label="Take over" shortcut="takeover" onClick={() => onCommand("takeover")} />
          )}
          <CommandButton control={controls.finish} testId="cmd-finish" label="Finish…" shortcut="finish" pressed={openForm === "finish"} onClick={() => onOpen("finish")} />
        </div>
      </div>
    </section>
  );
}
