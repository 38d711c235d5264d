import { type FormEvent, useState } from "react";
import type { Availability } from "./controls";
import { type Direction, hotkeyAction, scrollAction, typeAction } from "../components/grammar";

const KEYS: { testId: string; label: string; keys: string }[] = [
  { testId: "key-enter", label: "Enter", keys: "enter" },
  { testId: "key-tab", label: "Tab", keys: "tab" },
  { testId: "key-backspace", label: "Backspace", keys: "backspace" },
  { testId: "key-ctrl-a", label: "Ctrl+A", keys: "ctrl+a" },
];

/**
 * Acting in the model's place after a takeover: clicks come from the screenshot itself (the page
 * passes them to `onAct`); here are typing, keys and scrolling, and the person's reason.
 */
export function TakeoverPanel({
  act,
  thought,
  onThought,
  onAct,
  screen,
}: {
  act: Availability;
  thought: string;
  onThought: (text: string) => void;
  /** Send `act` with this action text (the page adds the thought). */
  onAct: (action: string) => void;
  /** The screenshot size, to scroll at its centre. */
  screen: { width: number; height: number };
}) {
  const [text, setText] = useState("");
  const scroll = (direction: Direction) => onAct(scrollAction(screen.width / 2, screen.height / 2, direction));

  function submitType(event: FormEvent) {
    event.preventDefault();
    if (!text) return;
    onAct(typeAction(text));
    setText("");
  }

  const disabledWhy = act.enabled ? undefined : act.why;
  return (
    <section className="card takeover" aria-label="Act yourself" data-testid="takeover-panel">
      <div className="section-header">
        <h2>You are acting</h2>
        <span className="muted small">Click the screenshot to click there.</span>
      </div>
      <label className="field">
        <span>Why (optional; stored as your thought)</span>
        <input data-testid="act-thought" value={thought} maxLength={2000} onChange={(e) => onThought(e.target.value)} placeholder="The OK button submits the form" />
      </label>
      <form className="inline-form" onSubmit={submitType}>
        <label className="field grow">
          <span>Text to type</span>
          <input data-testid="type-text" value={text} onChange={(e) => setText(e.target.value)} />
        </label>
        <button type="submit" className="button" data-testid="type-submit" disabled={!act.enabled || !text} title={disabledWhy ?? (text ? "Type this text" : "Enter some text first")}>
          Type
        </button>
      </form>
      <div className="button-row" aria-label="Keys">
        {KEYS.map((k) => (
          <button key={k.testId} type="button" className="button small" data-testid={k.testId} disabled={!act.enabled} title={disabledWhy ?? `Press ${k.label}`} onClick={() => onAct(hotkeyAction(k.keys))}>
            {k.label}
          </button>
        ))}
        <span className="header-spacer" />
        <button type="button" className="button small" data-testid="scroll-up" disabled={!act.enabled} title={disabledWhy ?? "Scroll up"} onClick={() => scroll("up")}>
          Scroll up
        </button>
        <button type="button" className="button small" data-testid="scroll-down" disabled={!act.enabled} title={disabledWhy ?? "Scroll down"} onClick={() => scroll("down")}>
          Scroll down
        </button>
      </div>
    </section>
  );
}
