import { fireEvent, render, screen, within } from "@testing-library/react";
import { describe, expect, it, vi } from "vitest";
import { type Column, Table } from "./Table";

interface Row {
  id: number;
  name: string;
  rows: number;
  failed?: boolean;
}

const columns: Column<Row>[] = [
  { header: "Name", cell: (r) => r.name },
  {
    header: "Rows",
    className: "num",
    cellProps: (r) => (r.failed ? { colSpan: 2, className: "failed" } : { "data-testid": "rows" }),
    cell: (r) => (r.failed ? "failed" : r.rows),
  },
  { header: "Twice", className: "num", cellProps: (r) => (r.failed ? null : {}), cell: (r) => r.rows * 2 },
  { header: "Hidden", hidden: true, cell: () => "never" },
];
const rows: Row[] = [
  { id: 1, name: "first", rows: 3 },
  { id: 2, name: "second", rows: 0, failed: true },
];

describe("Table", () => {
  it("draws the columns that show, a cell's attributes, and a cell that spans the next", () => {
    render(<Table testId="t" rows={rows} rowKey={(r) => r.id} columns={columns} rowProps={(r) => ({ "data-row": r.id })} />);
    const table = screen.getByTestId("t");
    expect(table.className).toBe("table");
    expect(table.parentElement?.className).toBe("table-wrap");
    expect([...table.querySelectorAll("th")].map((th) => [th.textContent, th.className])).toEqual([
      ["Name", ""],
      ["Rows", "num"],
      ["Twice", "num"],
    ]);
    const [first, second] = table.querySelectorAll("tbody tr");
    expect(first.getAttribute("data-row")).toBe("1");
    expect([...first.children].map((td) => td.textContent)).toEqual(["first", "3", "6"]);
    expect(within(first as HTMLElement).getByTestId("rows").className).toBe("num");
    expect([...second.children].map((td) => [td.textContent, td.getAttribute("colspan")])).toEqual([
      ["second", null],
      ["failed", "2"],
    ]);
  });

  it("shows what it is given for no rows, else the header alone", () => {
    const { rerender } = render(
      <Table testId="t" rows={[]} rowKey={(r: Row) => r.id} columns={columns} empty={<p>Nothing yet.</p>} />,
    );
    expect(screen.queryByTestId("t")).toBeNull();
    expect(screen.getByText("Nothing yet.")).toBeTruthy();
    rerender(<Table testId="t" rows={[]} rowKey={(r: Row) => r.id} columns={columns} />);
    expect(screen.getByTestId("t").querySelectorAll("tbody tr")).toHaveLength(0);
  });

  it("puts a row's detail under it, across every column that shows", () => {
    render(
      <Table
        testId="t"
        rows={rows}
        rowKey={(r) => r.id}
        columns={columns}
        rowDetail={(r) => (r.failed ? { content: "why it failed", props: { "data-testid": "detail" } } : null)}
      />,
    );
    const detail = screen.getByTestId("detail");
    expect(detail.previousElementSibling?.textContent).toContain("second");
    expect(detail.querySelector("td")?.getAttribute("colspan")).toBe("3");
  });

  it("pages by the keyset links it is given, and by load more", () => {
    const onPage = vi.fn();
    const { rerender } = render(
      <Table rows={rows} rowKey={(r) => r.id} columns={columns} paging={{ previous: null, next: "/n", busy: false, onPage, testId: "p" }} />,
    );
    expect((screen.getByTestId("p-previous") as HTMLButtonElement).disabled).toBe(true);
    fireEvent.click(screen.getByTestId("p-next"));
    expect(onPage).toHaveBeenCalledWith("/n");
    const onMore = vi.fn();
    rerender(<Table rows={rows} rowKey={(r) => r.id} columns={columns} paging={{ hasMore: true, loading: false, onMore }} />);
    fireEvent.click(screen.getByText("Load more"));
    expect(onMore).toHaveBeenCalled();
    rerender(<Table rows={rows} rowKey={(r) => r.id} columns={columns} paging={{ hasMore: false, loading: false, onMore }} />);
    expect(screen.queryByText("Load more")).toBeNull();
  });
});
