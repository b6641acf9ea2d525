-- classify_batch_events.sql
-- What: tags every row of the micro-batch with the reason it must be quarantined (null if
--       valid: the input contract, input_contract.sql, or a reason decided before the batch)
--       and normalises the value of fail/reset rows, which the acker ignores. Columns beyond
--       the ack_events ones (ingest's file and line number) pass through unchanged.
-- Who runs it: pipelines.engine.plan_batch, reading the DataFrame {batch_events}, and
--              pipelines.ingest over the rows of one input file.
-- Reads: {batch_events}: ack_events rows plus `staged_reason`, a reason decided
--        before the batch (the event_time stager's, see pipelines.staging), null otherwise.
-- Parameters: none.
-- Why `raw` only for quarantined rows: rendering every row as JSON made this step and the
--     fingerprint take 20-23 s for 5M events instead of 4-7 s; valid rows need only
--     `row_hash`, for the batch's fingerprint.
with batch_rows as (
    select * from {batch_events}
),

reasoned as (
    select
        *,
        -- a reason decided before the batch counts only for a row the contract admits
        coalesce({{include input_contract}}, staged_reason) as quarantine_reason
    from batch_rows
),

final as (
    select
        * except (xor_value, staged_reason, quarantine_reason),
        case when event_type in ('fail', 'reset') then null else xor_value end as xor_value,
        -- xxhash64 skips null arguments, so which columns are null is hashed too
        xxhash64(
            anchor_id, event_type, xor_value, spout_task, source_msg_id, component, event_time,
            event_id,
            cast(anchor_id is null as int) + 2 * cast(event_type is null as int)
            + 4 * cast(xor_value is null as int) + 8 * cast(spout_task is null as int)
            + 16 * cast(source_msg_id is null as int) + 32 * cast(component is null as int)
            + 64 * cast(event_time is null as int) + 128 * cast(event_id is null as int)
        ) as row_hash,
        case when quarantine_reason is not null then to_json(
            struct(
                anchor_id,
                event_type,
                xor_value,
                spout_task,
                source_msg_id,
                component,
                event_time,
                event_id
            )
        ) end as raw,
        quarantine_reason
    from reasoned
)

select * from final
