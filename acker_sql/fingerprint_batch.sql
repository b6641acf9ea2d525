-- fingerprint_batch.sql
-- What: the row count and an order-free content hash of the micro-batch's input, so a replay
--       of a committed batch with the same content is recognised and skipped; and how many
--       of its rows break the input contract.
-- Who runs it: pipelines.engine.plan_batch, reading the DataFrame {batch_by_anchor}
--              (group_batch_by_anchor.sql: the rows, their hashes' sum and the quarantined
--              rows of each anchor).
-- Parameters: none.
-- Why a decimal sum: a sum of 64-bit hashes keeps duplicate rows apart (an XOR would cancel
--                    them) and cannot overflow in decimal(38, 0).
select
    concat(
        cast(coalesce(sum(rows), 0) as string),
        ':',
        cast(coalesce(sum(row_hash_sum), 0) as string)
    ) as fingerprint,
    coalesce(sum(quarantined), 0) as quarantined
from {batch_by_anchor}
