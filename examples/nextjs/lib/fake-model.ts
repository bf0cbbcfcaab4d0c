/**
 * A stand-in for a language model's streaming API (no network, no key): it "answers" a question
 * token by token, a few tens of milliseconds apart, as a model's stream does. Swap it for your
 * model's client (its tokens arrive the same way: an async iterable).
 */
const ANSWERS: [RegExp, string][] = [
  [/postgres|database|sql/i, 'Every chunk of this answer is a row in your own PostgreSQL, written by the job as it runs and read back by the page over Server-Sent Events.'],
  [/resume|reload|refresh/i, 'Reload the page while I write: the page keeps the last chunk it saw and asks only for what came after it, so nothing is shown twice and nothing is lost.'],
];
const FALLBACK = 'This answer is written by a background job, a few words at a time, and stored as it goes: the page shows each word as soon as it is stored, and a page opened later reads it all back.';

/** The answer's tokens (words with their spaces), `delayMs` apart; stops when `signal` aborts. */
export async function* fakeAnswer(question: string, options: { delayMs?: number; signal?: AbortSignal } = {}): AsyncGenerator<string> {
  const text = ANSWERS.find(([pattern]) => pattern.test(question))?.[1] ?? FALLBACK;
  const tokens = text.match(/\S+\s*/g) ?? [];
  for (const token of tokens) {
    await pause(options.delayMs ?? 60, options.signal);
    yield token;
  }
}

function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(timer);
      reject(signal.reason);
    }, { once: true });
  });
}
