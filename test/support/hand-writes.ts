/**
 * Tests set a job's state by hand — a RUNNING job whose worker vanished, a DEAD one finished a week
 * ago — with plain SQL on skiplock.job, as they did when it was a table. Since migration 021 it is
 * a view over the record and the queue, and production leaves it read-only (an older deployment's
 * write must fail loudly). The test template alone gets these INSTEAD OF triggers, which route a
 * hand-written row the way the statements of src/store keep the two tables: a live job's state in
 * its queue row, every job's whole row in its record (the record's CHECKs judge it, the queue's
 * too while it is live). Nothing in src/ writes through the view: src/store tests that.
 */
import { JOB_ROW, QUEUE_COLUMNS } from '../../src/store/queue.ts';
import { statement, type Statement } from '../../src/store/sql.ts';

/** The view's columns the trigger writes into the record (failed_status and failed_at it derives from the status). */
const JOB = JOB_ROW.filter((c) => c !== 'failed_status' && c !== 'failed_at');
const QUEUE = QUEUE_COLUMNS;
const DEFAULTS: Record<string, string> = {
  payload: `'{}'::jsonb`, status: `'QUEUED'`, priority: '0', run_at: 'now()', attempts: '0', max_attempts: '5', timeout_ms: '10000',
  cancel_requested: 'false', created_at: 'now()', updated_at: 'now()', history: `'[]'::jsonb`, pending_children: '0', step_count: '0',
  wait_woken: 'false',
};

const list = (cols: readonly string[], prefix = '') => cols.map((c) => prefix + c).join(', ');
/** The record's values of NEW: a WAITING job's queue row may have no run_at; the record's is a placeholder then. */
const recordValues = (cols: readonly string[]) => cols.map((c) => (c === 'run_at' ? 'coalesce(NEW.run_at, now())' : `NEW.${c}`)).join(', ');
const live = `NEW.status IN ('QUEUED', 'RUNNING', 'WAITING')`;
/** The record's failed_status (migration 021) and failed_at (migration 025) of the row written. */
const FAILED = `CASE WHEN NEW.status IN ('DEAD', 'CANCELLED') THEN NEW.status END, CASE WHEN NEW.status IN ('DEAD', 'CANCELLED') THEN NEW.finished_at END`;

export const HAND_WRITES: Statement[] = [
  ...Object.entries(DEFAULTS).map(([c, v]) => statement(`ALTER VIEW skiplock.job ALTER COLUMN ${c} SET DEFAULT ${v}`)),
  statement(`ALTER VIEW skiplock.job ALTER COLUMN id SET DEFAULT nextval(pg_get_serial_sequence('skiplock.job_record', 'id'))`),
  statement(`CREATE FUNCTION skiplock.test_hand_write() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'DELETE' THEN
    DELETE FROM skiplock.queue WHERE id = OLD.id;
    DELETE FROM skiplock.job_record WHERE id = OLD.id;
    RETURN OLD;
  END IF;
  IF TG_OP = 'INSERT' THEN
    INSERT INTO skiplock.job_record (${list(JOB)}, failed_status, failed_at) OVERRIDING SYSTEM VALUE VALUES (${recordValues(JOB)}, ${FAILED});
  ELSE
    -- A live job's queue row goes first: a record that ends then passes its CHECKs alone.
    IF NOT (${live}) THEN DELETE FROM skiplock.queue WHERE id = OLD.id; END IF;
    UPDATE skiplock.job_record SET (${list(JOB.slice(1))}, failed_status, failed_at) = (${recordValues(JOB.slice(1))}, ${FAILED}) WHERE id = OLD.id;
  END IF;
  IF ${live} THEN
    INSERT INTO skiplock.queue (${list(QUEUE)}) VALUES (${list(QUEUE, 'NEW.')})
    ON CONFLICT (id) DO UPDATE SET (${list(QUEUE)}) = (${list(QUEUE, 'excluded.')});
  END IF;
  RETURN NEW;
END $$`),
  statement(`CREATE TRIGGER test_hand_write INSTEAD OF INSERT OR UPDATE OR DELETE ON skiplock.job
               FOR EACH ROW EXECUTE FUNCTION skiplock.test_hand_write()`),
];
