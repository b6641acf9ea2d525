-- add_late_events_tick_epoch.sql
-- What: gives a late_events table created before a tick could write late events the column
--       that names that tick; tables created since have it from their DDL. Older rows keep it
--       null: a micro-batch found them.
-- Who runs it: pipelines.tables.upgrade_tables (`acker init`, and every run as it starts),
--              only where the column is missing.
-- Parameters: :table.
alter table identifier(:table) add columns (
    tick_epoch bigint comment 'null when a micro-batch found the event late; else the epoch of the tick that found it, in an entry without init that an earlier acker opened for an anchor that already had an outcome'
)
