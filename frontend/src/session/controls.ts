/**
 * Who may press which control right now, and why not. One pure function, so the buttons, the
 * keyboard shortcuts and the tests all follow the same rules the server enforces
 * (annotation/services.py): the server still judges, this only saves a person a refused click.
 */
import { shortcutLabel } from "../components/shortcuts";
import type { Role } from "../api/projects";
import { isTerminal, type LiveEpisode } from "./episodeState";

export type ControlKey =
  | "approve"
  | "edit"
  | "reject"
  | "pause"
  | "resume"
  | "takeover"
  | "handback"
  | "finish"
  | "claim"
  | "release"
  | "act";

export interface Availability {
  enabled: boolean;
  /** Why it is disabled; empty when enabled. Shown as the button's title. */
  why: string;
}

export type Controls = Record<ControlKey, Availability>;

const DECISIONS = ["approve", "edit", "reject"];
const ok: Availability = { enabled: true, why: "" };
const no = (why: string): Availability => ({ enabled: false, why });

export function isManager(role: Role | null | undefined): boolean {
  return role === "manager" || role === "admin";
}

export function controlsFor(live: LiveEpisode, me: { username: string; role: Role | null } | null): Controls {
  const status = live.episode?.status;
  const all = (a: Availability) =>
    Object.fromEntries(
      (["approve", "edit", "reject", "pause", "resume", "takeover", "handback", "finish", "claim", "release", "act"] as const).map(
        (k) => [k, a],
      ),
    ) as Controls;

  if (isTerminal(status)) return all(no(`The episode is ${status}; it takes no more commands.`));
  if (!me) return all(no("Waiting to learn who you are from the server…"));

  const owner = live.control?.username ?? null;
  const mine = owner === me.username;
  const other = owner !== null && !mine;
  const pendingTypes = new Set(live.pending.map((p) => p.type));
  const sent = (type: string) => (pendingTypes.has(type) ? "Sent; waiting for the server to confirm." : "");

  const claim = mine
    ? no("You control this episode already.")
    : other && !isManager(me.role)
      ? no(`${owner} controls this episode; only a manager can take it from them. Ask them to release it.`)
      : sent("claim")
        ? no(sent("claim"))
        : ok;
  const release = !mine ? no("You do not control this episode.") : sent("release") ? no(sent("release")) : ok;

  if (other) {
    const next = claim.enabled
      ? `Press ${shortcutLabel("claim")} to claim control.`
      : "Ask them to release it if you need to act; only a manager can take it from them.";
    const watching = no(`${owner} controls this episode; you are watching. ${next}`);
    return { ...all(watching), claim, release };
  }

  const proposal = live.proposal;
  const latest = live.steps[live.steps.length - 1];
  const deciding = live.pending.some((p) => DECISIONS.includes(p.type));
  const decision = (kind: "approve" | "edit" | "reject"): Availability => {
    if (live.humanControl) return no("You have taken over: act on the screen yourself, or hand back to the model.");
    if (!proposal) {
      if (live.episode?.mode === "autonomous" && status !== "paused")
        return no("The agent acts on its own in this episode; pause it (Space) to decide its next step yourself.");
      if (latest?.void)
        return no("The model's last answer could not be read as an action, so there is nothing to approve; wait for its next proposal.");
      return no("Nothing is proposed right now; wait for the next proposal.");
    }
    if (deciding) return no("Your decision was sent; waiting for the server to confirm.");
    if (kind === "approve" && proposal.void_reason)
      return no("The model's answer could not be read as an action, so it cannot be approved: edit it (E) or reject it (R).");
    return ok;
  };
  const simple = (type: string, blocked: string): Availability => (blocked ? no(blocked) : sent(type) ? no(sent(type)) : ok);

  return {
    approve: decision("approve"),
    edit: decision("edit"),
    reject: decision("reject"),
    pause: simple("pause", status === "paused" ? "The episode is already paused." : ""),
    resume: simple("resume", status !== "paused" ? "The episode is not paused." : ""),
    takeover: simple("takeover", live.humanControl ? "You have already taken over." : ""),
    handback: simple("handback", !live.humanControl ? "The model is acting already." : ""),
    finish: simple("finish", ""),
    act: live.humanControl ? ok : no("Take over first: the model is acting."),
    claim,
    release,
  };
}
