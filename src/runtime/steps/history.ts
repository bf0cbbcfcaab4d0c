/**
 * The determinism rule in one place (docs/steps.md, "The determinism rule" and "Changing a
 * workflow's code"): how a run's calls of ctx.step / ctx.sleep / ctx.invoke / ctx.patched are
 * matched against the job's recorded steps. The run (src/runtime/steps/steps.ts) and the replay check
 * (src/runtime/steps/replay.ts) both walk the history through this cursor, so they cannot disagree.
 *
 * Markers (kind `patch`, recorded by ctx.patched) are transparent to the other steps: a step
 * reached where a marker is recorded skips it. So code that no longer calls `patched` (the patch
 * removed once no run predates it) still replays a history that has the marker.
 */
import type { StepKind } from '../../core/types.ts';
import type { StoredStep } from './types.ts';

/** The id a ctx.patched marker is stored under (the table's key is shared with step ids). */
export const markerId = (patchId: string): string => `patched:${patchId}`;

export type Reached =
  | { ok: true; seq: number; row: StoredStep | undefined }
  /** `transient`: the mismatch follows a marker this code never asked about, so a newer version wrote the history. */
  | { ok: false; message: string; transient: boolean };

export interface HistoryCursor {
  /** Matches a step, sleep or invoke against the history; new steps get the next free seq. */
  reach(id: string, kind: Exclude<StepKind, 'patch'>): Reached;
  /** ctx.patched: the answer, and the marker to record (with the next step write) when it is true and new. */
  patched(patchId: string): { value: boolean; marker?: { id: string; seq: number } };
  /** Recorded steps (not markers) no call has reached yet, in order. */
  unreached(): StoredStep[];
  /** The next recorded entry (a marker too) no call has reached: where a run that stops here would go on. */
  next(): StoredStep | undefined;
}

export function createHistoryCursor(stored: readonly StoredStep[]): HistoryCursor {
  const cursor = openCursor(stored);
  return {
    reach: (id, kind) => reach(cursor, id, kind),
    patched: (patchId) => patched(cursor, patchId),
    unreached: () => cursor.recorded.slice(cursor.pos).filter((s) => s.kind !== 'patch'),
    next: () => cursor.recorded[cursor.pos],
  };
}

/** Where a walk of the history stands. */
interface Cursor {
  /** The recorded steps and markers, in seq order. */
  readonly recorded: readonly StoredStep[];
  readonly byId: ReadonlyMap<string, StoredStep>;
  /** The answers ctx.patched gave in this walk, by patch id. */
  readonly asked: Map<string, boolean>;
  /** The first recorded entry no call has reached. */
  pos: number;
  /** The seq a new step takes. */
  nextSeq: number;
}

function openCursor(stored: readonly StoredStep[]): Cursor {
  const recorded = [...stored].sort((a, b) => a.seq - b.seq);
  return {
    recorded,
    byId: new Map(recorded.map((s) => [s.id, s])),
    asked: new Map<string, boolean>(),
    pos: 0,
    nextSeq: recorded.reduce((max, s) => Math.max(max, s.seq + 1), 0),
  };
}

/** Moves past the markers at the cursor; says whether one of them was never asked about. */
function skipMarkers(c: Cursor): string | undefined {
  let unknown: string | undefined;
  while (c.recorded[c.pos]?.kind === 'patch') {
    const id = c.recorded[c.pos]!.id;
    if (!c.asked.has(id.slice('patched:'.length))) unknown ??= id;
    c.pos += 1;
  }
  return unknown;
}

function reach(c: Cursor, id: string, kind: Exclude<StepKind, 'patch'>): Reached {
  const unknown = skipMarkers(c);
  const there = c.recorded[c.pos];
  const row = c.byId.get(id);
  const fail = (message: string): Reached => ({
    ok: false,
    transient: unknown !== undefined,
    message: unknown === undefined ? message
      : `${message} (after the marker ${JSON.stringify(unknown)}, which this code does not ask about: a newer version of the task wrote this history, so another attempt may run on it)`,
  });
  if (row && row.kind === 'patch') return fail(`non-deterministic steps: ${JSON.stringify(id)} is the marker of a ctx.patched in an earlier run and a ctx.${kind} now`);
  if (row && row !== there)
    return fail(`non-deterministic steps: ${JSON.stringify(id)} was step ${row.seq} of an earlier run and is step ${there ? there.seq : c.nextSeq} now` +
      `${there ? ` (where ${JSON.stringify(there.id)} was recorded)` : ''}; a handler must reach its steps in the same order on every run`);
  if (!row && there)
    return fail(`non-deterministic steps: step ${there.seq} was ${JSON.stringify(there.id)} (${there.kind}) in an earlier run, and is ${JSON.stringify(id)} (${kind}) now; a handler must reach its steps in the same order on every run`);
  if (row && row.kind !== kind) return fail(`non-deterministic steps: ${JSON.stringify(id)} was a ctx.${row.kind} in an earlier run and is a ctx.${kind} now`);
  if (row) {
    c.pos += 1;
    return { ok: true, seq: row.seq, row };
  }
  return { ok: true, seq: c.nextSeq++, row: undefined };
}

function patched(c: Cursor, patchId: string): { value: boolean; marker?: { id: string; seq: number } } {
  const known = c.asked.get(patchId);
  if (known !== undefined) return { value: known };
  const id = markerId(patchId);
  const row = c.byId.get(id);
  let answer: { value: boolean; marker?: { id: string; seq: number } };
  if (row?.kind === 'patch') {
    // A run that reached this point took the patched path: so does every later run.
    if (c.recorded[c.pos] === row) c.pos += 1;
    answer = { value: true };
  } else {
    // Fresh from here (nothing recorded past the markers at the cursor): the new path, recorded.
    let rest = c.pos;
    while (c.recorded[rest]?.kind === 'patch') rest += 1;
    answer = rest >= c.recorded.length ? { value: true, marker: { id, seq: c.nextSeq++ } } : { value: false };
  }
  c.asked.set(patchId, answer.value);
  return answer;
}
