-- set_idempotency_window.sql
-- What: gives a table created before the acker set it the window in which Delta keeps the
--       transaction id of each ingested file (ack_events and quarantine); tables created since
--       carry it from their DDL.
-- Who runs it: `acker init` (pipelines.tables.create_tables), only where the property is unset.
-- Parameters: :table; {{idempotency_window}}, a Delta calendar interval such as 'interval 30 days'
--             (a table property takes no parameter marker).
alter table identifier(:table)
set tblproperties ('delta.setTransactionRetentionDuration' = {{idempotency_window}})
