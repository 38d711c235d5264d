// @vitest-environment node
import { describe, expect, it } from "vitest";
import { isLive, LIVE_STALE_MS, liveScreenFrom } from "./liveScreen";

const picture = { frame: 1, width: 1280, height: 720, jpeg_b64: "/9j/4AAQ" };

describe("liveScreenFrom", () => {
  it("shows a frame's picture at the env's screen size, as a data URL", () => {
    expect(liveScreenFrom(null, picture, 1000)).toEqual({
      src: "data:image/jpeg;base64,/9j/4AAQ",
      width: 1280,
      height: 720,
      frame: 1,
      receivedAt: 1000,
    });
  });

  it("keeps the picture and its freshness on a keepalive, and needs a picture first", () => {
    const shown = liveScreenFrom(null, picture, 1000);
    const kept = liveScreenFrom(shown, { frame: 2, width: 1280, height: 720, jpeg_b64: null }, 1900);
    expect(kept).toEqual({ ...shown, frame: 2, receivedAt: 1900 });
    expect(liveScreenFrom(null, { frame: 2, width: 1280, height: 720, jpeg_b64: null }, 1900)).toBeNull();
    // a keepalive for another screen size does not vouch for the picture held
    expect(liveScreenFrom(shown, { frame: 3, width: 160, height: 210, jpeg_b64: null }, 2000)).toBe(shown);
  });

  it("ignores malformed frames", () => {
    const shown = liveScreenFrom(null, picture, 1000);
    for (const bad of [null, "x", { ...picture, width: 0 }, { ...picture, frame: "1" }, { ...picture, jpeg_b64: "\"><script>" }]) {
      expect(liveScreenFrom(shown, bad, 2000)).toBe(shown);
    }
  });
});

describe("isLive", () => {
  it("is live until frames stopped for LIVE_STALE_MS", () => {
    const shown = liveScreenFrom(null, picture, 1000);
    expect(isLive(shown, 1000 + LIVE_STALE_MS - 1)).toBe(true);
    expect(isLive(shown, 1000 + LIVE_STALE_MS)).toBe(false);
    expect(isLive(null, 0)).toBe(false);
  });
});
