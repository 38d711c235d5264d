import { fireEvent, render, screen } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import { isWideScreen } from "../components/ScreenshotView";
import { TakeoverPanel } from "./TakeoverPanel";

describe("TakeoverPanel keys", () => {
  it("presses the keys a person types, as one hotkey action", () => {
    const onAct = vi.fn();
    render(<TakeoverPanel act={{ enabled: true, why: "" }} thought="" onThought={() => {}} onAct={onAct} screen={{ width: 1280, height: 720 }} />);
    fireEvent.change(screen.getByTestId("hotkey-text"), { target: { value: " ctrl+s " } });
    fireEvent.click(screen.getByTestId("hotkey-submit"));
    expect(onAct).toHaveBeenCalledWith('hotkey(keys="ctrl+s")');
    expect((screen.getByTestId("hotkey-text") as HTMLInputElement).value).toBe("");
  });

  it("names a broken key combination and does not send it", () => {
    const onAct = vi.fn();
    render(<TakeoverPanel act={{ enabled: true, why: "" }} thought="" onThought={() => {}} onAct={onAct} screen={{ width: 1280, height: 720 }} />);
    fireEvent.change(screen.getByTestId("hotkey-text"), { target: { value: "ctrl+" } });
    expect(screen.getByTestId("hotkey-error").textContent).toContain('keys must be key names joined by "+"');
    expect((screen.getByTestId("hotkey-submit") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.submit(screen.getByTestId("hotkey-text"));
    expect(onAct).not.toHaveBeenCalled();
  });
});

describe("isWideScreen", () => {
  it("takes a desktop's screen as wide and a MiniWoB page as not", () => {
    expect(isWideScreen(1280, 720)).toBe(true);
    expect(isWideScreen(160, 210)).toBe(false);
    expect(isWideScreen(0, 0)).toBe(false);
  });
});
