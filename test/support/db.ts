import { inject } from 'vitest';
import { createPgDriver } from '../../src/store/drivers/pg.ts';
import { sqlState, statement, type Sql } from '../../src/store/sql.ts';

export interface TestDb {
  name: string;
  url: string;
  /** A pg driver on this database. */
  sql: Sql;
  /**
   * Empties skiplock.job and, by CASCADE, every table that refers to it (job_step, cron_firing),
   * and the tables named in `also`: the state a test of jobs starts from.
   */
  emptyJobs(...also: string[]): Promise<void>;
  drop(): Promise<void>;
}

/** A fresh database for one test file: an empty, migrated copy of the template, or empty when `migrated` is false. */
export async function createTestDb(options: { migrated?: boolean } = {}): Promise<TestDb> {
  const name = `t_${crypto.randomUUID().replaceAll('-', '').slice(0, 16)}`;
  const admin = createPgDriver(inject('pgAdminUrl'), { max: 1 });
  const template = options.migrated === false ? 'template0' : 'skiplock_template';
  await admin.query(statement(`CREATE DATABASE ${name} TEMPLATE ${template}`));
  const url = inject('pgUrlTemplate').replace('DBNAME', name);
  const sql = createPgDriver(url, { max: 20 });
  return {
    name,
    url,
    sql,
    async emptyJobs(...also) {
      // A test's runner may still be ticking: its statement and the TRUNCATE can deadlock (the
      // TRUNCATE is the one cancelled), so it is tried again.
      for (let attempt = 1; ; attempt++) {
        try {
          await sql.query(statement(`TRUNCATE ${['skiplock.job_record', 'skiplock.queue', ...also].join(', ')} CASCADE`));
          return;
        } catch (error) {
          if (sqlState(error) !== '40P01' || attempt >= 5) throw error;
        }
      }
    },
    async drop() {
      await sql.close();
      await admin.query(statement(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`));
      await admin.close();
    },
  };
}
