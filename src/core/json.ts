/**
 * What PostgreSQL refuses to store, checked before anything is written: text and jsonb cannot
 * hold U+0000, jsonb refuses unpaired UTF-16 surrogates (JSON.stringify writes them as \uD800),
 * and very deep nesting overflows JSON.stringify and the server's parser alike.
 */
import type { ErrorIssue } from './issue.ts';

/** Nesting deeper than this is refused in stored JSON (payloads). */
export const MAX_JSON_DEPTH = 64;

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

const LONE_SURROGATES = new RegExp(LONE_SURROGATE.source, 'g');

/** The same text with what PostgreSQL refuses written as escapes (`\\u0000`), for messages such as last_error. */
export function storableText(text: string): string {
  return text.replaceAll('\u0000', '\\u0000').replace(LONE_SURROGATES, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
}

/** Why a string cannot be stored as text, or undefined when it can. */
export function unstorableText(text: string): string | undefined {
  if (text.includes('\u0000')) return 'must not contain the NUL character (U+0000)';
  if (LONE_SURROGATE.test(text)) return 'must not contain an unpaired UTF-16 surrogate';
  return undefined;
}

/**
 * The first part of `value` that cannot be stored as jsonb, or undefined when all of it can.
 * Iterative, so hostile nesting cannot overflow the stack here either.
 */
export function findUnstorableJson(value: unknown, path: (string | number)[] = [], maxDepth = MAX_JSON_DEPTH): ErrorIssue | undefined {
  const stack: { value: unknown; path: (string | number)[] }[] = [{ value, path }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    const depth = item.path.length - path.length;
    const at = item.value;
    if (typeof at === 'string') {
      const problem = unstorableText(at);
      if (problem) return { path: item.path, message: `a string ${problem}` };
    } else if (typeof at === 'bigint' || typeof at === 'function' || typeof at === 'symbol') {
      return { path: item.path, message: `a ${typeof at} is not JSON` };
    } else if (typeof at === 'object' && at !== null && typeof (at as { toJSON?: unknown }).toJSON !== 'function') {
      if (depth >= maxDepth) return { path: item.path, message: `nested deeper than ${maxDepth} levels` };
      const entries: [string | number, unknown][] = Array.isArray(at) ? at.map((v, i) => [i, v]) : Object.entries(at);
      for (const [key, child] of entries) {
        if (typeof key === 'string') {
          const problem = unstorableText(key);
          if (problem) return { path: item.path, message: `a key ${problem}` };
        }
        stack.push({ value: child, path: [...item.path, key] });
      }
    }
  }
  return undefined;
}

/** True when `value` nests objects or arrays more than `maxDepth` levels deep (iterative). */
export function nestsDeeperThan(value: unknown, maxDepth: number): boolean {
  const stack: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  while (stack.length > 0) {
    const { value: at, depth } = stack.pop()!;
    if (typeof at !== 'object' || at === null) continue;
    if (depth >= maxDepth) return true;
    for (const child of Array.isArray(at) ? at : Object.values(at)) stack.push({ value: child, depth: depth + 1 });
  }
  return false;
}
