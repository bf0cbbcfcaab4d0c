/** What the stream route's tests share: a task that streams on cue, an SSE reader, a counting driver. */
import { z } from 'zod';
import { parseSse, type SseEvent } from '../../src/client/sse.ts';
import { defineTask, type Task } from '../../src/index.ts';
import type { Sql, Statement } from '../../src/store/sql.ts';

/** Gates a `talk` job waits at, by the payload's `gate` name: the test opens them. */
const gates = new Map<string, { open: () => void; promise: Promise<void> }>();
export function gate(name: string): { open: () => void; promise: Promise<void> } {
  let g = gates.get(name);
  if (!g) {
    let open!: () => void;
    const promise = new Promise<void>((resolve) => (open = resolve));
    gates.set(name, (g = { open, promise }));
  }
  return g;
}

/**
 * `talk`: writes `before` chunks (strings, some with newlines, and objects), waits at `gate`
 * (if named), writes `after` more, returns. Chunk k is `chunkAt(k)`.
 */
export const talk: Task = defineTask({
  name: 'talk',
  payload: z.object({ before: z.number().int(), after: z.number().int().default(0), gate: z.string().optional(), everyMs: z.number().int().default(0) }),
  timeoutMs: 20_000,
  handler: async (p, ctx) => {
    const out = ctx.stream();
    const write = async (from: number, to: number) => {
      for (let k = from; k <= to; k++) {
        out.write(chunkAt(k));
        if (p.everyMs > 0) await new Promise((resolve) => setTimeout(resolve, p.everyMs));
      }
    };
    await write(1, p.before);
    if (p.gate) await gate(p.gate).promise; // the chunks before it are flushed meanwhile (100 ms)
    await write(p.before + 1, p.before + p.after);
    return { wrote: p.before + p.after };
  },
});

export const chunkAt = (k: number): unknown => (k % 3 === 0 ? { k, text: `object ${k}` } : k % 3 === 1 ? `line ${k}\nsecond line\r\n: not a comment` : `token ${k}`);

/** The events of an SSE response, as an async iterator (the client's parser). */
export function events(res: Response): AsyncGenerator<SseEvent> {
  if (!res.body) throw new Error('no body');
  return parseSse(res.body);
}

/** Every event until the response ends (or `end`). */
export async function allEvents(res: Response): Promise<SseEvent[]> {
  const out: SseEvent[] = [];
  for await (const e of events(res)) {
    out.push(e);
    if (e.event === 'end') break;
  }
  return out;
}

/** A driver that counts the stream reads (readChunks) it sends. */
export function countingReads(sql: Sql): { sql: Sql; reads: () => number } {
  let reads = 0;
  const seen = (s: Statement) => {
    if (s.text.includes('FROM skiplock.job_stream_chunk c') && s.text.includes('LEFT JOIN LATERAL')) reads += 1;
  };
  return {
    sql: { query: (s) => (seen(s), sql.query(s)), batch: (list) => (list.forEach(seen), sql.batch(list)), close: async () => {} },
    reads: () => reads,
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `clock`: writes `n` chunks `{ t }` (Date.now() at the write), one every `everyMs`: write → reader latency. */
export const clock: Task = defineTask({
  name: 'clock',
  payload: z.object({ n: z.number().int(), everyMs: z.number().int() }),
  timeoutMs: 20_000,
  handler: async (p, ctx) => {
    const out = ctx.stream();
    for (let k = 1; k <= p.n; k++) {
      out.write({ t: Date.now() });
      await new Promise((resolve) => setTimeout(resolve, p.everyMs));
    }
  },
});
