-- set_table_property.sql
-- What: gives a table an older acker created a property this acker gives the table as it
--       creates it (pipelines.tables: each table's checkpoint interval, CHECKPOINT_INTERVALS,
--       so that the tables seldom write their Delta checkpoints in the same run; the columns
--       with file statistics of the tables that take every event, STATISTICS_COLUMNS; the
--       window in which Delta keeps the transaction id of each ingested file, IDEMPOTENCY_WINDOW,
--       of ack_events and quarantine).
-- Who runs it: `acker init` (pipelines.tables.create_tables), only where the property is
--              unset.
-- Parameters: :table; {{key}} and {{value}}, the property's Delta name and its value, as text
--             (a table property takes no parameter marker).
alter table identifier(:table)
set tblproperties ({{key}} = {{value}})
