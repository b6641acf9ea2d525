-- add_ticks_late_no_init.sql
-- What: gives a ticks table created before a tick could send an entry's events to late_events
--       the column that counts such entries; tables created since have it from their DDL.
--       Older rows keep it null: their ticks sent none.
-- Who runs it: pipelines.tables.upgrade_tables (`acker init`, and every run as it starts),
--              only where the column is missing.
-- Parameters: :table.
alter table identifier(:table) add columns (
    late_no_init bigint comment 'entries without init that an earlier acker opened for anchors that already had an outcome: their events went to late_events, not to expired'
)
