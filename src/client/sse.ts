/**
 * A small Server-Sent Events parser (the WHATWG event-stream format): the events of a response
 * body, as EventSource would dispatch them. Comment lines and `retry:` are skipped; an event
 * without a data line is not dispatched.
 */
export interface SseEvent {
  /** `message` unless the event named another type. */
  event: string;
  data: string;
  /** The event's `id:`, if it had one. */
  id: string | undefined;
}

/** The events of `body`; it ends when the body does, or at once when `signal` aborts (the body cancelled). */
export async function* parseSse(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<SseEvent> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  const stop = () => void reader.cancel().catch(() => {});
  signal?.addEventListener('abort', stop, { once: true });
  let buffer = '';
  let event = { type: '', data: [] as string[], id: undefined as string | undefined };
  try {
    for (;;) {
      if (signal?.aborted) return;
      const { done, value } = await reader.read();
      if (done) return;
      buffer += value;
      let end: number;
      while ((end = buffer.search(/\r\n|\r|\n/)) >= 0) {
        // A lone \r at the buffer's end may be the first half of \r\n: wait for more.
        if (buffer[end] === '\r' && end === buffer.length - 1) break;
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
        if (line === '') {
          if (event.data.length > 0) yield { event: event.type || 'message', data: event.data.join('\n'), id: event.id };
          event = { type: '', data: [], id: undefined };
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon < 0 ? line : line.slice(0, colon);
        const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'data') event.data.push(value);
        else if (field === 'event') event.type = value;
        else if (field === 'id' && !value.includes('\0')) event.id = value;
      }
    }
  } finally {
    signal?.removeEventListener('abort', stop);
    await reader.cancel().catch(() => {}); // the connection, when the caller stops early
  }
}
