/**
 * Parse what a person types as seeds: "3", "0, 1, 2" or "0-4" (ranges inclusive, mixed freely).
 * Returns the seeds in order without duplicates, or an error that says what to fix.
 */
export const MAX_SEEDS_PER_START = 100;

export type SeedParse = { ok: true; seeds: number[] } | { ok: false; error: string };

/**
 * `single`: a supervised episode has a person at it, so it starts one at a time: one seed, and a list or a range is
 * refused saying so (the server refuses them too).
 */
export function parseSeeds(text: string, range?: { start: number; end: number }, { single = false } = {}): SeedParse {
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
  if (single && (seeds.length > 1 || parts.some((part) => part.includes("-")))) {
    return {
      ok: false,
      error: "A supervised episode starts one at a time: give one seed, e.g. 3. Managers start several in autonomous mode.",
    };
  }
  if (range) {
    const outside = seeds.find((s) => s < range.start || s > range.end);
    if (outside !== undefined) {
      return { ok: false, error: `Seed ${outside} is outside this task's range ${range.start}–${range.end}.` };
    }
  }
  return { ok: true, seeds };
}

/** What the seed field accepts, for the mode chosen: what parseSeeds takes, said before anything is typed. */
export function seedHelp(mode: "supervised" | "autonomous", range: { seed_start: number; seed_end: number }): string {
  const allowed = `allowed ${range.seed_start}–${range.seed_end}`;
  return mode === "supervised"
    ? `One seed (${allowed}): a supervised episode has you at it, so it starts one at a time.`
    : `One seed, a list (0, 3, 7) or a range (0-4), at most ${MAX_SEEDS_PER_START} (${allowed}).`;
}
