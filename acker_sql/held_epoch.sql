-- held_epoch.sql
-- What: the epoch of a held_events row's time (the arrival under processing_time, else the event
--       time), null for a row without one; an expression over a held_events row.
-- Who runs it: no one alone; held_slice_rows.sql and select_held_slice.sql include it by name
--              (pipelines.sql.load_sql), so a slice's rows and their epochs agree.
-- Parameters: :origin_us and :interval_us, the time (microseconds since 1970) at which epoch 0
--             starts and the epoch's length.
floor((unix_micros(coalesce(arrived_at, event_time)) - :origin_us) / :interval_us)
