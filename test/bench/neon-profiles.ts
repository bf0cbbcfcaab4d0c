/**
 * The three traffic profiles of the Neon compute simulation (issue 22), as one UTC day each:
 * when jobs arrive. Every profile also runs one static schedule, daily at 05:00 UTC.
 */
export interface Profile {
  name: string;
  label: string;
  /** Arrival rate (jobs/s) at ms since midnight UTC. */
  rate(msOfDay: number): number;
  /** Arrivals are enqueued in one batch every batchMs (a finer grain changes no 5-minute gap). */
  batchMs: number;
}

const H = 3_600_000;
const between = (t: number, from: number, to: number) => t >= from * H && t < to * H;

export const PROFILES: readonly Profile[] = [
  { name: 'idle', label: 'idle queue, one daily schedule', rate: () => 0, batchMs: 1_000 },
  {
    name: 'bursts',
    label: '200 jobs a day in 4 bursts (09:00, 12:00, 15:00, 18:00 UTC; 50 jobs over 10 s each)',
    rate: (t) => ([9, 12, 15, 18].some((h) => t >= h * H && t < h * H + 10_000) ? 5 : 0),
    batchMs: 1_000,
  },
  {
    name: 'busy',
    label: '300,000 jobs a day: 2.55/s from 08:00 to 22:00 UTC, 50/s from 13:00 to 14:00, none at night',
    rate: (t) => (between(t, 13, 14) ? 50 : between(t, 8, 22) ? 2.55 : 0),
    batchMs: 10_000,
  },
];

/** Jobs arriving in each batch of the day: [msOfDay, count][], counts summing to the day's total. */
export function arrivals(profile: Profile): [number, number][] {
  const out: [number, number][] = [];
  let carry = 0;
  for (let t = 0; t < 24 * H; t += profile.batchMs) {
    carry += (profile.rate(t) * profile.batchMs) / 1000;
    const n = Math.floor(carry + 1e-9);
    if (n > 0) out.push([t, n]);
    carry -= n;
  }
  return out;
}
