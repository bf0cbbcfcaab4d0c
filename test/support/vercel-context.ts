/**
 * What Vercel's runtime provides a function, stood in for in-process tests: `waitUntil` and the
 * Runtime Cache, in the request context that @vercel/functions reads (Symbol.for('@vercel/request-context')).
 */
const REQUEST_CONTEXT = Symbol.for('@vercel/request-context');

export interface VercelContext {
  /** What waitUntil was given, to await at the end. */
  kept: Promise<unknown>[];
  /** The Runtime Cache's entries (values stored as structured clones, as a remote cache would). */
  cache: Map<string, unknown>;
  /** Removes the context. */
  remove(): void;
}

export function installVercelContext(): VercelContext {
  const kept: Promise<unknown>[] = [];
  const cache = new Map<string, unknown>();
  (globalThis as Record<symbol, unknown>)[REQUEST_CONTEXT] = {
    get: () => ({
      waitUntil: (work: Promise<unknown>) => kept.push(work),
      cache: {
        get: async (key: string) => cache.get(key) ?? null,
        set: async (key: string, value: unknown) => void cache.set(key, structuredClone(value)),
        delete: async (key: string) => void cache.delete(key),
        expireTag: async () => {},
      },
    }),
  };
  return { kept, cache, remove: () => void delete (globalThis as Record<symbol, unknown>)[REQUEST_CONTEXT] };
}
