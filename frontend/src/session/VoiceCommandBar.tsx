import { useEffect, useRef, useState } from "react";
import type { Command } from "../api/ws";
import type { Controls } from "./controls";
import type { PendingCommand, Proposal, VoiceCommandHeard } from "./episodeState";
import { browserNowMs, type SessionClock } from "./thinkAloud/clock";

/** How long a heard command waits, to be cancelled with Escape, before it is sent. */
export const VOICE_HOLD_MS = 1000;
/** A command heard longer ago than this (a replay after a reload) is never sent. */
export const VOICE_STALE_S = 30;

type Phase = "queued" | "pending" | "sent" | "acknowledged" | "refused" | "cancelled";

interface Shown {
  heard: VoiceCommandHeard;
  phase: Phase;
  id?: string;
  why?: string;
}

const LABELS: Record<VoiceCommandHeard["type"], string> = {
  approve: "Approve",
  reject: "Reject",
  takeover: "Take over",
  handback: "Hand back",
  pause: "Pause",
  resume: "Resume",
  finish: "Finish",
};

/** The frame the key for this command would send. */
export function voiceFrame(heard: VoiceCommandHeard, proposal: Proposal | null): Command {
  switch (heard.type) {
    case "approve":
      return { type: "approve", index: proposal?.index };
    case "reject":
      return { type: "reject", index: proposal?.index, ...(heard.reason ? { reason: heard.reason } : {}) };
    case "finish":
      return { type: "finish", outcome: heard.outcome };
    default:
      return { type: heard.type };
  }
}

const handledKey = (episodeId: number) => `loupe.voiceHandled.${episodeId}`;

function loadHandled(episodeId: number): Set<number> {
  try {
    const raw = sessionStorage.getItem(handledKey(episodeId));
    return new Set(raw ? (JSON.parse(raw) as number[]) : []);
  } catch {
    return new Set();
  }
}

function saveHandled(episodeId: number, handled: Set<number>): void {
  try {
    sessionStorage.setItem(handledKey(episodeId), JSON.stringify([...handled].slice(-50)));
  } catch {
    // private mode: the staleness check still keeps an old command from being sent again
  }
}

interface VoiceCommandBarProps {
  episodeId: number;
  voice: VoiceCommandHeard[];
  me: string | null;
  clock: SessionClock;
  controls: Controls;
  proposal: Proposal | null;
  pending: PendingCommand[];
  acked: string[];
  send: (command: Command) => string | null;
}

/**
 * A command the person said aloud (the server recognised it in their think-aloud words): shown for a second, with
 * Escape to cancel, then sent exactly as its key would be, under the same rules (controls.ts); then whether the
 * server acknowledged it. Only the speaker's own commands, and only fresh ones (not a replay after a reload).
 */
