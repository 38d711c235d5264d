import { useParams } from "react-router";

/** A numeric route parameter (`:projectId`), NaN when it is missing or not a number. */
export function useIdParam(name: string): number {
  const raw = useParams()[name];
  return raw && /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
}
