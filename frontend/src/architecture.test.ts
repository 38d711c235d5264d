// @vitest-environment node
/**
 * The import rules of the frontend, checked by reading the source (no linter needed):
 *
 * - Every REST call goes through the one client, `src/api/client.ts` (CSRF, `ApiError`): no other file
 *   calls `fetch(`; every WebSocket is opened by the one socket client, `src/api/ws.ts`.
 * - `src/api/` stands on its own: it imports nothing of the app's. It holds one module a topic
 *   (projects, tasks, episodes, review, ...), each with its calls, its query keys and its records; a
 *   topic may read another's records (types) but calls none of its functions.
 * - `src/components/` (shared pieces) imports only `api/` and itself; `src/shell/` (header, project
 *   frame and tabs, the login gate) imports only `api/`, `components/` and itself. Neither imports
 *   a page folder (`session/`, `review/`, `datasets/`, ...).
 * - Styles: `styles.css` (shared) and `components/components.css` are imported first, by `main.tsx`; every other
 *   sheet belongs to one folder and is imported only by that folder's pages (`review/review.css` by the review pages).
 * - A data table is `components/Table.tsx` (columns, rows, what shows when there are none, paging): no page writes
 *   `<table className="table">` itself.
 * - Query keys come from the factories in `src/api/` (`episodeKeys.detail(id)`, ...): no page or component
 *   writes a key as a literal array, so one resource has one key shape and an invalidation reaches it.
 *
 * Tests are left out: a test may mount a page to check how shared pieces are wired.
 */
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const SRC = dirname(fileURLToPath(import.meta.url));

/** The folders under src/ that are not pages. */
const LAYERS = ["api", "components", "shell", "test"];

function sourceFiles(): string[] {
  return (readdirSync(SRC, { recursive: true }) as string[])
    .map((name) => name.split(sep).join("/"))
    .filter((name) => /\.(ts|tsx)$/.test(name) && !/\.test\.(ts|tsx)$/.test(name) && !name.startsWith("test/"));
}

const read = (file: string) => readFileSync(join(SRC, file), "utf8");

