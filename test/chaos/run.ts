/** `npm run chaos`: the full fault-injection run. `npm run chaos -- --jobs 2000 --seed 7 --runs 3`. */
import { parseArgs } from 'node:util';
import { runChaos } from './harness.ts';

const { values } = parseArgs({
  options: {
    jobs: { type: 'string', default: '10000' },
    workers: { type: 'string', default: '4' },
    seed: { type: 'string', default: String(Date.now() % 100000) },
    runs: { type: 'string', default: '1' },
  },
});

let failed = false;
for (let run = 0; run < Number(values.runs); run++) {
  const seed = Number(values.seed) + run;
  const report = await runChaos({
    jobs: Number(values.jobs),
    stepJobs: Math.round(Number(values.jobs) / 10),
    workers: Number(values.workers),
    seed,
    killEveryMs: 1_500,
    failRate: 0.02,
    killAfterClaim: 0.002,
    killMidHandler: 0.0005,
    killBeforeWrite: 0.002,
    restartPgAt: 0.4,
    pgDownMs: 1_500,
    terminateConnectionsEveryMs: 2_000,
    timeoutMs: 15 * 60_000,
    log: (line) => console.log(`  ${line}`),
  });
  const ok = report.lost === 0 && report.stuckRunning === 0 && report.duplicateSideEffects === 0 && report.staleOverwrites === 0 && report.dead === 0 && report.cronInstantsNotOnce === 0 && report.stepLost === 0 && report.stepStuck === 0 && report.stepStaleOverwrites === 0;
  failed ||= !ok;
  console.log(`${ok ? 'GREEN' : 'RED'} run ${run + 1} (seed ${seed})`);
  console.table(report);
}
process.exit(failed ? 1 : 0);
