-- delete_held_slice.sql
-- What: removes the staged events of a slice once its micro-batch has committed
--       (the same rows as select_held_slice.sql with the same parameters).
-- Who runs it: pipelines.staging.
-- Parameters: as select_held_slice.sql.
delete from identifier(:held_events)
where
    stream_batch_id <= :stream_batch_id
    and (
        quarantine_reason is not null
        or coalesce(
            floor((unix_micros(coalesce(arrived_at, event_time)) - :origin_us) / :interval_us),
            :epoch
        ) <= :epoch
    )
