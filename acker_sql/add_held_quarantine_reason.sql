-- add_held_quarantine_reason.sql
-- What: gives a held_events table created before the event_time stager marked implausible
--       event times the column it marks them in; tables created since have it from their DDL.
-- Who runs it: pipelines.tables.upgrade_tables (`acker init`, and every run as it starts),
--              only where the column is missing.
-- Parameters: :table.
alter table identifier(:table) add columns (
    quarantine_reason string comment 'set when staged: event_time_in_future | event_time_far_from_batch (then the next micro-batch quarantines it); null otherwise'
)
