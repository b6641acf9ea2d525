-- select_quarantined_events.sql
-- What: the rows of this micro-batch that break the input contract, whole, with their reason.
-- Who runs it: pipelines.engine.plan_batch.
-- Reads: {classified_events} and {this_batch}.
-- Parameters: :source, the qualified ack_events table name.
select
    raw,
    quarantine_reason as reason,
    cast(:source as string) as source,
    cast(null as bigint) as source_row,
    this.batch_id,
    this.written_at as quarantined_at
from {classified_events}
cross join {this_batch} as this
where quarantine_reason is not null
