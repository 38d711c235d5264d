import { act, fireEvent, render, screen } from "@testing-library/react";
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import type { Controls } from "./controls";
import type { Proposal, VoiceCommandHeard } from "./episodeState";
import { browserNowMs, SessionClock } from "./thinkAloud/clock";
import { VOICE_HOLD_MS, VoiceCommandBar } from "./VoiceCommandBar";

const enabled = { enabled: true, why: "" };
const controls = Object.fromEntries(
  ["approve", "edit", "reject", "pause", "resume", "takeover", "handback", "finish", "claim", "release", "act"].map((k) => [k, enabled]),
) as Controls;
const proposal = { index: 2 } as Proposal;

/** A clock that reads the session time as the browser's own (offset 0). */
function clockNow(): SessionClock {
  const clock = new SessionClock();
  const now = browserNowMs();
  clock.observe({ serverTime: now / 1000, connectingAt: now, openedAt: now, receivedAt: now });
  return clock;
}

function heard(seq: number, type: VoiceCommandHeard["type"], extra: Partial<VoiceCommandHeard> = {}): VoiceCommandHeard {
  return { seq, type, reason: "", outcome: "", username: "ann", words: type, end: browserNowMs() / 1000, ...extra };
}

describe("VoiceCommandBar", () => {
  beforeEach(() => {
    vi.useFakeTimers();
    sessionStorage.clear();
  });
  afterEach(() => vi.useRealTimers());

  function bar(voice: VoiceCommandHeard[], send = vi.fn(() => "id-1"), extra: { pending?: { id: string; type: string }[]; acked?: string[] } = {}) {
    const props = { episodeId: 7, me: "ann", clock: clockNow(), controls, proposal, pending: extra.pending ?? [], acked: extra.acked ?? [], send };
    const view = render(<VoiceCommandBar {...props} voice={voice} />);
    return { send, rerender: (more: typeof extra) => view.rerender(<VoiceCommandBar {...props} {...more} voice={voice} />) };
  }

  it("shows a heard reject for a second, then sends it as the key would, with its reason", () => {
    const { send, rerender } = bar([heard(5, "reject", { reason: "that is the wrong button" })]);
    expect(screen.getByTestId("voice-command").dataset.state).toBe("pending");
    expect(send).not.toHaveBeenCalled();
    act(() => vi.advanceTimersByTime(VOICE_HOLD_MS));
    expect(send).toHaveBeenCalledWith({ type: "reject", index: 2, reason: "that is the wrong button" });
    rerender({ pending: [{ id: "id-1", type: "reject" }] });
    expect(screen.getByTestId("voice-command").dataset.state).toBe("sent");
    rerender({ pending: [], acked: ["id-1"] });
    expect(screen.getByTestId("voice-command").dataset.state).toBe("acknowledged");
  });

  it("sends nothing when Escape is pressed while it is pending", () => {
    const { send } = bar([heard(5, "approve")]);
    fireEvent.keyDown(window, { key: "Escape" });
    act(() => vi.advanceTimersByTime(3 * VOICE_HOLD_MS));
    expect(send).not.toHaveBeenCalled();
    expect(screen.getByTestId("voice-command").dataset.state).toBe("cancelled");
  });

  it("ignores another person's command and one heard long ago (a replay after a reload)", () => {
    const { send } = bar([heard(5, "approve", { username: "bob" }), heard(6, "pause", { end: browserNowMs() / 1000 - 120 })]);
    act(() => vi.advanceTimersByTime(3 * VOICE_HOLD_MS));
    expect(send).not.toHaveBeenCalled();
    expect(screen.queryByTestId("voice-command")).toBeNull();
  });

  it("says why a command that is not available now was not sent", () => {
    const send = vi.fn(() => "id-1");
    const props = { episodeId: 7, me: "ann", clock: clockNow(), proposal, pending: [], acked: [], send };
    render(<VoiceCommandBar {...props} controls={{ ...controls, resume: { enabled: false, why: "The episode is not paused." } }} voice={[heard(5, "resume")]} />);
    act(() => vi.advanceTimersByTime(VOICE_HOLD_MS));
    expect(send).not.toHaveBeenCalled();
    expect(screen.getByTestId("voice-state").textContent).toBe("Not sent: The episode is not paused.");
  });
});
