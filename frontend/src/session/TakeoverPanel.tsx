import { type FormEvent, useState } from "react";
import type { Availability } from "./controls";
import { checkAction, type Direction, hotkeyAction, scrollAction, typeAction } from "../components/grammar";
import { LimitCounter } from "../components/LimitCounter";
import { isOverLimit } from "../components/limits";

const KEYS: { testId: string; label: string; keys: string }[] = [
  { testId: "key-enter", label: "Enter", keys: "enter" },
  { testId: "key-tab", label: "Tab", keys: "tab" },
  { testId: "key-backspace", label: "Backspace", keys: "backspace" },
  { testId: "key-ctrl-a", label: "Ctrl+A", keys: "ctrl+a" },
  { testId: "key-escape", label: "Esc", keys: "escape" },
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
  const [keys, setKeys] = useState("");
  const keysChecked = keys.trim() ? checkAction(hotkeyAction(keys.trim())) : null;
  const keysError = keysChecked && !keysChecked.ok ? keysChecked.error : null;
  const scroll = (direction: Direction) => onAct(scrollAction(screen.width / 2, screen.height / 2, direction));

  function submitType(event: FormEvent) {
    event.preventDefault();
    if (!text || isOverLimit("typed_text", text)) return;
    onAct(typeAction(text));
    setText("");
  }

  function submitKeys(event: FormEvent) {
    event.preventDefault();
    if (!keys.trim() || keysError) return;
    onAct(hotkeyAction(keys.trim()));
    setKeys("");
  }

  const disabledWhy = act.enabled ? undefined : act.why;
  return (
    <section className="card takeover" aria-label="Act yourself" data-testid="takeover-panel">
      <div className="section-header">
        <h2>You are acting</h2>
        <span className="muted small">Click the screenshot to click there.</span>
      </div>
      <div className="field">
        <label htmlFor="act-thought">Why (optional; stored as the thought of each action you take until you change it)</label>
        <span className="inline-form">
          <input
            id="act-thought"
            className="grow"
            data-testid="act-thought"
            value={thought}
            aria-describedby="act-thought-limit"
            onChange={(e) => onThought(e.target.value)}
            placeholder="The OK button submits the form"
          />
          <button type="button" className="button subtle small" data-testid="act-thought-clear" disabled={!thought} onClick={() => onThought("")}>
            Clear
          </button>
        </span>
        <LimitCounter kind="human_thought" value={thought} id="act-thought-limit" />
      </div>
      <form className="inline-form" onSubmit={submitType}>
        <label className="field grow">
          <span>Text to type</span>
          <input data-testid="type-text" value={text} aria-describedby="type-text-limit" onChange={(e) => setText(e.target.value)} />
          <LimitCounter kind="typed_text" value={text} id="type-text-limit" />
        </label>
        <button type="submit" className="button" data-testid="type-submit" disabled={!act.enabled || !text || isOverLimit("typed_text", text)} title={disabledWhy ?? (text ? "Type this text" : "Enter some text first")}>
          Type
        </button>
      </form>
      <form className="inline-form" onSubmit={submitKeys}>
        <label className="field grow">
          <span>Keys to press together (e.g. ctrl+s, alt+f4)</span>
          <input data-testid="hotkey-text" value={keys} onChange={(e) => setKeys(e.target.value)} placeholder="ctrl+s" aria-invalid={keysError ? true : undefined} />
        </label>
        <button type="submit" className="button" data-testid="hotkey-submit" disabled={!act.enabled || !keys.trim() || keysError !== null} title={disabledWhy ?? keysError ?? (keys.trim() ? "Press these keys" : "Enter keys first")}>
          Press
        </button>
      </form>
      {keysError && (
        <p className="field-error" data-testid="hotkey-error">
          {keysError}
        </p>
      )}
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
