/**
 * Review queues (annotation/api.py): a manager's batch of episodes that several assignees each review,
 * the caller's next held episode, and the adjudication of items whose reviews disagree.
 */
import { apiFetch } from "./client";
import type { Review, Verdict } from "./review";

export type ItemState = "pending" | "done" | "adjudication" | "adjudicated";

export interface QueueProgress {
  items: number;
  pending: number;
  done: number;
  adjudication: number;
  adjudicated: number;
  reviews_done: number;
  reviews_needed: number;
  reviewers: { id: number; username: string; reviewed: number; skipped: number; holding: number }[];
}

export interface QueueAgreement {
  items_with_multiple_reviews: number;
  agreement: number | null;
  kappa: number | null;
  reviewers: { username: string; reviews: number; settled: number; agreement: number | null; kappa: number | null }[];
}

export interface QueueItem {
  id: number;
  queue: number;
  episode: number;
  state: ItemState;
  reviews_done: number;
  final_verdict: Verdict | null;
  adjudicated_by: string | null;
  adjudication_comment: string;
  reviews?: Review[];
}

export interface ReviewQueue {
  id: number;
  project: number;
  name: string;
  filter: Record<string, string>;
  overlap: number;
  state: "open" | "closed";
  hold_seconds: number;
  created_by: string;
  created_at: string;
  assignees: { id: number; username: string }[];
  progress: QueueProgress;
  /** Managers only. */
  agreement?: QueueAgreement;
  adjudication?: QueueItem[];
}

export interface QueueCreateInput {
  name: string;
  filter: Record<string, string>;
  overlap: number;
  assignees: number[];
}

/** The caller's held item (null when nothing is left for them). */
export interface QueueNext {
  queue: number;
  item: number | null;
  episode: number | null;
  held_until: string | null;
  reviewed_by_you: number;
  left_for_you: number;
}

export const queueList = (projectId: number, signal?: AbortSignal) =>
  apiFetch<{ results: ReviewQueue[] }>(`projects/${projectId}/review-queues/`, { signal }).then((r) => r.results);

export const queueCreate = (projectId: number, body: QueueCreateInput) =>
  apiFetch<ReviewQueue>(`projects/${projectId}/review-queues/`, { method: "POST", body });

export const queueGet = (queueId: number, signal?: AbortSignal) =>
  apiFetch<ReviewQueue>(`review-queues/${queueId}/`, { signal });

export const queueNext = (queueId: number) => apiFetch<QueueNext>(`review-queues/${queueId}/next`, { method: "POST" });

export const queueRelease = (itemId: number, skip: boolean) =>
  apiFetch<QueueItem>(`queue-items/${itemId}/release`, { method: "POST", body: { skip } });

export const queueAdjudicate = (itemId: number, verdict: Verdict, comment: string) =>
  apiFetch<QueueItem & { review_status: string }>(`queue-items/${itemId}/adjudicate`, {
    method: "POST",
    body: { verdict, comment },
  });
