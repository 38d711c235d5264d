import { useEffect, useState } from "react";

/**
 * The length of the recording at `src`, in seconds, once the browser knows it; null before.
 *
 * MediaRecorder's WebM carries no duration, so Chromium reports `Infinity` for it until it has read
 * to the end. A second, silent element of our own asks for the end (a seek far past it), which makes
 * the browser find the real length; the player a person uses is never moved for it, so nothing they
 * do races with the probe. A player that knows its length at once (`known`) needs no probe.
 */
export function useClipLength(src: string, known: number | null): number | null {
  const [probed, setProbed] = useState<number | null>(null);
  const finite = known !== null && Number.isFinite(known) && known > 0 ? known : null;

  useEffect(() => {
    if (finite !== null || typeof Audio === "undefined") return;
    const probe = new Audio();
    let live = true;
    const learn = () => {
      if (live && Number.isFinite(probe.duration) && probe.duration > 0) setProbed(probe.duration);
    };
    probe.preload = "metadata";
    probe.muted = true;
    probe.addEventListener("loadedmetadata", () => {
      if (Number.isFinite(probe.duration)) learn();
      else probe.currentTime = Number.MAX_SAFE_INTEGER; // the browser reads to the end and learns the length
    });
    probe.addEventListener("durationchange", learn);
    probe.addEventListener("seeked", learn);
    probe.src = src;
    return () => {
      live = false;
      probe.removeAttribute("src"); // stop fetching
    };
  }, [src, finite]);

  return finite ?? probed;
}
