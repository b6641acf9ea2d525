-- add_batches_through_epoch.sql
-- What: gives a batches table created before a micro-batch could apply several epochs at once
--       the column that says how far it applied; tables created since have it from their DDL.
--       Older rows keep it null: each applied its own epoch only.
-- Who runs it: pipelines.tables.upgrade_tables (`acker init`, and every run as it starts),
--              only where the column is missing.
-- Parameters: :table.
alter table identifier(:table) add columns (
    through_epoch bigint comment 'the last epoch whose events the batch applied: epoch, or a later one for a pass over several epochs, whose ticks follow it'
)
