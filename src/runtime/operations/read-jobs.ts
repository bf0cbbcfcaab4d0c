/**
 * Reading jobs by hand: one job with its steps and children, a page of jobs (newest first) and the
 * opaque cursors between pages. Reads only; the SQL is in src/store/admin.ts and job-detail.ts.
 */
import { checkRange, SkiplockError } from '../../core/errors.ts';
import { unstorableText } from '../../core/json.ts';
import { isJobId } from '../../core/job-id.ts';
import type { Job, JobDetail, JobStatus } from '../../core/types.ts';
import { getJob, listJobs } from '../../store/admin.ts';
import { getJobDetail, mapJobDetail } from '../../store/job-detail.ts';
import { mapJob } from '../../store/rows.ts';
import type { Sql } from '../../store/sql.ts';
import type { SkiplockContext } from '../context.ts';

export const LIST_LIMIT = { default: 50, max: 500 } as const;

export interface ListJobsOptions {
  status?: JobStatus;
  task?: string;
  /** Page size, 1 to 500. Default 50. */
  limit?: number;
  /** `nextCursor` of the previous page; omitted for the first page. */
  cursor?: string;
}

export interface JobPage {
  /** Newest first. */
  jobs: Job[];
  /** Pass it as `cursor` for the next page; null on the last page. */
  nextCursor: string | null;
}

export interface JobReads {
  /**
   * One job with its durable steps (in the order its handler reached them) and its children (the
   * first 1000 by id), in one statement; undefined when there is no such job.
   */
  getJobDetail(id: string): Promise<JobDetail | undefined>;
  /** One page of jobs, newest first; throws invalid_request for a bad cursor or limit. */
  listJobs(options?: ListJobsOptions): Promise<JobPage>;
}

export function createJobReads({ sql }: Pick<SkiplockContext, 'sql'>): JobReads {
  return {
    async getJobDetail(id) {
      if (!isJobId(id)) return undefined;
      const [row] = await sql.query(getJobDetail({ id }));
      return row ? mapJobDetail(row) : undefined;
    },
    async listJobs(options = {}) {
      const limit = options.limit ?? LIST_LIMIT.default;
      checkRange('limit', limit, LIST_LIMIT.max);
      const beforeId = options.cursor === undefined ? null : decodeCursor(options.cursor);
      const taskProblem = options.task === undefined ? undefined : unstorableText(options.task);
      if (taskProblem) throw new SkiplockError('invalid_request', `invalid task: it ${taskProblem}`, [{ path: ['task'], message: taskProblem }]);
      // One row more than asked tells whether another page exists.
      const rows = await sql.query(
        listJobs({ status: options.status ?? null, task: options.task ?? null, beforeId, limit: limit + 1 }),
      );
      const jobs = rows.slice(0, limit).map(mapJob);
      const last = jobs[jobs.length - 1];
      return { jobs, nextCursor: rows.length > limit && last ? encodeCursor(last.id) : null };
    },
  };
}

/** One job by its id (skiplock.getJob); undefined when there is none, or the id is not a job id. */
export async function readJob(sql: Sql, id: string): Promise<Job | undefined> {
  if (!isJobId(id)) return undefined;
  const [row] = await sql.query(getJob({ id }));
  return row ? mapJob(row) : undefined;
}

/*
 * Cursors are opaque to clients: base64url of "j" + the last id of the page. Only the format is
 * checked when decoding; a cursor whose job was deleted still pages correctly (id < cursor).
 */
export function encodeCursor(id: string): string {
  return btoa(`j${id}`).replaceAll('+', '-').replaceAll('/', '_').replace(/=+$/, '');
}

export function decodeCursor(cursor: string): string {
  const invalid = () => new SkiplockError('invalid_request', 'invalid cursor', [{ path: ['cursor'], message: 'not a cursor from a previous page' }]);
  if (!/^[A-Za-z0-9_-]{2,40}$/.test(cursor)) throw invalid();
  let text: string;
  try {
    text = atob(cursor.replaceAll('-', '+').replaceAll('_', '/'));
  } catch {
    throw invalid();
  }
  const id = /^j(\d+)$/.exec(text)?.[1];
  if (id === undefined || !isJobId(id)) throw invalid();
  return id;
}
