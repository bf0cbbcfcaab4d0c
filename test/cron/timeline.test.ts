import { CronExpressionParser } from 'cron-parser';
import { describe, expect, test } from 'vitest';
import { parseTiming, type Timing } from '../../src/core/schedule.ts';
import { timelineOf } from '../../src/core/schedule-timeline.ts';

const MIN = 60_000;
const HOUR = 60 * MIN;

function timing(input: Parameters<typeof parseTiming>[0]): Timing {
  const parsed = parseTiming(input, 'test');
  if (!('timing' in parsed)) throw new Error(JSON.stringify(parsed.issues));
  return parsed.timing;
}

/** The reference: one continuous cron-parser walk from well before the window. */
function reference(cron: string, tz: string, from: Date, until: Date): number[] {
  const it = CronExpressionParser.parse(cron, { tz, hashSeed: 'test', currentDate: from });
  const out: number[] = [];
  for (let d = it.next().toDate(); d <= until; d = it.next().toDate()) out.push(d.getTime());
  return out;
}

const transitions = [
  { tz: 'Europe/Oslo', at: '2026-03-29T01:00:00Z' },
  { tz: 'Europe/Oslo', at: '2026-10-25T01:00:00Z' },
  { tz: 'America/New_York', at: '2026-03-08T07:00:00Z' },
  { tz: 'America/New_York', at: '2026-11-01T06:00:00Z' },
];
const expressions = ['30 2 * * *', '0 30 2 * * *', '15 * * * *', '*/20 * * * *', '0 3 * * *', '45 1,2,3 * * *', '0 */15 * * * *'];

describe('cron instants do not depend on where the watermark lands near a DST change', () => {
  for (const { tz, at } of transitions) {
    for (const cron of expressions) {
      test(`${cron} in ${tz} around ${at}`, () => {
        const t = new Date(at).getTime();
        const timeline = timelineOf(timing({ cron, tz }), 'test');
        const end = new Date(t + 40 * HOUR);
        const all = reference(cron, tz, new Date(t - 30 * HOUR), end);
        for (let s = t - 4 * HOUR; s <= t + 4 * HOUR; s += 11 * MIN + 1000) {
          const after = new Date(s);
          const expected = all.filter((x) => x > s && x <= s + 8 * HOUR);
          expect(timeline.between(after, new Date(s + 8 * HOUR), 10_000).map((d) => d.getTime()), `between from ${after.toISOString()}`).toEqual(expected);
          expect(timeline.next(after)?.getTime(), `next from ${after.toISOString()}`).toBe(all.find((x) => x > s));
          for (const u of [s + 7 * MIN, s + 50 * MIN, s + 2 * HOUR, s + 6 * HOUR, s + 25 * HOUR]) {
            const inWindow = all.filter((x) => x > s && x <= u);
            expect(timeline.latest(after, new Date(u))?.getTime() ?? null, `latest in (${after.toISOString()}, ${new Date(u).toISOString()}]`).toBe(inWindow.at(-1) ?? null);
          }
        }
      });
    }
  }
});
