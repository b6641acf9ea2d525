-- set_checkpoint_interval.sql
-- What: gives a table an older acker created the checkpoint interval this acker gives each
--       table as it creates it (pipelines.tables.CHECKPOINT_INTERVALS: each its own, so that
--       the tables seldom write their Delta checkpoints in the same run).
-- Who runs it: `acker init` (pipelines.tables.spread_checkpoints), only where the property is
--              unset.
-- Parameters: :table; {{interval}}, a number of commits, as text (a table property takes no
--             parameter marker).
alter table identifier(:table)
set tblproperties ('delta.checkpointInterval' = {{interval}})
