import { expect, test } from 'vitest';
import { runChaos } from './harness.ts';

test('a short chaos run loses nothing, leaves nothing RUNNING, applies no side effect twice', async () => {
  const report = await runChaos({
    jobs: 1_500,
    stepJobs: 150,
    workers: 3,
    seed: 42,
    killEveryMs: 1_000,
    failRate: 0.03,
    killAfterClaim: 0.005,
    killMidHandler: 0.002,
    killBeforeWrite: 0.005,
    restartPgAt: 0.3,
    pgDownMs: 500,
    terminateConnectionsEveryMs: 1_000,
    timeoutMs: 120_000,
    minCronFirings: 5,
  });
  console.log(JSON.stringify(report)); // the figures, also when an expectation below fails
  expect(report).toMatchObject({ done: 1_500, lost: 0, stuckRunning: 0, dead: 0, duplicateSideEffects: 0, staleOverwrites: 0, cronInstantsNotOnce: 0, pgRestarts: 1 });
  // Durable steps: every step job and child DONE, every keyed step effect there, nothing left waiting.
  expect(report).toMatchObject({ stepJobsDone: 150, stepChildrenDone: 300, stepLost: 0, stepStuck: 0, stepStaleOverwrites: 0 });
  expect(report.cronFirings).toBeGreaterThanOrEqual(5);
  expect(report.workerKills + report.injectedCrashes).toBeGreaterThan(0);
}, 150_000);
