// Generated from migrations/*.sql by src/dev/migrations-data.ts (npm run migrations:data). Do not edit.

/** The ids of the migrations this skiplock ships, in order. */
export const MIGRATION_IDS: readonly number[] = [1,2,3,4,5,6,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26];

/** The newest of them: the schema version this skiplock needs. */
export const SCHEMA_VERSION = 26;
