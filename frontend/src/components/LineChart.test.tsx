import { fireEvent, render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { LineChart, linearScale, niceTicks } from "./LineChart";

describe("LineChart", () => {
  it("picks round ticks that cover the data", () => {
    expect(niceTicks(0, 1)).toEqual([0, 0.2, 0.4, 0.6, 0.8, 1]);
    expect(niceTicks(3, 97)).toEqual([0, 20, 40, 60, 80, 100]);
    const flat = niceTicks(5, 5);
    expect(flat[0]).toBeLessThan(5);
    expect(flat[flat.length - 1]).toBeGreaterThan(5);
  });

  it("maps a domain linearly onto a range", () => {
    const y = linearScale(0, 10, 200, 0);
    expect(y(0)).toBe(200);
    expect(y(5)).toBe(100);
    expect(y(10)).toBe(0);
  });

  it("draws one path per series and shows every series' value at the hovered x", () => {
    const { container } = render(
      <LineChart
        width={300}
        height={200}
        title="Loss"
        series={[
          { name: "train", points: [{ x: 0, y: 1 }, { x: 1, y: 0.5 }, { x: 2, y: 0.25 }] },
          { name: "eval", points: [{ x: 0, y: 1.2 }, { x: 2, y: 0.4 }] },
        ]}
      />,
    );
    expect(container.querySelectorAll("path[data-series]")).toHaveLength(2);
    const hit = screen.getByTestId("chart-hit-area");
    // happy-dom has no layout: the hit area's rect is 0 wide, so the pointer maps to x = 0.
    fireEvent.mouseMove(hit, { clientX: 0, clientY: 10 });
    const tooltip = screen.getByRole("tooltip");
    expect(tooltip.textContent).toContain("train: 1");
    expect(tooltip.textContent).toContain("eval: 1.2");
    fireEvent.mouseLeave(hit);
    expect(screen.queryByRole("tooltip")).toBeNull();
  });

  it("says so when there is no data", () => {
    render(<LineChart series={[{ name: "a", points: [] }]} />);
    expect(screen.getByText("No data yet.")).toBeTruthy();
  });
});

describe("LineChart options", () => {
  it("marks every point when asked, so a single day still shows", () => {
    const { container } = render(
      <LineChart
        showPoints
        yFromZero
        yMax={1}
        xTickValues={[5]}
        formatX={(x) => `day ${x}`}
        series={[
          { name: "v0", points: [{ x: 5, y: 0.5 }] },
          { name: "v1", points: [{ x: 5, y: 0.75 }] },
        ]}
      />,
    );
    expect(container.querySelectorAll("circle[data-point]")).toHaveLength(2);
    expect(screen.getByText("day 5")).toBeTruthy();
    expect(screen.getByText("1")).toBeTruthy(); // the y axis reaches a rate's 1.0
  });

  it("shows a lone point as a dot without being asked, and longer lines without dots", () => {
    const { container } = render(
      <LineChart
        series={[
          { name: "sft", points: [{ x: 10, y: 0.8 }] },
          { name: "dpo", points: [{ x: 10, y: 0.5 }, { x: 20, y: 0.4 }] },
        ]}
      />,
    );
    const dots = container.querySelectorAll("circle[data-point]");
    expect(dots).toHaveLength(1);
    expect(dots[0].getAttribute("data-point")).toBe("sft");
  });
});