/** The top-level folder (or file, for src/App.tsx and the like) under src/ that each relative import of `file` reaches. */
function importedAreas(file: string): { spec: string; area: string }[] {
  const found: { spec: string; area: string }[] = [];
  const pattern = /(?:\bfrom\s*|\bimport\s*\(?\s*)["'](\.{1,2}\/[^"']*)["']/g;
  for (const match of read(file).matchAll(pattern)) {
    const target = relative(SRC, resolve(SRC, dirname(file), match[1])).split(sep).join("/");
    found.push({ spec: match[1], area: target.split("/")[0] });
  }
  return found;
}

const pageFolders = () =>
  readdirSync(SRC, { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !LAYERS.includes(entry.name))
    .map((entry) => entry.name);

describe("the frontend's import rules", () => {
  it("finds the source and the page folders it checks", () => {
    expect(sourceFiles()).toContain("api/client.ts");
    expect(sourceFiles()).toContain("api/episodes.ts");
    expect(sourceFiles()).toContain("shell/Layout.tsx");
    expect(pageFolders()).toEqual(expect.arrayContaining(["auth", "session", "review", "datasets", "dashboard", "cycles", "runs", "episodes", "projects"]));
  });

  it("makes REST calls only in src/api/client.ts and opens sockets only in src/api/ws.ts", () => {
    // `fetch(` as a call of its own (or window./globalThis.fetch), not refetch() or fetchAll().
    const call = /(?:^|[^\w$.]|(?:window|globalThis|self)\.)fetch\s*\(/m;
    expect(sourceFiles().filter((file) => file !== "api/client.ts" && call.test(read(file)))).toEqual([]);
    // and the client's own calls (apiFetch, fetchAll) only in the topic modules beside it
    const client = /\b(?:apiFetch|fetchAll)\s*[<(]/;
    expect(sourceFiles().filter((file) => !file.startsWith("api/") && client.test(read(file)))).toEqual([]);
    const socket = /new\s+WebSocket\s*\(/;
    expect(sourceFiles().filter((file) => file !== "api/ws.ts" && socket.test(read(file)))).toEqual([]);
  });

  it("keeps the API's topic modules apart: one reads another's records, never calls it", () => {
    const shared = ["client", "types", "schema", "ws"];
    const offenders = sourceFiles()
      .filter((file) => file.startsWith("api/"))
      .flatMap((file) =>
        [...read(file).matchAll(/^import\s+(type\s+)?\{([^}]*)\}\s*from\s*["']\.\/([\w.]+)["']/gm)]
          .filter(([, typeOnly, names, module]) => {
            const values = names.split(",").map((n) => n.trim()).filter((n) => n && !n.startsWith("type "));
            return !shared.includes(module) && !typeOnly && values.length > 0;
          })
          .map(([, , , module]) => `${file} calls into ./${module}`),
      );
    expect(offenders).toEqual([]);
  });

  it("takes every query key from the key factories in src/api/", () => {
    // `queryKey: [` or a cache call given `[...]`: a key written by hand instead of a factory's
    const literal = /queryKey:\s*\[|(?:invalidateQueries|setQueryData|getQueryData|removeQueries|refetchQueries|cancelQueries)\s*(?:<[^>]*>)?\(\s*\[/;
    const offenders = sourceFiles().filter((file) => !file.startsWith("api/") && literal.test(read(file)));
    expect(offenders).toEqual([]);
  });

  it("imports each page folder's sheet from that folder only, and the shared sheets first", () => {
    const sheets = (readdirSync(SRC, { recursive: true }) as string[])
      .map((name) => name.split(sep).join("/"))
      .filter((name) => name.endsWith(".css"));
    const importers = (sheet: string) =>
      sourceFiles().filter((file) =>
        [...read(file).matchAll(/^import\s+["'](\.{1,2}\/[^"']+\.css)["'];/gm)].some(
          ([, spec]) => relative(SRC, resolve(SRC, dirname(file), spec)).split(sep).join("/") === sheet,
        ),
      );
    expect(sheets).toEqual(expect.arrayContaining(["styles.css", "components/components.css", "review/review.css"]));
    for (const sheet of sheets) {
      const by = importers(sheet);
      expect(by.length, `${sheet} is imported by no module`).toBeGreaterThan(0);
      const shared = sheet === "styles.css" || sheet === "components/components.css";
      expect(by.filter((file) => (shared ? file !== "main.tsx" : dirname(file) !== dirname(sheet))), sheet).toEqual([]);
    }
    const main = read("main.tsx");
    expect(main.indexOf('import "./styles.css"')).toBeLessThan(main.indexOf('import "./components/components.css"'));
    expect(main.indexOf('import "./components/components.css"')).toBeLessThan(main.indexOf("import { App }"));
  });

  it("draws every data table with components/Table.tsx", () => {
    const table = /<table[^>]*className=\{?["'`]table\b/;
    expect(sourceFiles().filter((file) => file !== "components/Table.tsx" && table.test(read(file)))).toEqual([]);
  });

  it("keeps src/api/ free of the rest of the app", () => {
    const offenders = sourceFiles()
      .filter((file) => file.startsWith("api/"))
      .flatMap((file) => importedAreas(file).filter(({ area }) => area !== "api").map(({ spec }) => `${file} imports ${spec}`));
    expect(offenders).toEqual([]);
  });

  it("keeps shared components and the shell free of page code", () => {
    const allowed: Record<string, string[]> = {
      components: ["api", "components"],
      shell: ["api", "components", "shell"],
    };
    const offenders = sourceFiles()
      .filter((file) => file.split("/")[0] in allowed)
      .flatMap((file) =>
        importedAreas(file)
          .filter(({ area }) => !allowed[file.split("/")[0]].includes(area))
          .map(({ spec }) => `${file} imports ${spec}`),
      );
    expect(offenders).toEqual([]);
  });
});
