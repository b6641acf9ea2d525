-- enable_change_feed.sql
-- What: gives an ack_events table created before the processing_time clock dated arrivals its
--       change data feed, whose rows carry their commit's timestamp; tables created since have
--       it from their DDL.
-- Who runs it: pipelines.tables.upgrade_tables (`acker init`, and every run as it starts),
--              only where the feed is off.
-- Parameters: :table.
alter table identifier(:table)
set tblproperties ('delta.enableChangeDataFeed' = 'true')
