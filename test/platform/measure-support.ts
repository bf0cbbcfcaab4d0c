/** What the measurement scripts against a running stack share: a job read until it finished, and percentiles. */

export interface JobTimes { id: string; status: string; createdAt: string; runAt: string; finishedAt: string | null }

/** GET the job until it has finished (or throw after timeoutMs). */
export async function finishedJob(base: string, headers: Record<string, string>, id: string, timeoutMs: number): Promise<JobTimes> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = ((await (await fetch(`${base}/v1/jobs/${id}`, { headers })).json()) as { job: JobTimes }).job;
    if (job.finishedAt) return job;
    if (Date.now() > deadline) throw new Error(`job ${id} still ${job.status} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** One line: n, p50, p90, p99, max. */
export function summary(label: string, ms: number[]): void {
  const sorted = [...ms].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil(p * sorted.length) - 1)]!;
  console.log(`${label}: n=${sorted.length} p50=${at(0.5)} ms p90=${at(0.9)} ms p99=${at(0.99)} ms max=${sorted.at(-1)} ms`);
}
