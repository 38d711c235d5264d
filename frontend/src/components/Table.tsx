/**
 * The one data table of the pages (`.table` in a `.table-wrap` that scrolls sideways when it must): columns, rows,
 * what shows when there are none, a row under a row (a refusal under the row whose button caused it), and paging
 * by keyset links or "load more".
 */
import { Fragment, type HTMLAttributes, type Key, type ReactNode, type TdHTMLAttributes, type ThHTMLAttributes } from "react";

/** An element's attributes, `data-*` ones included (test hooks, states). */
type WithData<A> = A & { [data: `data-${string}`]: string | number | boolean | undefined };

export interface Column<T> {
  /** The header cell's content (nothing for an actions column: give it `headerProps["aria-label"]`). */
  header?: ReactNode;
  /** A header cell of its own, instead of `header` (a sortable column's button). */
  headerCell?: ReactNode;
  /** The cell's content for one row. */
  cell: (row: T) => ReactNode;
  /** Class of both the header and the cells (`num`: right-aligned figures). */
  className?: string;
  headerProps?: WithData<ThHTMLAttributes<HTMLTableCellElement>>;
  /** The cell's attributes for one row; null: no cell here (a cell before it spans this column). */
  cellProps?: (row: T) => WithData<TdHTMLAttributes<HTMLTableCellElement>> | null;
  /** Leave the column out (actions for someone who may not act). */
  hidden?: boolean;
  /** Its cells head their rows (`<th>`: a matrix's row labels). */
  rowHeader?: boolean;
}

/** Keyset paging: the links to the pages before and after this one, as the API gave them. */
export interface KeysetPaging {
  previous: string | null;
  next: string | null;
  /** A page is on its way: both buttons wait. */
  busy: boolean;
  onPage: (link: string | null) => void;
  /** The buttons' test ids are `<testId>-previous` and `<testId>-next`. */
  testId: string;
}

/** Paging by "Load more" (an infinite list). */
export interface MorePaging {
  hasMore: boolean;
  loading: boolean;
  onMore: () => void;
}

interface TableProps<T> {
  columns: Column<T>[];
  rows: T[];
  rowKey: (row: T) => Key;
  rowProps?: (row: T) => WithData<HTMLAttributes<HTMLTableRowElement>>;
  /** A row under this row, across every column, when there is something to say; null: none. */
  rowDetail?: (row: T) => { content: ReactNode; props?: WithData<HTMLAttributes<HTMLTableRowElement>> } | null;
  /** Rows after the data rows (a difference of two rows, a total). */
  lastRows?: ReactNode;
  /** What shows instead of the table when there are no rows (`null`: nothing); left out, the table shows its header
   * alone. */
  empty?: ReactNode;
  /** Classes besides `table`. */
  className?: string;
  testId?: string;
  /** Shown inside the scrolling wrapper, above the table. */
  intro?: ReactNode;
  /** Without the wrapper that scrolls a wide table sideways (a narrow one inside a card). */
  bare?: boolean;
  paging?: KeysetPaging | MorePaging;
}

function Pager({ paging }: { paging: KeysetPaging | MorePaging }) {
  if ("onMore" in paging) {
    if (!paging.hasMore) return null;
    return (
      <div className="table-more">
        <button type="button" className="button" disabled={paging.loading} onClick={paging.onMore}>
          {paging.loading ? "Loading…" : "Load more"}
        </button>
      </div>
    );
  }
  if (!paging.next && !paging.previous) return null;
  return (
    <div className="table-pager">
      <button
        type="button"
        className="button"
        disabled={!paging.previous || paging.busy}
        onClick={() => paging.onPage(paging.previous)}
        data-testid={`${paging.testId}-previous`}
      >
        ← Previous page
      </button>
      <button
        type="button"
        className="button"
        disabled={!paging.next || paging.busy}
        onClick={() => paging.onPage(paging.next)}
        data-testid={`${paging.testId}-next`}
      >
        Next page →
      </button>
    </div>
  );
}

export function Table<T>({
  columns,
  rows,
  rowKey,
  rowProps,
  rowDetail,
  empty,
  className,
  testId,
  intro,
  bare,
  paging,
  lastRows,
}: TableProps<T>) {
  const shown = columns.filter((column) => !column.hidden);
  const cells = (row: T) =>
    shown.map((column, index) => {
      const props = column.cellProps ? column.cellProps(row) : {};
      if (props === null) return null;
      const Cell = column.rowHeader ? "th" : "td";
      return (
        <Cell key={index} className={column.className} {...props}>
          {column.cell(row)}
        </Cell>
      );
    });
  const table = (
    <table className={className ? `table ${className}` : "table"} data-testid={testId}>
      <thead>
        <tr>
          {shown.map((column, index) =>
            column.headerCell !== undefined ? (
              <Fragment key={index}>{column.headerCell}</Fragment>
            ) : (
              <th key={index} className={column.className} {...column.headerProps}>
                {column.header}
              </th>
            ),
          )}
        </tr>
      </thead>
      <tbody>
        {rows.map((row) => {
          if (!rowDetail) {
            return (
              <tr key={rowKey(row)} {...rowProps?.(row)}>
                {cells(row)}
              </tr>
            );
          }
          const detail = rowDetail(row);
          return (
            <Fragment key={rowKey(row)}>
              <tr {...rowProps?.(row)}>{cells(row)}</tr>
              {detail && (
                <tr {...detail.props}>
                  <td colSpan={shown.length}>{detail.content}</td>
                </tr>
              )}
            </Fragment>
          );
        })}
        {lastRows}
      </tbody>
    </table>
  );
  return (
    <>
      {rows.length === 0 && empty !== undefined ? (
        empty
      ) : bare ? (
        table
      ) : (
        <div className="table-wrap">
          {intro}
          {table}
        </div>
      )}
      {paging && <Pager paging={paging} />}
    </>
  );
}
