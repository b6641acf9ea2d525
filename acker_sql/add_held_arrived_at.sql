-- add_held_arrived_at.sql
-- What: gives a held_events table created before the processing_time clock staged its events
--       the column that holds their arrival; tables created since have it from their DDL.
-- Who runs it: pipelines.tables.upgrade_tables (`acker init`, and every run as it starts),
--              only where the column is missing.
-- Parameters: :table.
alter table identifier(:table) add columns (
    arrived_at timestamp comment 'processing_time clock: when its row was committed to ack_events; null under event_time'
)
