/**
 * CPU time, the cost per job that background load on a shared machine does not distort the way
 * it distorts wall-clock throughput: this process's (process.cpuUsage) and the PostgreSQL
 * server's (every process of its tree, from /proc; Linux only).
 */
import { readdirSync, readFileSync } from 'node:fs';

/** Linux reports CPU time in clock ticks of 10 ms (CLK_TCK = 100 on this machine and nearly every other). */
const TICK_MS = 10;

/**
 * CPU ms used so far by the server whose postmaster is `postmasterPid` and all its children
 * (backends, autovacuum, WAL writer…): each live child's, and the postmaster's own with its exited
 * children's (cutime, cstime), so a backend that exits keeps its CPU in the sum (counting live
 * processes only, a delta across an exit went negative).
 */
export function postgresCpuMs(postmasterPid: number): number {
  let ticks = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // pid (comm) state ppid … utime stime: fields after the last ')' start at field 3.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const pid = Number(entry);
    const ppid = Number(fields[1]);
    if (pid === postmasterPid) ticks += Number(fields[11]) + Number(fields[12]) + Number(fields[13]) + Number(fields[14]);
    else if (ppid === postmasterPid) ticks += Number(fields[11]) + Number(fields[12]);
  }
  return ticks * TICK_MS;
}

/** CPU ms used so far by one process (a backend: `SELECT pg_backend_pid()`), from /proc. */
export function pidCpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/** The postmaster's pid, from the first line of postmaster.pid in the data directory. */
export function postmasterPidOf(dataDir: string): number {
  return Number(readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
}

/** This process's CPU ms (user + system) so far. */
export function processCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}
