import { render, screen } from "@testing-library/react";
import { describe, expect, it } from "vitest";
import { BarChart } from "./BarChart";

describe("BarChart", () => {
  it("draws one bar a value, as tall as its value, labelled, and none for a missing value", () => {
    const { container } = render(
      <BarChart
        title="Episodes"
        height={240}
        bars={[
          { label: "ann", value: 10 },
          { label: "bob", value: 5 },
          { label: "cid", value: null },
        ]}
      />,
    );
    const rects = [...container.querySelectorAll("rect.chart-bar")];
    expect(rects).toHaveLength(2);
    const [ann, bob] = rects.map((r) => Number(r.getAttribute("height")));
    expect(ann).toBeCloseTo(2 * bob, 5);
    const cid = container.querySelector('[data-bar="cid"]');
    expect(cid?.textContent).toContain("—");
    expect(screen.getByText("Episodes")).toBeTruthy();
  });

  it("hangs a negative value below the zero line", () => {
    const { container } = render(<BarChart bars={[{ label: "kappa", value: -0.5 }, { label: "share", value: 0.5 }]} yMin={-1} yMax={1} />);
    const [kappa, share] = [...container.querySelectorAll("rect.chart-bar")];
    const zero = Number(container.querySelector("line.chart-axis")?.getAttribute("y1"));
    expect(Number(kappa.getAttribute("y"))).toBeCloseTo(zero, 5); // starts at zero, goes down
    expect(Number(share.getAttribute("y")) + Number(share.getAttribute("height"))).toBeCloseTo(zero, 5);
  });

  it("labels counts with whole numbers only", () => {
    const { container } = render(<BarChart integer bars={[{ label: "ann", value: 1 }]} />);
    const labels = [...container.querySelectorAll(".chart-grid text")].map((t) => t.textContent);
    expect(labels).toEqual(["0", "1"]);
  });

  it("says so when there is nothing to draw", () => {
    render(<BarChart bars={[]} title="Agreement" />);
    expect(screen.getByText("No data yet.")).toBeTruthy();
  });
});
