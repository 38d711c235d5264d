/**
 * Where waiting uploads are kept: in memory always, and in IndexedDB where the browser has it,
 * so audio recorded while offline survives a reload or a closed tab until it is uploaded.
 */
import type { ClipMeta } from "../../api/audio";

/** One upload waiting its turn: a chunk of a clip, or the call that finishes the clip. */
export interface UploadItem {
  /** `<clip client id>:<chunk index>`, or `<clip client id>:finish`. */
  id: string;
  /** Order of recording: uploads go out oldest first (chunk 0 before 1, a clip's chunks before its finish). */
  seq: number;
  /** The user who recorded it: another user logged in on this browser must not upload it. */
  owner: string;
  clip: ClipMeta;
  kind: "chunk" | "finish";
  /** Chunk index (0 carries the WebM header); -1 for a finish. */
  index: number;
  /** The chunk's start on the session clock (seconds); the clip's start for a finish. */
  start: number;
  data?: Blob;
}

export interface UploadStore {
  /** Whether items outlive the page. */
  readonly persistent: boolean;
  load(owner: string): Promise<UploadItem[]>;
  put(item: UploadItem): Promise<void>;
  remove(id: string): Promise<void>;
}

/** Items in memory only: what the queue falls back to, and what the tests use. */
export class MemoryUploadStore implements UploadStore {
  readonly persistent: boolean = false;
  readonly items = new Map<string, UploadItem>();

  async load(owner: string): Promise<UploadItem[]> {
    return [...this.items.values()].filter((item) => item.owner === owner);
  }

  async put(item: UploadItem): Promise<void> {
    this.items.set(item.id, item);
  }

  async remove(id: string): Promise<void> {
    this.items.delete(id);
  }
}

const DB_NAME = "loupe-think-aloud";
const STORE = "uploads";

function request<T>(req: IDBRequest<T>): Promise<T> {
  return new Promise((resolve, reject) => {
    req.onsuccess = () => resolve(req.result);
    req.onerror = () => reject(req.error);
  });
}

export class IndexedDbUploadStore implements UploadStore {
  readonly persistent: boolean = true;
  private readonly db: IDBDatabase;

  private constructor(db: IDBDatabase) {
    this.db = db;
  }

  /** The store, or null where IndexedDB is missing or refused (some private modes). */
  static async open(): Promise<IndexedDbUploadStore | null> {
    if (typeof indexedDB === "undefined") return null;
    try {
      const opening = indexedDB.open(DB_NAME, 1);
      opening.onupgradeneeded = () => {
        if (!opening.result.objectStoreNames.contains(STORE)) opening.result.createObjectStore(STORE, { keyPath: "id" });
      };
      return new IndexedDbUploadStore(await request(opening));
    } catch {
      return null;
    }
  }

  private store(mode: IDBTransactionMode): IDBObjectStore {
    return this.db.transaction(STORE, mode).objectStore(STORE);
  }

  async load(owner: string): Promise<UploadItem[]> {
    const all = (await request(this.store("readonly").getAll())) as UploadItem[];
    return all.filter((item) => item.owner === owner);
  }

  async put(item: UploadItem): Promise<void> {
    await request(this.store("readwrite").put(item));
  }

  async remove(id: string): Promise<void> {
    await request(this.store("readwrite").delete(id));
  }
}
