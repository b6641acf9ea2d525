-- select_window_outcomes.sql
-- What: every outcome still remembered for a micro-batch whose first epoch is :min_epoch +
--       tombstone_epochs: the rows of completed, failed and expired from :min_epoch on.
-- Who runs it: pipelines.engine.process_batch, when the outcomes it keeps in memory are not
--              where the writer's own last write left the three tables (a new process, or a
--              commit of another's); the result is bound as the temp view `window_outcomes`.
-- Parameters: :completed, :failed, :expired (tables); :min_epoch.
select anchor_id, 'completed' as outcome, reason, batch_id, epoch
from identifier(:completed)
where epoch >= :min_epoch
union all
select anchor_id, 'failed' as outcome, reason, batch_id, epoch
from identifier(:failed)
where epoch >= :min_epoch
union all
select anchor_id, 'expired' as outcome, reason, batch_id, epoch
from identifier(:expired)
where epoch >= :min_epoch
