import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { ShellOutput } from "./ShellOutput";

describe("ShellOutput", () => {
  it("shows what a shell step printed and its exit code", () => {
    render(<ShellOutput step={{ action: { name: "shell", args: { command: "ls" } }, info: { output: "3\n", exit_code: 0 } }} />);
    expect(screen.getByTestId("shell-output").textContent).toBe("Shell output (exit code 0)3");
  });

  it("says why a command did not finish", () => {
    render(<ShellOutput step={{ action: { name: "shell", args: { command: "sleep 30" } }, info: { output: "", exit_code: null, error: "'sleep 30' ran over 10.0 s and was stopped" } }} />);
    expect(screen.getByTestId("shell-output").textContent).toContain("ran over 10.0 s and was stopped(nothing printed)");
  });

  it("shows nothing for other steps", () => {
    const { container } = render(<ShellOutput step={{ action: { name: "click", args: { x: 1, y: 2 } }, info: {} }} />);
    expect(container.innerHTML).toBe("");
  });
});
