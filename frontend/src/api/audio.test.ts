import { afterEach, describe, expect, it, vi } from "vitest";
import { mockFetch } from "../test/http";
import { chunkPut } from "./audio";
import { ApiError, NETWORK_ERROR_DETAIL } from "./client";

afterEach(() => vi.unstubAllGlobals());

describe("chunkPut: raw bytes through the one client", () => {
  it("sends the bytes as they are, with their type, the session time and the CSRF header", async () => {
    document.cookie = "csrftoken=tok";
    const { fn, requests } = mockFetch({
      "PUT /api/v1/audio/7/chunks/2": { status: 201, body: { clip: 7, index: 2, size: 3, duplicate: false } },
    });
    const data = new Blob(["abc"], { type: "audio/webm" });
    await expect(chunkPut(7, 2, data, "audio/webm;codecs=opus", 12.34567)).resolves.toEqual({ clip: 7, index: 2, size: 3, duplicate: false });
    expect(requests[0].headers).toEqual({
      Accept: "application/json",
      "Content-Type": "audio/webm;codecs=opus",
      "X-Chunk-Start": "12.346",
      "X-CSRFToken": "tok",
    });
    expect(requests[0].credentials).toBe("same-origin");
    expect(fn.mock.calls[0][1]?.body).toBe(data);
  });

  it("reports a refusal with the server's words, and a request cut short as no answer", async () => {
    mockFetch({ "PUT /api/v1/audio/7/chunks/0": { status: 413, body: { detail: "Chunk too large." } } });
    const refused = (await chunkPut(7, 0, new Blob(["x"]), "audio/webm", 0).catch((e) => e)) as ApiError;
    expect(refused).toMatchObject({ kind: "http", status: 413, detail: "Chunk too large." });

    vi.stubGlobal("fetch", vi.fn(async () => Promise.reject(new DOMException("The operation was aborted.", "AbortError"))));
    const aborted = (await chunkPut(7, 0, new Blob(["x"]), "audio/webm", 0).catch((e) => e)) as ApiError;
    expect(aborted).toBeInstanceOf(ApiError);
    expect(aborted).toMatchObject({ kind: "network", status: 0, detail: NETWORK_ERROR_DETAIL });
  });
});
