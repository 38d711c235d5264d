import { fireEvent, render } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import { actionLabel, actionMarkers, displayToScreenshot, scalePoint } from "./markers";
import { ScreenshotView } from "./ScreenshotView";

describe("click marker", () => {
  it("draws a click at its screenshot pixel in an overlay whose viewBox is the screenshot size", () => {
    const { container, getByTestId } = render(
      <ScreenshotView
        src="/shot.png"
        width={160}
        height={210}
        alt="screen"
        action={{ name: "click", args: { x: 120, y: 48 } }}
        displayWidth={480}
        testId="episode-screenshot"
      />,
    );
    const svg = getByTestId("action-overlay");
    expect(svg.getAttribute("viewBox")).toBe("0 0 160 210");
    expect(svg.getAttribute("preserveAspectRatio")).toBe("none");
    const dot = container.querySelector(".marker-action .marker-dot")!;
    expect(dot.getAttribute("cx")).toBe("120");
    expect(dot.getAttribute("cy")).toBe("48");
    // The frame keeps the screenshot's aspect ratio, so the overlay scales exactly like the image.
    const frame = container.querySelector(".screenshot") as HTMLElement;
    expect(frame.style.width).toBe("480px");
    expect(frame.style.aspectRatio.replace(/\s/g, "")).toBe("160/210");
    expect(getByTestId("episode-screenshot").getAttribute("src")).toBe("/shot.png");
  });

  it("places a marker 3x further across when the screenshot is shown 3x larger", () => {
    expect(scalePoint({ x: 120, y: 48 }, { width: 160, height: 210 }, { width: 480, height: 630 })).toEqual({ x: 360, y: 144 });
    expect(displayToScreenshot({ x: 360, y: 144 }, { width: 480, height: 630 }, { width: 160, height: 210 })).toEqual({
      x: 120,
      y: 48,
    });
    // A click on the image's far edge stays inside the screenshot.
    expect(displayToScreenshot({ x: 480, y: 630 }, { width: 480, height: 630 }, { width: 160, height: 210 })).toEqual({
      x: 159,
      y: 209,
    });
  });

  it("reads string coordinates and knows which actions have no place", () => {
    expect(actionMarkers({ name: "double_click", args: { x: "10", y: "20" } })).toEqual([
      { kind: "click", at: { x: 10, y: 20 }, variant: "double_click" },
    ]);
    expect(actionMarkers({ name: "drag", args: { x1: 1, y1: 2, x2: 30, y2: 40 } })).toEqual([
      { kind: "drag", from: { x: 1, y: 2 }, to: { x: 30, y: 40 } },
    ]);
    expect(actionMarkers({ name: "type", args: { text: "hi" } })).toEqual([]);
    expect(actionMarkers({ name: "click", args: { x: "left" } })).toEqual([]);
    expect(actionMarkers(null)).toEqual([]);
  });

  it("draws no overlay when the action points nowhere", () => {
    const { queryByTestId } = render(
      <ScreenshotView src="/s.png" width={160} height={210} alt="s" action={{ name: "wait", args: {} }} />,
    );
    expect(queryByTestId("action-overlay")).toBeNull();
  });
});

describe("caption and picking", () => {
  it("captions actions that have no place, preferring the proposal's", () => {
    expect(actionLabel({ name: "type", args: { text: "Alice" } })).toBe("⌨ type “Alice”");
    expect(actionLabel({ name: "hotkey", args: { keys: "ctrl+a" } })).toBe("⌨ ctrl+a");
    expect(actionLabel({ name: "click", args: { x: 1, y: 2 } })).toBeNull();
    const { getByTestId } = render(
      <ScreenshotView src="/s.png" width={160} height={210} alt="s" action={{ name: "wait", args: {} }} proposal={{ name: "hotkey", args: { keys: "enter" } }} />,
    );
    expect(getByTestId("action-label").textContent).toBe("⌨ enter");
  });

  it("reports a click on the shown image in screenshot pixels", () => {
    const onPick = vi.fn();
    const { getByTestId } = render(
      <ScreenshotView src="/s.png" width={160} height={210} alt="s" displayWidth={320} testId="shot" onPick={onPick} />,
    );
    const img = getByTestId("shot");
    img.getBoundingClientRect = () => ({ left: 10, top: 20, width: 320, height: 420, right: 330, bottom: 440, x: 10, y: 20, toJSON: () => ({}) });
    fireEvent.click(img, { clientX: 10 + 100, clientY: 20 + 50 });
    expect(onPick).toHaveBeenCalledWith({ x: 50, y: 25 });
  });
});
