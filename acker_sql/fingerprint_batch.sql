-- fingerprint_batch.sql
-- What: the row count and an order-free content hash of the micro-batch's input, so a replay
--       of a committed batch with the same content is recognised and skipped; and how many
--       of its rows break the input contract.
-- Who runs it: pipelines.engine.plan_batch, reading the DataFrame {classified_events}.
-- Parameters: none.
-- Why a decimal sum: a sum of 64-bit hashes keeps duplicate rows apart (an XOR would cancel
--                    them) and cannot overflow in decimal(38, 0).
select
    concat(
        cast(count(*) as string),
        ':',
        cast(coalesce(sum(cast(row_hash as decimal(38, 0))), 0) as string)
    ) as fingerprint,
    count_if(quarantine_reason is not null) as quarantined
from {classified_events}
