-- count_touched_pending.sql
-- What: of the pending rows a micro-batch touches, how many hold an outcome (rows an earlier
--       batch resolved, which the count of pending still includes) and how many hold more
--       keys than :large_tree_keys (mark_redeliveries.sql then plans its intersection branch).
-- Who runs it: pipelines.engine.plan_batch, reading the DataFrame {touched_pending}.
-- Parameters: :large_tree_keys.
select
    count_if(outcome is not null) as resolved,
    count_if(greatest(size(applied_keys), size(prev.applied_keys)) > :large_tree_keys) as large
from {touched_pending}
