/**
 * Parse what a person types as seeds: "3", "0, 1, 2" or "0-4" (ranges inclusive, mixed freely).
 * Returns the seeds in order without duplicates, or an error that says what to fix.
 */
export const MAX_SEEDS_PER_START = 100;

export type SeedParse = { ok: true; seeds: number[] } | { ok: false; error: string };

export function parseSeeds(text: string, range?: { start: number; end: number }): SeedParse {
  const parts = text
    .split(/[\s,]+/)
    .map((p) => p.trim())
    .filter(Boolean);
  if (parts.length === 0) return { ok: false, error: "Enter at least one seed, e.g. 0 or 0-4." };

  const seeds: number[] = [];
  const seen = new Set<number>();
  const add = (seed: number) => {
    if (!seen.has(seed)) {
      seen.add(seed);
      seeds.push(seed);
    }
  };
  for (const part of parts) {
    const range_ = /^(\d+)-(\d+)$/.exec(part);
    if (range_) {
      const low = Number(range_[1]);
      const high = Number(range_[2]);
      if (high < low) return { ok: false, error: `The range "${part}" runs backwards; write it low-high.` };
      if (high - low + 1 > MAX_SEEDS_PER_START) {
        return { ok: false, error: `Start at most ${MAX_SEEDS_PER_START} episodes at once.` };
      }
      for (let s = low; s <= high; s += 1) add(s);
    } else if (/^\d+$/.test(part)) {
      add(Number(part));
    } else {
      return { ok: false, error: `"${part}" is not a seed; use whole numbers like 3 or ranges like 0-4.` };
    }
    if (seeds.length > MAX_SEEDS_PER_START) {
      return { ok: false, error: `Start at most ${MAX_SEEDS_PER_START} episodes at once.` };
    }
  }
  if (range) {
    const outside = seeds.find((s) => s < range.start || s > range.end);
    if (outside !== undefined) {
      return { ok: false, error: `Seed ${outside} is outside this task's range ${range.start}–${range.end}.` };
    }
  }
  return { ok: true, seeds };
}
