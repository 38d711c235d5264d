/**
 * Review queues (annotation/api.py): a manager's batch of episodes that several assignees each review,
 * the caller's next held episode, and the adjudication of items whose reviews disagree.
 */
import { apiFetch } from "./client";
import type { Verdict } from "./review";
import type { Schemas } from "./types";

export type ItemState = Schemas["QueueItemStateEnum"];
export type QueueProgress = Schemas["QueueProgressOutput"];
export type QueueAgreement = Schemas["QueueAgreementOutput"];
export type QueueItem = Schemas["QueueItemOutput"];
/** A review queue; managers also get its agreement and the items awaiting adjudication. */
export type ReviewQueue = Schemas["QueueOutput"];
export type QueueCreateInput = Schemas["QueueCreateInputRequest"];
/** The caller's held item (null when nothing is left for them). */
export type QueueNext = Schemas["QueueNextOutput"];

export const queueKeys = {
  list: (projectId: number) => ["project", projectId, "review-queues"] as const,
  detail: (queueId: number) => ["review-queue", queueId] as const,
};

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
