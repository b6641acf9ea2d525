-- select_window_outcomes.sql
-- What: every outcome still remembered for a micro-batch whose first epoch is :min_epoch +
--       tombstone_epochs: the rows of completed, failed and expired from :min_epoch on.
-- Who runs it: pipelines.engine.plan_batch, when the outcomes the writer keeps in memory are
--              not where its own last write left the three tables (a new process, or a
--              commit of another's); find_batch_tombstones.sql reads the result as
--              {window_outcomes}.
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
