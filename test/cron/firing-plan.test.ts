/** The pure part of firing: which instants a tick fires, and where the watermark goes. */
import { expect, test } from 'vitest';
import { planFiring, type FiringPolicy } from '../../src/core/firing-plan.ts';
import { parseTiming } from '../../src/core/schedule.ts';
import { timelineOf } from '../../src/core/schedule-timeline.ts';

const minutely = (() => {
  const parsed = parseTiming({ cron: '* * * * *' }, 'p');
  if (!('timing' in parsed)) throw new Error('bad timing');
  return timelineOf(parsed.timing, 'p');
})();
const policy = (p: Partial<FiringPolicy>): FiringPolicy => ({ catchUp: 'all', overlap: 'allow', maxFiringsPerTick: 100, ...p });
const at = (iso: string) => new Date(iso);
const plan = (p: Partial<FiringPolicy>, now = '2026-01-05T10:10:30Z') => {
  const result = planFiring(minutely, policy(p), at('2026-01-05T10:00:30Z'), at(now));
  return { ...result, instants: result.instants.map((d) => d.toISOString().slice(11, 16)) };
};

test('all, bounded: stops at the last fired instant so the next tick continues', () => {
  expect(plan({})).toMatchObject({ instants: ['10:01', '10:02', '10:03', '10:04', '10:05', '10:06', '10:07', '10:08', '10:09', '10:10'], advanceTo: at('2026-01-05T10:10:30Z'), nextRunAt: at('2026-01-05T10:11:00Z') });
  expect(plan({ maxFiringsPerTick: 3 })).toMatchObject({ instants: ['10:01', '10:02', '10:03'], advanceTo: at('2026-01-05T10:03:00Z'), nextRunAt: at('2026-01-05T10:04:00Z') });
  // Busy (overlap 'skip' with a live job): everything due is skipped.
  expect(plan({ maxFiringsPerTick: 3 })).toMatchObject({ busyAdvanceTo: at('2026-01-05T10:10:30Z'), busyNextRunAt: at('2026-01-05T10:11:00Z') });
  expect(plan({ overlap: 'skip' })).toMatchObject({ instants: ['10:01'], advanceTo: at('2026-01-05T10:01:00Z') });
});

test('latest and none', () => {
  expect(plan({ catchUp: 'latest' })).toMatchObject({ instants: ['10:10'], advanceTo: at('2026-01-05T10:10:30Z') });
  expect(plan({ catchUp: 'none' })).toMatchObject({ instants: ['10:10'] });
  expect(plan({ catchUp: 'none' }, '2026-01-05T10:11:00.001Z')).toMatchObject({ instants: ['10:11'] });
  expect(plan({ catchUp: 'none' }, '2026-01-05T10:10:59.999Z')).toMatchObject({ instants: ['10:10'] });
  // A clock behind the watermark fires nothing and moves nothing.
  expect(plan({}, '2026-01-05T09:00:00Z')).toMatchObject({ instants: [], advanceTo: at('2026-01-05T10:00:30Z'), nextRunAt: at('2026-01-05T10:01:00Z') });
});

test('none skips an instant more than a minute old', () => {
  const hourly = parseTiming({ cron: '0 * * * *' }, 'p');
  if (!('timing' in hourly)) throw new Error('bad timing');
  const result = planFiring(timelineOf(hourly.timing, 'p'), policy({ catchUp: 'none' }), at('2026-01-05T09:30:00Z'), at('2026-01-05T10:01:00.001Z'));
  expect(result).toMatchObject({ instants: [], advanceTo: at('2026-01-05T10:01:00.001Z'), nextRunAt: at('2026-01-05T11:00:00Z') });
});

test('every: aligned to the epoch', () => {
  const every = parseTiming({ every: '15m' }, 'p');
  if (!('timing' in every)) throw new Error('bad timing');
  const timeline = timelineOf(every.timing, 'p');
  expect(timeline.between(at('2026-01-05T10:00:00Z'), at('2026-01-05T10:45:00Z'), 10).map((d) => d.toISOString())).toEqual([
    '2026-01-05T10:15:00.000Z',
    '2026-01-05T10:30:00.000Z',
    '2026-01-05T10:45:00.000Z',
  ]);
  expect(timeline.latest(at('2026-01-05T10:00:00Z'), at('2026-01-05T10:44:59Z'))?.toISOString()).toBe('2026-01-05T10:30:00.000Z');
  expect(timeline.next(at('2026-01-05T10:15:00Z'))?.toISOString()).toBe('2026-01-05T10:30:00.000Z');
});

test('H is hashed from the schedule name: the same instants in every process', () => {
  const instants = (name: string) => {
    const parsed = parseTiming({ cron: 'H * * * *' }, name);
    if (!('timing' in parsed)) throw new Error('bad timing');
    return timelineOf(parsed.timing, name).between(at('2026-01-05T10:00:00Z'), at('2026-01-05T13:00:00Z'), 10).map((d) => d.toISOString());
  };
  expect(instants('report')).toEqual(instants('report'));
  expect(instants('report')).toHaveLength(3);
});
