import { describe, expect, it } from "vitest";
import { offsetFromHello, SessionClock } from "./clock";

describe("offsetFromHello", () => {
  it("puts the hello's sending a quarter of the upgrade before its arrival", () => {
    // Upgrade took 40 ms (two round trips), so one way is ~10 ms: the server's 1000.000 s
    // happened at browser 10_000 + 60 - 10 = 10_050 ms.
    const estimate = offsetFromHello({ serverTime: 1000, connectingAt: 10_000, openedAt: 10_040, receivedAt: 10_060 });
    expect(estimate.offsetMs).toBe(1_000_000 - 10_050);
    expect(estimate.uncertaintyMs).toBe(60);
  });

  it("finds a server clock hours ahead of the browser's", () => {
    const browser = 1_700_000_000_000;
    const server = (browser + 3 * 3600_000 + 5) / 1000; // 3 h ahead, stamped 5 ms after the socket opened
    const estimate = offsetFromHello({ serverTime: server, connectingAt: browser - 8, openedAt: browser, receivedAt: browser + 5 });
    expect(Math.abs(estimate.offsetMs - 3 * 3600_000)).toBeLessThanOrEqual(13);
  });

  it("never estimates the hello as sent before the socket began connecting", () => {
    const estimate = offsetFromHello({ serverTime: 50, connectingAt: 100, openedAt: 900, receivedAt: 120 });
    expect(estimate.offsetMs).toBe(50_000 - 100);
  });
});

describe("SessionClock", () => {
  it("knows nothing until a hello, then converts browser times to session seconds", () => {
    const clock = new SessionClock();
    expect(clock.known).toBe(false);
    expect(clock.sessionSeconds(5000)).toBeNull();
    clock.observe({ serverTime: 100, connectingAt: 0, openedAt: 0, receivedAt: 0 });
    expect(clock.known).toBe(true);
    expect(clock.offsetMs).toBe(100_000);
    expect(clock.sessionSeconds(5000)).toBe(105);
  });

  it("keeps the tightest hello across reconnects and tells its subscribers", () => {
    const clock = new SessionClock();
    const heard: number[] = [];
    clock.subscribe(() => heard.push(clock.offsetMs ?? Number.NaN));
    clock.observe({ serverTime: 10, connectingAt: 0, openedAt: 400, receivedAt: 500 }); // slow: ±500 ms
    clock.observe({ serverTime: 20, connectingAt: 9_000, openedAt: 9_004, receivedAt: 9_005 }); // fast: ±5 ms
    clock.observe({ serverTime: 30, connectingAt: 19_000, openedAt: 19_800, receivedAt: 20_000 }); // slow again
    expect(clock.uncertaintyMs).toBe(5);
    expect(clock.offsetMs).toBe(20_000 - (9_005 - 1));
    expect(heard).toHaveLength(2);
  });
});