export function VoiceCommandBar({ episodeId, voice, me, clock, controls, proposal, pending, acked, send }: VoiceCommandBarProps) {
  /** The commands heard, oldest first: one at a time is pending or sent, the next waits ("queued"). */
  const [entries, setEntries] = useState<Shown[]>([]);
  const handled = useRef<Set<number> | null>(null);
  handled.current ??= loadHandled(episodeId);
  const latest = useRef({ controls, proposal, entries });
  latest.current = { controls, proposal, entries };
  /** Ids of sent commands the page has seen pending: one that leaves pending without an ack was refused. */
  const seenPending = useRef(new Set<string>());

  useEffect(() => {
    const seen = handled.current!;
    const now = clock.sessionSeconds(browserNowMs());
    const fresh: Shown[] = [];
    for (const heard of voice) {
      if (seen.has(heard.seq)) continue;
      seen.add(heard.seq);
      if (heard.username === me && now !== null && now - heard.end <= VOICE_STALE_S) fresh.push({ heard, phase: "queued" });
    }
    if (fresh.length) {
      saveHandled(episodeId, seen);
      setEntries((current) => [...current, ...fresh].slice(-KEPT));
    }
  }, [voice, me, clock, episodeId]);

  const update = (seq: number, change: (entry: Shown) => Shown) =>
    setEntries((current) => current.map((entry) => (entry.heard.seq === seq ? change(entry) : entry)));

  // The next queued command goes pending once the one before it is settled.
  const busy = entries.some((e) => e.phase === "pending" || e.phase === "sent");
  const next = entries.find((e) => e.phase === "queued");
  useEffect(() => {
    if (!busy && next) update(next.heard.seq, (entry) => ({ ...entry, phase: "pending" }));
  }, [busy, next?.heard.seq]);

  const active = entries.find((e) => e.phase === "pending");
  const activeSeq = active?.heard.seq;
  useEffect(() => {
    if (activeSeq === undefined) return;
    const timer = setTimeout(() => {
      const entry = latest.current.entries.find((e) => e.heard.seq === activeSeq);
      if (!entry || entry.phase !== "pending") return;
      const available = latest.current.controls[entry.heard.type];
      if (!available.enabled) {
        update(activeSeq, (e) => ({ ...e, phase: "refused", why: `Not sent: ${available.why}` }));
        return;
      }
      const id = send(voiceFrame(entry.heard, latest.current.proposal));
      update(activeSeq, (e) => (id ? { ...e, phase: "sent", id } : { ...e, phase: "refused", why: "Not sent: not connected." }));
    }, VOICE_HOLD_MS);
    function onKeyDown(event: KeyboardEvent) {
      if (event.key !== "Escape") return;
      event.preventDefault();
      event.stopImmediatePropagation();
      update(activeSeq!, (entry) => (entry.phase === "pending" ? { ...entry, phase: "cancelled" } : entry));
    }
    window.addEventListener("keydown", onKeyDown, { capture: true });
    return () => {
      clearTimeout(timer);
      window.removeEventListener("keydown", onKeyDown, { capture: true });
    };
  }, [activeSeq, send]);

  // A sent command is settled by the server: acknowledged, or refused (its notice says why).
  useEffect(() => {
    for (const entry of entries) {
      if (entry.phase !== "sent" || !entry.id) continue;
      if (acked.includes(entry.id)) update(entry.heard.seq, (e) => ({ ...e, phase: "acknowledged" }));
      else if (pending.some((p) => p.id === entry.id)) seenPending.current.add(entry.id);
      else if (seenPending.current.has(entry.id))
        update(entry.heard.seq, (e) => ({ ...e, phase: "refused", why: "The server refused it; the notice says why." }));
    }
  }, [acked, pending, entries]);

  if (entries.length === 0) return null;
  return (
    <section className="card voice-commands" aria-label="Spoken commands" data-testid="voice-commands">
      <h2>Spoken commands</h2>
      <ul>
        {[...entries].reverse().map((entry) => (
          <VoiceEntry key={entry.heard.seq} entry={entry} onCancel={() => update(entry.heard.seq, (e) => ({ ...e, phase: "cancelled" }))} />
        ))}
      </ul>
    </section>
  );
}

const KEPT = 4;

function VoiceEntry({ entry, onCancel }: { entry: Shown; onCancel: () => void }) {
  const { heard, phase } = entry;
  const outcome = heard.type === "finish" ? ` as ${heard.outcome}` : "";
  return (
    <li
      className={`voice-command voice-${phase}`}
      data-testid="voice-command"
      data-state={phase}
      data-type={heard.type}
      role="status"
      aria-live="polite"
    >
      <strong>
        {LABELS[heard.type]}
        {outcome}
      </strong>
      {heard.type === "reject" && heard.reason && (
        <>
          {" "}
          <span className="voice-reason" data-testid="voice-reason">
            {heard.reason}
          </span>
        </>
      )}{" "}
      <span className="small" data-testid="voice-state">
        {phase === "queued" && <>You said “{heard.words}”. Next, after the one above.</>}
        {phase === "pending" && <>You said “{heard.words}”. Sending in a second; press Esc to cancel.</>}
        {phase === "sent" && <>You said “{heard.words}”. Sent; waiting for the server to confirm.</>}
        {phase === "acknowledged" && <>You said “{heard.words}”. Done: the server took it.</>}
        {phase === "cancelled" && <>You said “{heard.words}”. Cancelled: nothing was sent.</>}
        {phase === "refused" && entry.why}
      </span>
      {phase === "pending" && (
        <button type="button" className="button small" data-testid="voice-cancel" onClick={onCancel}>
          Cancel <kbd>Esc</kbd>
        </button>
      )}
    </li>
  );
}
