-- select_outcome_anchors.sql
-- What: every anchor that has an outcome, with it: the rows of completed, failed and expired,
--       all of them (an anchor gets one outcome, however late its events come), and the epoch
--       of the batch or tick that wrote each.
-- Who runs it: pipelines.engine.plan_batch, when the outcomes the writer keeps in memory are
--              not where its own last write left the three tables (a new process, or a
--              commit of another's), and pipelines.engine.tick; find_batch_tombstones.sql
--              and reborn_entries.sql read the result as {outcome_anchors}.
-- Parameters: :completed, :failed, :expired (tables).
-- Cost: five narrow columns of every outcome row, read once per process: see
--       docs/semantics.md, resolving a tree.
select anchor_id, 'completed' as outcome, reason, batch_id, epoch
from identifier(:completed)
union all
select anchor_id, 'failed' as outcome, reason, batch_id, epoch
from identifier(:failed)
union all
select anchor_id, 'expired' as outcome, reason, batch_id, epoch
from identifier(:expired)
