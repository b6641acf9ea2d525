-- select_quarantined_events.sql
-- What: the rows of this micro-batch that break the input contract, whole, with their reason.
-- Who runs it: pipelines.engine.plan_batch.
-- Parameters: :batch_id; :source, the qualified ack_events table name.
select
    raw,
    quarantine_reason as reason,
    cast(:source as string) as source,
    cast(null as bigint) as source_row,
    cast(:batch_id as bigint) as batch_id,
    current_timestamp() as quarantined_at
from {classified_events}
where quarantine_reason is not null
