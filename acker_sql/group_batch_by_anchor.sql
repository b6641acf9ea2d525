-- group_batch_by_anchor.sql
-- What: the micro-batch's rows grouped by anchor: whether the anchor has a valid event, its
--       rows, the sum of their row hashes, and how many of them break the input contract.
--       The batch's fingerprint (fingerprint_batch.sql) and its anchors
--       (select_batch_anchors.sql) are read from these rows.
-- Who runs it: pipelines.engine.plan_batch, reading the DataFrame {classified_events}; it
--              materialises the result once for the fingerprint and both look-ups.
-- Parameters: none.
-- Why one step: the fingerprint and the anchors each read every event of the batch; grouped
--     once, both read a row per anchor. A decimal sum per anchor, as the fingerprint's, so
--     that the sum of the anchors' sums is the sum of every row's hash.
select
    anchor_id,
    count_if(quarantine_reason is null) > 0 as has_valid_event,
    count(*) as rows,
    sum(cast(row_hash as decimal(38, 0))) as row_hash_sum,
    count_if(quarantine_reason is not null) as quarantined
from {classified_events}
group by anchor_id
