/**
 * takeBatch: which pending results one statement writes. A child's result never goes with its
 * parent's: a statement updates a row once, and the child's fan-in (src/store/steps.ts) updates
 * the parent, so writing both at once would lose the child's end on the parent.
 */
import { expect, test } from 'vitest';
import { done } from '../../src/core/state.ts';
import type { Job } from '../../src/core/types.ts';
import { takeBatch, type PendingResult } from '../../src/runtime/tick/results.ts';

const result = (id: string, parentId: string | null = null): PendingResult => ({ job: { id, parentId } as Job, outcome: done(null) });
const ids = (results: readonly PendingResult[]) => results.map((r) => r.job.id);

test('without child jobs, every pending result goes in one batch', () => {
  const pending = [result('1'), result('2'), result('3')];
  expect(ids(takeBatch(pending))).toEqual(['1', '2', '3']);
  expect(pending).toEqual([]);
});

test("a child whose parent's result is pending waits for the next batch; other children do not", () => {
  const pending = [result('10'), result('11', '10'), result('12', '99'), result('13')];
  expect(ids(takeBatch(pending))).toEqual(['10', '12', '13']);
  expect(ids(pending)).toEqual(['11']);
  expect(ids(takeBatch(pending))).toEqual(['11']);
  expect(pending).toEqual([]);
});
